#include "backend/keep_awake.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/device.h"
#include "backend_test_util.h"
#include "gtest/gtest.h"

namespace lazycl::backend {
namespace {

using namespace std::chrono_literals;

// Polls `done` for up to 10 s (a loaded CI machine may not run an idle-priority thread for a
// while: that is what idle priority means).
bool Eventually(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return done();
}

// The scheduling policy of every thread of this process that is not the caller, from
// /proc/self/task/<tid>/stat (field 41); SCHED_IDLE is 5.
int CountThreadsWithPolicy(int policy) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');  // the name may hold spaces
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    // Fields from 3 (state) on; policy is field 41.
    for (int i = 3; i <= 41 && fields >> field; ++i) {
      if (i == 41 && std::atoi(field.c_str()) == policy) ++count;
    }
  }
  return count;
}

TEST(KeepAwake, SpinsAtIdlePriorityUntilTheLingerEndsAndAgainAtTheNextTouch) {
  const int idle_before = CountThreadsWithPolicy(5);
  KeepAwake awake(2, /*linger_ns=*/50'000'000);
  EXPECT_EQ(awake.Threads(), 0) << "no thread before the first touch";
  awake.Touch();
  ASSERT_TRUE(Eventually([&] { return awake.Threads() == 2; }))
      << "threads that lowered their priority: " << awake.Threads();
  EXPECT_EQ(CountThreadsWithPolicy(5), idle_before + 2) << "both at SCHED_IDLE";
  // They stop once the linger has passed...
  ASSERT_TRUE(Eventually([&] { return awake.Spinning() == 0; }));
  // ...and a touch wakes them from their sleep.
  for (int i = 0; i < 100 && awake.Spinning() == 0; ++i) {
    awake.Touch();
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_GT(awake.Spinning(), 0);
  // The destructor ends the spin at once and joins (a 50 ms linger, not the test's timeout).
}

TEST(KeepAwake, AWaitCutsTheSpinToABriefOneAndItsEndSpinsForTheLingerAgain) {
  // A linger longer than Eventually's 10 s: only Waiting can end this spin in time.
  KeepAwake awake(2, /*linger_ns=*/120'000'000'000);
  awake.Touch();
  ASSERT_TRUE(Eventually([&] { return awake.Spinning() == 2; })) << awake.Spinning();
  awake.Waiting();  // the host blocks: kBriefNs more, then sleep
  EXPECT_TRUE(Eventually([&] { return awake.Spinning() == 0; })) << awake.Spinning();
  // The wait has ended and the host works on: the full linger again.
  awake.Touch();
  ASSERT_TRUE(Eventually([&] { return awake.Spinning() == 2; })) << awake.Spinning();
  std::this_thread::sleep_for(std::chrono::nanoseconds(3 * KeepAwake::kBriefNs));
  EXPECT_EQ(awake.Spinning(), 2) << "a Touch after the wait spins past the brief spin";
}

TEST(KeepAwake, ZeroThreadsOrZeroLingerStartsNothing) {
  KeepAwake none(0, 1'000'000), still(2, 0);
  none.Touch();
  still.Touch();
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(none.Threads(), 0);
  EXPECT_EQ(still.Threads(), 0);
}

TEST(KeepAwake, ACpuDeviceKeepsItsCoresAwakeWhenTurnedOn) {
  std::unique_ptr<Device> on = test::OpenDeviceWith({{"LAZYCL_KEEP_AWAKE_US", "5000"}});
  ASSERT_NE(on, nullptr);
  if (on->info().type != base::DeviceType::kCpu) GTEST_SKIP() << "not a CPU device";
  EXPECT_EQ(on->KeepAwakeThreads(), 0) << "nothing launched yet";
  ASSERT_TRUE(on->Finish().ok());  // a wait touches it too
  EXPECT_TRUE(Eventually([&] { return on->KeepAwakeThreads() == on->info().compute_units; }))
      << on->KeepAwakeThreads() << " of " << on->info().compute_units;
  for (auto env : {std::map<std::string, std::string>{{"LAZYCL_KEEP_AWAKE_US", "0"}},
                   std::map<std::string, std::string>{}}) {  // off by default
    std::unique_ptr<Device> off = test::OpenDeviceWith(env);
    ASSERT_NE(off, nullptr);
    ASSERT_TRUE(off->Finish().ok());
    std::this_thread::sleep_for(10ms);
    EXPECT_EQ(off->KeepAwakeThreads(), 0) << env.size();
  }
}

TEST(KeepAwake, AReadsWaitTellsTheSpinnersToo) {
  std::unique_ptr<Device> device = test::OpenDeviceWith({{"LAZYCL_KEEP_AWAKE_US", "5000"}});
  ASSERT_NE(device, nullptr);
  if (device->info().type != base::DeviceType::kCpu) GTEST_SKIP() << "not a CPU device";
  std::vector<float> data = {1, 2, 3, 4};
  const BufferId id = device->buffers().Declare(sizeof(float) * data.size(), "read");
  ASSERT_TRUE(device->buffers().Upload(id, data.data(), 0, sizeof(float) * data.size()).ok());
  EXPECT_EQ(device->KeepAwakeThreads(), 0) << "a small upload is queued, not waited for";
  std::vector<float> back(data.size());
  ASSERT_TRUE(device->buffers().Download(id, back.data(), 0, sizeof(float) * back.size()).ok());
  EXPECT_EQ(back, data);
  EXPECT_TRUE(Eventually([&] {
    return device->KeepAwakeThreads() == device->info().compute_units;
  })) << device->KeepAwakeThreads()
      << " of " << device->info().compute_units;
  device->buffers().Release(id);
}

}  // namespace
}  // namespace lazycl::backend
