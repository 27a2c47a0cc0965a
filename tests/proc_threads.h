#pragma once

#include <sched.h>
#include <sys/types.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

// The threads of this process as Linux shows them (/proc/self/task), for the tests of the
// threads a CPU device starts (keep_awake_test, cpu_affinity_test).
namespace lazycl::backend::test {

// The CPUs thread `tid` (0: the caller) may run on, from sched_getaffinity.
inline std::vector<int> CpusOf(pid_t tid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(tid, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

struct ThreadInfo {
  pid_t tid = 0;
  int policy = -1;  // /proc/self/task/<tid>/stat field 41: 0 SCHED_OTHER, 3 BATCH, 5 IDLE
  std::vector<int> cpus;
};

inline std::vector<ThreadInfo> ProcThreads() {
  std::vector<ThreadInfo> threads;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    ThreadInfo info;
    info.tid = static_cast<pid_t>(std::atoi(entry.path().filename().c_str()));
    std::ifstream in(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');  // the name may hold spaces
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    // Fields from 3 (state) on; policy is field 41.
    for (int i = 3; i <= 41 && fields >> field; ++i) {
      if (i == 41) info.policy = std::atoi(field.c_str());
    }
    info.cpus = CpusOf(info.tid);
    threads.push_back(std::move(info));
  }
  return threads;
}

// Polls `done` for up to 10 s (a loaded CI machine may not run an idle-priority thread for a
// while: that is what idle priority means).
inline bool Eventually(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

}  // namespace lazycl::backend::test
