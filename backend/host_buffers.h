#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "backend/buffer_manager.h"

namespace lazycl::backend {

// The BufferManager interface over host memory: storage for host tensors and for the host
// reference backend. Nothing here is a host<->device transfer, so nothing is counted as one.
class HostBuffers final : public BufferManager {
 public:
  BufferId Declare(size_t bytes, std::string label) override;
  absl::Status Upload(BufferId id, const void* src, size_t offset, size_t bytes) override;
  absl::Status Download(BufferId id, void* dst, size_t offset, size_t bytes) override;
  absl::Status PrepareWrite(BufferId id) override;
  absl::Status CheckReadable(BufferId id) const override;
  void Release(BufferId id) override;
  size_t Bytes(BufferId id) const override;
  bool IsAllocated(BufferId id) const override;
  bool IsWritten(BufferId id) const override;
  const std::string& Label(BufferId id) const override;

  // Storage of an allocated buffer (64-byte aligned); nullptr while only declared.
  void* Data(BufferId id);
  const void* Data(BufferId id) const;

 private:
  // Storage comes from the 64-byte aligned operator new[], so it must go back through it.
  struct AlignedDelete {
    void operator()(std::byte* p) const;
  };
  struct Entry {
    size_t bytes = 0;
    std::string label;
    std::unique_ptr<std::byte[], AlignedDelete> data;  // null until allocated
    bool written = false;
  };
  const Entry& Get(BufferId id) const;
  Entry& Get(BufferId id);

  absl::flat_hash_map<BufferId, Entry> entries_;
};

// The process-wide host buffer manager.
HostBuffers& HostMemory();

}  // namespace lazycl::backend
