#pragma once

#include <optional>
#include <vector>

// Where a CPU device's threads run: PoCL's workers, one per core, and KeepAwake's spinners.
//
// Left to the kernel's scheduler, they piled up. On a 2-core Zen 4 EPYC VM (Linux 6.18, PoCL
// 3.1) `perf sched timehist` of the scalar-read row showed both PoCL workers and both spinners on
// CPU 0, taking turns, while the host thread had CPU 1 to itself and halted it whenever it
// waited. A process that started that way stayed so: [640, 128] x [128, 352] ran at 95-100
// GFLOP/s in 5 of 6 processes against 180-190 in the sixth (numpy 200 in the same minutes), and
// with the workers pinned (PoCL's POCL_AFFINITY) at 144-184 in every one. Why the scheduler
// leaves them there is its own business (idle-priority spinners make a core look busy to a
// waking thread's search for an idle one, and a core idle for less than the migration cost
// pulls no work: likely, not measured here).
//
// So, where the process may run on every online CPU, PoCL's workers are pinned (worker i to CPU
// i, as POCL_AFFINITY=1 does; PoCL reads it when it starts its workers, during the first
// platform and device query) and, where LAZYCL_KEEP_AWAKE_US turns them on, spinner i to CPU i.
// The host threads are left free. Where the process is confined to some CPUs (taskset, a
// cpuset), nothing is pinned: PoCL names CPUs by absolute index and treats a failed
// pthread_setaffinity_np as fatal.
namespace lazycl::backend {

// The CPUs this process may run on, in increasing order; empty where that cannot be read
// (or off Linux).
std::vector<int> AllowedCpus();

// Whether the process may run on every online CPU (0 .. n - 1); false off Linux.
bool EveryOnlineCpuAllowed();

// Sets POCL_AFFINITY=1 for its lifetime, around the first OpenCL platform query, when `pin` is
// true, the user has not set POCL_AFFINITY, and EveryOnlineCpuAllowed(). It puts the
// environment back as it was when it goes, so that no child process inherits it. Not thread-safe
// with respect to other code that sets or reads the environment at the same moment, as setenv
// never is: construct it once, before any device exists (backend/opencl_device.cpp).
class ScopedPoclAffinity {
 public:
  explicit ScopedPoclAffinity(bool pin);
  ~ScopedPoclAffinity();
  ScopedPoclAffinity(const ScopedPoclAffinity&) = delete;
  ScopedPoclAffinity& operator=(const ScopedPoclAffinity&) = delete;

  bool set() const { return set_; }  // whether this set the variable

 private:
  bool set_ = false;
};

// Pins the calling thread to the CPU with position `index` (modulo their count) among
// `allowed`; returns that CPU, or nullopt where nothing was pinned (empty `allowed`, index < 0,
// or the call failed).
std::optional<int> PinCallingThread(const std::vector<int>& allowed, int index);

}  // namespace lazycl::backend
