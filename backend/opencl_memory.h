#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cl.h"
#include "backend/memory.h"

// The Memory of one OpenCL device (internal to backend/: it exposes OpenCL types).
namespace lazycl::backend {

// Handles are cl_mem objects, each holding one reference that Free releases. Copies are blocking
// writes and reads on the device's in-order queue, timed by their profiling events. The Device
// owns the context and queue; this holds references to them, so they outlive every buffer.
class OpenClMemory final : public Memory {
 public:
  // `host_pages`: the device computes in host memory (a CPU device), so buffers of 2 MiB and
  // more are allocated by us on 2 MiB-aligned memory advised for huge pages and handed over
  // with CL_MEM_USE_HOST_PTR: a fresh 64 MiB buffer then takes 32 page faults instead of 16384
  // (~45 ms of kernel time on the first launch that writes it).
  OpenClMemory(cl::Context context, cl::CommandQueue queue, bool host_pages);

  // OpenCL has no 0-byte buffers: 0 bytes is one shared 1-element buffer.
  absl::StatusOr<MemoryHandle> Allocate(size_t bytes) override;
  void Free(MemoryHandle handle) override;
  absl::StatusOr<int64_t> CopyIn(MemoryHandle dst, size_t offset, const void* src,
                                 size_t bytes) override;
  absl::StatusOr<int64_t> CopyOut(void* dst, MemoryHandle src, size_t offset,
                                  size_t bytes) override;
  bool is_device() const override { return true; }

  static cl_mem Mem(MemoryHandle handle) { return static_cast<cl_mem>(handle); }

 private:
  cl::Context context_;
  cl::CommandQueue queue_;
  bool host_pages_;
  cl::Buffer empty_;  // what 0-byte allocations share; created on first need
};

}  // namespace lazycl::backend
