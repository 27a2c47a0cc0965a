// lazycl::nn beyond what the JAX oracle checks (tests/reference/cases.py covers linear, the
// norms, cross_entropy and attention against JAX): dropout's mask and scaling, the same on host
// and device for a seed, and its gradient.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

TEST(NnTest, DropoutKeepsAboutOneMinusPScaledAndIsTheSameOnEveryDevice) {
  const double p = 0.3;
  const int64_t n = 20000;
  Tensor x = randn({n}, 5, DType::f32, Device::host()) + 3.0;  // no zeros of its own
  const std::vector<float> xv = x.to_vector<float>();
  const std::vector<float> host = nn::dropout(x, p, 42).to_vector<float>();
  const std::vector<float> dev = nn::dropout(x.to(Device::opencl()), p, 42).to_vector<float>();
  ASSERT_EQ(host.size(), static_cast<size_t>(n));
  EXPECT_EQ(host, dev);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (host[i] == 0) continue;
    ++kept;
    EXPECT_FLOAT_EQ(host[i], static_cast<float>(xv[i] / (1 - p))) << i;
  }
  // Binomial(n, 0.7): the standard deviation is ~65; 5 of them either side.
  EXPECT_NEAR(static_cast<double>(kept), n * (1 - p), 5 * std::sqrt(n * p * (1 - p)));
  // Another seed, another mask.
  EXPECT_NE(nn::dropout(x, p, 43).to_vector<float>(), host);
  EXPECT_EQ(nn::dropout(x, 0, 1).to_vector<float>(), xv);
  for (float v : nn::dropout(x, 1, 1).to_vector<float>()) EXPECT_EQ(v, 0.0f);
}

TEST(NnTest, DropoutGradientIsTheScaledMask) {
  Tensor x = randn({64}, 6, DType::f32, Device::opencl()).requires_grad_();
  Tensor y = nn::dropout(x, 0.5, 7);
  Tensor g = grad(sum(y), {x})[0];
  const std::vector<float> yv = y.to_vector<float>();
  const std::vector<float> gv = g.to_vector<float>();
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_FLOAT_EQ(gv[i], yv[i] == 0 ? 0.0f : 2.0f) << i;
}

}  // namespace
}  // namespace lazycl
