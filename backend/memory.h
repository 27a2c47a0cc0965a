#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Where a BufferManager's storage lives. A Memory only obtains, frees and copies bytes; the
// manager above it owns the buffer table, the declared/allocated/written states, the checks, the
// pool and the counters (tinygrad's Allocator: the base class does checks and accounting, a
// device implements _alloc, _free, _copyin, _copyout). Implementations: HostHeap
// (backend/host_memory.h) and OpenClMemory (backend/opencl_memory.h).
namespace lazycl::backend {

// One allocation of a Memory: a host address for host memory, a cl_mem for an OpenCL device.
// Never null for a live allocation; owned by the manager until it hands it back to Free.
using MemoryHandle = void*;

// What Memory::CopyIn returns for a copy still queued (see there).
inline constexpr int64_t kTimedLater = -1;

class Memory {
 public:
  virtual ~Memory() = default;

  // Storage of `bytes`, uninitialised. 0 bytes gives a valid handle too (kernels need something
  // to bind). ResourceExhausted when the memory has no room, so the manager may empty its pool
  // and try again; any other error is final.
  virtual absl::StatusOr<MemoryHandle> Allocate(size_t bytes) = 0;
  virtual void Free(MemoryHandle handle) = 0;

  // Copies of `bytes` > 0 at `offset` into / out of an allocation, whose bounds the manager has
  // checked. CopyOut blocks; CopyIn may return once `src` is no longer needed, the copy still
  // queued ahead of every later use of the allocation (OpenClMemory stages small ones). Both
  // return the device time of the copy in nanoseconds (0 when unknown), or kTimedLater for a
  // queued copy, whose time the memory records itself (TransferToDeviceTime) once it has run.
  // CopyIn is ResourceExhausted when the device could not commit memory for it.
  virtual absl::StatusOr<int64_t> CopyIn(MemoryHandle dst, size_t offset, const void* src,
                                         size_t bytes) = 0;
  virtual absl::StatusOr<int64_t> CopyOut(void* dst, MemoryHandle src, size_t offset,
                                          size_t bytes) = 0;

  // Device memory: the manager rounds its allocations up to pool bins (backend/pool_bins.h),
  // keeps released storage in a pool, and counts allocations and copies in the Device* and
  // Transfer* metrics. Host memory is none of these, and its handles are host addresses.
  virtual bool is_device() const = 0;
};

}  // namespace lazycl::backend
