// scan (SPEC "scan"): the body traced once on placeholders and compiled once; every step runs
// on the device reading xs slices in place and writing ys into one stacked buffer.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "frontend/trace_scope.h"
#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "test_util.h"

namespace lazycl {
namespace {

using test::C;
using test::ErrorOf;
using test::Has;
using test::Iota;
using test::NumParams;

const Device kCl = Device::opencl(0);
const Device kHost = Device::host();

using Ts = std::vector<Tensor>;
using Body = std::pair<Ts, Ts>;

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

class ScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sync({ones({1}, DType::f32, kCl) + 1});
    metrics::reset();
    live_ = C("DeviceLiveBytes");
  }
  // The library is usable and not stuck in tracing.
  void ExpectHealthy() {
    EXPECT_FALSE(frontend::TraceScope::active());
    Tensor a = tensor(std::vector<float>{1, 2}, {2}, kCl);
    EXPECT_EQ((a * 3 + 1).to_vector<float>(), (std::vector<float>{4, 7}));
  }
  int64_t live_ = 0;
};

TEST_F(ScanTest, CumulativeSumEqualsCppLoop) {
  const int T = 7;
  const std::vector<float> init = {0.5f, -1, 2}, xs = Iota(T * 3, -3, 0.25f);
  ScanResult r = scan(
      [](const Ts& c, const Ts& x) {
        Tensor next = c[0] + x[0];
        return Body{{next}, {next * 2}};
      },
      {tensor(init, {3}, kCl)}, {tensor(xs, {T, 3}, kCl)});
  std::vector<float> carry = init, ys;
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < 3; ++i) carry[i] = carry[i] + xs[t * 3 + i];
    for (int i = 0; i < 3; ++i) ys.push_back(carry[i] * 2);
  }
  ASSERT_EQ(r.carry.size(), 1u);
  ASSERT_EQ(r.ys.size(), 1u);
  EXPECT_EQ(r.carry[0].device(), kCl);
  EXPECT_EQ(r.ys[0].shape(), (std::vector<int64_t>{T, 3}));
  EXPECT_EQ(r.carry[0].to_vector<float>(), carry);
  EXPECT_EQ(r.ys[0].to_vector<float>(), ys);
  EXPECT_EQ(C("TraceTransferBytes"), 0);
}

TEST_F(ScanTest, SeveralCarriesAndXsOfDifferentDtypesAndShapes) {
  const int T = 6;
  const std::vector<float> h0 = Iota(6, -0.5f, 0.2f), xa = Iota(T * 6, 1, -0.05f);
  const std::vector<int32_t> n0 = {1, 2, 3, 4}, xb = {5, -1, 7, 0, 3, 2};
  std::vector<int64_t> xc;
  for (int i = 0; i < T * 2; ++i) xc.push_back(int64_t{1} << (20 + i));
  ScanResult r = scan(
      [](const Ts& c, const Ts& x) {
        Tensor h = tanh(c[0] * 0.5 + x[0]);
        Tensor n = c[1] + x[1];  // i32[4] + i32[] (broadcast)
        return Body{{h, n}, {sum(h), x[2] * 3, n}};
      },
      {tensor(h0, {2, 3}, kCl), tensor(n0, {4}, kCl)},
      {tensor(xa, {T, 2, 3}, kCl), tensor(xb, {T}, kCl), tensor(xc, {T, 2}, kCl)});

  std::vector<float> h = h0, y0;
  std::vector<int32_t> n = n0, y2;
  std::vector<int64_t> y1;
  for (int t = 0; t < T; ++t) {
    float s = 0;
    for (int i = 0; i < 6; ++i) {
      h[i] = std::tanh(h[i] * 0.5f + xa[t * 6 + i]);
      s += h[i];
    }
    y0.push_back(s);
    for (int i = 0; i < 2; ++i) y1.push_back(xc[t * 2 + i] * 3);
    for (int i = 0; i < 4; ++i) {
      n[i] += xb[t];
      y2.push_back(n[i]);
    }
  }
  ASSERT_EQ(r.carry.size(), 2u);
  ASSERT_EQ(r.ys.size(), 3u);
  EXPECT_EQ(r.carry[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.carry[1].dtype(), DType::i32);
  EXPECT_EQ(r.ys[0].shape(), (std::vector<int64_t>{T}));
  EXPECT_EQ(r.ys[1].shape(), (std::vector<int64_t>{T, 2}));
  EXPECT_EQ(r.ys[1].dtype(), DType::i64);
  EXPECT_EQ(r.ys[2].shape(), (std::vector<int64_t>{T, 4}));
  ExpectNear(r.carry[0].to_vector<float>(), h, 1e-5);
  EXPECT_EQ(r.carry[1].to_vector<int32_t>(), n);
  ExpectNear(r.ys[0].to_vector<float>(), y0, 1e-4);
  EXPECT_EQ(r.ys[1].to_vector<int64_t>(), y1);
  EXPECT_EQ(r.ys[2].to_vector<int32_t>(), y2);
  EXPECT_EQ(C("TraceTransferBytes"), 0);
}

TEST_F(ScanTest, YsThatAreTheCarryItself) {
  const int T = 5;
  ScanResult r = scan(
      [](const Ts& c, const Ts& x) {
        Tensor next = c[0] * 2 + x[0];
        // the incoming carry, the outgoing carry twice
        return Body{{next}, {c[0], next, next}};
      },
      {tensor(std::vector<float>{1, -1}, {2}, kCl)}, {tensor(Iota(T * 2, 0, 1), {T, 2}, kCl)});
  std::vector<float> c = {1, -1}, before, after;
  for (int t = 0; t < T; ++t) {
    before.insert(before.end(), c.begin(), c.end());
    for (int i = 0; i < 2; ++i) c[i] = c[i] * 2 + static_cast<float>(t * 2 + i);
    after.insert(after.end(), c.begin(), c.end());
  }
  EXPECT_EQ(r.carry[0].to_vector<float>(), c);
  EXPECT_EQ(r.ys[0].to_vector<float>(), before);
  EXPECT_EQ(r.ys[1].to_vector<float>(), after);
  EXPECT_EQ(r.ys[2].to_vector<float>(), after);
}

TEST_F(ScanTest, YsThatAreXsSlicesUnchangedAndSwappedCarries) {
  const int T = 4;
  const std::vector<float> a = Iota(T * 3, 0, 1);
  const std::vector<int32_t> b = {9, 8, 7, 6};
  ScanResult r = scan(
      [](const Ts& c, const Ts& x) {
        // carries swap places every step; ys are the slices as they are
        return Body{{c[1], c[0]}, {x[1], x[0]}};
      },
      {tensor(std::vector<float>{1, 2}, {2}, kCl), tensor(std::vector<float>{3, 4}, {2}, kCl)},
      {tensor(a, {T, 3}, kCl), tensor(b, {T}, kCl)});
  EXPECT_EQ(r.ys[0].to_vector<int32_t>(), b);
  EXPECT_EQ(r.ys[1].to_vector<float>(), a);
  EXPECT_EQ(r.ys[1].shape(), (std::vector<int64_t>{T, 3}));
  // An even number of swaps.
  EXPECT_EQ(r.carry[0].to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(r.carry[1].to_vector<float>(), (std::vector<float>{3, 4}));
  ScanResult odd = scan(
      [](const Ts& c, const Ts& x) {
        return Body{{c[1], c[0]}, {x[0]}};
      },
      {tensor(std::vector<float>{1, 2}, {2}, kCl), tensor(std::vector<float>{3, 4}, {2}, kCl)},
      {tensor(Iota(3, 0, 1), {3}, kCl)});
  EXPECT_EQ(odd.carry[0].to_vector<float>(), (std::vector<float>{3, 4}));
  EXPECT_EQ(odd.carry[1].to_vector<float>(), (std::vector<float>{1, 2}));
  // The carry becomes the slice.
  ScanResult last = scan(
      [](const Ts&, const Ts& x) {
        return Body{{x[0]}, {}};
      },
      {zeros({3}, DType::f32, kCl)}, {tensor(a, {T, 3}, kCl)});
  EXPECT_EQ(last.carry[0].to_vector<float>(), (std::vector<float>{9, 10, 11}));
  EXPECT_TRUE(last.ys.empty());
}

TEST_F(ScanTest, ZeroSteps) {
  for (Device d : {kCl, kHost}) {
    SCOPED_TRACE(d.str());
    int body_calls = 0;
    ScanResult r = scan(
        [&body_calls](const Ts& c, const Ts& x) {
          ++body_calls;
          Tensor next = c[0] + x[0];
          return Body{{next, c[1]}, {next, sum(x[1]), x[1]}};
        },
        {tensor(std::vector<float>{1, 2, 3}, {3}, d), tensor(std::vector<int32_t>{7}, {1}, d)},
        {zeros({0, 3}, DType::f32, d), zeros({0, 2, 2}, DType::i64, d)});
    EXPECT_LE(body_calls, 1);
    ASSERT_EQ(r.carry.size(), 2u);
    ASSERT_EQ(r.ys.size(), 3u);
    EXPECT_EQ(r.carry[0].to_vector<float>(), (std::vector<float>{1, 2, 3}));
    EXPECT_EQ(r.carry[1].to_vector<int32_t>(), (std::vector<int32_t>{7}));
    EXPECT_EQ(r.ys[0].shape(), (std::vector<int64_t>{0, 3}));
    EXPECT_EQ(r.ys[0].dtype(), DType::f32);
    EXPECT_EQ(r.ys[1].shape(), (std::vector<int64_t>{0}));
    EXPECT_EQ(r.ys[1].dtype(), DType::i64);
    EXPECT_EQ(r.ys[2].shape(), (std::vector<int64_t>{0, 2, 2}));
    EXPECT_TRUE(r.ys[0].to_vector<float>().empty());
    EXPECT_TRUE(r.ys[2].to_vector<int64_t>().empty());
    // ys with no steps can still be used in further computation.
    EXPECT_EQ(sum(r.ys[0]).item<float>(), 0.0f);
  }
  EXPECT_EQ(C("TraceTransferBytes"), 0);
}

Body Rnn(const Ts& c, const Ts& x) {
  Tensor h = tanh(matmul(c[0], x[1]) + x[0]);
  return {{h}, {h, sum(h, {1})}};
}

TEST_F(ScanTest, HostScanEqualsDeviceScan) {
  const int T = 5;
  const std::vector<float> h0 = Iota(2 * 3, -0.3f, 0.1f), xa = Iota(T * 2 * 3, 0.2f, -0.01f),
                           w = Iota(T * 3 * 3, -0.4f, 0.02f);
  ScanResult host = scan(Rnn, {tensor(h0, {2, 3}, kHost)},
                         {tensor(xa, {T, 2, 3}, kHost), tensor(w, {T, 3, 3}, kHost)});
  EXPECT_EQ(host.carry[0].device(), kHost);
  EXPECT_EQ(host.ys[0].device(), kHost);
  EXPECT_EQ(C("TransferToDeviceBytes"), 0);
  EXPECT_EQ(C("KernelLaunches"), 0);
  ScanResult dev =
      scan(Rnn, {tensor(h0, {2, 3}, kCl)}, {tensor(xa, {T, 2, 3}, kCl), tensor(w, {T, 3, 3}, kCl)});
  EXPECT_EQ(dev.carry[0].device(), kCl);
  ExpectNear(dev.carry[0].to_vector<float>(), host.carry[0].to_vector<float>(), 1e-5);
  ASSERT_EQ(dev.ys.size(), 2u);
  EXPECT_EQ(host.ys[0].shape(), dev.ys[0].shape());
  EXPECT_EQ(host.ys[1].shape(), (std::vector<int64_t>{T, 2}));
  ExpectNear(dev.ys[0].to_vector<float>(), host.ys[0].to_vector<float>(), 1e-5);
  ExpectNear(dev.ys[1].to_vector<float>(), host.ys[1].to_vector<float>(), 1e-5);
  // Mixed: host init, device xs runs on the device.
  ScanResult mixed = scan(Rnn, {tensor(h0, {2, 3}, kHost)},
                          {tensor(xa, {T, 2, 3}, kCl), tensor(w, {T, 3, 3}, kCl)});
  EXPECT_EQ(mixed.carry[0].device(), kCl);
  ExpectNear(mixed.carry[0].to_vector<float>(), host.carry[0].to_vector<float>(), 1e-5);
}

TEST_F(ScanTest, HostInputsAreUploadedOnceNotPerStep) {
  const int T = 32;
  Tensor init = tensor(Iota(4, 0, 1), {4}, kHost);
  Tensor xs = tensor(Iota(T * 4, 0, 0.5f), {T, 4}, kHost);
  // One device operand puts the scan on the device; the host ones move there once.
  Tensor scale = tensor(Iota(T, 1, 0), {T}, kCl);
  metrics::reset();
  ScanResult r = scan(
      [](const Ts& c, const Ts& x) {
        return Body{{c[0] + x[0] * x[1]}, {c[0] * x[0]}};
      },
      {init}, {xs, scale});
  sync({r.carry[0], r.ys[0]});
  EXPECT_EQ(r.carry[0].device(), kCl);
  EXPECT_EQ(C("TransferToDeviceBytes"), 4 * 4 + T * 4 * 4);
  EXPECT_EQ(C("TransferToDeviceCount"), 2);
  EXPECT_EQ(C("TransferFromDeviceBytes"), 0);
  EXPECT_EQ(C("TraceTransferBytes"), 0);
  std::vector<float> c = Iota(4, 0, 1), xv = Iota(T * 4, 0, 0.5f);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < 4; ++i) c[i] = c[i] + xv[t * 4 + i] * 1.0f;
  EXPECT_EQ(r.carry[0].to_vector<float>(), c);
}

TEST_F(ScanTest, CompiledOnceWhateverTheNumberOfSteps) {
  // A body no other test uses.
  auto body = [](const Ts& c, const Ts& x) {
    Tensor next = c[0] * 0.96875 + sin(x[0]) * 0.015625;
    return Body{{next}, {next - 0.5}};
  };
  Tensor init = tensor(Iota(16, 0, 0.1f), {16}, kCl);
  Tensor xs64 = tensor(Iota(64 * 16, 0, 0.01f), {64, 16}, kCl);
  Tensor xs4 = slice(xs64, 0, 0, 4);
  sync({init, xs64, xs4});
  metrics::reset();
  ScanResult r4 = scan(body, {init}, {xs4});
  sync({r4.carry[0]});
  const int64_t compiles4 = C("GraphCompiles"), launches4 = C("KernelLaunches");
  EXPECT_EQ(compiles4, 1);
  ASSERT_GT(launches4, 0);
  EXPECT_EQ(launches4 % 4, 0);
  metrics::reset();
  ScanResult r64 = scan(body, {init}, {xs64});
  sync({r64.carry[0]});
  EXPECT_EQ(C("GraphCompiles"), 0);  // compiled once, for the 4-step scan
  EXPECT_EQ(C("GraphCacheHits"), 1);
  EXPECT_EQ(C("KernelLaunches"), 16 * launches4);  // the same kernels, once per step
  // No per-step round trip.
  EXPECT_EQ(C("TransferToDeviceBytes"), 0);
  EXPECT_EQ(C("TransferFromDeviceBytes"), 0);
  EXPECT_EQ(C("TraceTransferBytes"), 0);
  // And the numbers are the loop's.
  std::vector<float> c = Iota(16, 0, 0.1f), xs = Iota(64 * 16, 0, 0.01f), ys;
  for (int t = 0; t < 64; ++t) {
    for (int i = 0; i < 16; ++i) {
      c[i] = c[i] * 0.96875f + std::sin(xs[t * 16 + i]) * 0.015625f;
      ys.push_back(c[i] - 0.5f);
    }
  }
  ExpectNear(r64.carry[0].to_vector<float>(), c, 1e-5);
  ExpectNear(r64.ys[0].to_vector<float>(), ys, 1e-5);
  ExpectNear(r4.ys[0].to_vector<float>(), std::vector<float>(ys.begin(), ys.begin() + 4 * 16),
             1e-5);
}

TEST_F(ScanTest, DeviceMemoryDoesNotGrowPerStep) {
  auto body = [](const Ts& c, const Ts& x) { return Body{{c[0] + x[0] * 2, c[1] - 1}, {}}; };
  Tensor init0 = zeros({1000}, DType::f32, kCl), init1 = ones({64}, DType::i32, kCl);
  Tensor xs = tensor(Iota(256 * 1000, 0, 1e-3f), {256, 1000}, kCl);
  sync({init0, init1, xs});
  auto peak_over_live = [&](int64_t steps) {
    metrics::reset();
    const int64_t live = C("DeviceLiveBytes");
    {
      ScanResult r = scan(body, {init0, init1}, {slice(xs, 0, 0, steps)});
      sync(r.carry);
    }
    EXPECT_EQ(C("DeviceLiveBytes"), live) << steps << " steps";
    return C("DevicePeakBytes") - live;
  };
  peak_over_live(2);  // warm the pool and the graph cache
  const int64_t p4 = peak_over_live(4);
  const int64_t p256 = peak_over_live(256);
  // The slice view of xs is computed into one buffer first; it grows with the steps, so compare
  // without it: 256 steps of 1000 floats and 4 steps of 1000 floats.
  EXPECT_LE(p256 - p4, 256 * 1000 * 4 - 4 * 1000 * 4 + 4096) << p4 << " " << p256;
  // With xs used whole, the peak is exactly the same.
  auto whole = [&](const Tensor& x) {
    metrics::reset();
    const int64_t live = C("DeviceLiveBytes");
    {
      ScanResult r = scan(body, {init0, init1}, {x});
      sync(r.carry);
    }
    EXPECT_EQ(C("DeviceLiveBytes"), live);
    return std::pair{C("DevicePeakBytes") - live, C("DeviceAllocCount")};
  };
  Tensor xs8 = tensor(Iota(8 * 1000, 0, 1e-3f), {8, 1000}, kCl);
  sync({xs8});
  whole(xs8);
  const auto [peak8, allocs8] = whole(xs8);
  const auto [peak256, allocs256] = whole(xs);
  EXPECT_EQ(peak8, peak256);
  EXPECT_LE(allocs256, allocs8);
}

TEST_F(ScanTest, LiveBytesReturnToStartAfterManyScans) {
  {
    Tensor w = tensor(Iota(9, -1, 0.25f), {3, 3}, kCl);
    for (int i = 0; i < 12; ++i) {
      const int T = 1 + i * 3;
      // Host init, host xs or neither (both host would run the plain loop).
      const bool host_init = i % 2 == 1, host_xs = !host_init && i % 4 == 0;
      ScanResult r = scan(
          [&w](const Ts& c, const Ts& x) {
            Tensor h = tanh(matmul(c[0], w) + x[0]);
            return Body{{h}, {h, sum(h)}};
          },
          {tensor(Iota(3, 0, 1), {1, 3}, host_init ? kHost : kCl)},
          {tensor(Iota(T * 3, 0, 0.1f), {T, 1, 3}, host_xs ? kHost : kCl)});
      EXPECT_EQ(r.carry[0].device(), kCl);
      EXPECT_EQ(r.ys[0].shape(), (std::vector<int64_t>{T, 1, 3}));
      (void)r.ys[1].to_vector<float>();
    }
  }
  EXPECT_EQ(C("DeviceLiveBytes"), live_);
}

TEST_F(ScanTest, MaterializedTracingGivesSameNumbersButMovesBytes) {
  const int T = 6;
  Tensor w = tensor(Iota(16, -0.5f, 0.06f), {4, 4}, kCl);
  // carry: f32[4] (16 B) + i32[2] (8 B); slices: f32[1,4] (16 B) + i64[3] (24 B).
  const int64_t per_call = 16 + 8 + 16 + 24;
  std::vector<int64_t> xb;
  for (int i = 0; i < T * 3; ++i) xb.push_back(i - 4);
  Tensor init0 = tensor(Iota(4, 0.1f, 0.1f), {4}, kCl);
  Tensor init1 = tensor(std::vector<int32_t>{0, 0}, {2}, kCl);
  Tensor xa = tensor(Iota(T * 4, 0, 0.1f), {T, 1, 4}, kCl);
  Tensor xbt = tensor(xb, {T, 3}, kCl);
  sync({w, init0, init1, xa, xbt});
  auto run = [&](bool materialized) {
    metrics::reset();
    ScanResult r = scan(
        [&w](const Ts& c, const Ts& x) {
          Tensor h = tanh(matmul(reshape(c[0], {1, 4}), w) + x[0]);
          Tensor n = c[1] + cast(slice(x[1], 0, 0, 2), DType::i32);
          return Body{{reshape(h, {4}), n}, {h, x[1] * 2}};
        },
        {init0, init1}, {xa, xbt}, ScanOptions{.trace_on_materialized_inputs = materialized});
    sync({r.carry[0], r.carry[1], r.ys[0], r.ys[1]});
    return std::pair{r, std::pair{C("TransferToDeviceBytes"), C("TraceTransferBytes")}};
  };
  auto [placeholder_run, placeholder_bytes] = run(false);
  auto [materialized_run, materialized_bytes] = run(true);
  auto [materialized_again, again_bytes] = run(true);
  EXPECT_EQ(placeholder_bytes.first, 0);
  EXPECT_EQ(placeholder_bytes.second, 0);
  EXPECT_EQ(materialized_bytes.first - placeholder_bytes.first, per_call);
  EXPECT_EQ(materialized_bytes.second, per_call);
  EXPECT_EQ(again_bytes.first, per_call);  // every call pays it again
  EXPECT_EQ(again_bytes.second, per_call);
  for (const ScanResult* r : {&materialized_run, &materialized_again}) {
    EXPECT_EQ(r->carry[0].to_vector<float>(), placeholder_run.carry[0].to_vector<float>());
    EXPECT_EQ(r->carry[1].to_vector<int32_t>(), placeholder_run.carry[1].to_vector<int32_t>());
    EXPECT_EQ(r->ys[0].to_vector<float>(), placeholder_run.ys[0].to_vector<float>());
    EXPECT_EQ(r->ys[1].to_vector<int64_t>(), placeholder_run.ys[1].to_vector<int64_t>());
  }
  // And the placeholder run is the C++ loop.
  std::vector<float> h = Iota(4, 0.1f, 0.1f), wv = Iota(16, -0.5f, 0.06f),
                     xav = Iota(T * 4, 0, 0.1f);
  std::vector<int32_t> n = {0, 0};
  for (int t = 0; t < T; ++t) {
    std::vector<float> next(4);
    for (int j = 0; j < 4; ++j) {
      float acc = 0;
      for (int k = 0; k < 4; ++k) acc += h[k] * wv[k * 4 + j];
      next[j] = std::tanh(acc + xav[t * 4 + j]);
    }
    h = next;
    for (int j = 0; j < 2; ++j) n[j] += static_cast<int32_t>(xb[t * 3 + j]);
  }
  ExpectNear(placeholder_run.carry[0].to_vector<float>(), h, 1e-5);
  EXPECT_EQ(placeholder_run.carry[1].to_vector<int32_t>(), n);
}

TEST_F(ScanTest, BodyCapturingDeviceTensors) {
  const int T = 10;
  const std::vector<float> wv = Iota(9, -0.4f, 0.1f), bv = {0.1f, -0.2f, 0.3f};
  Tensor w = tensor(wv, {3, 3}, kCl);
  Tensor b = tensor(bv, {3}, kCl) * 0.5;  // pending: computed inside the body's graph
  Tensor xs = tensor(Iota(T * 3, -1, 0.07f), {T, 3}, kCl);
  Tensor init = tensor(std::vector<float>{0.3f, 0.2f, 0.1f}, {1, 3}, kCl);
  sync({w, xs, init});
  metrics::reset();
  ScanResult r = scan(
      [&w, &b](const Ts& c, const Ts& x) {
        Tensor h = tanh(matmul(c[0], w) + x[0] + b);
        return Body{{h}, {h}};
      },
      {init}, {xs});
  sync({r.carry[0], r.ys[0]});
  EXPECT_EQ(C("TransferToDeviceBytes"), 0);
  EXPECT_EQ(C("TraceTransferBytes"), 0);
  const std::vector<float> xv = Iota(T * 3, -1, 0.07f);
  std::vector<float> h = {0.3f, 0.2f, 0.1f}, ys;
  for (int t = 0; t < T; ++t) {
    std::vector<float> next(3);
    for (int j = 0; j < 3; ++j) {
      float acc = 0;
      for (int k = 0; k < 3; ++k) acc += h[k] * wv[k * 3 + j];
      next[j] = std::tanh(acc + xv[t * 3 + j] + bv[j] * 0.5f);
    }
    h = next;
    ys.insert(ys.end(), h.begin(), h.end());
  }
  ExpectNear(r.carry[0].to_vector<float>(), h, 1e-5);
  ExpectNear(r.ys[0].to_vector<float>(), ys, 1e-5);
  // The captured tensors are untouched.
  EXPECT_EQ(w.to_vector<float>(), wv);
}

TEST_F(ScanTest, BodyCapturingAPlaceholderIsAnError) {
  Tensor p = placeholder({2}, DType::f32, kCl);
  const std::string e = ErrorOf([&] {
    scan(
        [&p](const Ts& c, const Ts& x) {
          return Body{{c[0] + p}, {x[0]}};
        },
        {zeros({2}, DType::f32, kCl)}, {zeros({3, 2}, DType::f32, kCl)});
  });
  EXPECT_TRUE(Has(e, "placeholder")) << e;
  EXPECT_EQ(C("DeviceLiveBytes"), live_);
  ExpectHealthy();
}

// Regression: a placeholder given as init or xs used to reach the kernel launch of the first
// step (after compiling the body), failing there with the backend's message.
TEST_F(ScanTest, PlaceholderInitOrXsFailsBeforeAnythingRuns) {
  auto body = [](const Ts& c, const Ts& x) {
    return Body{{c[0] * 0.8125 + x[0]}, {c[0] - 0.4375}};
  };
  auto check = [&](const Ts& init, const Ts& xs, const std::string& shape) {
    metrics::reset();
    const std::string e = ErrorOf([&] { scan(body, init, xs); });
    EXPECT_TRUE(Has(e, "placeholder") && Has(e, "f32") && Has(e, shape)) << e;
    EXPECT_EQ(C("GraphCompiles"), 0);
    EXPECT_EQ(C("KernelLaunches"), 0);
    EXPECT_EQ(C("DeviceLiveBytes"), live_);
  };
  Tensor xs = ones({3, 2}, DType::f32, kCl), init = zeros({2}, DType::f32, kCl);
  sync({xs, init});
  live_ = C("DeviceLiveBytes");
  check({placeholder({2}, DType::f32, kCl)}, {xs}, "[2]");
  check({init}, {placeholder({3, 2}, DType::f32, kCl)}, "[3,2]");
  ExpectHealthy();
}

// A scan inside a traced body (trace, call, or another scan's body) is unrolled into the trace:
// a nested scan equals its unrolled loop, values and gradients, on the device as on the host.
TEST_F(ScanTest, ANestedScanEqualsItsUnrolledLoop) {
  // inner: c <- tanh(c * 0.75 + x_j), y_j = c * x_j over the rows of a [3, 2]
  auto inner = [](const Ts& c, const Ts& x) {
    const Tensor next = tanh(c[0] * 0.75 + x[0]);
    return Body{{next}, {next * x[0]}};
  };
  // outer: over the [4, 3, 2] xs, each step scans its [3, 2] slice from the carry
  auto outer = [&](const Ts& c, const Ts& x) {
    ScanResult r = scan(inner, {c[0]}, {x[0]});
    return Body{{r.carry[0] + 0.5 * sum(r.ys[0], {0}, false)}, {r.ys[0]}};
  };
  auto loops = [&](const Tensor& init, const Tensor& xs) {  // the same as plain loops
    Tensor c = init;
    std::vector<Tensor> ys;
    for (int64_t t = 0; t < xs.size(0); ++t) {
      Tensor ci = c;
      std::vector<Tensor> inner_ys;
      for (int64_t j = 0; j < xs.size(1); ++j) {
        const Tensor xj = xs[t][j];
        ci = tanh(ci * 0.75 + xj);
        inner_ys.push_back(ci * xj);
      }
      const Tensor stacked = stack(inner_ys, 0);
      c = ci + 0.5 * sum(stacked, {0}, false);
      ys.push_back(stacked);
    }
    return std::make_pair(c, stack(ys, 0));
  };
  const Tensor xs_h = randn({4, 3, 2}, 7, DType::f32, kHost);
  const Tensor init_h = randn({2}, 8, DType::f32, kHost);
  auto [want_c, want_ys] = loops(init_h, xs_h);
  // The host's nested scan, and the device's: top level (the outer scan traces its body, and
  // the inner scan unrolls in it), and inside trace() and call().
  for (Device d : {kHost, kCl}) {
    SCOPED_TRACE(d.str());
    Tensor xs = xs_h.to(d).detach().requires_grad_();
    Tensor init = init_h.to(d).detach().requires_grad_();
    ScanResult r = scan(outer, {init}, {xs});
    test::ExpectNear(r.carry[0].to(kHost), want_c, 1e-5);
    test::ExpectNear(r.ys[0].to(kHost), want_ys, 1e-5);
    // Gradients of a loss over both, against the plain loops' on the host.
    const Tensor w = randn({4, 3, 2}, 9, DType::f32, kHost);
    const std::vector<Tensor> got = grad(sum(r.carry[0]) + sum(r.ys[0] * w.to(d)), {init, xs});
    Tensor xs_ref = xs_h.detach().requires_grad_(), init_ref = init_h.detach().requires_grad_();
    auto [c_ref, ys_ref] = loops(init_ref, xs_ref);
    const std::vector<Tensor> want = grad(sum(c_ref) + sum(ys_ref * w), {init_ref, xs_ref});
    test::ExpectNear(got[0].to(kHost), want[0], 1e-4);
    test::ExpectNear(got[1].to(kHost), want[1], 1e-4);
  }
  // Inside trace(): the scan reads the trace's placeholders.
  Function f = trace(
      [&](const Ts& a) {
        ScanResult r = scan(outer, {a[0]}, {a[1]});
        return Ts{r.carry[0], r.ys[0]};
      },
      {{{2}, DType::f32}, {{4, 3, 2}, DType::f32}}, kCl);
  const Ts out = f({init_h.to(kCl), xs_h.to(kCl)});
  test::ExpectNear(out[0].to(kHost), want_c, 1e-5);
  test::ExpectNear(out[1].to(kHost), want_ys, 1e-5);
  ExpectHealthy();
}

// A long scan unrolled in a trace is a deep chain over slices of one lazy fill: it fuses like
// any chain. The fusion rule for broadcast expensive nodes counted the fill's [300, 8] elements
// as the kernel's iteration, so every step's [8] carry looked broadcast and was materialized,
// one node per pass over the region (300 kernels, cubic time in the steps: 16 s at 300 steps).
TEST_F(ScanTest, AScanUnrolledInATraceFusesLikeAChain) {
  auto inner = [](const Ts& c, const Ts& x) { return Body{{tanh(c[0] * 0.75 + x[0])}, {}}; };
  metrics::reset();
  const Ts out = call(
      [&](const Ts& a) {
        ScanResult r = scan(inner, {a[0]}, {a[1]});
        return Ts{r.carry[0]};
      },
      {zeros({8}, DType::f32, kCl), ones({300, 8}, DType::f32, kCl)});
  float want = 0;
  for (int t = 0; t < 300; ++t) want = std::tanh(want * 0.75f + 1.0f);
  EXPECT_NEAR(out[0].to_vector<float>()[0], want, 1e-5);
  // Chains fuse up to 128 deep: 900 ops make a handful of kernels, not one per step.
  EXPECT_LE(C("KernelLaunches"), 20);
  ExpectHealthy();
}

TEST_F(ScanTest, ValidationErrors) {
  auto keep = [](const Ts& c, const Ts& x) { return Body{{c[0]}, {x[0]}}; };
  for (Device d : {kCl, kHost}) {
    SCOPED_TRACE(d.str());
    Tensor x3 = zeros({3, 2}, DType::f32, d), x4 = zeros({4, 2}, DType::f32, d);
    Tensor i0 = tensor(std::vector<float>{1, 2}, {2}, d);
    Tensor n0 = tensor(std::vector<int32_t>{1, 2}, {2}, d);
    std::string e = ErrorOf([&] { scan(keep, {i0}, {x3, x4}); });
    EXPECT_TRUE(Has(e, "xs 1") && Has(e, "4") && Has(e, "3")) << e;
    e = ErrorOf([&] { scan(keep, {i0}, {}); });
    EXPECT_TRUE(Has(e, "xs") && Has(e, "empty")) << e;
    e = ErrorOf([&] { scan(keep, {i0}, {zeros({}, DType::f32, d)}); });
    EXPECT_TRUE(Has(e, "scalar")) << e;
    // The body changes a carry's shape.
    e = ErrorOf([&] {
      scan(
          [](const Ts& c, const Ts& x) {
            return Body{{c[0], reshape(x[0], {1, 2})}, {}};
          },
          {i0, i0}, {x3});
    });
    EXPECT_TRUE(Has(e, "carry 1") && Has(e, "f32[1,2]") && Has(e, "f32[2]")) << e;
    // ... or its dtype.
    e = ErrorOf([&] {
      scan(
          [](const Ts& c, const Ts&) {
            return Body{{c[0], cast(c[1], DType::f32)}, {}};
          },
          {i0, n0}, {x3});
    });
    EXPECT_TRUE(Has(e, "carry 1") && Has(e, "f32[2]") && Has(e, "i32[2]")) << e;
    // ... or their number.
    e = ErrorOf([&] {
      scan([](const Ts& c, const Ts&) { return Body{{c[0]}, {}}; }, {i0, n0}, {x3});
    });
    EXPECT_TRUE(Has(e, "1") && Has(e, "2") && Has(e, "carry")) << e;
    e = ErrorOf([&] { scan(keep, {Tensor()}, {x3}); });
    EXPECT_TRUE(Has(e, "undefined")) << e;
    EXPECT_THROW(scan(ScanFn(), {i0}, {x3}), Error);
  }
  EXPECT_EQ(C("DeviceLiveBytes"), live_);
  ExpectHealthy();
}

TEST_F(ScanTest, BodyThatThrowsSurfacesAndLeaksNothing) {
  for (Device d : {kCl, kHost}) {
    SCOPED_TRACE(d.str());
    const int64_t live = C("DeviceLiveBytes");
    {
      // A host carry: scan uploads it before tracing, and must release it on the way out.
      Tensor init = tensor(Iota(256, 0, 1), {256}, kHost);
      Tensor xs = tensor(Iota(4 * 256, 0, 1), {4, 256}, d);
      try {
        scan([](const Ts&, const Ts&) -> Body { throw std::runtime_error("body failed: 42"); },
             {init}, {xs});
        ADD_FAILURE() << "no throw";
      } catch (const Error& e) {
        // Wrapped in a lazycl::Error that names the scan body and keeps the body's message.
        const std::string what = e.what();
        EXPECT_NE(what.find("body failed: 42"), std::string::npos) << what;
        EXPECT_NE(what.find("scan"), std::string::npos) << what;
      }
      try {
        scan([](const Ts&, const Ts&) -> Body { throw Error("lazycl error from the body"); },
             {init}, {xs});
        ADD_FAILURE() << "no throw";
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), "lazycl error from the body");
      }
      // An op error inside the body.
      EXPECT_THROW(scan(
                       [](const Ts& c, const Ts& x) {
                         return Body{{c[0] + x[0]}, {}};
                       },
                       {init}, {zeros({4, 3}, DType::f32, d)}),
                   Error);
    }
    EXPECT_EQ(C("DeviceLiveBytes"), live);
    ExpectHealthy();
  }
  // The library still scans.
  ScanResult r = scan(
      [](const Ts& c, const Ts& x) {
        return Body{{c[0] + x[0]}, {}};
      },
      {zeros({2}, DType::f32, kCl)}, {ones({3, 2}, DType::f32, kCl)});
  EXPECT_EQ(r.carry[0].to_vector<float>(), (std::vector<float>{3, 3}));
}

TEST_F(ScanTest, PendingInputsAndManySteps) {
  const int T = 200;
  Tensor xs = reshape(arange(T * 2, DType::f32, kCl) * 0.01, {T, 2});  // pending
  Tensor init = ones({2}, DType::f32, kCl) * 0.5;                      // pending
  ScanResult r = scan(
      [](const Ts& c, const Ts& x) {
        Tensor next = c[0] * 0.99 + cos(x[0]) * 0.01;
        return Body{{next}, {sum(next)}};
      },
      {init}, {xs});
  std::vector<float> c = {0.5f, 0.5f}, ys;
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < 2; ++i)
      c[i] = c[i] * 0.99f + std::cos(static_cast<float>(t * 2 + i) * 0.01f) * 0.01f;
    ys.push_back(c[0] + c[1]);
  }
  ExpectNear(r.carry[0].to_vector<float>(), c, 1e-5);
  ExpectNear(r.ys[0].to_vector<float>(), ys, 1e-5);
  EXPECT_EQ(C("TraceTransferBytes"), 0);
}

// A scan queues its inputs' graph without waiting for it (the body is traced meanwhile), then
// its steps, and returns once they are done: reads give the host's values, and a process that
// exits right after scans it never read exits cleanly. (Returning with the steps still queued
// was tried: with cold caches PoCL then compiles their kernels while exit() destroys LLVM's
// lazily created statics, and this child died of SIGSEGV.)
TEST_F(ScanTest, ScanResultsAreReadyWhenItReturns) {
  const int T = 400;
  auto run = [&](Device d) {
    Tensor xs = reshape(arange(T * 4096, DType::f32, d) * 1e-6, {T, 4096});
    sync({xs});
    return scan(
        [](const Ts& c, const Ts& x) {
          return Body{{tanh(c[0] * 0.5 + x[0]) + sin(c[0]) * 0.25}, {}};
        },
        {zeros({4096}, DType::f32, d)}, {xs});
  };
  const std::vector<float> expected = run(Device::host()).carry[0].to_vector<float>();
  ScanResult r = run(kCl);
  ExpectNear(r.carry[0].to_vector<float>(), expected, 1e-5);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ScanResult pending = run(kCl);
        // Then steps of a body never compiled before, whose kernels PoCL compiles at their
        // first launch, with an input still queued (the arange).
        ScanResult later = scan(
            [](const Ts& c, const Ts& x) {
              return Body{{exp(c[0] * -0.125) * cos(x[0]) - c[0] * 0.375}, {}};
            },
            {pending.carry[0]}, {reshape(arange(8 * 4096, DType::f32, kCl), {8, 4096})});
        // And a scan whose body throws while traced, its inputs' graph (never compiled before)
        // queued: drained as the error leaves.
        bool threw = false;
        try {
          scan([](const Ts&, const Ts&) -> Body { throw std::runtime_error("no"); },
               {sqrt(abs(later.carry[0])) * 0.3 - 1.7}, {pending.carry[0] * 0.5 + 2.25});
        } catch (const std::exception&) {
          threw = true;
        }
        std::exit(threw && later.carry[0].dim() == 1 ? 3 : 4);
      },
      testing::ExitedWithCode(3), "");
}

// A device scan is deferred (SPEC "scan"): it returns with its body traced and nothing compiled
// or run; its steps run when a result is first needed. The graph that needs it queues behind the
// steps (the step loop does not drain once warm: StepLoopsLeftQueued) and reads wait for both. A
// scan whose results are dropped unread runs nothing, and a process may exit with one pending.
TEST_F(ScanTest, AScanIsDeferredUntilAResultIsNeeded) {
  const int T = 64;
  auto run = [&](Device d, double scale) {
    Tensor xs = reshape(arange(T * 2048, DType::f32, d) * 1e-6, {T, 2048});
    return scan(
        [scale](const Ts& c, const Ts& x) {
          return Body{{tanh(c[0] * scale + x[0]) + c[0] * 0.25}, {x[0] * 2}};
        },
        {zeros({2048}, DType::f32, d)}, {xs});
  };
  ScanResult host = run(Device::host(), 0.5);
  const std::vector<float> expected = host.carry[0].to_vector<float>();
  const std::vector<float> expected_ys = host.ys[0].to_vector<float>();
  ScanResult cold = run(kCl, 0.5);  // compiles when read
  ExpectNear(cold.carry[0].to_vector<float>(), expected, 1e-5);

  const int64_t launches = C("KernelLaunches"), lookups = C("GraphCacheHits") + C("GraphCompiles");
  const int64_t deferred = C("ScansDeferred"), queued = C("StepLoopsLeftQueued");
  { ScanResult dropped = run(kCl, 0.5); }
  ScanResult warm = run(kCl, 0.5);
  EXPECT_EQ(C("ScansDeferred") - deferred, 2);
  EXPECT_EQ(C("KernelLaunches"), launches) << "a scan ran before any result was needed";
  EXPECT_EQ(C("GraphCacheHits") + C("GraphCompiles"), lookups);
  std::vector<float> twice = expected;
  for (float& v : twice) v *= 2;
  ExpectNear((warm.carry[0] * 2).to_vector<float>(), twice, 2e-5);
  EXPECT_EQ(C("StepLoopsLeftQueued") - queued, 1);
  const int64_t ran = C("KernelLaunches") - launches;
  EXPECT_GE(ran, T + 2) << "the steps, the xs and the product";
  ExpectNear(warm.ys[0].to_vector<float>(), expected_ys, 1e-6);  // written by the same run
  EXPECT_EQ(C("KernelLaunches") - launches, ran);

  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ScanResult pending = run(kCl, 0.75);
        std::exit(pending.carry[0].dim() == 1 ? 3 : 4);
      },
      testing::ExitedWithCode(3), "");
}

// A graph that reads only part of a deferred scan's final carry (a language model's last
// position) computes the last step itself (runtime/storage.h: Producer::LastStepOf), and only
// the part it reads: the last step's product for one row, while its sum over rows still reads
// every row. Each way of reading equals the host's loop: in part, whole, in part then whole,
// run in reverse, and with stacked ys (whose steps all run in place: nothing is inlined).
TEST_F(ScanTest, AReaderOfPartOfTheCarryComputesPartOfTheLastStep) {
  const int T = 3;
  auto run = [&](Device d, bool reverse, bool with_ys) {
    const Tensor h = reshape(arange(6 * 8, DType::f32, d) * 0.01 - 0.2, {6, 8});
    const Tensor w = reshape(cos(arange(T * 8 * 8, DType::f32, d)) * 0.3, {T, 8, 8});
    ScanOptions options;
    options.reverse = reverse;
    return scan(
        [with_ys](const Ts& c, const Ts& x) {
          Tensor next = c[0] + tanh(matmul(c[0], x[0])) + mean(c[0], {0}, true) * 0.5;
          return Body{{next}, with_ys ? Ts{next * 2} : Ts{}};
        },
        {h}, {w}, options);
  };
  auto last_row = [](const Tensor& h) { return slice(h, 0, 5, 6) * 3.0; };
  std::vector<std::string> kernels;
  auto ran = [&](const std::string& what) {
    for (const std::string& k : kernels)
      if (k.find(what) != std::string::npos) return true;
    return false;
  };
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse ? "reverse" : "forward");
    const Tensor want_whole = run(kHost, reverse, false).carry[0];
    const std::vector<float> whole = want_whole.to_vector<float>();
    const std::vector<float> part = last_row(want_whole).to_vector<float>();

    metrics::reset();
    metrics::set_profiling(true);
    metrics::reset_profile();
    ScanResult r = run(kCl, reverse, false);
    ExpectNear(last_row(r.carry[0]).to_vector<float>(), part, 1e-5);
    kernels.clear();
    for (const metrics::KernelProfile& k : metrics::kernel_profile()) kernels.push_back(k.kernel);
    metrics::set_profiling(false);
    EXPECT_EQ(C("LastStepsInlined"), 1);
    EXPECT_EQ(C("ScanLastStepsMade"), 1);
    EXPECT_TRUE(ran("Matmul f32[1,8]")) << ::testing::PrintToString(kernels);
    EXPECT_TRUE(ran("Matmul f32[6,8]")) << ::testing::PrintToString(kernels);
    // The same result read whole afterwards: the scan's own run, all its steps.
    ExpectNear(r.carry[0].to_vector<float>(), whole, 1e-5);
    EXPECT_EQ(C("LastStepsInlined"), 1);

    metrics::reset();
    ExpectNear(run(kCl, reverse, false).carry[0].to_vector<float>(), whole, 1e-5);
    ScanResult sum = run(kCl, reverse, false);
    ExpectNear((sum.carry[0] * 1.0).to_vector<float>(), whole, 1e-5);
    EXPECT_EQ(C("LastStepsInlined"), 0) << "a reader of all of the carry";
    ScanResult ys = run(kCl, reverse, true);
    ExpectNear(last_row(ys.carry[0]).to_vector<float>(), part, 1e-5);
    EXPECT_EQ(C("LastStepsInlined"), 0) << "a scan with stacked ys";
    EXPECT_EQ(C("ScanLastStepsMade"), 0);
  }
  ExpectHealthy();
}

// A loop of scans whose results nobody reads in between is a chain of pending scans; every 16th
// (frontend::kMaxPendingProducers) runs the ones before it, so reading the last recurses a bounded
// number of levels (a chain of 20,000, uncut, overflowed the stack when read).
TEST_F(ScanTest, AChainOfDeferredScansIsCutAsItGrows) {
  const int n = 2000;
  Tensor h = zeros({4}, DType::f32, kCl);
  const Tensor xs = ones({3, 4}, DType::f32, kCl);
  for (int i = 0; i < n; ++i) {
    h = scan([](const Ts& c, const Ts& x) { return Body{{c[0] + x[0]}, {}}; }, {h}, {xs}).carry[0];
  }
  EXPECT_EQ(C("ScansDeferred"), n);
  EXPECT_EQ(C("ScanChainsCut"), (n - 1) / 16);  // at scans 17, 33, ...
  EXPECT_EQ(h.to_vector<float>(), std::vector<float>(4, 3.0f * n));
}

// Deferred scans compose: one scan's results as another's init, xs and capture, all pending
// until the last result is read, equal the host's loops.
TEST_F(ScanTest, DeferredScansFeedEachOther) {
  auto chain = [](Device d) {
    Tensor xs = reshape(arange(5 * 6, DType::f32, d) * 0.1 - 1.0, {5, 6});
    ScanResult first = scan(
        [](const Ts& c, const Ts& x) {
          Tensor next = tanh(c[0] + x[0]);
          return Body{{next}, {next * 0.5}};
        },
        {ones({6}, DType::f32, d)}, {xs});
    Tensor shared = first.carry[0] * 0.25;  // captured by the second body, still pending
    ScanResult second = scan(
        [&](const Ts& c, const Ts& x) {
          Tensor next = c[0] * 0.5 + x[0] + shared;
          return Body{{next}, {next - x[0]}};
        },
        {first.carry[0]}, {first.ys[0]}, ScanOptions{.reverse = true});
    return std::vector<Tensor>{second.carry[0], second.ys[0], first.ys[0]};
  };
  const std::vector<Tensor> want = chain(kHost);
  const int64_t launches = C("KernelLaunches");
  const std::vector<Tensor> got = chain(kCl);
  EXPECT_EQ(C("KernelLaunches"), launches);
  for (size_t i = 0; i < got.size(); ++i)
    ExpectNear(got[i].to_vector<float>(), want[i].to_vector<float>(), 1e-5);
}

// A result of a deferred scan overwritten from the host before the scan ran keeps the host's
// bytes: the scan, run later for the other result, does not write over them.
TEST_F(ScanTest, ACopyIntoAPendingResultIsNotOverwrittenByTheScan) {
  auto body = [](const Ts& c, const Ts& x) {
    Tensor next = c[0] + x[0];
    return Body{{next}, {next * 3}};
  };
  const std::vector<float> xs = Iota(4 * 3, -2, 0.5f);
  ScanResult host = scan(body, {zeros({3}, DType::f32, kHost)}, {tensor(xs, {4, 3}, kHost)});
  ScanResult r = scan(body, {zeros({3}, DType::f32, kCl)}, {tensor(xs, {4, 3}, kCl)});
  const std::vector<float> mine = {7, 8, 9};
  r.carry[0].copy_from_host(mine.data(), mine.size() * sizeof(float));
  ExpectNear(r.ys[0].to_vector<float>(), host.ys[0].to_vector<float>(), 1e-6);
  EXPECT_EQ(r.carry[0].to_vector<float>(), mine);
}

// What goes wrong while a deferred scan runs (here an input computed from a placeholder) is
// thrown by every read of its results, each time, with the placeholder named; the library stays
// usable. A bare placeholder input or capture is still refused when scan is called.
TEST_F(ScanTest, ADeferredScanThatFailsFailsEveryRead) {
  auto body = [](const Ts& c, const Ts& x) {
    Tensor next = c[0] + x[0];
    return Body{{next}, {next}};
  };
  Tensor hole = placeholder({4, 3}, DType::f32, kCl);
  ScanResult r = scan(body, {zeros({3}, DType::f32, kCl)}, {hole * 2});
  for (const Tensor& t : {r.carry[0], r.ys[0], r.carry[0] + 1}) {
    const std::string e = ErrorOf([&] { (void)t.to_vector<float>(); });
    EXPECT_TRUE(Has(e, "placeholder")) << e;
  }
  ExpectHealthy();
  EXPECT_TRUE(Has(ErrorOf([&] { (void)scan(body, {zeros({3}, DType::f32, kCl)}, {hole}); }),
                  "placeholder"));
  Tensor captured = placeholder({3}, DType::f32, kCl);
  const std::string e = ErrorOf([&] {
    (void)scan(
        [&](const Ts& c, const Ts& x) {
          return Body{{c[0] + x[0] * captured}, {}};
        },
        {zeros({3}, DType::f32, kCl)}, {zeros({4, 3}, DType::f32, kCl)});
  });
  EXPECT_TRUE(Has(e, "captured")) << e;
  ExpectHealthy();
  // With no ys, a read of part of the carry runs the steps before the last on their own
  // (AReaderOfPartOfTheCarryComputesPartOfTheLastStep): their failure is that read's, and the
  // scan's own run fails every later read of all of the carry.
  ScanResult no_ys = scan(
      [](const Ts& c, const Ts& x) {
        return Body{{c[0] + x[0]}, {}};
      },
      {zeros({3}, DType::f32, kCl)}, {hole * 2});
  const int64_t made = C("ScanLastStepsMade");
  for (const Tensor& t : {slice(no_ys.carry[0], 0, 1, 2) * 2.0, no_ys.carry[0]}) {
    const std::string msg = ErrorOf([&] { (void)t.to_vector<float>(); });
    EXPECT_TRUE(Has(msg, "placeholder")) << msg;
  }
  EXPECT_EQ(C("ScanLastStepsMade"), made + 1);
  ExpectHealthy();
}

}  // namespace
}  // namespace lazycl
