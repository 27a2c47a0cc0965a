#include "backend/host_buffers.h"

#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace lazycl::backend {
namespace {

constexpr std::align_val_t kAlignment{64};

absl::Status CheckRange(const std::string& label, size_t size, size_t offset, size_t bytes) {
  if (offset > size || bytes > size - offset) {
    return absl::InvalidArgumentError(absl::StrCat("buffer '", label, "' of ", size,
                                                   " bytes: range [", offset, ", ", offset, " + ",
                                                   bytes, ") is out of bounds"));
  }
  return absl::OkStatus();
}

}  // namespace

void HostBuffers::AlignedDelete::operator()(std::byte* p) const {
  ::operator delete[](p, kAlignment);
}

BufferId HostBuffers::Declare(size_t bytes, std::string label) {
  BufferId id = NewBufferId();
  Entry& entry = entries_[id];
  entry.bytes = bytes;
  entry.label = std::move(label);
  return id;
}

absl::Status HostBuffers::Upload(BufferId id, const void* src, size_t offset, size_t bytes) {
  Entry& entry = Get(id);
  if (absl::Status s = CheckRange(entry.label, entry.bytes, offset, bytes); !s.ok()) return s;
  if (absl::Status s = PrepareWrite(id); !s.ok()) return s;
  if (bytes > 0) std::memcpy(entry.data.get() + offset, src, bytes);
  return absl::OkStatus();
}

absl::Status HostBuffers::Download(BufferId id, void* dst, size_t offset, size_t bytes) {
  if (absl::Status s = CheckReadable(id); !s.ok()) return s;
  const Entry& entry = Get(id);
  if (absl::Status s = CheckRange(entry.label, entry.bytes, offset, bytes); !s.ok()) return s;
  if (bytes > 0) std::memcpy(dst, entry.data.get() + offset, bytes);
  return absl::OkStatus();
}

absl::Status HostBuffers::PrepareWrite(BufferId id) {
  Entry& entry = Get(id);
  if (entry.data == nullptr) {
    // At least one byte, so even an empty buffer has a distinct, non-null address.
    const size_t bytes = entry.bytes == 0 ? 1 : entry.bytes;
    entry.data.reset(static_cast<std::byte*>(::operator new[](bytes, kAlignment)));
  }
  entry.written = true;
  return absl::OkStatus();
}

absl::Status HostBuffers::CheckReadable(BufferId id) const {
  const Entry& entry = Get(id);
  if (!entry.written) return NotWrittenError(entry.label, entry.bytes);
  return absl::OkStatus();
}

void HostBuffers::Release(BufferId id) {
  const size_t erased = entries_.erase(id);
  LAZYCL_CHECK(erased == 1, "HostBuffers::Release of unknown buffer id %llu",
               static_cast<unsigned long long>(id));
}

size_t HostBuffers::Bytes(BufferId id) const { return Get(id).bytes; }
bool HostBuffers::IsAllocated(BufferId id) const { return Get(id).data != nullptr; }
bool HostBuffers::IsWritten(BufferId id) const { return Get(id).written; }
const std::string& HostBuffers::Label(BufferId id) const { return Get(id).label; }

void* HostBuffers::Data(BufferId id) { return Get(id).data.get(); }
const void* HostBuffers::Data(BufferId id) const { return Get(id).data.get(); }

const HostBuffers::Entry& HostBuffers::Get(BufferId id) const {
  auto it = entries_.find(id);
  LAZYCL_CHECK(it != entries_.end(), "unknown host buffer id %llu",
               static_cast<unsigned long long>(id));
  return it->second;
}

HostBuffers::Entry& HostBuffers::Get(BufferId id) {
  auto it = entries_.find(id);
  LAZYCL_CHECK(it != entries_.end(), "unknown host buffer id %llu",
               static_cast<unsigned long long>(id));
  return it->second;
}

HostBuffers& HostMemory() {
  // Leaked on purpose: tensors destroyed during static destruction still release into it.
  static HostBuffers* const memory = new HostBuffers;
  return *memory;
}

}  // namespace lazycl::backend
