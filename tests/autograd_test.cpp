// Autograd of every differentiable op, checked by finite differences on the host, and device
// gradients checked against host gradients.
//
// Tolerance: central differences in f32 with eps = 1e-2 have a truncation error of order
// eps^2 |f'''| ~ 1e-4 and a rounding error of order 1e-7 |loss| / eps ~ 1e-4 for the losses
// here (|loss| < 100), so |analytic - numeric| <= 1e-2 (1 + |numeric|) separates right from
// wrong (a wrong rule is off by O(1)). Inputs keep away from kinks (relu, abs at 0; ties of max,
// maximum, minimum) by at least 0.05, which eps cannot cross. Device vs host: 1e-5 relative.

#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Device Cl() {
  const Device d = default_env().device();
  EXPECT_TRUE(d.is_opencl()) << d.str();
  return d;
}

Tensor F(std::vector<float> data, std::vector<int64_t> shape, Device device) {
  return tensor(std::move(data), std::move(shape), device);
}

struct Input {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Values in [lo, hi) kept at least 0.05 from `avoid` points and from each other's ties.
Input Make(std::vector<int64_t> shape, uint64_t seed, float lo = -1.5f, float hi = 1.5f) {
  Tensor t = rand(shape, seed, lo, hi, DType::f32, Device::host());
  std::vector<float> v = t.to_vector<float>();
  for (float& x : v) {
    if (std::fabs(x) < 0.05f) x = x < 0 ? -0.05f - std::fabs(x) : 0.05f + x;
  }
  return {shape, v};
}

// loss = sum(f(inputs) * weights), weights fixed random, so every output element matters.
Tensor Loss(const Fn& f, const std::vector<Tensor>& in) {
  Tensor y = f(in);
  Tensor w = rand(y.shape(), 99, 0.5, 1.5, DType::f32, y.device());
  return sum(y * w);
}

std::vector<Tensor> Leaves(const std::vector<Input>& inputs, Device device) {
  std::vector<Tensor> out;
  for (const Input& in : inputs) out.push_back(tensor(in.data, in.shape, device).requires_grad_());
  return out;
}

std::vector<std::vector<float>> Grads(const Fn& f, const std::vector<Input>& inputs,
                                      Device device) {
  std::vector<Tensor> leaves = Leaves(inputs, device);
  std::vector<Tensor> g = grad(Loss(f, leaves), leaves);
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(g[i].shape(), inputs[i].shape);
    EXPECT_EQ(g[i].device(), device);
    out.push_back(g[i].to_vector<float>());
  }
  return out;
}

void CheckFiniteDifferences(const Fn& f, const std::vector<Input>& inputs) {
  const std::vector<std::vector<float>> analytic = Grads(f, inputs, Device::host());
  const float eps = 1e-2f;
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (size_t e = 0; e < inputs[i].data.size(); ++e) {
      auto eval = [&](float delta) {
        std::vector<Input> moved = inputs;
        moved[i].data[e] += delta;
        std::vector<Tensor> t;
        for (const Input& in : moved) t.push_back(tensor(in.data, in.shape, Device::host()));
        return static_cast<double>(Loss(f, t).item<float>());
      };
      const double numeric = (eval(eps) - eval(-eps)) / (2 * eps);
      EXPECT_NEAR(analytic[i][e], numeric, 1e-2 * (1 + std::fabs(numeric)))
          << "input " << i << " element " << e;
    }
  }
}

void CheckDeviceMatchesHost(const Fn& f, const std::vector<Input>& inputs) {
  const auto host = Grads(f, inputs, Device::host());
  const auto device = Grads(f, inputs, Cl());
  for (size_t i = 0; i < host.size(); ++i) {
    ASSERT_EQ(host[i].size(), device[i].size());
    for (size_t e = 0; e < host[i].size(); ++e) {
      EXPECT_NEAR(device[i][e], host[i][e], 1e-5 * (1 + std::fabs(host[i][e])))
          << "input " << i << " element " << e;
    }
  }
}

void Check(const Fn& f, const std::vector<Input>& inputs) {
  CheckFiniteDifferences(f, inputs);
  CheckDeviceMatchesHost(f, inputs);
}

TEST(AutogradTest, UnaryOps) {
  const Input x = Make({2, 3}, 1);
  const Input pos = Make({2, 3}, 2, 0.2f, 2.0f);
  Check([](auto& a) { return neg(a[0]); }, {x});
  Check([](auto& a) { return exp(a[0]); }, {x});
  Check([](auto& a) { return log(a[0]); }, {pos});
  Check([](auto& a) { return sqrt(a[0]); }, {pos});
  Check([](auto& a) { return tanh(a[0]); }, {x});
  Check([](auto& a) { return sigmoid(a[0]); }, {x});
  Check([](auto& a) { return relu(a[0]); }, {x});
  Check([](auto& a) { return abs(a[0]); }, {x});
  Check([](auto& a) { return sin(a[0]); }, {x});
  Check([](auto& a) { return cos(a[0]); }, {x});
  Check([](auto& a) { return erf(a[0]); }, {x});
  Check([](auto& a) { return -a[0]; }, {x});
}

TEST(AutogradTest, BinaryOpsWithBroadcasting) {
  const Input a = Make({2, 3}, 3);
  const Input row = Make({3}, 4);
  const Input col = Make({2, 1}, 5);
  const Input pos = Make({2, 3}, 6, 0.3f, 2.0f);
  Check([](auto& t) { return add(t[0], t[1]); }, {a, row});
  Check([](auto& t) { return sub(t[0], t[1]); }, {col, row});
  Check([](auto& t) { return mul(t[0], t[1]); }, {a, col});
  Check([](auto& t) { return div(t[0], t[1]); }, {row, pos});
  Check([](auto& t) { return maximum(t[0], t[1]); }, {a, row});
  Check([](auto& t) { return minimum(t[0], t[1]); }, {col, a});
  Check([](auto& t) { return pow(t[0], t[1]); }, {pos, row});
  Check([](auto& t) { return pow(t[0], 3.0); }, {a});
  Check([](auto& t) { return t[0] * 2.0 + 1.0 - t[0] / 4.0; }, {a});
  Check([](auto& t) { return 1.0 / t[0] - 3.0 * t[0]; }, {pos});
  Check([](auto& t) { return t[0] * t[0]; }, {a});  // one tensor used twice
}

TEST(AutogradTest, Where) {
  const Input a = Make({2, 3}, 7);
  const Input b = Make({3}, 8);
  Check([](auto& t) { return where(gt(t[0], t[1]), t[0], t[1] * 2.0); }, {a, b});
  Check([](auto& t) { return where(lt(t[0], 0.0 * t[0]), t[0], 5.0); }, {a});
}

TEST(AutogradTest, Reductions) {
  const Input x = Make({2, 3, 4}, 9);
  Check([](auto& t) { return sum(t[0]); }, {x});
  Check([](auto& t) { return sum(t[0], {1}); }, {x});
  Check([](auto& t) { return sum(t[0], {0, 2}, true); }, {x});
  Check([](auto& t) { return mean(t[0], {-1}); }, {x});
  Check([](auto& t) { return mean(t[0], {0}, true); }, {x});
  Check([](auto& t) { return max(t[0], {2}); }, {x});
  Check([](auto& t) { return max(t[0], {0, 1}, true); }, {x});
  Check([](auto& t) { return max(t[0]); }, {x});
}

TEST(AutogradTest, MaxSplitsTiesEvenly) {
  Tensor x = F({1, 3, 3, 2, 3, 0}, {6}, Device::host()).requires_grad_();
  std::vector<float> g = grad(max(x), {x})[0].to_vector<float>();
  EXPECT_EQ(g, (std::vector<float>{0, 1.f / 3, 1.f / 3, 0, 1.f / 3, 0}));
  Tensor a = F({1, 2}, {2}, Device::host()).requires_grad_();
  Tensor b = F({1, 3}, {2}, Device::host()).requires_grad_();
  std::vector<Tensor> gm = grad(sum(maximum(a, b)), {a, b});
  EXPECT_EQ(gm[0].to_vector<float>(), (std::vector<float>{0.5f, 0}));
  EXPECT_EQ(gm[1].to_vector<float>(), (std::vector<float>{0.5f, 1}));
}

TEST(AutogradTest, Matmul) {
  Check([](auto& t) { return matmul(t[0], t[1]); }, {Make({3, 4}, 10), Make({4, 2}, 11)});
  Check([](auto& t) { return matmul(t[0], t[1]); }, {Make({2, 3, 4}, 12), Make({4, 5}, 13)});
  Check([](auto& t) { return matmul(t[0], t[1]); }, {Make({1, 3, 4}, 14), Make({2, 4, 2}, 15)});
}

TEST(AutogradTest, Views) {
  const Input x = Make({2, 3, 4}, 16);
  Check([](auto& t) { return reshape(t[0], {6, 4}); }, {x});
  Check([](auto& t) { return reshape(t[0], {2, 3, 4}); }, {x});  // identity
  Check([](auto& t) { return transpose(t[0], 0, 2); }, {x});
  Check([](auto& t) { return permute(t[0], {1, 2, 0}); }, {x});
  Check([](auto& t) { return broadcast_to(t[0], {5, 2, 3, 4}); }, {x});
  Check([](auto& t) { return slice(t[0], 2, 1, 3); }, {x});
  Check([](auto& t) { return unsqueeze(squeeze(slice(t[0], 0, 1, 2), 0), 1); }, {x});
  Check([](auto& t) { return cat({t[0], t[1]}, 1); }, {x, Make({2, 2, 4}, 17)});
  Check([](auto& t) { return stack({t[0], t[1]}, 0); }, {Make({3}, 18), Make({3}, 19)});
}

TEST(AutogradTest, NonContiguousViews) {
  const Input x = Make({3, 4}, 20);
  const Input y = Make({4, 3}, 21);
  // Elementwise and matmul on transposed and sliced operands.
  Check([](auto& t) { return exp(transpose(t[0], 0, 1)) * t[1]; }, {x, y});
  Check([](auto& t) { return matmul(transpose(t[0], 0, 1), slice(t[1], 0, 1, 4)); }, {x, y});
  Check([](auto& t) { return sum(slice(transpose(t[0], 0, 1), 0, 1, 3) * 2.0, {0}); }, {x});
}

TEST(AutogradTest, SoftmaxAndLogSoftmax) {
  const Input x = Make({3, 5}, 22);
  Check([](auto& t) { return softmax(t[0], 1); }, {x});
  Check([](auto& t) { return softmax(t[0], 0); }, {x});
  Check([](auto& t) { return log_softmax(t[0], -1); }, {x});
}

TEST(AutogradTest, Composite) {
  // A two-layer MLP with a mean cross-entropy-like loss.
  Check(
      [](auto& t) {
        Tensor h = tanh(matmul(t[0], t[1]) + t[2]);
        return log_softmax(matmul(h, t[3]), 1);
      },
      {Make({4, 3}, 23), Make({3, 5}, 24), Make({5}, 25), Make({5, 2}, 26)});
}

TEST(AutogradTest, BackwardAccumulatesIntoLeaves) {
  Tensor x = F({1, 2, 3}, {3}, Device::host()).requires_grad_();
  Tensor y = x * x;
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_FALSE(y.grad().defined());  // not a leaf: not kept
  sum(x * 3.0).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{5, 7, 9}));
}

TEST(AutogradTest, BackwardWithGradientArgument) {
  Tensor x = F({1, 2, 3}, {3}, Device::host()).requires_grad_();
  (x * 2.0).backward(F({1, 10, 100}, {3}, Device::host()));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2, 20, 200}));
}

TEST(AutogradTest, RequiresGradPropagation) {
  Tensor a = F({1, 2}, {2}, Device::host());
  Tensor b = F({3, 4}, {2}, Device::host()).requires_grad_();
  EXPECT_FALSE((a * 2.0).requires_grad());
  EXPECT_TRUE((a * b).requires_grad());
  EXPECT_FALSE(gt(b, a).requires_grad());  // bool results do not
  EXPECT_FALSE(cast(b, DType::i32).requires_grad());
  Tensor d = Tensor(a * b).requires_grad_(false);
  EXPECT_TRUE(d.is_leaf());
}

TEST(AutogradTest, DetachedCopyIsAConstant) {
  for (Device device : {Device::host(), Cl()}) {
    Tensor x = F({1, 2}, {2}, device).requires_grad_();
    Tensor c = x.detach();
    EXPECT_FALSE(c.requires_grad());
    // d/dx sum(c * x) = c, not 2x.
    EXPECT_EQ(grad(sum(c * x), {x})[0].to_vector<float>(), (std::vector<float>{1, 2}));
    Tensor y = exp(x);  // pending on a device
    EXPECT_EQ(grad(sum(y.detach() * x + y * 0.0), {x})[0].to_vector<float>(),
              exp(x).detach().to_vector<float>());
  }
}

TEST(AutogradTest, GradWrtIntermediate) {
  Tensor x = F({1, 2}, {2}, Device::host()).requires_grad_();
  Tensor y = x * 3.0;
  Tensor loss = sum(y * y);
  std::vector<Tensor> g = grad(loss, {y, x});
  EXPECT_EQ(g[0].to_vector<float>(), (std::vector<float>{6, 12}));
  EXPECT_EQ(g[1].to_vector<float>(), (std::vector<float>{18, 36}));
}

TEST(AutogradTest, DeviceGradientsAreLazyAndMatchHost) {
  Tensor x = F({0.5f, -1, 2}, {3}, Cl()).requires_grad_();
  Tensor h = F({0.5f, -1, 2}, {3}, Device::host()).requires_grad_();
  metrics::reset();
  Tensor g = grad(sum(exp(x) * x), {x})[0];
  EXPECT_EQ(metrics::counter("KernelLaunches"), 0);  // nothing ran yet
  std::vector<float> dv = g.to_vector<float>();
  std::vector<float> hv = grad(sum(exp(h) * h), {h})[0].to_vector<float>();
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(dv[i], hv[i], 1e-5 * (1 + std::fabs(hv[i])));
}

TEST(AutogradTest, GradFlowsThroughTransfers) {
  Tensor h = F({1, 2, 3}, {3}, Device::host()).requires_grad_();
  Tensor d = h.to(Cl());
  EXPECT_FALSE(d.is_leaf());
  Tensor c = F({1, 1, 1}, {3}, Device::host()).requires_grad_();
  Tensor loss = sum(d * d + c);  // c is moved to the device implicitly
  std::vector<Tensor> g = grad(loss, {h, c});
  EXPECT_EQ(g[0].device(), Device::host());
  EXPECT_EQ(g[0].to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(g[1].to_vector<float>(), (std::vector<float>{1, 1, 1}));
}

TEST(AutogradTest, ErrorBackwardOnNonScalar) {
  Tensor x = F({1, 2}, {2}, Device::host()).requires_grad_();
  try {
    (x * 2.0).backward();
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a scalar"), std::string::npos) << e.what();
  }
  EXPECT_THROW((x * 2.0).backward(F({1, 2, 3}, {3}, Device::host())), Error);
}

TEST(AutogradTest, ErrorWrtDoesNotRequireGrad) {
  Tensor x = F({1, 2}, {2}, Device::host()).requires_grad_();
  Tensor c = F({1, 2}, {2}, Device::host());
  try {
    grad(sum(x * c), {c});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not require grad"), std::string::npos) << e.what();
  }
}

TEST(AutogradTest, ErrorWrtNotInGraph) {
  Tensor x = F({1, 2}, {2}, Device::host()).requires_grad_();
  Tensor z = F({1, 2}, {2}, Device::host()).requires_grad_();
  try {
    grad(sum(x * 2.0), {z});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not in the graph"), std::string::npos) << e.what();
  }
}

TEST(AutogradTest, ErrorLossDoesNotRequireGrad) {
  Tensor x = F({1, 2}, {2}, Device::host());
  EXPECT_THROW(sum(x).backward(), Error);
}

}  // namespace
}  // namespace lazycl

namespace lazycl {
namespace {

TEST(NoGradGuardTest, OpsInsideRecordNothingAndGuardsNestAndAreThreadLocal) {
  for (Device d : {Device::host(), Device::opencl()}) {
    SCOPED_TRACE(d.str());
    Tensor w = randn({3, 3}, 1, DType::f32, d).requires_grad_();
    Tensor x = randn({2, 3}, 2, DType::f32, d);
    EXPECT_TRUE(is_grad_enabled());
    {
      NoGradGuard outer;
      EXPECT_FALSE(is_grad_enabled());
      Tensor y = tanh(matmul(x, w));
      EXPECT_FALSE(y.requires_grad());
      EXPECT_TRUE(w.requires_grad());  // leaves keep requiring grad
      EXPECT_THROW(grad(sum(y), {w}), Error);
      // A tensor moved to another device inside the guard records no transfer either.
      EXPECT_FALSE(w.to(d.is_host() ? Device::opencl() : Device::host()).requires_grad());
      {
        NoGradGuard inner;
        EXPECT_FALSE(is_grad_enabled());
      }
      EXPECT_FALSE(is_grad_enabled());  // the inner guard restores what it found
      // Another thread is not inside this guard.
      bool other = false;
      std::thread([&] { other = is_grad_enabled(); }).join();
      EXPECT_TRUE(other);
      // call and scan inside the guard record nothing.
      std::vector<Tensor> c = call(
          [&](const std::vector<Tensor>& a) { return std::vector<Tensor>{matmul(a[0], w)}; }, {x});
      EXPECT_FALSE(c[0].requires_grad());
      ScanResult r = scan(
          [&](const std::vector<Tensor>& carry, const std::vector<Tensor>& xs) {
            return std::make_pair(std::vector<Tensor>{tanh(matmul(carry[0], w) + xs[0])},
                                  std::vector<Tensor>{});
          },
          {x}, {randn({4, 2, 3}, 3, DType::f32, d).requires_grad_()});
      EXPECT_FALSE(r.carry[0].requires_grad());
    }
    EXPECT_TRUE(is_grad_enabled());
    Tensor y = tanh(matmul(x, w));
    EXPECT_TRUE(y.requires_grad());
    EXPECT_EQ(grad(sum(y), {w})[0].shape(), (std::vector<int64_t>{3, 3}));
  }
}

}  // namespace
}  // namespace lazycl
