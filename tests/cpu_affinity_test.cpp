#include "backend/cpu_affinity.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/device.h"
#include "backend/keep_awake.h"
#include "backend_test_util.h"
#include "gtest/gtest.h"
#include "proc_threads.h"

namespace lazycl::backend {
namespace {

using test::CpusOf;
using test::Eventually;
using test::ProcThreads;
using test::ThreadInfo;

TEST(CpuAffinity, AllowedCpusAreThisProcesssMask) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  EXPECT_EQ(allowed, CpusOf(0));
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  bool every = static_cast<long>(allowed.size()) >= online;
  for (long i = 0; every && i < online; ++i) every = allowed[static_cast<size_t>(i)] == i;
  EXPECT_EQ(EveryOnlineCpuAllowed(), every);
}

TEST(CpuAffinity, PinsTheCallingThreadToTheIndexthAllowedCpuModuloTheirCount) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  for (int index : {0, 1, static_cast<int>(allowed.size()) + 1}) {
    std::optional<int> pinned;
    std::vector<int> after;
    std::thread t([&] {
      pinned = PinCallingThread(allowed, index);
      after = CpusOf(0);
    });
    t.join();
    const int want = allowed[static_cast<size_t>(index) % allowed.size()];
    ASSERT_TRUE(pinned.has_value()) << "index " << index;
    EXPECT_EQ(*pinned, want);
    EXPECT_EQ(after, std::vector<int>{want}) << "index " << index;
  }
  EXPECT_EQ(PinCallingThread({}, 0), std::nullopt);
  EXPECT_EQ(PinCallingThread(allowed, -1), std::nullopt);
  EXPECT_EQ(CpusOf(0), allowed) << "the test's own thread is untouched";
}

TEST(CpuAffinity, PoclAffinityIsSetForTheScopeOnlyAndNeverOverTheUsers) {
  ASSERT_EQ(std::getenv("POCL_AFFINITY"), nullptr) << "run without POCL_AFFINITY set";
  {
    const ScopedPoclAffinity off(/*pin=*/false);
    EXPECT_FALSE(off.set());
    EXPECT_EQ(std::getenv("POCL_AFFINITY"), nullptr);
  }
  {
    const ScopedPoclAffinity on(/*pin=*/true);
    EXPECT_EQ(on.set(), EveryOnlineCpuAllowed());
    if (on.set()) {
      ASSERT_NE(std::getenv("POCL_AFFINITY"), nullptr);
      EXPECT_STREQ(std::getenv("POCL_AFFINITY"), "1");
    }
  }
  EXPECT_EQ(std::getenv("POCL_AFFINITY"), nullptr) << "put back as it was";
  ASSERT_EQ(setenv("POCL_AFFINITY", "0", 1), 0);
  {
    const ScopedPoclAffinity user(/*pin=*/true);
    EXPECT_FALSE(user.set());
    EXPECT_STREQ(std::getenv("POCL_AFFINITY"), "0");
  }
  EXPECT_STREQ(std::getenv("POCL_AFFINITY"), "0") << "the user's value stays";
  ASSERT_EQ(unsetenv("POCL_AFFINITY"), 0);
}

TEST(CpuAffinity, PinnedSpinnersRunOnePerCpu) {
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "one CPU";
  KeepAwake pinned(2, /*linger_ns=*/50'000'000, /*pin=*/true);
  pinned.Touch();
  ASSERT_TRUE(Eventually([&] { return pinned.Threads() == 2; })) << pinned.Threads();
  std::vector<int> cpus = pinned.PinnedCpus();
  std::sort(cpus.begin(), cpus.end());
  EXPECT_EQ(cpus, (std::vector<int>{allowed[0], allowed[1]}));
  int idle_on_one = 0;
  for (const ThreadInfo& t : ProcThreads()) {
    if (t.policy == 5 && t.cpus.size() == 1) ++idle_on_one;
  }
  EXPECT_GE(idle_on_one, 2) << "idle-priority threads pinned to one CPU";

  KeepAwake free(2, /*linger_ns=*/50'000'000);
  free.Touch();
  ASSERT_TRUE(Eventually([&] { return free.Threads() == 2; })) << free.Threads();
  EXPECT_TRUE(free.PinnedCpus().empty());
}

// PoCL's workers, pinned as POCL_AFFINITY pins them: the first device of the process was
// opened with LAZYCL_PIN_THREADS at its default (1) and may use every CPU, so worker i runs on
// CPU i only; the test's own thread stays free.
TEST(CpuAffinity, PoclWorkersArePinnedOnePerCpu) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "one CPU";
  if (!EveryOnlineCpuAllowed()) GTEST_SKIP() << "confined to some CPUs: nothing is pinned";
  std::vector<ThreadInfo> before = ProcThreads();
  std::unique_ptr<Device> device = test::OpenDeviceWith({{"LAZYCL_KEEP_AWAKE_US", "0"}});
  ASSERT_NE(device, nullptr);
  if (device->info().platform_name.find("Portable Computing Language") == std::string::npos ||
      device->info().type != base::DeviceType::kCpu) {
    GTEST_SKIP() << "not PoCL's CPU device";
  }
  std::set<pid_t> old;
  for (const ThreadInfo& t : before) old.insert(t.tid);
  std::set<int> worker_cpus;
  for (const ThreadInfo& t : ProcThreads()) {
    // PoCL's workers: SCHED_BATCH (backend/thread_policy.h), or SCHED_OTHER where a caller
    // turned that off; never the keep-awake spinners' SCHED_IDLE (5).
    const bool worker_policy = t.policy == 3 || t.policy == 0;
    if (old.count(t.tid) == 0 && worker_policy && t.cpus.size() == 1) {
      worker_cpus.insert(t.cpus[0]);
    }
  }
  std::set<int> want;
  for (int i = 0; i < device->info().compute_units; ++i) want.insert(i);
  std::string all;
  for (const ThreadInfo& t : ProcThreads()) {
    all += " " + std::to_string(t.tid) + (old.count(t.tid) ? "(old)" : "") + ":p" +
           std::to_string(t.policy) + ":" + std::to_string(t.cpus.size());
  }
  EXPECT_EQ(worker_cpus, want) << "new threads pinned to one CPU each; threads:" << all;
  EXPECT_EQ(CpusOf(0).size(), AllowedCpus().size());
}

}  // namespace
}  // namespace lazycl::backend
