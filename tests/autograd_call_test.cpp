// Gradients through trace/call: equal to those of the same code run directly; unused arguments
// get zeros and cost no transfer; the gradient is traced once and compiled once.

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "test_util.h"

namespace lazycl {
namespace {

using test::ExpectNear;
const auto Cl = test::DefaultCl;

std::vector<Tensor> Mlp(const std::vector<Tensor>& a) {
  Tensor h = tanh(matmul(a[0], a[1]) + a[2]);
  return {h, sum(h * h)};
}

TEST(AutogradCallTest, GradientsEqualDirectComputation) {
  Tensor x = randn({4, 3}, 1, DType::f32, Cl()).requires_grad_();
  Tensor w = randn({3, 5}, 2, DType::f32, Cl()).requires_grad_();
  Tensor b = randn({5}, 3, DType::f32, Cl()).requires_grad_();
  std::vector<Tensor> out = call(Mlp, {x, w, b});
  EXPECT_TRUE(out[0].requires_grad());
  Tensor loss = out[1] + sum(out[0]);
  std::vector<Tensor> g = grad(loss, {x, w, b});

  Tensor hx = x.to(Device::host()), hw = w.to(Device::host()), hb = b.to(Device::host());
  std::vector<Tensor> leaves = {hx, hw, hb};
  for (Tensor& t : leaves) t = t.to(Device::host()).requires_grad_(false).requires_grad_();
  std::vector<Tensor> direct = Mlp(leaves);
  std::vector<Tensor> h = grad(direct[1] + sum(direct[0]), leaves);
  for (int i = 0; i < 3; ++i) ExpectNear(g[i], h[i]);
}

TEST(AutogradCallTest, HostArgumentsGetHostGradients) {
  Tensor x = randn({2, 3}, 4, DType::f32, Device::host()).requires_grad_();
  Tensor w = randn({3, 2}, 5, DType::f32, Device::host()).requires_grad_();
  Tensor b = randn({2}, 6, DType::f32, Device::host()).requires_grad_();
  std::vector<Tensor> g = grad(call(Mlp, {x, w, b})[1], {x, w, b});
  std::vector<Tensor> h = grad(Mlp({x, w, b})[1], {x, w, b});
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(g[i].device(), Device::host());
    ExpectNear(g[i], h[i]);
  }
}

TEST(AutogradCallTest, UnusedArgumentGetsZerosWithoutTransfer) {
  Tensor x = randn({3}, 7, DType::f32, Cl()).requires_grad_();
  Tensor unused = randn({2, 2}, 8, DType::f32, Device::host()).requires_grad_();
  Tensor unused_dev = randn({5}, 9, DType::f32, Cl()).requires_grad_();
  Function f = trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[1] * 2.0}; },
                     {{{2, 2}, DType::f32}, {{3}, DType::f32}, {{5}, DType::f32}}, Cl());
  EXPECT_EQ(f.used_arguments(), (std::vector<int>{1}));
  sync({x, unused_dev});
  metrics::reset();
  std::vector<Tensor> g = grad(sum(f({unused, x, unused_dev})[0]), {unused, x, unused_dev});
  EXPECT_EQ(g[0].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(g[0].device(), Device::host());
  EXPECT_EQ(g[2].shape(), (std::vector<int64_t>{5}));
  EXPECT_EQ(g[2].device(), Cl());
  sync(g);
  EXPECT_EQ(metrics::counter("TransferToDeviceBytes"), 0);
  EXPECT_EQ(metrics::counter("TransferFromDeviceBytes"), 0);
  EXPECT_EQ(g[0].to_vector<float>(), std::vector<float>(4, 0));
  EXPECT_EQ(g[1].to_vector<float>(), std::vector<float>(3, 2));
  EXPECT_EQ(g[2].to_vector<float>(), std::vector<float>(5, 0));
}

TEST(AutogradCallTest, ArgumentUsedOnlyThroughItsShape) {
  Tensor x = randn({3}, 10, DType::f32, Cl()).requires_grad_();
  Tensor y = randn({3}, 11, DType::f32, Cl()).requires_grad_();
  auto fn = [](const std::vector<Tensor>& a) {
    Tensor scale = full(a[1].shape(), 3.0, DType::f32, a[1].device());
    return std::vector<Tensor>{a[0] * scale};
  };
  Function f = trace(fn, {{{3}, DType::f32}, {{3}, DType::f32}}, Cl());
  EXPECT_EQ(f.num_parameters(), 1);
  std::vector<Tensor> g = grad(sum(f({x, y})[0]), {x, y});
  EXPECT_EQ(g[0].to_vector<float>(), std::vector<float>(3, 3));
  EXPECT_EQ(g[1].to_vector<float>(), std::vector<float>(3, 0));
}

TEST(AutogradCallTest, ResultThatIsAnArgument) {
  Tensor x = randn({3}, 12, DType::f32, Cl()).requires_grad_();
  auto fn = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0], a[0] * 2.0}; };
  std::vector<Tensor> out = call(fn, {x});
  // d/dx sum(x * out0 + out1) = 2x + 2... with out0 == x: x*x + 2x -> 2x + 2
  Tensor loss = sum(x * out[0] + out[1]);
  Tensor g = grad(loss, {x})[0];
  ExpectNear(g, x * 2.0 + 2.0);
}

TEST(AutogradCallTest, GradientIsTracedAndCompiledOnce) {
  Function f = trace(Mlp, {{{4, 3}, DType::f32}, {{3, 5}, DType::f32}, {{5}, DType::f32}}, Cl());
  int64_t compiles[3] = {0, 0, 0};
  for (int step = 0; step < 3; ++step) {
    Tensor x = randn({4, 3}, 20 + step, DType::f32, Cl());
    Tensor w = randn({3, 5}, 30 + step, DType::f32, Cl()).requires_grad_();
    Tensor b = randn({5}, 40 + step, DType::f32, Cl()).requires_grad_();
    sync({x, w, b});
    metrics::reset();
    std::vector<Tensor> g = grad(f({x, w, b})[1], {w, b});
    sync(g);
    compiles[step] = metrics::counter("GraphCompiles");
  }
  EXPECT_GE(compiles[0], 1);
  EXPECT_EQ(compiles[1], 0);
  EXPECT_EQ(compiles[2], 0);
}

TEST(AutogradCallTest, NoRecordWithoutRequiresGrad) {
  Tensor x = randn({3}, 13, DType::f32, Cl());
  std::vector<Tensor> out =
      call(Mlp, {reshape(x, {1, 3}), ones({3, 2}, DType::f32, Cl()), zeros({2}, DType::f32, Cl())});
  EXPECT_FALSE(out[0].requires_grad());
  EXPECT_THROW(out[1].backward(), Error);
}

}  // namespace
}  // namespace lazycl

namespace lazycl {
namespace {

// Closure conversion: a weight the traced function captures (instead of taking it as an
// argument) gets the gradient it gets when passed explicitly.
TEST(AutogradCallTest, CapturedTensorsGetTheGradientOfExplicitArguments) {
  Tensor x = randn({4, 3}, 11, DType::f32, Cl()).requires_grad_();
  Tensor w = randn({3, 5}, 12, DType::f32, Cl()).requires_grad_();              // a device leaf
  Tensor b_host = randn({5}, 13, DType::f32, Device::host()).requires_grad_();  // uploaded
  Tensor scale_leaf = randn({5}, 14, DType::f32, Cl()).requires_grad_();
  Tensor scale = exp(scale_leaf);  // captured while lazy, computed from a leaf
  Tensor unused = randn({2}, 15, DType::f32, Cl()).requires_grad_();

  auto captured = [&](const std::vector<Tensor>& a) {
    Tensor h = tanh(matmul(a[0], w) + b_host) * scale;
    return std::vector<Tensor>{h, sum(h * h)};
  };
  auto explicit_args = [](const std::vector<Tensor>& a) {
    Tensor h = tanh(matmul(a[0], a[1]) + a[2]) * a[3];
    return std::vector<Tensor>{h, sum(h * h)};
  };
  for (int call_count = 0; call_count < 2; ++call_count) {  // a Function is called twice
    SCOPED_TRACE(call_count);
    Function f = trace(captured, {{{4, 3}, DType::f32}}, Cl());
    std::vector<Tensor> out = f({x});
    if (call_count == 1) out = f({x});
    std::vector<Tensor> g = grad(out[1] + sum(out[0]), {x, w, b_host, scale_leaf});
    std::vector<Tensor> e = call(explicit_args, {x, w, b_host, scale});
    std::vector<Tensor> h = grad(e[1] + sum(e[0]), {x, w, b_host, scale_leaf});
    for (int i = 0; i < 4; ++i) {
      SCOPED_TRACE("gradient " + std::to_string(i));
      EXPECT_EQ(g[i].device(), h[i].device());
      ExpectNear(g[i], h[i]);
    }
    // A captured tensor the loss does not read is not in its graph.
    EXPECT_THROW(grad(out[1], {unused}), Error);
  }
  // And with call(): the accumulated grad of the captured leaf, as backward() gives.
  std::vector<Tensor> out = call(captured, {x});
  out[1].backward();
  ASSERT_TRUE(w.grad().defined());
  Tensor w2 = randn({3, 5}, 12, DType::f32, Cl()).requires_grad_();
  std::vector<Tensor> e2 = call(explicit_args, {x, w2, b_host.detach(), scale.detach()});
  ExpectNear(w.grad(), grad(e2[1], {w2})[0]);
}

}  // namespace
}  // namespace lazycl
