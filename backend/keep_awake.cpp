#include "backend/keep_awake.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <system_error>

#if defined(__linux__)
#include <sched.h>
#endif

#include "backend/cpu_affinity.h"
#include "backend/cpu_pause.h"

namespace lazycl::backend {

namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Lowers the calling thread to SCHED_IDLE; false where that is not possible.
bool LowerToIdlePriority() {
#if defined(__linux__) && defined(SCHED_IDLE)
  sched_param param{};
  param.sched_priority = 0;
  return sched_setscheduler(0, SCHED_IDLE, &param) == 0;
#else
  return false;
#endif
}

}  // namespace

KeepAwake::KeepAwake(int threads, int64_t linger_ns, bool pin)
    : threads_wanted_(threads), linger_ns_(linger_ns), pin_(pin) {}

KeepAwake::~KeepAwake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  deadline_ns_.store(0);  // ends any spin now
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

int KeepAwake::Threads() const { return running_.load(); }

std::vector<int> KeepAwake::PinnedCpus() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pinned_;
}

void KeepAwake::Touch() { SpinFor(linger_ns_); }

void KeepAwake::Waiting() { SpinFor(std::min(kBriefNs, linger_ns_)); }

void KeepAwake::SpinFor(int64_t ns) {
  if (threads_wanted_ <= 0 || linger_ns_ <= 0) return;
  std::call_once(started_, [this] { Start(); });
  deadline_ns_.store(NowNs() + ns);
  // Paired with Run's increment of sleeping_ before it reads the deadline (both seq_cst): either
  // the sleeper sees the new deadline, or this sees the sleeper and wakes it under the lock it
  // waits with.
  if (sleeping_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    wake_.notify_all();
  }
}

void KeepAwake::Start() {
  threads_.reserve(static_cast<size_t>(threads_wanted_));
  for (int i = 0; i < threads_wanted_; ++i) {
    // A process at its thread limit gets fewer spinners (Threads() says how many), never an
    // exception out of the launch that touched this: spinning only saves wake-up latency.
    try {
      threads_.emplace_back([this, i] { Run(i); });
    } catch (const std::system_error&) {
      break;
    }
  }
}

void KeepAwake::Run(int index) {
  if (!LowerToIdlePriority()) return;  // at normal priority it would take the workers' cores
  const std::optional<int> cpu =
      pin_ ? PinCallingThread(AllowedCpus(), index) : std::optional<int>();
  std::unique_lock<std::mutex> lock(mu_);
  if (cpu.has_value()) pinned_.push_back(*cpu);
  running_.fetch_add(1);
  while (!stop_) {
    sleeping_.fetch_add(1);
    wake_.wait(lock, [this] { return stop_ || deadline_ns_.load() > NowNs(); });
    sleeping_.fetch_sub(1);
    if (stop_) break;
    lock.unlock();
    spinning_.fetch_add(1);
    // The clock is read every 32 pauses (~1 us): the loop's only memory traffic. Each round
    // ends in a yield, so that a thread woken onto this core (a PoCL worker, the host) runs at
    // once: a loop that never enters the kernel is preempted only when an interrupt comes, and
    // without the yield it held the core up to a scheduler tick (header).
    while (deadline_ns_.load(std::memory_order_relaxed) > NowNs()) {
      for (int i = 0; i < 32; ++i) CpuPause();
      std::this_thread::yield();
    }
    spinning_.fetch_sub(1);
    lock.lock();
  }
}

}  // namespace lazycl::backend
