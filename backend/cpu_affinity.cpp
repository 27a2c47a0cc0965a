#include "backend/cpu_affinity.h"

#include <cstdlib>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#endif

namespace lazycl::backend {

namespace {
constexpr const char* kPoclAffinity = "POCL_AFFINITY";
}  // namespace

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
#endif
  return cpus;
}

bool EveryOnlineCpuAllowed() {
#if defined(__linux__)
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online <= 0) return false;
  const std::vector<int> allowed = AllowedCpus();
  if (static_cast<long>(allowed.size()) < online) return false;
  for (long i = 0; i < online; ++i) {
    if (allowed[static_cast<size_t>(i)] != i) return false;
  }
  return true;
#else
  return false;
#endif
}

ScopedPoclAffinity::ScopedPoclAffinity(bool pin) {
  if (!pin || std::getenv(kPoclAffinity) != nullptr || !EveryOnlineCpuAllowed()) return;
  set_ = setenv(kPoclAffinity, "1", /*overwrite=*/0) == 0;
}

ScopedPoclAffinity::~ScopedPoclAffinity() {
  if (set_) unsetenv(kPoclAffinity);
}

std::optional<int> PinCallingThread(const std::vector<int>& allowed, int index) {
  if (allowed.empty() || index < 0) return std::nullopt;
  const int cpu = allowed[static_cast<size_t>(index) % allowed.size()];
#if defined(__linux__)
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) != 0) return std::nullopt;
  return cpu;
#else
  return std::nullopt;
#endif
}

}  // namespace lazycl::backend
