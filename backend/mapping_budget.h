#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/status.h"

// Keeping a process under the kernel's limit on memory mappings while PoCL < 4.0 loads kernels
// (internal to backend/).
//
// PoCL's CPU device loads each kernel, per work-group size, as a shared object (4-5 mappings).
// Before 4.0 its pthread device takes two references on that object per launch and gives back
// one (pocl commit ab28f2533 "pocl_check_kernel_dlhandle_cache() called twice"), so nothing is
// ever unloaded: a process that runs ~13,000 distinct kernels reaches vm.max_map_count (65,530
// by default) and PoCL aborts the process inside dlopen ("failed to map segment from shared
// object"). Found by lazycl-fuzz, whose runs died at ~42,000 graphs.
namespace lazycl::backend {

// True for a PoCL platform version ("OpenCL 3.0 PoCL 3.1+debian ...") before 4.0.
bool PoclKeepsEveryKernel(std::string_view platform_name, std::string_view platform_version);

class MappingBudget {
 public:
  // `count` returns the process's mappings now (-1: unknown); `limit` is the most it may have.
  MappingBudget(std::function<int64_t()> count, int64_t limit);

  // The process-wide budget: /proc/self/maps against /proc/sys/vm/max_map_count (no limit where
  // either cannot be read).
  static MappingBudget& Process();

  // Before a launch that may load a kernel not loaded yet (its first at a work-group size):
  // ResourceExhausted, naming `kernel` and the limit, when the process is within kMargin
  // mappings of the limit; OK otherwise. Reads the count again only when an estimate of
  // kPerKernel mappings per load since the last reading could have come near the limit, or
  // every kRecount loads.
  absl::Status BeforeLoad(std::string_view kernel);

  static constexpr int64_t kMargin = 2048;
  static constexpr int64_t kPerKernel = 12;  // two shared objects (PoCL's specializations)
  static constexpr int64_t kRecount = 16;

 private:
  std::function<int64_t()> count_;
  int64_t limit_;
  std::mutex mu_;
  int64_t counted_ = -2;  // the last reading; -2: none yet
  int64_t loads_since_ = 0;
};

}  // namespace lazycl::backend
