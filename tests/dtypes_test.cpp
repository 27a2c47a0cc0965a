// f16 and bf16 (lazycl/dtype.h): conversions against the IEEE 754 and bfloat16 definitions, the
// device's conversions against the host's bit for bit, every kind of op on the device against
// the host interpreter and against f32 arithmetic rounded once, promotion, autograd, scan,
// checkpoints and placeholders. CTest runs it once per codegen strategy.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/half.h"
#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "test_util.h"

namespace lazycl {
namespace {

using test::ErrorOf;
using test::Has;

const Device kCl = Device::opencl(0);

TEST(HalfBitsTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(base::FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(base::FloatToBf16(base::BitsFloat(0x3F808000u)), 0x3F80);  // tie: even stays
  EXPECT_EQ(base::FloatToBf16(base::BitsFloat(0x3F818000u)), 0x3F82);  // tie: odd rounds up
  EXPECT_EQ(base::FloatToBf16(base::BitsFloat(0x3F808001u)), 0x3F81);  // above the tie
  EXPECT_EQ(base::FloatToBf16(-2.0f), 0xC000);
  EXPECT_EQ(base::FloatToBf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(base::FloatToBf16(std::numeric_limits<float>::max()), 0x7F80);  // overflows
  EXPECT_TRUE(std::isnan(base::Bf16ToFloat(base::FloatToBf16(std::nanf("")))));
  EXPECT_EQ(base::FloatToBf16(base::BitsFloat(0xFFC00001u)) & 0x8000, 0x8000);  // sign kept
  EXPECT_EQ(base::Bf16ToFloat(0x4049), 3.140625f);
}

TEST(HalfBitsTest, F16RoundsToNearestEvenWithSubnormals) {
  EXPECT_EQ(base::FloatToF16(1.0f), 0x3C00);
  EXPECT_EQ(base::FloatToF16(-2.0f), 0xC000);
  EXPECT_EQ(base::FloatToF16(65504.0f), 0x7BFF);  // the largest half
  EXPECT_EQ(base::FloatToF16(65519.0f), 0x7BFF);
  EXPECT_EQ(base::FloatToF16(65520.0f), 0x7C00);  // rounds to infinity
  EXPECT_EQ(base::FloatToF16(0.1f), 0x2E66);
  EXPECT_EQ(base::FloatToF16(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(base::FloatToF16(std::ldexp(1.0f, -25)), 0x0000);  // its half: tie to even 0
  EXPECT_EQ(base::FloatToF16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(base::FloatToF16(std::ldexp(1.0f, -14)), 0x0400);             // the smallest normal
  EXPECT_EQ(base::FloatToF16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie: even stays
  EXPECT_EQ(base::FloatToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie: odd goes up
  EXPECT_EQ(base::F16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(base::F16ToFloat(0x7BFF), 65504.0f);
  EXPECT_TRUE(std::isinf(base::F16ToFloat(0xFC00)) && base::F16ToFloat(0xFC00) < 0);
  EXPECT_TRUE(std::isnan(base::F16ToFloat(base::FloatToF16(std::nanf("")))));
  // Every half value converts to float and back to itself.
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = base::F16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(base::FloatToF16(f), h) << h;
    ASSERT_EQ(base::FloatToBf16(base::Bf16ToFloat(static_cast<uint16_t>(h))), h) << h;
  }
}

// Floats that exercise the conversions: ties, subnormals, overflow, infinities, NaN.
std::vector<float> Specials() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.5f,
                          65504.0f,
                          65520.0f,
                          1e-8f,
                          6e-8f,
                          3e38f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::nanf("")};
  for (uint32_t bits : {0x3F808000u, 0x3F818000u, 0x3F808001u, 0x33000000u, 0x38800000u}) {
    v.push_back(base::BitsFloat(bits));
  }
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1000.0f, 1000.0f);
  for (int i = 0; i < 200; ++i)
    v.push_back(u(rng) * std::pow(10.0f, static_cast<float>(i % 9 - 6)));
  return v;
}

class HalfTest : public ::testing::TestWithParam<DType> {
 protected:
  DType half() const { return GetParam(); }
  uint16_t Bits(float f) const {
    return half() == DType::bf16 ? base::FloatToBf16(f) : base::FloatToF16(f);
  }
  // One ulp of the half dtype at |v| (relative precision 2^-8 or 2^-11), at least `floor`.
  double Ulp(double v, double floor = 1e-6) const {
    return std::max(floor, std::fabs(v) * (half() == DType::bf16 ? 0x1p-7 : 0x1p-10));
  }
  // Random values the half dtype holds exactly, as an f32 host tensor.
  Tensor Values(std::vector<int64_t> shape, uint32_t seed, float lo = -2, float hi = 2) const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) {
      const uint16_t b = Bits(u(rng));
      x = half() == DType::bf16 ? base::Bf16ToFloat(b) : base::F16ToFloat(b);
    }
    return tensor(v, shape, Device::host());
  }
  // `f` on half tensors on the device and on the host: the same dtype, and values within one
  // ulp of each other (f32 maths differs in its last bits between them); and within `ulps` of
  // `f` computed in f32 and rounded once.
  void Check(const std::function<Tensor(const std::vector<Tensor>&)>& f,
             const std::vector<Tensor>& f32_inputs, double ulps = 2) const {
    std::vector<Tensor> dev, host, wide;
    for (const Tensor& t : f32_inputs) {
      const Tensor h = is_floating(t.dtype()) ? cast(t, half()) : t;
      host.push_back(h);
      dev.push_back(h.to(kCl));
      wide.push_back(t);
    }
    const Tensor d = f(dev), h = f(host), w = f(wide);
    ASSERT_EQ(d.dtype(), h.dtype());
    ASSERT_EQ(d.shape(), h.shape());
    if (!is_floating(d.dtype())) {
      if (d.dtype() == DType::i64) {
        EXPECT_EQ(d.to_vector<int64_t>(), h.to_vector<int64_t>());
      }
      if (d.dtype() == DType::boolean) {
        EXPECT_EQ(d.to_vector<uint8_t>(), h.to_vector<uint8_t>());
      }
      return;
    }
    EXPECT_EQ(d.dtype(), half());
    const std::vector<float> dv = d.to_vector<float>(), hv = h.to_vector<float>();
    const std::vector<float> wv = w.to_vector<float>();
    for (size_t i = 0; i < dv.size(); ++i) {
      if (std::isnan(hv[i])) {
        EXPECT_TRUE(std::isnan(dv[i])) << i;
        continue;
      }
      EXPECT_NEAR(dv[i], hv[i], Ulp(hv[i])) << "element " << i;
      EXPECT_NEAR(hv[i], wv[i], ulps * Ulp(wv[i], 1e-3)) << "element " << i << " vs f32";
    }
  }
};

TEST_P(HalfTest, DeviceConversionsMatchTheHostsBitForBit) {
  const std::vector<float> v = Specials();
  const Tensor x = tensor(v, {static_cast<int64_t>(v.size())}, Device::host());
  const std::vector<uint16_t> dev = cast(x.to(kCl), half()).to_vector<uint16_t>();
  const std::vector<uint16_t> host = cast(x, half()).to_vector<uint16_t>();
  ASSERT_EQ(dev.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) {
      EXPECT_TRUE(
          std::isnan(half() == DType::bf16 ? base::Bf16ToFloat(dev[i]) : base::F16ToFloat(dev[i])));
      continue;
    }
    EXPECT_EQ(dev[i], Bits(v[i])) << v[i];
    EXPECT_EQ(host[i], Bits(v[i])) << v[i];
  }
  // And back: to f32 exactly, and to integers and bool through f32.
  const Tensor h = cast(x, half());
  EXPECT_EQ(cast(h.to(kCl), DType::f32).to_vector<float>().size(), v.size());
  const std::vector<float> back = cast(h.to(kCl), DType::f32).to_vector<float>();
  const std::vector<float> read = h.to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isnan(read[i])) {
      EXPECT_EQ(back[i], read[i]);
    }
  }
  const Tensor small = cast(tensor(std::vector<float>{-0.0f, 2.7f, -3.5f, 0.0f}, {4}), half());
  EXPECT_EQ(cast(small.to(kCl), DType::i32).to_vector<int32_t>(),
            (std::vector<int32_t>{0, 2, -3, 0}));
  EXPECT_EQ(cast(small.to(kCl), DType::boolean).to_vector<uint8_t>(),
            (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(cast(small, DType::boolean).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1, 1, 0}));
}

TEST_P(HalfTest, ElementwiseWithBroadcastingAndScalars) {
  const Tensor a = Values({3, 1, 5}, 1), b = Values({4, 1}, 2), pos = Values({4, 5}, 3, 0.1f, 3);
  Check([](const auto& x) { return x[0] + x[1]; }, {a, b});
  Check([](const auto& x) { return x[0] * x[1] - x[0]; }, {a, b}, 3);
  Check([](const auto& x) { return x[0] / x[1]; }, {a, pos});
  Check([](const auto& x) { return x[0] * 0.3 + 1.0; }, {a}, 3);
  Check([](const auto& x) { return maximum(x[0], x[1]); }, {a, b});
  for (auto fn :
       {+[](const Tensor& t) { return exp(t); }, +[](const Tensor& t) { return tanh(t); },
        +[](const Tensor& t) { return sigmoid(t); }, +[](const Tensor& t) { return silu(t); },
        +[](const Tensor& t) { return relu(t); }, +[](const Tensor& t) { return abs(t); },
        +[](const Tensor& t) { return -t; }}) {
    Check([fn](const auto& x) { return fn(x[0]); }, {a});
  }
  Check([](const auto& x) { return sqrt(x[0]); }, {pos});
  Check([](const auto& x) { return log(x[0]); }, {pos});
  Check([](const auto& x) { return rsqrt(x[0]); }, {pos});
  Check([](const auto& x) { return lt(x[0], x[1]); }, {a, b});
  Check([](const auto& x) { return where(gt(x[0], 0.0), x[0], x[1]); }, {a, b});
  Check([](const auto& x) { return clamp(x[0], -0.5, 0.5); }, {a});
}

TEST_P(HalfTest, ReductionsAccumulateInF32) {
  const Tensor a = Values({6, 33}, 4), empty = Values({2, 0}, 5), one = Values({1, 1}, 6);
  Check([](const auto& x) { return sum(x[0], {1}); }, {a});
  Check([](const auto& x) { return mean(x[0]); }, {a});
  Check([](const auto& x) { return max(x[0], {0}); }, {a});
  Check([](const auto& x) { return min(x[0], {1}, true); }, {a});
  Check([](const auto& x) { return argmax(x[0], 1); }, {a});
  Check([](const auto& x) { return softmax(x[0], -1); }, {a});
  Check([](const auto& x) { return log_softmax(x[0], 0); }, {a});
  Check([](const auto& x) { return cumsum(x[0], 1); }, {a}, 8);
  Check([](const auto& x) { return sum(x[0], {1}); }, {empty});
  Check([](const auto& x) { return sum(x[0]); }, {one});
  // A sum that half arithmetic would get wrong: 4096 ones (bf16 stops counting at 256).
  const Tensor ones4096 = ones({4096}, half(), kCl);
  EXPECT_EQ(sum(ones4096).to_vector<float>()[0], 4096.0f);
}

TEST_P(HalfTest, MatmulsViewsAndIndexing) {
  const Tensor a = Values({5, 7}, 7), b = Values({7, 3}, 8), batch = Values({2, 5, 7}, 9);
  Check([](const auto& x) { return matmul(x[0], x[1]); }, {a, b}, 4);
  Check([](const auto& x) { return matmul(x[0], x[1]); }, {batch, b}, 4);
  Check([](const auto& x) { return matmul(transpose(x[1], 0, 1), transpose(x[0], 0, 1)); }, {a, b},
        4);
  Check([](const auto& x) { return cat({x[0], slice(x[0], 0, 1, 3)}, 0); }, {a});
  Check([](const auto& x) { return permute(x[0], {2, 0, 1}) * 2.0; }, {batch});
  const Tensor ids = tensor(std::vector<int32_t>{4, 0, 2, 2}, {4});
  Check([](const auto& x) { return index_select(x[0], 0, x[1]); }, {a, ids});
  Check([](const auto& x) { return nn::embedding(x[0], x[1]); }, {a, ids});
  Check([](const auto& x) { return nn::rms_norm(x[0], {}, 1e-5); }, {a}, 4);
  const Tensor src = Values({4, 7}, 10);
  Check(
      [](const auto& x) {
        return scatter_add(x[0], 0, broadcast_to(reshape(x[1], {4, 1}), {4, 7}), x[2]);
      },
      {a, ids, src}, 4);
}

TEST_P(HalfTest, PromotionFollowsPyTorch) {
  const Tensor h = cast(ones({2}, DType::f32, kCl), half());
  const DType other = half() == DType::bf16 ? DType::f16 : DType::bf16;
  EXPECT_EQ((h + cast(ones({2}, DType::f32, kCl), other)).dtype(), DType::f32);
  EXPECT_EQ((h + ones({2}, DType::f32, kCl)).dtype(), DType::f32);
  EXPECT_EQ((h + ones({2}, DType::i32, kCl)).dtype(), half());
  EXPECT_EQ((h * 0.5).dtype(), half());
  EXPECT_EQ(full({1}, 0.1, half(), kCl).to_vector<uint16_t>()[0], Bits(0.1f));
  EXPECT_TRUE(Has(ErrorOf([&] { h.to_vector<int32_t>(); }), dtype_name(half())));
  EXPECT_TRUE(Has(ErrorOf([&] { h.to_vector<int32_t>(); }), "to_vector<float>()"));
  EXPECT_TRUE(Has(ErrorOf([&] { ones({2}, DType::f32, kCl).to_vector<uint16_t>(); }), "f32"));
}

TEST_P(HalfTest, GradientsScanAndPlaceholders) {
  Tensor w = cast(Values({4, 3}, 11), half()).to(kCl).requires_grad_();
  const Tensor x = cast(Values({2, 4}, 12), half()).to(kCl);
  Tensor loss = sum(tanh(matmul(x, w)));
  loss.backward();
  ASSERT_EQ(w.grad().dtype(), half());
  Tensor w32 = cast(w.detach(), DType::f32).requires_grad_();
  sum(tanh(matmul(cast(x, DType::f32), w32))).backward();
  const std::vector<float> g = w.grad().to_vector<float>(), g32 = w32.grad().to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], g32[i], 8 * Ulp(g32[i], 1e-2)) << i;

  // A scan over a half carry keeps its dtype.
  const Tensor init = cast(Values({3}, 13), half()).to(kCl);
  const Tensor xs = cast(Values({5, 3}, 14), half()).to(kCl);
  ScanResult r = scan(
      [](const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        return std::make_pair(std::vector<Tensor>{c[0] * 0.5 + x[0]}, std::vector<Tensor>{c[0]});
      },
      {init}, {xs});
  EXPECT_EQ(r.carry[0].dtype(), half());
  EXPECT_EQ(r.ys[0].shape(), (std::vector<int64_t>{5, 3}));
  const std::vector<float> c = r.carry[0].to_vector<float>();
  std::vector<float> want = init.to_vector<float>();
  const std::vector<float> xv = xs.to_vector<float>();
  for (int t = 0; t < 5; ++t) {
    for (size_t i = 0; i < 3; ++i) {
      want[i] = half() == DType::bf16
                    ? base::Bf16ToFloat(base::FloatToBf16(want[i] * 0.5f + xv[t * 3 + i]))
                    : base::F16ToFloat(base::FloatToF16(want[i] * 0.5f + xv[t * 3 + i]));
    }
  }
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(c[i], want[i], Ulp(want[i])) << i;

  // Placeholders of a half dtype trace with nothing allocated or moved.
  metrics::reset();
  Function f = trace(
      [](const std::vector<Tensor>& a) { return std::vector<Tensor>{matmul(a[0], a[1]) * 2.0}; },
      {{{64, 128}, half()}, {{128, 32}, half()}}, kCl);
  EXPECT_EQ(metrics::counter("DeviceAllocBytes"), 0);
  EXPECT_EQ(metrics::counter("TraceTransferBytes"), 0);
  EXPECT_EQ(f.num_parameters(), 2);
}

INSTANTIATE_TEST_SUITE_P(Halves, HalfTest, ::testing::Values(DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// f64: values, promotion, reads and random numbers. (JAX x64 checks the ops themselves:
// reference_test's f64 cases.)
TEST(F64Test, ValuesKeepEveryBitOnTheDeviceAndTheHost) {
  const std::vector<double> v = {0.1, 1.0 / 3.0, 1e-300, -2.5e300, 123456789.123456789, -0.0};
  for (Device d : {Device::host(), kCl}) {
    SCOPED_TRACE(d.str());
    const Tensor x = tensor(v, {2, 3}, DType::f64, d);
    EXPECT_EQ(x.dtype(), DType::f64);
    const std::vector<double> back = x.to_vector<double>();
    ASSERT_EQ(back.size(), v.size());
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(std::signbit(back[i]), std::signbit(v[i]));
    EXPECT_EQ(back, v);
    // Arithmetic in double: 0.1 + 0.2 is 0.30000000000000004, not f32's 0.3.
    const Tensor s = tensor({0.1}, {1}, DType::f64, d) + 0.2;
    EXPECT_EQ(s.item<double>(), 0.1 + 0.2);
    EXPECT_EQ((x * 3.0).to_vector<double>()[1], (1.0 / 3.0) * 3.0);
    // A number keeps all its digits as a kernel argument.
    EXPECT_EQ(full({1}, 0.1, DType::f64, d).item<double>(), 0.1);
    // A sum of doubles keeps what f32 loses: 1 + 1e-10 is 1 in f32.
    EXPECT_EQ(sum(tensor({1.0, 1e-10}, {2}, DType::f64, d)).item<double>(), 1.0 + 1e-10);
  }
}

TEST(F64Test, PromotionAndReads) {
  const Tensor x = ones({2}, DType::f64, kCl);
  EXPECT_EQ((x + ones({2}, DType::f32, kCl)).dtype(), DType::f64);
  EXPECT_EQ((x + ones({2}, DType::i64, kCl)).dtype(), DType::f64);
  EXPECT_EQ((x + cast(ones({2}, DType::f32, kCl), DType::bf16)).dtype(), DType::f64);
  EXPECT_EQ(promote(DType::f16, DType::f64), DType::f64);
  EXPECT_EQ(dtype_size(DType::f64), 8u);
  EXPECT_TRUE(is_floating(DType::f64));
  EXPECT_TRUE(Has(ErrorOf([&] { x.to_vector<float>(); }), "to_vector<double>()"));
  EXPECT_TRUE(Has(ErrorOf([&] { ones({2}, DType::f32, kCl).to_vector<double>(); }), "f32"));
  // tensor() from doubles into other dtypes converts as cast() does.
  EXPECT_EQ(tensor({2.7, -2.7}, {2}, DType::i32, kCl).to_vector<int32_t>(),
            (std::vector<int32_t>{2, -2}));
  EXPECT_EQ(tensor({0.1}, {1}, DType::f32).item<float>(), 0.1f);
}

TEST(F64Test, RandomNumbersAgreeOnHostAndDeviceAndFollowTheF32Stream) {
  const std::vector<double> h = randn({1000}, 5, DType::f64, Device::host()).to_vector<double>();
  const std::vector<double> d = randn({1000}, 5, DType::f64, kCl).to_vector<double>();
  const std::vector<float> f = randn({1000}, 5, DType::f32, Device::host()).to_vector<float>();
  double mean = 0;
  for (size_t i = 0; i < h.size(); ++i) {
    EXPECT_NEAR(d[i], h[i], 1e-13 * (1 + std::fabs(h[i]))) << i;
    EXPECT_NEAR(h[i], f[i], 1e-5 * (1 + std::fabs(h[i]))) << i;  // the same uniforms
    mean += h[i] / 1000;
  }
  EXPECT_LT(std::fabs(mean), 0.1);
  const std::vector<double> u = rand({100}, 6, -1, 3, DType::f64, kCl).to_vector<double>();
  for (double x : u) {
    EXPECT_GE(x, -1);
    EXPECT_LT(x, 3);
  }
}

}  // namespace
}  // namespace lazycl
