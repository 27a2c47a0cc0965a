#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/device.h"
#include "kernels/plan.h"

// The kernel profiler (LAZYCL_PROFILE=1, lazycl::metrics::set_profiling): while it is on, every
// kernel the executor launches keeps its OpenCL event, and the device times are summed per
// kernel, a kernel being one KernelSpec of a plan (its launches, main and tail, count as one
// run). Timings are read from the devices when a report is asked for (or when many wait).
namespace lazycl::runtime::profile {

struct KernelRow {
  int device = 0;
  std::string entry;    // the program's first entry point (the kernel's name in dumps)
  std::string summary;  // KernelSpec::summary: the root, its shape, the matmul's K
  std::string ops;      // KernelSpec::fused_ops
  int64_t bytes = 0;    // per run: inputs and output once each
  int64_t flops = 0;    // per run
  int64_t runs = 0;
  int64_t launches = 0;
  // CL_PROFILING_COMMAND_END - START: of the first run (on PoCL that includes compiling the
  // kernel for its launch size), and summed over the later ones.
  double first_ns = 0;
  double device_ns = 0;
  // Device idle time before this kernel's launches where it waited for the host (Gaps' host).
  double host_wait_ns = 0;
  unsigned seen_launches = 0;  // bit l: launch l of the kernel has had its first run
};

// The device's idle time between consecutive profiled launches of one device (an in-order
// queue: from one kernel's end to the next one's start). `host`: the next kernel was enqueued
// only after the previous had ended, so the device waited for the host; `handoff`: it was
// enqueued already, and the driver took that long to start it (on PoCL, waking its worker
// threads). Gaps before a kernel's first run (which compiles it) are left out.
struct Gaps {
  int64_t host_gaps = 0;
  double host_ns = 0;
  int64_t handoff_gaps = 0;
  double handoff_ns = 0;
};

bool Enabled();
// Turns profiling on or off for every device, open or opened later. Off first reads the
// timings still waiting; rows stay until Reset.
void SetEnabled(bool on);

// The row of `spec` on `device` (registered on first use). Launch l of the spec carries the
// tag TagOf(...) * kLaunchesPerTag + min(l, kLaunchesPerTag - 1).
inline constexpr int64_t kLaunchesPerTag = 4;
int64_t TagOf(int device, const kernels::KernelSpec& spec);
// Changes at every Reset: tags taken before it are void.
int64_t Generation();
// One run of the kernel tagged `tag` was enqueued.
void CountRun(int64_t tag);
// Reads the timings waiting on `device` into the rows (waits for those kernels).
void Collect(int device, backend::Device& d);
// Collect, once many timings wait on `device`.
void MaybeCollect(int device, backend::Device& d);

// Every row with at least one run, after reading every open device's timings, by device time
// after the first run, longest first.
std::vector<KernelRow> Rows();
// The gaps between the launches profiled so far, after reading every open device's timings.
Gaps LaunchGaps();
// The rows as a table: share of the total, total and mean time after the first run, the first
// run's time, runs, launches, GB/s, GFLOP/s, the fused ops and the kernel.
std::string Report();
// Forgets every row and every timing not yet read.
void Reset();

// Called once a device is opened: turns profiling on for it if it is on, and with
// LAZYCL_PROFILE=1 arranges for Report() to be printed to stderr at exit.
void OnDeviceOpened(int device, backend::Device& d);

}  // namespace lazycl::runtime::profile
