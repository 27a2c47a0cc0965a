#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace lazycl::backend {

// Keeps a CPU OpenCL device's cores from going idle between its kernels. Off unless
// LAZYCL_KEEP_AWAKE_US turns it on (base/settings.h says what it cost and saved).
//
// PoCL's worker threads sleep on a condition variable whenever their queue is empty: between two
// kernels, and while the host builds the next graph. A core with nothing to run halts, and in a
// virtual machine waking a halted vCPU costs tens of microseconds (an exit to the hypervisor and
// an interrupt), paid by every kernel whose second worker must be woken and by every read the
// host waits for. Small kernels then run on one core (the first worker takes most of their
// work-groups before the second wakes). Runtimes built for this spin before they sleep (OpenMP's
// KMP_BLOCKTIME, Eigen's thread pool under XLA); PoCL 3 does not, so this does it beside it:
// `threads` threads at SCHED_IDLE priority spin (with a pause instruction) until `linger` after
// the last Touch, then sleep until the next. At SCHED_IDLE they take a core only when nothing
// else wants it, so the core stays awake and a worker or the host thread that wakes preempts
// them at once. Measured on a 2-core Zen 4 EPYC VM (AVX2, PoCL 3.1), an external spinner of this
// kind, rounds alternating: a scalar read 0.094 -> 0.064 ms, the MLP forward 37.9 -> 33.5 ms, a
// char-LM sampling token 2.70 -> 2.32 ms.
//
// Each round of the spin ends in a yield. Without it, a thread woken onto a spinner's core
// waited for the spinner up to a scheduler tick, as if its preemption came only with the next
// interrupt: a [1024, 1024] product in a loop on a 2-core Zen 4 EPYC VM (Linux 6.18,
// PREEMPT_NONE, HZ 250; `LAZYCL_PROFILE`'s "idle between launches") had 1.6-2.3 ms from one
// kernel's end to the next one's start with the spinners on, against 0.16-0.23 ms with them off;
// with the yield, 0.18-0.22 ms (three processes each).
//
// With `pin`, thread i runs on the i-th CPU the process may use only (backend/cpu_affinity.h):
// left free, the scheduler put both spinners on one core of a 2-core VM, beside both PoCL
// workers, and the other core halted whenever the host waited.
//
// Linux only (SCHED_IDLE); elsewhere, or where the priority cannot be set, no thread spins; where
// the process cannot create more threads, fewer spin.
class KeepAwake {
 public:
  KeepAwake(int threads, int64_t linger_ns, bool pin = false);
  ~KeepAwake();  // stops the threads and joins them
  KeepAwake(const KeepAwake&) = delete;
  KeepAwake& operator=(const KeepAwake&) = delete;

  // Work was enqueued, or a wait has ended and the host works on: spin until `linger` from now.
  // Starts the threads on first use. Cheap while they spin: a clock read and two atomics.
  void Touch();
  // The host is about to block until the device is done: spin for at most kBriefNs more (the
  // wait's end, if it comes that soon, then wakes a core that is awake), then sleep until the
  // next Touch, however long the linger. Spinning through a long wait slows the kernels that run
  // in it: on a 2-core Zen 5 EPYC VM (KVM, PoCL 3.1 `pthread-skylake-avx512-AMD EPYC`), eight
  // chained relu([256, 1024] x [1024, 1024] + b), one graph, took 10.4-12.6 ms (median 11.9)
  // with the spinners on through the whole wait (5 ms linger from its start) and 10.1-11.4 ms
  // (median 10.4) with them on for its first 1 ms (8 alternating processes, each the median of
  // 30 runs), measured before the spin loop yielded (above), which is the likely cause; a brief
  // spin keeps what the spinners are for, a quick wake at the end of a short wait (a read, a
  // sampled token).
  void Waiting();
  static constexpr int64_t kBriefNs = 1'000'000;

  // Threads that spin or wait to (0 before the first Touch, or where spinning is unavailable),
  // and how many of them are spinning now (tests).
  int Threads() const;
  int Spinning() const { return spinning_.load(); }
  // The CPU each running thread was pinned to, in no order (tests); empty without `pin`.
  std::vector<int> PinnedCpus() const;

 private:
  void SpinFor(int64_t ns);  // sets the deadline to `ns` from now (shortens it, too)
  void Start();
  void Run(int index);

  const int threads_wanted_;
  const int64_t linger_ns_;
  const bool pin_;
  std::once_flag started_;
  std::atomic<int64_t> deadline_ns_{0};
  std::atomic<int> sleeping_{0};
  std::atomic<int> spinning_{0};
  std::atomic<int> running_{0};  // threads that set their priority and run the loop
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;        // under mu_
  std::vector<int> pinned_;  // under mu_
  std::vector<std::thread> threads_;
};

}  // namespace lazycl::backend
