#include "lazycl/metrics.h"

#include <string>

#include "base/metrics_registry.h"
#include "gtest/gtest.h"

namespace lazycl {
namespace {

namespace internal = lazycl::base::metrics;

TEST(MetricsTest, UnknownCounterIsZero) { EXPECT_EQ(metrics::counter("NeverTouchedByAnyone"), 0); }

TEST(MetricsTest, AddAccumulates) {
  metrics::reset();
  internal::Add("KernelLaunches", 2);
  internal::Add("KernelLaunches", 3);
  EXPECT_EQ(metrics::counter("KernelLaunches"), 5);
  internal::Counter("KernelLaunches").fetch_add(1);
  EXPECT_EQ(metrics::counter("KernelLaunches"), 6);
}

TEST(MetricsTest, ResetZeroesCountersButKeepsLiveAndRestartsPeak) {
  metrics::reset();
  const int64_t base = metrics::counter("DeviceLiveBytes");
  internal::AddLiveBytes(1000);
  internal::AddLiveBytes(-600);
  EXPECT_EQ(metrics::counter("DevicePeakBytes"), base + 1000);
  internal::Add("TransferToDeviceBytes", 77);
  metrics::reset();
  EXPECT_EQ(metrics::counter("TransferToDeviceBytes"), 0);
  EXPECT_EQ(metrics::counter("DeviceLiveBytes"), base + 400);
  EXPECT_EQ(metrics::counter("DevicePeakBytes"), base + 400);
  internal::AddLiveBytes(-400);
  EXPECT_EQ(metrics::counter("DeviceLiveBytes"), base);
  EXPECT_EQ(metrics::counter("DevicePeakBytes"), base + 400);
}

TEST(MetricsTest, ReportHasCountersAndTimerPercentiles) {
  metrics::reset();
  internal::Add("ProgramBuilds", 4);
  for (int i = 1; i <= 100; ++i) internal::RecordTime("CompileTime", int64_t{i} * 1000000);
  const std::string report = metrics::report();
  EXPECT_NE(report.find("ProgramBuilds"), std::string::npos) << report;
  EXPECT_NE(report.find("CompileTime"), std::string::npos) << report;
  for (const char* column : {"count", "total ms", "p50 ms", "p90 ms", "p99 ms"}) {
    EXPECT_NE(report.find(column), std::string::npos) << column;
  }
  // 100 samples of 1..100 ms: total 5050, p50 50, p90 90, p99 99.
  EXPECT_NE(report.find("5050.000"), std::string::npos) << report;
  EXPECT_NE(report.find("50.000"), std::string::npos);
  EXPECT_NE(report.find("90.000"), std::string::npos);
  EXPECT_NE(report.find("99.000"), std::string::npos);
  metrics::reset();
  EXPECT_EQ(metrics::report().find("CompileTime"), std::string::npos);
}

TEST(MetricsTest, ReportSortsCounterNames) {
  internal::Add("ZzzLast", 1);
  internal::Add("AaaFirst", 1);
  const std::string report = metrics::report();
  EXPECT_LT(report.find("AaaFirst"), report.find("ZzzLast"));
}

}  // namespace
}  // namespace lazycl

#include <thread>
#include <vector>

namespace lazycl {
namespace {

TEST(MetricsTest, ConcurrentAddsAndTimersAreNotLost) {
  metrics::reset();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 10000; ++i) {
        base::metrics::Add("ConcurrentCounter", 1);
        if (i % 100 == 0) base::metrics::RecordTime("ConcurrentTime", i);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(metrics::counter("ConcurrentCounter"), 40000);
  EXPECT_NE(metrics::report().find("ConcurrentTime"), std::string::npos);
}

}  // namespace
}  // namespace lazycl
