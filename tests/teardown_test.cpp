// Regression: dropping the last handle of a deep graph recursed once per node (shared_ptr
// teardown of Node -> operands, and of TensorImpl -> GradFn -> inputs) and overflowed the stack:
// an autograd chain of ~75k ops or a traced graph of ~175k nodes crashed with SIGSEGV. Teardown
// is iterative now; these run on a thread with a 256 KiB stack, where recursion would die within
// a few thousand frames.
#include <pthread.h>

#include <functional>
#include <utility>

#include "gtest/gtest.h"
#include "ir/ir.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

// Runs `fn` on a new thread with a `stack_bytes` stack and waits for it.
void RunOnSmallStack(size_t stack_bytes, std::function<void()> fn) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, stack_bytes), 0);
  pthread_t thread;
  auto body = [](void* arg) -> void* {
    (*static_cast<std::function<void()>*>(arg))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, body, &fn), 0);
  ASSERT_EQ(pthread_join(thread, nullptr), 0);
  pthread_attr_destroy(&attr);
}

constexpr size_t kSmallStack = 256 * 1024;

TEST(TeardownTest, MillionNodeChainIsReleasedOnASmallStack) {
  bool built = false;
  RunOnSmallStack(kSmallStack, [&] {
    ir::NodePtr n = ir::MakeConstant(0.5, DType::f32, {1});
    for (int i = 0; i < 1000000; ++i) n = *ir::MakeUnary(ir::Op::kExp, std::move(n));
    built = n->operands.size() == 1;
    n.reset();  // the whole chain goes here
  });
  EXPECT_TRUE(built);
}

TEST(TeardownTest, SharedOperandsSurviveTheTeardownOfOneUser) {
  ir::NodePtr shared = ir::MakeConstant(2, DType::f32, {3});
  ir::NodePtr chain = shared;
  for (int i = 0; i < 1000; ++i) chain = *ir::MakeUnary(ir::Op::kExp, std::move(chain));
  ir::NodePtr other = *ir::MakeUnary(ir::Op::kSqrt, shared);
  chain.reset();
  ASSERT_EQ(other->operands.size(), 1u);
  EXPECT_EQ(other->operands[0], shared);
  EXPECT_EQ(shared->op, ir::Op::kConstant);
  EXPECT_EQ(shared->shape, (ir::Shape{3}));
}

TEST(TeardownTest, LongAutogradChainIsReleasedOnASmallStack) {
  float grad = 0;
  RunOnSmallStack(kSmallStack, [&] {
    Tensor x = tensor(std::vector<float>{1.0f}, {1});
    x.requires_grad_();
    Tensor y = x;
    for (int i = 0; i < 200000; ++i) y = y * 1.0f;
    // A short chain's gradient, to show the records are real (the long one is only dropped).
    Tensor z = x * 3.0f + x;
    grad = lazycl::grad(sum(z), {x})[0].item<float>();
    y = Tensor();  // 200,000 records go here
  });
  EXPECT_FLOAT_EQ(grad, 4.0f);
}

}  // namespace
}  // namespace lazycl
