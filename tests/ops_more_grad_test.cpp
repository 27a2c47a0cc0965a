// Gradients of the ops of frontend/ops_more.cpp and ops_reduce_more.cpp: by central finite
// differences on the host (where every op is differentiable at the sampled points), the
// device's gradient against the host's, and the conventions at the kinks written out (clamp at
// its bounds, prod with zeros, min with ties, topk with ties, cumsum's reverse running sum).
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "ops_more_util.h"

namespace lazycl::more {
namespace {

using Op1 = std::function<Tensor(const Tensor&)>;

// sum(w * f(x)) for fixed random weights w: a scalar whose gradient weighs every output.
Tensor Loss(const Op1& f, const Tensor& x, uint64_t seed) {
  Tensor y = f(x);
  Tensor w = randn(y.shape(), seed, DType::f32, Host()).to(x.device());
  return sum(y * w);
}

// The gradient of Loss at `values` ([shape]) on `device`.
std::vector<float> Gradient(const Op1& f, const std::vector<float>& values, const Shape& shape,
                            Device device, uint64_t seed) {
  Tensor x = tensor(values, shape, Host()).to(device);
  x.requires_grad_();
  return grad(Loss(f, x, seed), {x})[0].to_vector<float>();
}

// Finite differences against the host gradient; the device gradient against the host's.
void CheckGradient(const std::string& name, const Op1& f, const std::vector<float>& values,
                   const Shape& shape, uint64_t seed, double h = 1e-2, double tol = 2e-3) {
  SCOPED_TRACE(name);
  const std::vector<float> host = Gradient(f, values, shape, Host(), seed);
  ASSERT_EQ(host.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    std::vector<float> up = values;
    std::vector<float> down = values;
    up[i] += static_cast<float>(h);
    down[i] -= static_cast<float>(h);
    const double lu = Loss(f, tensor(up, shape, Host()), seed).item<float>();
    const double ld = Loss(f, tensor(down, shape, Host()), seed).item<float>();
    const double numeric = (lu - ld) / (static_cast<double>(up[i]) - down[i]);
    EXPECT_NEAR(host[i], numeric, tol * (1 + std::fabs(numeric))) << name << " element " << i;
  }
  const std::vector<float> device = Gradient(f, values, shape, Cl(), seed);
  ASSERT_EQ(device.size(), host.size());
  for (size_t i = 0; i < host.size(); ++i) {
    EXPECT_NEAR(device[i], host[i], 1e-5 * (1 + std::fabs(host[i]))) << name << " device " << i;
  }
}

std::vector<float> Normal(const Shape& shape, uint64_t seed) {
  return randn(shape, seed, DType::f32, Host()).to_vector<float>();
}

TEST(OpsMoreGradTest, ElementwiseByFiniteDifferences) {
  const Shape s = {3, 5};
  std::vector<float> positive = rand(s, 1, 0.3, 3.0, DType::f32, Host()).to_vector<float>();
  CheckGradient(
      "rsqrt", [](const Tensor& x) { return rsqrt(x); }, positive, s, 2, 1e-3);
  CheckGradient(
      "silu", [](const Tensor& x) { return silu(x); }, Normal(s, 3), s, 4);
  CheckGradient(
      "gelu", [](const Tensor& x) { return gelu(x); }, Normal(s, 5), s, 6);
  CheckGradient(
      "gelu tanh", [](const Tensor& x) { return gelu(x, true); }, Normal(s, 7), s, 8);
  // Wide inputs: the tails of silu and gelu (no NaN from exp overflow).
  const std::vector<float> wide = {-100, -30, -8, -1, 0, 1, 8, 30, 100};
  for (bool tanh_form : {false, true}) {
    CheckGradient(
        "gelu wide", [&](const Tensor& x) { return gelu(x, tanh_form); }, wide, {9}, 9);
  }
  CheckGradient(
      "silu wide", [](const Tensor& x) { return silu(x); }, wide, {9}, 10);
  // Values at least h away from the bounds: clamp is smooth there.
  const std::vector<float> spread = {-3, -1.5, -0.9, -0.5, 0.1, 0.7, 1.4, 2.6};
  CheckGradient(
      "clamp", [](const Tensor& x) { return clamp(x, -1, 1); }, spread, {8}, 11);
  CheckGradient(
      "clamp_min", [](const Tensor& x) { return clamp_min(x, 0); }, spread, {8}, 12);
  CheckGradient(
      "clamp_max", [](const Tensor& x) { return clamp_max(x, 0); }, spread, {8}, 13);
  CheckGradient(
      "tril", [](const Tensor& x) { return tril(x, 1); }, Normal({4, 5}, 14), {4, 5}, 15);
  CheckGradient(
      "triu", [](const Tensor& x) { return triu(x, -1); }, Normal({2, 3, 3}, 16), {2, 3, 3}, 17);
}

TEST(OpsMoreGradTest, ReductionsByFiniteDifferences) {
  const Shape s = {3, 4, 5};
  CheckGradient(
      "min", [](const Tensor& x) { return min(x, {1}); }, Normal(s, 20), s, 21);
  CheckGradient(
      "min all", [](const Tensor& x) { return min(x); }, Normal(s, 22), s, 23);
  CheckGradient(
      "prod", [](const Tensor& x) { return prod(x, {2}); }, Normal(s, 24), s, 25);
  CheckGradient(
      "prod keepdim",
      [](const Tensor& x) {
        return prod(x, {0, 2}, true);
      },
      Normal(s, 26), s, 27, 1e-2, 5e-3);
  // One zero in a row: the zero's gradient is the product of the others.
  std::vector<float> with_zero = Normal({3, 4}, 28);
  with_zero[5] = 0;
  CheckGradient(
      "prod with a zero", [](const Tensor& x) { return prod(x, {1}); }, with_zero, {3, 4}, 29);
  CheckGradient(
      "cumsum", [](const Tensor& x) { return cumsum(x, 1); }, Normal(s, 30), s, 31);
  CheckGradient(
      "cumsum 0", [](const Tensor& x) { return cumsum(x, 0); }, Normal(s, 32), s, 33);
  CheckGradient(
      "topk values", [](const Tensor& x) { return topk(x, 3, -1).first; }, Normal(s, 34), s, 35);
  CheckGradient(
      "topk values dim 0", [](const Tensor& x) { return topk(x, 2, 0).first; }, Normal(s, 36), s,
      37);
}

// d loss / d x for loss = sum(f(x)) (cotangent 1), on the host and on the device.
std::vector<std::vector<float>> OnesGradient(const Op1& f, const std::vector<float>& v,
                                             const Shape& shape) {
  std::vector<std::vector<float>> out;
  for (Device d : {Host(), Cl()}) {
    Tensor x = tensor(v, shape, Host()).to(d);
    x.requires_grad_();
    out.push_back(grad(sum(f(x)), {x})[0].to_vector<float>());
  }
  return out;
}

TEST(OpsMoreGradTest, ConventionsAtKinks) {
  // clamp: the gradient passes where lo <= x <= hi (PyTorch), bounds included.
  for (const auto& g : OnesGradient([](const Tensor& x) { return clamp(x, -1, 2); },
                                    {-1, 2, 0.5f, -1.5f, 2.5f, NAN}, {6})) {
    EXPECT_EQ(std::vector<float>(g.begin(), g.begin() + 5), (std::vector<float>{1, 1, 1, 0, 0}));
  }
  // prod: one zero gets the product of the others, two zeros give zeros.
  for (const auto& g : OnesGradient([](const Tensor& x) { return prod(x, {1}); },
                                    {2, 0, 3, 0, 0, 3, 2, 4, 0.5f}, {3, 3})) {
    EXPECT_EQ(g, (std::vector<float>{0, 6, 0, 0, 0, 0, 2, 1, 8}));
  }
  // min: ties split evenly, as max does.
  for (const auto& g :
       OnesGradient([](const Tensor& x) { return min(x, {1}); }, {1, 1, 2, 3, 0, 0}, {2, 3})) {
    EXPECT_EQ(g, (std::vector<float>{0.5f, 0.5f, 0, 0, 0.5f, 0.5f}));
  }
  // topk: the chosen element alone (the lower index of a tie).
  for (const auto& g :
       OnesGradient([](const Tensor& x) { return topk(x, 2).first; }, {3, 3, 3, 1, 5, 5}, {2, 3})) {
    EXPECT_EQ(g, (std::vector<float>{1, 1, 0, 0, 1, 1}));
  }
  // cumsum: the reverse running sum of the cotangent.
  for (const auto& g :
       OnesGradient([](const Tensor& x) { return cumsum(x, 0); }, {1, 2, 3, 4}, {4})) {
    EXPECT_EQ(g, (std::vector<float>{4, 3, 2, 1}));
  }
  // rsqrt, silu and gelu at 0 and the tails: finite.
  for (const auto& g :
       OnesGradient([](const Tensor& x) { return silu(x) + gelu(x) + gelu(x, true); },
                    {-1000, -90, 0, 90, 1000}, {5})) {
    for (float v : g) EXPECT_TRUE(std::isfinite(v)) << v;
    EXPECT_NEAR(g[2], 1.5, 1e-6);  // silu'(0) = gelu'(0) = 1/2
  }
  // argmax and argmin give i64 and carry no gradient.
  Tensor x = tensor(std::vector<float>{1, 2}, {2}, Cl());
  x.requires_grad_();
  EXPECT_FALSE(argmax(x, 0).requires_grad());
  EXPECT_FALSE(topk(x, 1).second.requires_grad());
  EXPECT_TRUE(topk(x, 1).first.requires_grad());
}

}  // namespace
}  // namespace lazycl::more
