#include "backend/host_memory.h"

#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"

namespace lazycl::backend {
namespace {

constexpr std::align_val_t kAlignment{64};

}  // namespace

absl::StatusOr<MemoryHandle> HostHeap::Allocate(size_t bytes) {
  void* data = ::operator new[](bytes == 0 ? 1 : bytes, kAlignment, std::nothrow);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("host allocation of ", bytes, " bytes"));
  }
  return data;
}

void HostHeap::Free(MemoryHandle handle) { ::operator delete[](handle, kAlignment); }

absl::StatusOr<int64_t> HostHeap::CopyIn(MemoryHandle dst, size_t offset, const void* src,
                                         size_t bytes) {
  std::memcpy(static_cast<std::byte*>(dst) + offset, src, bytes);
  return 0;
}

absl::StatusOr<int64_t> HostHeap::CopyOut(void* dst, MemoryHandle src, size_t offset,
                                          size_t bytes) {
  std::memcpy(dst, static_cast<const std::byte*>(src) + offset, bytes);
  return 0;
}

BufferManager& HostMemory() {
  // Leaked on purpose: tensors destroyed during static destruction still release into it.
  static BufferManager* const memory = new BufferManager(std::make_unique<HostHeap>());
  return *memory;
}

}  // namespace lazycl::backend
