// Generated maths checked against <cmath> over the whole f32 range: on CPU devices codegen
// replaces the slow builtins `log`, `tanh`, `exp` and `erf` with its own formulations
// (kernels/templates/cpu_math.cl: lc_log, lc_tanh, lc_exp/lc_exp16, lc_erf), whose accuracy bounds
// are stated there and enforced here. On a GPU (or with LAZYCL_CODEGEN=gpu) the same checks
// hold the OpenCL builtins to the same bounds.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Every 97th bit pattern of both signs, from the smallest subnormal to infinity, plus the
// special values: about 88 million floats would take too long, 89 thousand cover every binade
// with many mantissas (and the length is not a multiple of the local size, so the bounds-checked
// tail runs too).
std::vector<float> WideRange() {
  std::vector<float> xs = {
      0.0f,        -0.0f,      1.0f,        -1.0f,           kInf,       -kInf,   kNaN,
      1e-45f,      -1e-45f,    1e-38f,      1.17549435e-38f, 0.625f,     -0.625f, 0.6249999f,
      0.99999994f, 1.0000001f, 0.70710677f, 0.7071068f,      1.4142135f, 2.0f,    0.5f};
  for (uint32_t bits = 1; bits < 0x7f800000u; bits += 97 * 1024) {
    xs.push_back(FromBits(bits));
    xs.push_back(-FromBits(bits));
  }
  for (uint32_t bits = 0x3f000000u; bits < 0x40000000u; bits += 97) xs.push_back(FromBits(bits));
  return xs;
}

// Max relative error of `got` against `want` (computed in double), where both are finite and
// want != 0; non-finite and zero results must match exactly (NaN equals NaN).
double MaxRelativeError(const std::vector<float>& xs, const std::vector<float>& got,
                        double (*want_of)(double), float* worst_x) {
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = want_of(static_cast<double>(xs[i]));
    const float want_f = static_cast<float>(want);
    if (std::isnan(want_f)) {
      EXPECT_TRUE(std::isnan(got[i])) << "x=" << xs[i] << " got " << got[i];
      continue;
    }
    if (std::isinf(want_f) || want_f == 0.0f) {
      EXPECT_EQ(got[i], want_f) << "x=" << xs[i];
      continue;
    }
    const double err = std::fabs(static_cast<double>(got[i]) - want) / std::fabs(want);
    if (err > worst) {
      worst = err;
      *worst_x = xs[i];
    }
  }
  return worst;
}

std::vector<float> OnDevice(const std::vector<float>& xs, Tensor (*op)(const Tensor&)) {
  Tensor x = tensor(xs, {static_cast<int64_t>(xs.size())}, Device::opencl());
  return op(x).to_vector<float>();
}

double Log(double x) { return std::log(x); }
double Tanh(double x) { return std::tanh(x); }

// 4 ulp of f32 is 4 * 2^-23 relative at worst (2^-24 below the binade's top).
constexpr double kFourUlp = 4.0 / 8388608.0;

TEST(CodegenTest, LogIsAccurateOverTheWholeRange) {
  const std::vector<float> xs = WideRange();
  float worst_x = 0;
  const double err = MaxRelativeError(xs, OnDevice(xs, &log), &Log, &worst_x);
  EXPECT_LE(err, kFourUlp) << "worst at x=" << worst_x;
  // log(0) is -inf, log(negative) NaN, log(inf) inf: checked exactly above.
}

TEST(CodegenTest, TanhIsAccurateOverTheWholeRange) {
  const std::vector<float> xs = WideRange();
  float worst_x = 0;
  const double err = MaxRelativeError(xs, OnDevice(xs, &tanh), &Tanh, &worst_x);
  EXPECT_LE(err, kFourUlp) << "worst at x=" << worst_x;
}

double Sin(double x) { return std::sin(x); }
double Cos(double x) { return std::cos(x); }

// sin and cos (lc_sin and lc_cos on the CPU strategy: a three-part reduction by pi / 2 up to
// |x| = 1e6, the builtins beyond): every binade, dense where the polynomials meet (multiples of
// pi / 4), the worst cases of the host emulation, and both sides of 1e6.
TEST(CodegenTest, SinAndCosAreAccurateOverTheWholeRange) {
  std::vector<float> xs = WideRange();
  for (float x = -20.0f; x < 20.0f; x += 0.000977f) xs.push_back(x);
  for (float x : {931878.125f, 993335.5f, 999999.94f, 1e6f, 1000000.06f, 1e6f + 0.5f, 3e7f,
                  -931878.125f, 1.5707964f, 3.1415927f, 4.712389f, 6.2831855f}) {
    xs.push_back(x);
  }
  for (float x = 900000.0f; x < 1100000.0f; x += 0.97f) xs.push_back(x);
  float worst_x = 0;
  double err = MaxRelativeError(xs, OnDevice(xs, &sin), &Sin, &worst_x);
  EXPECT_LE(err, kFourUlp) << "sin: worst at x=" << worst_x;
  err = MaxRelativeError(xs, OnDevice(xs, &cos), &Cos, &worst_x);
  EXPECT_LE(err, kFourUlp) << "cos: worst at x=" << worst_x;
  // sin(-0) is -0.
  EXPECT_TRUE(std::signbit(OnDevice({-0.0f}, &sin)[0]));
}

// exp over every binade of both signs: relative error within 2^-23 where the result is a normal
// float (measured: lc_exp 0.65 * 2^-23, PoCL's builtin 0.61 * 2^-23); subnormal results (x below
// about -87.3) within one subnormal step (2^-149) of the exact value, and 0, inf and NaN exactly
// where <cmath> gives them.
void CheckExp(const std::vector<float>& xs, const std::vector<float>& got) {
  double worst = 0;
  float worst_x = 0;
  const double step = std::ldexp(1.0, -149);
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = std::exp(static_cast<double>(xs[i]));
    const float want_f = static_cast<float>(want);
    if (std::isnan(want_f)) {
      EXPECT_TRUE(std::isnan(got[i])) << "x=" << xs[i] << " got " << got[i];
    } else if (std::isinf(want_f)) {
      EXPECT_EQ(got[i], want_f) << "x=" << xs[i];
    } else if (want < std::numeric_limits<float>::min()) {
      EXPECT_LE(std::fabs(static_cast<double>(got[i]) - want), step) << "x=" << xs[i];
    } else {
      const double err = std::fabs(static_cast<double>(got[i]) - want) / want;
      if (err > worst) {
        worst = err;
        worst_x = xs[i];
      }
    }
  }
  EXPECT_LE(worst, 1.0 / 8388608.0) << "worst at x=" << worst_x;
}

TEST(CodegenTest, ExpIsAccurateOverTheWholeRange) {
  std::vector<float> xs = WideRange();
  // Dense where the result goes subnormal, overflows, and around 0.
  for (float x = -110.0f; x < -80.0f; x += 0.0137f) xs.push_back(x);
  for (float x = 85.0f; x < 90.0f; x += 0.00731f) xs.push_back(x);
  for (float x = -2.0f; x < 2.0f; x += 0.000913f) xs.push_back(x);
  CheckExp(xs, OnDevice(xs, &exp));
}

// In a row kernel exp runs in its float16 form (softmax's exp pass). exp(x) - max(0 * x) over
// rows of 40 (two vectors and a scalar tail of 8) is a row kernel whose result is exp(x)
// itself: the max of zeros (fmax skips the NaNs of 0 * inf) is 0, and subtracting 0 is exact.
TEST(CodegenTest, VectorExpIsAccurateToo) {
  std::vector<float> xs = WideRange();
  for (float x = -110.0f; x < 90.0f; x += 0.0173f) xs.push_back(x);
  const int64_t cols = 40;
  while (xs.size() % cols != 0) xs.push_back(0.5f);
  const int64_t rows = static_cast<int64_t>(xs.size()) / cols;
  Tensor x = tensor(xs, {rows, cols}, Device::opencl());
  CheckExp(xs, (exp(x) - max(x * 0.0, {1}, true)).to_vector<float>());
}

// erf (lc_erf on CPUs; gelu uses it too): within 4 * 2^-23 relative where the result is a
// normal float, within two subnormal steps (2^-148) below or flushed to zero (PoCL's builtin,
// which the GPU strategy calls, measured 1.15 steps off; lc_erf within one), NaN for NaN.
TEST(CodegenTest, ErfIsAccurateOverTheWholeRange) {
  std::vector<float> xs = WideRange();
  for (float x = -5.0f; x < 5.0f; x += 0.000913f) xs.push_back(x);  // both branches, densely
  const std::vector<float> got = OnDevice(xs, &erf);
  double worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = std::erf(static_cast<double>(xs[i]));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[i])) << "x=" << xs[i];
    } else if (std::fabs(want) < std::numeric_limits<float>::min()) {
      EXPECT_TRUE(std::fabs(got[i] - want) <= std::ldexp(1.0, -148) || got[i] == 0.0f)
          << "x=" << xs[i] << " got " << got[i];
      EXPECT_EQ(std::signbit(got[i]), std::signbit(xs[i])) << "x=" << xs[i];
    } else {
      const double err = std::fabs(static_cast<double>(got[i]) - want) / std::fabs(want);
      if (err > worst) {
        worst = err;
        worst_x = xs[i];
      }
    }
  }
  EXPECT_LE(worst, kFourUlp) << "worst at x=" << worst_x;
}

// Where f32 rounds tanh to +-1 (|x| >= 13 ln 2 = 9.0109...), the device says exactly +-1 on both
// strategies (PoCL's builtin, which the gpu strategy calls, says 1 - 2^-24 up to 1e4), so the
// gradient 1 - y^2 is exactly 0 there, as on the host and in JAX. lazycl-fuzz found it (seed
// 2026, graph 3685, gpu codegen): a saturated tanh inside a scan whose 1.2e-7 was amplified to
// 2.8e-4. CTest runs this test with LAZYCL_CODEGEN=gpu too (codegen_gpu_tanh_test).
TEST(CodegenTest, TanhIsExactlyOneWhereItRoundsToOne) {
  const std::vector<float> xs = {9.0109134f,
                                 9.5f,
                                 10,
                                 20,
                                 100,
                                 1e4f,
                                 1e30f,
                                 -9.0109134f,
                                 -10.0f,
                                 -100.0f,
                                 std::numeric_limits<float>::infinity()};
  Tensor x = tensor(xs, {static_cast<int64_t>(xs.size())}, Device::opencl());
  x = x.detach().requires_grad_();
  const Tensor y = tanh(x);
  const std::vector<float> got = y.to_vector<float>();
  const std::vector<float> g = grad(sum(y), {x})[0].to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_EQ(got[i], xs[i] > 0 ? 1.0f : -1.0f) << "tanh(" << xs[i] << ")";
    EXPECT_EQ(std::tanh(xs[i]), xs[i] > 0 ? 1.0f : -1.0f) << "the host's tanh(" << xs[i] << ")";
    EXPECT_EQ(g[i], 0.0f) << "d tanh / dx at " << xs[i];
  }
}

TEST(CodegenTest, TanhKeepsTheSignOfZero) {
  const std::vector<float> got = OnDevice({0.0f, -0.0f}, &tanh);
  EXPECT_FALSE(std::signbit(got[0]));
  EXPECT_TRUE(std::signbit(got[1]));
}

}  // namespace
}  // namespace lazycl
