#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/buffer_manager.h"
#include "backend/memory.h"

// Host memory: storage for host tensors and for the host reference backend.
namespace lazycl::backend {

// The Memory of the host heap: 64-byte aligned allocations whose handles are their addresses.
// Nothing here is a host<->device transfer, so the manager counts nothing for it.
class HostHeap final : public Memory {
 public:
  // At least one byte, so even an empty buffer has a distinct, non-null address.
  absl::StatusOr<MemoryHandle> Allocate(size_t bytes) override;
  void Free(MemoryHandle handle) override;
  absl::StatusOr<int64_t> CopyIn(MemoryHandle dst, size_t offset, const void* src,
                                 size_t bytes) override;
  absl::StatusOr<int64_t> CopyOut(void* dst, MemoryHandle src, size_t offset,
                                  size_t bytes) override;
  bool is_device() const override { return false; }
};

// The process-wide manager of host memory.
BufferManager& HostMemory();

}  // namespace lazycl::backend
