// TEMPORARY stand-in so host_eval links and tests on the hosteval branch; replaced by the real
// backend/host_buffers.cpp at merge. No pooling, no counters, no memory limit.
#include "backend/host_buffers.h"

#include <atomic>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backend/check.h"

namespace lazycl::backend {
namespace {

constexpr std::align_val_t kAlignment{64};

std::atomic<BufferId> next_id{1};

// Entry::data is a unique_ptr with the default deleter, which would not match the aligned new;
// storage is therefore always handed back through here, never by the unique_ptr.
void FreeAligned(std::unique_ptr<std::byte[]>& data) {
  std::byte* p = data.release();
  if (p != nullptr) ::operator delete[](p, kAlignment);
}

}  // namespace

BufferId HostBuffers::Declare(size_t bytes, std::string label) {
  BufferId id = next_id.fetch_add(1);
  Entry& e = entries_[id];
  e.bytes = bytes;
  e.label = std::move(label);
  return id;
}

absl::Status HostBuffers::PrepareWrite(BufferId id) {
  Entry& e = Get(id);
  if (e.data == nullptr) e.data.reset(new (kAlignment) std::byte[e.bytes]);
  e.written = true;
  return absl::OkStatus();
}

absl::Status HostBuffers::Upload(BufferId id, const void* src, size_t offset, size_t bytes) {
  Entry& e = Get(id);
  LAZYCL_CHECK(offset + bytes <= e.bytes, "upload past the end of %s", e.label.c_str());
  absl::Status s = PrepareWrite(id);
  if (!s.ok()) return s;
  if (bytes > 0) std::memcpy(e.data.get() + offset, src, bytes);
  return absl::OkStatus();
}

absl::Status HostBuffers::Download(BufferId id, void* dst, size_t offset, size_t bytes) {
  absl::Status s = CheckReadable(id);
  if (!s.ok()) return s;
  const Entry& e = Get(id);
  LAZYCL_CHECK(offset + bytes <= e.bytes, "download past the end of %s", e.label.c_str());
  if (bytes > 0) std::memcpy(dst, e.data.get() + offset, bytes);
  return absl::OkStatus();
}

absl::Status HostBuffers::CheckReadable(BufferId id) const {
  const Entry& e = Get(id);
  if (!e.written) {
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer '", e.label, "' holds no data (a placeholder that was never written)"));
  }
  return absl::OkStatus();
}

void HostBuffers::Release(BufferId id) {
  auto it = entries_.find(id);
  LAZYCL_CHECK(it != entries_.end(), "release of unknown host buffer %llu",
               static_cast<unsigned long long>(id));
  FreeAligned(it->second.data);
  entries_.erase(it);
}

size_t HostBuffers::Bytes(BufferId id) const { return Get(id).bytes; }
bool HostBuffers::IsAllocated(BufferId id) const { return Get(id).data != nullptr; }
bool HostBuffers::IsWritten(BufferId id) const { return Get(id).written; }
const std::string& HostBuffers::Label(BufferId id) const { return Get(id).label; }
void* HostBuffers::Data(BufferId id) { return Get(id).data.get(); }
const void* HostBuffers::Data(BufferId id) const { return Get(id).data.get(); }

const HostBuffers::Entry& HostBuffers::Get(BufferId id) const {
  auto it = entries_.find(id);
  LAZYCL_CHECK(it != entries_.end(), "unknown host buffer %llu",
               static_cast<unsigned long long>(id));
  return it->second;
}

HostBuffers::Entry& HostBuffers::Get(BufferId id) {
  auto it = entries_.find(id);
  LAZYCL_CHECK(it != entries_.end(), "unknown host buffer %llu",
               static_cast<unsigned long long>(id));
  return it->second;
}

// Never destroyed: Storages held by static objects may release into it during exit, and the
// entries' unique_ptrs must never run their (mismatched) default deleter.
HostBuffers& HostMemory() {
  static HostBuffers* memory = new HostBuffers;
  return *memory;
}

}  // namespace lazycl::backend
