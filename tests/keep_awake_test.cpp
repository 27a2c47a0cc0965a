#include "backend/keep_awake.h"

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "backend/device.h"
#include "backend_test_util.h"
#include "gtest/gtest.h"
#include "proc_threads.h"

namespace lazycl::backend {
namespace {

using namespace std::chrono_literals;

using test::Eventually;

// Threads of this process (the caller too) with scheduling policy `policy` (SCHED_IDLE: 5).
int CountThreadsWithPolicy(int policy) {
  int count = 0;
  for (const test::ThreadInfo& t : test::ProcThreads()) count += t.policy == policy ? 1 : 0;
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
