#include "backend/thread_policy.h"

#include <sched.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "backend_test_util.h"
#include "gtest/gtest.h"
#include "proc_threads.h"

namespace lazycl::backend {
namespace {

bool CallingThreadIsBatch() { return sched_getscheduler(0) == SCHED_BATCH; }

// How many of this process's threads run under SCHED_BATCH.
int BatchThreads() {
  int batch = 0;
  for (const test::ThreadInfo& t : test::ProcThreads()) batch += t.policy == SCHED_BATCH ? 1 : 0;
  return batch;
}

// Whether a thread started now, from the calling thread, runs under SCHED_BATCH.
bool NewThreadIsBatch() {
  bool batch = false;
  std::thread([&batch] { batch = CallingThreadIsBatch(); }).join();
  return batch;
}

TEST(ScopedBatchPolicy, ThreadsStartedInItsScopeRunUnderBatchAndTheCallerGetsItsPolicyBack) {
  ASSERT_EQ(sched_getscheduler(0), SCHED_OTHER);
  {
    const ScopedBatchPolicy policy(/*batch=*/true);
    EXPECT_TRUE(policy.set());
    EXPECT_TRUE(CallingThreadIsBatch());
    EXPECT_TRUE(NewThreadIsBatch());  // inherited, as PoCL's workers inherit it
  }
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
  EXPECT_FALSE(NewThreadIsBatch());
}

TEST(ScopedBatchPolicy, OffItChangesNothing) {
  const ScopedBatchPolicy policy(/*batch=*/false);
  EXPECT_FALSE(policy.set());
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
  EXPECT_FALSE(NewThreadIsBatch());
}

TEST(ScopedBatchPolicy, AThreadThatIsNotUnderSchedOtherKeepsItsPolicy) {
  // In a thread of its own: an idle-priority thread may need privileges to come back.
  std::thread([] {
    const sched_param param{};
    ASSERT_EQ(sched_setscheduler(0, SCHED_IDLE, &param), 0);
    {
      const ScopedBatchPolicy policy(/*batch=*/true);
      EXPECT_FALSE(policy.set());
      EXPECT_EQ(sched_getscheduler(0), SCHED_IDLE);
    }
    EXPECT_EQ(sched_getscheduler(0), SCHED_IDLE);
  }).join();
}

// A CPU device's workers: PoCL starts one per compute unit during the first platform query.
bool IsPoclCpu(const Device& device) {
  return device.info().type == base::DeviceType::kCpu &&
         device.info().platform_name == "Portable Computing Language";
}

TEST(ThreadPolicyChild, WorkersLeftAsTheyAre) {
  if (std::getenv("LAZYCL_THREAD_POLICY_CHILD") == nullptr) GTEST_SKIP() << "a child";
  std::unique_ptr<Device> device = test::OpenDeviceWith({{"LAZYCL_BATCH_WORKERS", "0"}});
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(BatchThreads(), 0);
}

TEST(ThreadPolicy, APoclCpuDevicesWorkersRunUnderBatchAndTheHostThreadDoesNot) {
  if (std::getenv("LAZYCL_THREAD_POLICY_CHILD") != nullptr) GTEST_SKIP() << "the parent";
  ASSERT_EQ(BatchThreads(), 0);
  std::unique_ptr<Device> device = test::OpenDeviceWith({});
  ASSERT_NE(device, nullptr);
  EXPECT_FALSE(CallingThreadIsBatch());
  if (IsPoclCpu(*device)) {
    EXPECT_GE(BatchThreads(), device->info().compute_units);
  }

  // LAZYCL_BATCH_WORKERS=0, in a fresh process (the workers start once per process).
  const pid_t pid = test::SpawnSelf("ThreadPolicyChild.*", {"LAZYCL_THREAD_POLICY_CHILD=1"});
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid;
}

}  // namespace
}  // namespace lazycl::backend
