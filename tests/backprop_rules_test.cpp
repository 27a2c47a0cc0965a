// ir::Backprop's rules over whole expressions (ir/autodiff.cpp), checked on the IR they build:
// what a gradient graph reads decides what its kernels compute. Values are checked against the
// host and JAX elsewhere (fusion_test, reference_test, autograd_scan_test).
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "ir/autodiff.h"
#include "ir/ir.h"
#include "ir/post_order.h"
#include "ir_test_util.h"

namespace lazycl::ir {
namespace {

using test::Ok;

int CountOps(const NodePtr& root, Op op) {
  const std::vector<NodePtr> roots = {root};
  int count = 0;
  for (const Node* n : PostOrder(std::span<const NodePtr>(roots))) count += n->op == op;
  return count;
}

// softmax(x) = e / sum(e), e = exp(x - stop_gradient(max(x))), as frontend::softmax builds it.
struct Softmax {
  NodePtr x, y;
};
Softmax MakeSoftmax(const Shape& shape) {
  Softmax s;
  s.x = MakeBuffer(nullptr, DType::f32, shape);
  const int64_t last = static_cast<int64_t>(shape.size()) - 1;
  NodePtr shift = MakeStopGradient(Ok(MakeReduce(Op::kMax, s.x, {last})));
  NodePtr neg =
      Ok(MakeBinary(Op::kMul, Ok(MakeExpand(shift, shape)), MakeConstant(-1, DType::f32, shape)));
  NodePtr e = Ok(MakeUnary(Op::kExp, Ok(MakeBinary(Op::kAdd, s.x, neg))));
  NodePtr sum = Ok(MakeReduce(Op::kSum, e, {last}));
  s.y = Ok(MakeBinary(Op::kDiv, e, Ok(MakeExpand(sum, shape))));
  return s;
}

// softmax's VJP is y (g - sum(g y)): with y's value at hand (a computed buffer), the gradient
// reads y and g only, never exp again; nothing flows into max (stop_gradient).
TEST(BackpropRules, SoftmaxGradientReadsYAndNotExp) {
  const Shape shape = {8, 32};
  const Softmax s = MakeSoftmax(shape);
  NodePtr g = MakeBuffer(nullptr, DType::f32, shape);
  NodePtr y_value = MakeBuffer(nullptr, DType::f32, shape);
  const absl::flat_hash_map<const Node*, NodePtr> values = {{s.y.get(), y_value}};
  const std::vector<NodePtr> dx = Backprop({s.y}, {g}, {s.x}, values);
  ASSERT_EQ(dx.size(), 1u);
  ASSERT_NE(dx[0], nullptr);
  EXPECT_EQ(CountOps(dx[0], Op::kExp), 0) << NodeString(*dx[0]);
  EXPECT_EQ(CountOps(dx[0], Op::kMax), 0);
  EXPECT_EQ(CountOps(dx[0], Op::kSum), 1);  // sum(g y)
}

// When e or its sum is a target itself (a boundary of a recorded op), the rule does not skip
// them: each gets its own adjoint.
TEST(BackpropRules, SoftmaxPartsThatAreTargetsGetTheirAdjoints) {
  const Shape shape = {4, 16};
  const Softmax s = MakeSoftmax(shape);
  const NodePtr& e = s.y->operands[0];
  NodePtr g = MakeBuffer(nullptr, DType::f32, shape);
  const std::vector<NodePtr> adjoints = Backprop({s.y}, {g}, {e, s.x}, {});
  ASSERT_EQ(adjoints.size(), 2u);
  EXPECT_NE(adjoints[0], nullptr);  // e's, through the division and the sum
  EXPECT_EQ(adjoints[1], nullptr);  // x is below the target e
}

// A stop-gradient node ends every path through it: x * stop_gradient(x) differentiates to
// stop_gradient(x) alone.
TEST(BackpropRules, StopGradientEndsThePath) {
  NodePtr x = MakeBuffer(nullptr, DType::f32, {3});
  NodePtr y = Ok(MakeBinary(Op::kMul, x, MakeStopGradient(x)));
  NodePtr g = MakeBuffer(nullptr, DType::f32, {3});
  const std::vector<NodePtr> dx = Backprop({y}, {g}, {x}, {});
  ASSERT_NE(dx[0], nullptr);
  // g * stop_gradient(x): one Mul, and no Add of a second path.
  EXPECT_EQ(CountOps(dx[0], Op::kAdd), 0) << NodeString(*dx[0]);
  EXPECT_EQ(CountOps(dx[0], Op::kMul), 1) << NodeString(*dx[0]);
}

}  // namespace
}  // namespace lazycl::ir
