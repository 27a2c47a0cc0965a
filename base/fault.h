#pragma once

// Fault injection, for tests: make the N-th device allocation, program build, kernel launch or
// host<->device transfer fail as the OpenCL call would, to check that every failure is a clear
// lazycl::Error and leaves the library usable (tests/fault_test.cpp walks N over a training
// step). The backend asks ShouldFail at each site; nothing is armed in normal use, and then a
// site costs one relaxed atomic increment.
#include <cstdint>

namespace lazycl::base::fault {

enum class Site {
  kAlloc,     // a device buffer (clCreateBuffer): fails with CL_MEM_OBJECT_ALLOCATION_FAILURE
  kBuild,     // a program the process has not built yet (from source or the disk cache)
  kLaunch,    // a kernel launch (clEnqueueNDRangeKernel): CL_OUT_OF_RESOURCES
  kTransfer,  // a host<->device copy (clEnqueueRead/WriteBuffer): CL_OUT_OF_RESOURCES
};
inline constexpr int kSites = 4;
const char* SiteName(Site site);  // "alloc", "build", "launch", "transfer"

// The `nth` call at `site` from now (1 = the next one) fails; 0 disarms. Counts restart.
void FailNth(Site site, int64_t nth);
// The `nth` call and every later one fail, until FailNth(site, 0) or Reset: a resource that
// stays exhausted, so that retries fail too.
void FailFrom(Site site, int64_t nth);
// Calls at `site` since its last FailNth or Reset.
int64_t Count(Site site);
// Disarms every site and zeroes the counts.
void Reset();

// Counts a call at `site`; true when it is the armed one (after FailNth it fails once, then the
// site disarms; after FailFrom every later call fails).
bool ShouldFail(Site site);

}  // namespace lazycl::base::fault
