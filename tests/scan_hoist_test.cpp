// scan's step loop computes loop-invariant work once (runtime/step_loop.cpp, HoistInvariants):
// an expensive subexpression the body captured still pending (rotary tables) runs once before
// the steps, not once per step; cheap invariants stay fused; values and gradients equal the
// host's scan.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "lazycl/profile.h"

namespace lazycl {
namespace {

const Device kCl = Device::opencl(0);
using Ts = std::vector<Tensor>;

// The body: h' = h * cos(table) + x (table captured), and a causal-style mask that is cheap.
ScanResult RunScan(Device d, const Tensor& w, bool masked) {
  const int64_t n = 64;
  Tensor table = cos(cast(arange(n, DType::i32, d), DType::f32) * 0.1) * exp(w);  // pending
  Tensor mask = lt(arange(n, DType::i32, d), 40);
  ScanFn body = [&](const Ts& carry, const Ts& x) {
    Tensor h = carry[0] * table + x[0];
    if (masked) h = where(mask, h, 0.0);
    return std::make_pair(Ts{h}, Ts{h * 2});
  };
  Tensor xs = reshape(cast(arange(5 * n, DType::i32, d), DType::f32) * 0.01, {5, n});
  return scan(body, {ones({n}, DType::f32, d)}, {xs});
}

float Sum(const Tensor& t) { return sum(t).item<float>(); }

TEST(ScanHoist, ExpensiveCaptureRunsOnceNotPerStep) {
  const Tensor w = full({1}, 0.5, DType::f32, kCl);
  sync({w});
  metrics::set_profiling(true);
  metrics::reset_profile();
  const int64_t hoisted = metrics::counter("ScanHoistedNodes");
  ScanResult r = RunScan(kCl, w, /*masked=*/false);
  sync({r.carry[0], r.ys[0]});
  EXPECT_EQ(metrics::counter("ScanHoistedNodes") - hoisted, 1);
  int cos_runs = 0;
  for (const metrics::KernelProfile& k : metrics::kernel_profile()) {
    if (k.ops.find("Cos") != std::string::npos) cos_runs += static_cast<int>(k.runs);
  }
  EXPECT_EQ(cos_runs, 1) << metrics::profile();  // 5 steps, one evaluation of the table
  metrics::set_profiling(false);

  ScanResult host = RunScan(Device::host(), w.to(Device::host()), false);
  const std::vector<float> got = r.ys[0].to_vector<float>(), want = host.ys[0].to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::abs(want[i])));
}

TEST(ScanHoist, CheapInvariantsStayFused) {
  // A pending mask of iota < 40 alone costs nothing worth a kernel of its own.
  const int64_t n = 64;
  Tensor mask = lt(arange(n, DType::i32, kCl), 40);
  Tensor xs = reshape(cast(arange(3 * n, DType::i32, kCl), DType::f32), {3, n});
  const int64_t hoisted = metrics::counter("ScanHoistedNodes");
  ScanFn body = [&](const Ts& carry, const Ts& x) {
    return std::make_pair(Ts{where(mask, carry[0] + x[0], 0.0)}, Ts{});
  };
  ScanResult r = scan(body, {zeros({n}, DType::f32, kCl)}, {xs});
  const std::vector<float> got = r.carry[0].to_vector<float>();
  EXPECT_EQ(metrics::counter("ScanHoistedNodes") - hoisted, 0);
  for (int64_t i = 0; i < n; ++i) {
    const float want = i < 40 ? static_cast<float>(3 * i + 3 * n) : 0.0f;  // i + (n+i) + (2n+i)
    EXPECT_EQ(got[i], want) << i;
  }
}

TEST(ScanHoist, GradientThroughAHoistedCaptureMatchesTheHost) {
  for (bool masked : {false, true}) {
    Tensor w = full({1}, 0.25, DType::f32, kCl);
    w.requires_grad_();
    ScanResult r = RunScan(kCl, w, masked);
    Tensor loss = sum(r.ys[0]) + sum(r.carry[0]);
    loss.backward();
    Tensor wh = full({1}, 0.25, DType::f32, Device::host());
    wh.requires_grad_();
    ScanResult rh = RunScan(Device::host(), wh, masked);
    Tensor loss_h = sum(rh.ys[0]) + sum(rh.carry[0]);
    loss_h.backward();
    const float g = w.grad().item<float>(), gh = wh.grad().item<float>();
    EXPECT_NEAR(g, gh, 1e-4 * (1 + std::abs(gh))) << "masked " << masked;
    EXPECT_NEAR(Sum(r.ys[0]), Sum(rh.ys[0]), 1e-3 * (1 + std::abs(Sum(rh.ys[0]))));
  }
}

}  // namespace
}  // namespace lazycl
