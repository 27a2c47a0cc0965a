// The kernel profiler (lazycl/profile.h, LAZYCL_PROFILE): one row per generated kernel with its
// fused ops, runs and launches, device times from OpenCL events with the first run apart, and
// byte and FLOP rates whose accounting is checked against the shapes that ran.
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/settings.h"
#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "lazycl/profile.h"
#include "runtime/tiering.h"

namespace lazycl {
namespace {

const metrics::KernelProfile* Find(const std::vector<metrics::KernelProfile>& rows,
                                   const std::string& kernel_has) {
  for (const metrics::KernelProfile& row : rows) {
    if (row.kernel.find(kernel_has) != std::string::npos) return &row;
  }
  return nullptr;
}

// What a row says ran per later run: rate x time / runs.
double PerRun(double rate_per_ns, const metrics::KernelProfile& row) {
  return rate_per_ns * row.total_ms * 1e6 / static_cast<double>(row.runs - 1);
}

TEST(Profile, RowsPerKernelWithFusedOpsTimesAndRates) {
  metrics::set_profiling(true);
  metrics::reset_profile();
  ASSERT_TRUE(metrics::profiling());
  const Device cl = Device::opencl(0);
  const int64_t n = 3000;  // 3 inputs and 1 output of n f32: 4 * 4 * n bytes per run
  const Tensor a = randn({n}, 1, DType::f32, cl), b = randn({n}, 2, DType::f32, cl),
               c = randn({n}, 3, DType::f32, cl);
  const Tensor x = randn({48, 40}, 4, DType::f32, cl), w = randn({40, 24}, 5, DType::f32, cl);
  sync({a, b, c, x, w});
  metrics::reset_profile();
  for (int i = 0; i < 4; ++i) sync({relu(a * b + c), matmul(x, w)});
  const std::vector<metrics::KernelProfile> rows = metrics::kernel_profile();

  const metrics::KernelProfile* ew = Find(rows, "f32[3000]");
  ASSERT_NE(ew, nullptr) << metrics::profile();
  EXPECT_EQ(ew->runs, 4);
  EXPECT_GE(ew->launches, 4);
  for (const char* op : {"Mul", "Add", "Relu"}) EXPECT_NE(ew->ops.find(op), std::string::npos);
  EXPECT_GT(ew->first_ms, 0);
  EXPECT_GT(ew->total_ms, 0);
  EXPECT_NEAR(ew->mean_us, ew->total_ms * 1e3 / 3, 1e-9 * ew->mean_us + 1e-12);
  EXPECT_EQ(ew->gflop_per_s, 0);
  EXPECT_NEAR(PerRun(ew->gb_per_s, *ew), 16.0 * n, 1e-6 * 16 * n);

  const metrics::KernelProfile* mm = Find(rows, "Matmul f32[48,24]");
  ASSERT_NE(mm, nullptr) << metrics::profile();
  EXPECT_EQ(mm->runs, 4);
  EXPECT_NE(mm->ops.find("Matmul"), std::string::npos);
  EXPECT_NEAR(PerRun(mm->gflop_per_s, *mm), 2.0 * 48 * 40 * 24, 1e-6 * 2 * 48 * 40 * 24);
  EXPECT_NEAR(PerRun(mm->gb_per_s, *mm), 4.0 * (48 * 40 + 40 * 24 + 48 * 24), 1e-3);

  double share = 0;
  for (const metrics::KernelProfile& row : rows) {
    share += row.share;
    EXPECT_FALSE(row.entry.empty());
  }
  EXPECT_NEAR(share, 1.0, 1e-9);
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_GE(rows[i - 1].total_ms, rows[i].total_ms);

  const std::string table = metrics::profile();
  EXPECT_NE(table.find("lazycl profile: "), std::string::npos) << table;
  EXPECT_NE(table.find("first_us"), std::string::npos) << table;
  EXPECT_NE(table.find(ew->entry), std::string::npos) << table;

  // Off: the launches still waiting keep their times, nothing more is counted; reset forgets.
  sync({relu(a * b + c)});
  metrics::set_profiling(false);
  EXPECT_EQ(Find(metrics::kernel_profile(), "f32[3000]")->runs, 5);
  EXPECT_EQ(Find(metrics::kernel_profile(), "f32[3000]")->launches, ew->launches / 4 * 5);
  sync({relu(a * b + c)});
  EXPECT_EQ(Find(metrics::kernel_profile(), "f32[3000]")->runs, 5);
  metrics::reset_profile();
  EXPECT_TRUE(metrics::kernel_profile().empty());
  metrics::set_profiling(true);
  sync({relu(a * b + c)});
  ASSERT_NE(Find(metrics::kernel_profile(), "f32[3000]"), nullptr);
  EXPECT_EQ(Find(metrics::kernel_profile(), "f32[3000]")->runs, 1);
  EXPECT_EQ(Find(metrics::kernel_profile(), "f32[3000]")->mean_us, 0);  // no later run
  metrics::set_profiling(false);
}

// The idle time between kernels: kernels of one graph, enqueued together, long enough that the
// next is enqueued before the previous ends, have hand-off gaps between them; a kernel enqueued
// after the previous had finished (the host slept in between) is a gap spent waiting for the
// host, at least as long as the sleep.
TEST(Profile, GapsBetweenLaunchesSayWhoTheDeviceWaitedFor) {
  const Device cl = Device::opencl(0);
  const int64_t n = int64_t{1} << 21;
  const Tensor a = randn({n}, 1, DType::f32, cl), b = randn({n}, 2, DType::f32, cl),
               c = randn({n}, 3, DType::f32, cl);
  sync({a, b, c});
  // Three kernels a step: each reads its own input (outputs of one input would be one
  // multi-output kernel, leaving one hand-off a step).
  auto step = [&] { sync({exp(a) + 1.0, tanh(b) * 2.0, exp(c) - 1.0}); };
  // First runs: on the generic kernels while the fused ones build (tiered execution), then on
  // the fused ones.
  step();
  runtime::WaitForBackgroundBuilds();
  for (int i = 0; i < 4; ++i) step();
  metrics::set_profiling(true);
  metrics::reset_profile();
  step();  // each kernel's first profiled run: no gap counted before it
  step();
  (void)metrics::launch_gaps();  // waits for the kernels so far: the device is idle from here
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  step();
  metrics::LaunchGaps gaps = metrics::launch_gaps();
  // A hand-off gap needs the host to enqueue a step's next kernel before the previous ends; on a
  // loaded machine the host may be descheduled between every pair of enqueues of a few steps,
  // so more steps give it more chances (cumulative since the reset).
  for (int i = 0; i < 20 && gaps.handoff_gaps == 0; ++i) {
    step();
    gaps = metrics::launch_gaps();
  }
  // Each host gap is charged to the kernel it delayed; the sleep's to the next step's first.
  double row_waits = 0, longest = 0;
  for (const metrics::KernelProfile& row : metrics::kernel_profile()) {
    row_waits += row.host_wait_ms;
    longest = std::max(longest, row.host_wait_ms);
  }
  metrics::set_profiling(false);
  EXPECT_NEAR(row_waits, gaps.host_ms, 1e-6 * gaps.host_ms);
  EXPECT_GE(longest, 29.0);
  EXPECT_GE(gaps.host_gaps, 1);
  EXPECT_GE(gaps.host_ms, 29.0) << "the 30 ms sleep with the device idle";
  EXPECT_GE(gaps.handoff_gaps, 1);
  EXPECT_GE(gaps.handoff_ms, 0.0);
  EXPECT_LT(gaps.handoff_ms, gaps.host_ms);
  const std::string table = metrics::profile();
  EXPECT_NE(table.find("idle between launches:"), std::string::npos) << table;
  metrics::reset_profile();
  const metrics::LaunchGaps none = metrics::launch_gaps();
  EXPECT_EQ(none.host_gaps + none.handoff_gaps, 0);
}

// Host tensors launch nothing, so they add no rows.
TEST(Profile, HostWorkIsNotAKernel) {
  metrics::set_profiling(true);
  metrics::reset_profile();
  const Tensor h = randn({100}, 1, DType::f32, Device::host());
  sync({exp(h) + 1.0});
  EXPECT_TRUE(metrics::kernel_profile().empty());
  metrics::set_profiling(false);
}

TEST(Profile, EnvironmentVariable) {
  auto parse = [](std::string value) {
    return base::ParseSettings([value](std::string_view name) -> std::optional<std::string> {
      if (name == "LAZYCL_PROFILE") return value;
      return std::nullopt;
    });
  };
  ASSERT_TRUE(parse("1").ok());
  EXPECT_TRUE(parse("1")->profile);
  EXPECT_FALSE(parse("0")->profile);
  const absl::StatusOr<base::Settings> bad = parse("yes");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("LAZYCL_PROFILE"), std::string::npos);
  EXPECT_NE(bad.status().message().find("yes"), std::string::npos);
}

}  // namespace
}  // namespace lazycl
