#pragma once

#include <cstdint>
#include <string>
#include <vector>

// The kernel profiler: where a step's device time goes, per generated kernel. Set
// LAZYCL_PROFILE=1 to profile a whole run and get the table on stderr at exit, or turn it on
// and read it from code. README, "Profiling", shows a table and how to read it.
namespace lazycl::metrics {

// One generated kernel, summed over its runs since profiling began (or the last reset).
struct KernelProfile {
  int device = 0;        // cl:N
  std::string kernel;    // what it computes: its root op, dtype and shape (matmuls: and K)
  std::string ops;       // the IR ops fused into it, "matmul, add, relu"
  std::string entry;     // its OpenCL entry point, as named in LAZYCL_DEBUG=3 dumps
  int64_t runs = 0;      // times it ran
  int64_t launches = 0;  // OpenCL launches (a CPU kernel may run as a main and a tail launch)
  // Device time from OpenCL profiling events. The first run is kept apart: on PoCL it includes
  // compiling the kernel for its launch (tens to hundreds of ms). The rest are "later" runs.
  double first_ms = 0;     // the first run
  double total_ms = 0;     // the later runs
  double mean_us = 0;      // per later run; 0 with one run
  double share = 0;        // of every kernel's total_ms, 0..1
  double gb_per_s = 0;     // its inputs and output once each per later run / time; 0: not known
  double gflop_per_s = 0;  // matmuls; 0 for others
  // The device's idle time before its launches where it waited for the host to enqueue them
  // (launch_gaps()'s host gaps, by the kernel that ended each): where host work is on the
  // critical path.
  double host_wait_ms = 0;
};

// Turns profiling on or off (LAZYCL_PROFILE=1 turns it on from the start). It costs one
// OpenCL event per launch; kernels run as they would otherwise.
void set_profiling(bool on);
bool profiling();

// Waits for the profiled kernels still running, then returns every kernel that ran, longest
// total_ms first.
std::vector<KernelProfile> kernel_profile();

// The device's idle time between one profiled kernel's end and the next one's start (each
// device runs its kernels in order): where the next kernel was enqueued only after the previous
// had finished (the device waited for the host: building graphs, the program's own work), and
// where it was enqueued already (the driver's hand-off between kernels; on PoCL, waking its
// worker threads). Gaps before a kernel's first run, which compiles it, are left out. Wall
// time beyond the device time of kernel_profile() is mostly these.
struct LaunchGaps {
  int64_t host_gaps = 0;
  double host_ms = 0;
  int64_t handoff_gaps = 0;
  double handoff_ms = 0;
};
LaunchGaps launch_gaps();

// kernel_profile() as a table, after a line with launch_gaps().
std::string profile();

// Forgets what was profiled so far (metrics::reset() leaves the profile alone).
void reset_profile();

}  // namespace lazycl::metrics
