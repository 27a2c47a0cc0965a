#include "backend/buffer_manager.h"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <mutex>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backend/pool_bins.h"
#include "base/check.h"
#include "base/metrics_registry.h"
#include "base/string_view.h"

namespace lazycl::backend {
namespace {

BufferId NewBufferId() {
  static std::atomic<BufferId> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

absl::Status CheckRange(const std::string& label, size_t size, size_t offset, size_t bytes) {
  if (offset > size || bytes > size - offset) {
    return absl::InvalidArgumentError(absl::StrCat("buffer '", label, "' of ", size,
                                                   " bytes: range [", offset, ", ", offset, " + ",
                                                   bytes, ") is out of bounds"));
  }
  return absl::OkStatus();
}

}  // namespace

BufferManager::BufferManager(std::unique_ptr<Memory> memory, BufferLimits limits)
    : memory_(std::move(memory)), device_(memory_->is_device()), limits_(limits) {}

BufferManager::~BufferManager() {
  // Storage still owned by ids dies with the manager; the gauges must not keep counting it.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, entry] : entries_) Free(entry, /*to_pool=*/false);
  TrimPoolLocked();
}

BufferId BufferManager::Declare(size_t bytes, std::string label) {
  BufferId id = NewBufferId();
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = entries_[id];
  entry.bytes = bytes;
  entry.label = std::move(label);
  return id;
}

BufferId BufferManager::Declare(size_t bytes, std::string label, HostSource source) {
  BufferId id = Declare(bytes, std::move(label));
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = Get(id);
  entry.written = true;              // it holds data: the file's
  entry.source = std::move(source);  // even for 0 bytes: Load gives it its (empty) handle
  return id;
}

absl::Status BufferManager::OutOfMemory(int64_t storage_bytes, std::string_view why) const {
  std::string limit = limits_.memory_limit > 0 ? absl::StrCat(limits_.memory_limit,
                                                              " bytes (LAZYCL_DEVICE_MEMORY_LIMIT)")
                                               : std::string("none set");
  return absl::ResourceExhaustedError(
      absl::StrCat(device_ ? "device" : "host", " out of memory (", base::Sv(why), "): requested ",
                   storage_bytes, " bytes, live ", live_bytes_, " bytes, peak ", peak_bytes_,
                   " bytes, pooled ", pool_bytes_, " bytes, limit ", limit));
}

void BufferManager::TrimPool() {
  std::lock_guard<std::mutex> lock(mu_);
  TrimPoolLocked();
}

void BufferManager::TrimPoolLocked() {
  for (const Pooled& pooled : pooled_) memory_->Free(pooled.handle);
  pooled_.clear();
  pool_.clear();
  if (pool_bytes_ != 0) base::metrics::Add("DevicePoolBytes", -pool_bytes_);
  pool_bytes_ = 0;
}

void BufferManager::FreeOldestPooled() {
  const Pooled oldest = pooled_.front();
  std::vector<std::list<Pooled>::iterator>& bin = pool_[oldest.bytes];
  // A bin lists its buffers in pooling order, so the oldest of all is its bin's first.
  LAZYCL_CHECK(!bin.empty() && bin.front() == pooled_.begin(), "pool bin %zu out of order",
               oldest.bytes);
  bin.erase(bin.begin());
  Unpool(pooled_.begin());
  memory_->Free(oldest.handle);
  pool_bytes_ -= static_cast<int64_t>(oldest.bytes);
  base::metrics::Add("DevicePoolBytes", -static_cast<int64_t>(oldest.bytes));
}

void BufferManager::Unpool(std::list<Pooled>::iterator it) {
  if (spare_.size() < kSpareNodes) {
    spare_.splice(spare_.begin(), pooled_, it);
  } else {
    pooled_.erase(it);
  }
}

absl::Status BufferManager::MakeRoom(int64_t bytes) {
  // Both caps count pooled storage, which the device holds too; it goes before an error does.
  auto over = [bytes](int64_t cap, int64_t held) { return cap > 0 && held + bytes > cap; };
  if (over(limits_.memory_limit, live_bytes_ + pool_bytes_) ||
      over(limits_.global_mem_bytes, live_bytes_ + pool_bytes_)) {
    TrimPoolLocked();
  }
  if (over(limits_.memory_limit, live_bytes_)) {
    return OutOfMemory(bytes, "over LAZYCL_DEVICE_MEMORY_LIMIT");
  }
  if (over(limits_.global_mem_bytes, live_bytes_)) {
    return OutOfMemory(bytes,
                       absl::StrCat("over the device's global memory of ", limits_.global_mem_bytes,
                                    " bytes (CL_DEVICE_GLOBAL_MEM_SIZE)"));
  }
  return absl::OkStatus();
}

absl::Status BufferManager::CheckRoom(std::span<const size_t> bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t total = 0;
  for (size_t request : bytes) {
    const int64_t storage = static_cast<int64_t>(device_ ? PoolBinBytes(request) : request);
    if (limits_.max_alloc_bytes > 0 && storage > limits_.max_alloc_bytes) {
      return OutOfMemory(storage, absl::StrCat("above CL_DEVICE_MAX_MEM_ALLOC_SIZE of ",
                                               limits_.max_alloc_bytes, " bytes"));
    }
    total += storage;
  }
  return MakeRoom(total);
}

absl::StatusOr<MemoryHandle> BufferManager::AllocateFromMemory(size_t storage_bytes) {
  const int64_t bytes = static_cast<int64_t>(storage_bytes);
  if (limits_.max_alloc_bytes > 0 && bytes > limits_.max_alloc_bytes) {
    return OutOfMemory(bytes, absl::StrCat("above CL_DEVICE_MAX_MEM_ALLOC_SIZE of ",
                                           limits_.max_alloc_bytes, " bytes"));
  }
  if (absl::Status s = MakeRoom(bytes); !s.ok()) return s;
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<MemoryHandle> handle = memory_->Allocate(storage_bytes);
    if (handle.ok()) {
      if (device_ && bytes > 0) {
        base::metrics::Add("DeviceAllocBytes", bytes);
        base::metrics::Add("DeviceAllocCount", 1);
      }
      return handle;
    }
    if (!absl::IsResourceExhausted(handle.status())) return handle.status();
    if (attempt > 0) return OutOfMemory(bytes, base::StdSv(handle.status().message()));
    TrimPoolLocked();
  }
}

absl::Status BufferManager::Allocate(Entry& entry) {
  if (entry.handle != nullptr) return absl::OkStatus();
  // A 0-byte buffer still gets a handle from the memory, but costs nothing: it is never
  // counted, pooled or limited.
  const size_t storage = device_ ? PoolBinBytes(entry.bytes) : entry.bytes;
  if (auto it = pool_.find(storage); storage > 0 && it != pool_.end() && !it->second.empty()) {
    entry.handle = it->second.back()->handle;
    Unpool(it->second.back());
    it->second.pop_back();
    pool_bytes_ -= static_cast<int64_t>(storage);
    base::metrics::Add("DevicePoolBytes", -static_cast<int64_t>(storage));
  } else {
    absl::StatusOr<MemoryHandle> handle = AllocateFromMemory(storage);
    if (!handle.ok()) return handle.status();
    entry.handle = *handle;
  }
  entry.storage_bytes = storage;
  live_bytes_ += static_cast<int64_t>(storage);
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  if (device_ && storage > 0) base::metrics::AddLiveBytes(static_cast<int64_t>(storage));
  return absl::OkStatus();
}

void BufferManager::Free(Entry& entry, bool to_pool) {
  if (entry.handle == nullptr) return;
  const int64_t storage = static_cast<int64_t>(entry.storage_bytes);
  live_bytes_ -= storage;
  if (device_ && storage > 0) base::metrics::AddLiveBytes(-storage);
  const bool fits = limits_.pool_limit < 0 || storage <= limits_.pool_limit;
  if (to_pool && device_ && storage > 0 && fits) {
    while (limits_.pool_limit >= 0 && pool_bytes_ + storage > limits_.pool_limit) {
      FreeOldestPooled();
    }
    if (spare_.empty()) {
      pooled_.push_back({entry.storage_bytes, entry.handle});
    } else {
      spare_.front() = {entry.storage_bytes, entry.handle};
      pooled_.splice(pooled_.end(), spare_, spare_.begin());
    }
    pool_[entry.storage_bytes].push_back(std::prev(pooled_.end()));
    pool_bytes_ += storage;
    base::metrics::Add("DevicePoolBytes", storage);
  } else {
    memory_->Free(entry.handle);
  }
  entry.handle = nullptr;
  entry.storage_bytes = 0;
}

absl::Status BufferManager::Upload(BufferId id, const void* src, size_t offset, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = Get(id);
  if (absl::Status s = CheckRange(entry.label, entry.bytes, offset, bytes); !s.ok()) return s;
  // A partial write must keep the rest of a lazily declared buffer.
  if (absl::Status s = LoadLocked(entry); !s.ok()) return s;
  const bool fresh = entry.handle == nullptr;
  if (absl::Status s = Allocate(entry); !s.ok()) return s;
  if (absl::Status s = CopyInLocked(entry, src, offset, bytes, fresh); !s.ok()) return s;
  entry.written = true;
  return absl::OkStatus();
}

absl::Status BufferManager::CopyInLocked(Entry& entry, const void* src, size_t offset, size_t bytes,
                                         bool fresh) {
  if (bytes == 0) return absl::OkStatus();
  absl::StatusOr<int64_t> nanos = memory_->CopyIn(entry.handle, offset, src, bytes);
  if (absl::IsResourceExhausted(nanos.status()) && fresh) {
    // Some drivers only commit memory on first use: give this storage back to the memory,
    // empty the pool and try once more with fresh storage.
    Free(entry, /*to_pool=*/false);
    TrimPoolLocked();
    if (absl::Status s = Allocate(entry); !s.ok()) return s;
    nanos = memory_->CopyIn(entry.handle, offset, src, bytes);
    if (absl::IsResourceExhausted(nanos.status())) {
      absl::Status oom = OutOfMemory(static_cast<int64_t>(entry.storage_bytes),
                                     base::StdSv(nanos.status().message()));
      Free(entry, /*to_pool=*/false);
      return oom;
    }
  }
  if (!nanos.ok()) return nanos.status();
  if (device_) {
    base::metrics::Add("TransferToDeviceBytes", static_cast<int64_t>(bytes));
    base::metrics::ThreadTransferBytes() += static_cast<int64_t>(bytes);
    base::metrics::Add("TransferToDeviceCount", 1);
    if (*nanos != kTimedLater) base::metrics::RecordTime("TransferToDeviceTime", *nanos);
  }
  return absl::OkStatus();
}

absl::Status BufferManager::Load(BufferId id) {
  std::lock_guard<std::mutex> lock(mu_);
  return LoadLocked(Get(id));
}

absl::Status BufferManager::PrepareRead(BufferId id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = LoadLocked(Get(id)); !s.ok()) return s;
  return CheckReadableLocked(id);
}

std::optional<HostSource> BufferManager::PendingSource(BufferId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry& entry = Get(id);
  if (entry.source.file == nullptr) return std::nullopt;
  return entry.source;
}

absl::Status BufferManager::LoadLocked(Entry& entry) {
  if (entry.source.file == nullptr) return absl::OkStatus();
  const base::ReadOnlyFile& file = *entry.source.file;
  auto fail = [&](const absl::Status& s) {
    // No storage is kept and the source stays: the next read tries again.
    Free(entry, /*to_pool=*/true);
    return absl::Status(s.code(), absl::StrCat("loading ", entry.label, ": ", s.message()));
  };
  const bool fresh = entry.handle == nullptr;
  if (absl::Status s = Allocate(entry); !s.ok()) return fail(s);
  if (!device_) {
    // Host storage is host memory: the file is read straight into it.
    if (entry.bytes > 0) {
      if (absl::Status s = file.ReadAt(entry.source.offset, entry.handle, entry.bytes); !s.ok())
        return fail(s);
    }
  } else if (entry.bytes > 0) {
    // Through a bounded staging buffer, one counted upload per chunk.
    constexpr size_t kChunk = size_t{16} << 20;
    const size_t staging_bytes = std::min(entry.bytes, kChunk);
    std::unique_ptr<char[]> staging(new (std::nothrow) char[staging_bytes]);
    if (staging == nullptr) {
      return fail(absl::ResourceExhaustedError(
          absl::StrCat("host out of memory: requested ", staging_bytes, " bytes of staging")));
    }
    for (size_t done = 0; done < entry.bytes; done += staging_bytes) {
      const size_t n = std::min(staging_bytes, entry.bytes - done);
      if (absl::Status s = file.ReadAt(entry.source.offset + done, staging.get(), n); !s.ok())
        return fail(s);
      if (absl::Status s = CopyInLocked(entry, staging.get(), done, n, fresh && done == 0); !s.ok())
        return fail(s);
    }
  }
  base::metrics::Add("CheckpointReadBytes", static_cast<int64_t>(entry.bytes));
  entry.source = HostSource{};
  entry.written = true;
  return absl::OkStatus();
}

absl::Status BufferManager::Download(BufferId id, void* dst, size_t offset, size_t bytes) {
  MemoryHandle handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::Status s = CheckReadableLocked(id); !s.ok()) return s;
    Entry& entry = Get(id);
    if (absl::Status s = CheckRange(entry.label, entry.bytes, offset, bytes); !s.ok()) return s;
    if (bytes == 0) return absl::OkStatus();
    if (absl::Status s = LoadLocked(entry); !s.ok()) return s;
    handle = entry.handle;
  }
  // The copy runs unlocked: the caller holds the buffer (it cannot be released meanwhile), and a
  // device read may wait for queued kernels, which must not stall every other buffer call.
  absl::StatusOr<int64_t> nanos = memory_->CopyOut(dst, handle, offset, bytes);
  if (!nanos.ok()) return nanos.status();
  if (device_) {
    base::metrics::Add("TransferFromDeviceBytes", static_cast<int64_t>(bytes));
    base::metrics::ThreadTransferBytes() += static_cast<int64_t>(bytes);
    base::metrics::Add("TransferFromDeviceCount", 1);
    base::metrics::RecordTime("TransferFromDeviceTime", *nanos);
  }
  return absl::OkStatus();
}

absl::Status BufferManager::PrepareWrite(BufferId id) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = Get(id);
  // A kernel may write only part of it: the rest must be the file's.
  if (absl::Status s = LoadLocked(entry); !s.ok()) return s;
  if (absl::Status s = Allocate(entry); !s.ok()) return s;
  entry.written = true;
  return absl::OkStatus();
}

absl::Status BufferManager::CheckReadable(BufferId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CheckReadableLocked(id);
}

absl::Status BufferManager::CheckReadableLocked(BufferId id) const {
  const Entry& entry = Get(id);
  if (entry.written) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("buffer '", entry.label, "' (", entry.bytes,
                                                    " bytes) holds no data: it was declared but "
                                                    "never written"));
}

void BufferManager::Release(BufferId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  LAZYCL_CHECK(it != entries_.end(), "BufferManager::Release of unknown buffer id %llu",
               static_cast<unsigned long long>(id));
  Free(it->second, /*to_pool=*/true);
  entries_.erase(it);
}

size_t BufferManager::Bytes(BufferId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return Get(id).bytes;
}
bool BufferManager::IsAllocated(BufferId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return Get(id).handle != nullptr;
}
bool BufferManager::IsWritten(BufferId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return Get(id).written;
}
std::string BufferManager::Label(BufferId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return Get(id).label;
}
int64_t BufferManager::live_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_bytes_;
}
int64_t BufferManager::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_bytes_;
}
int64_t BufferManager::pool_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pool_bytes_;
}

MemoryHandle BufferManager::Handle(BufferId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry& entry = Get(id);
  LAZYCL_CHECK(entry.handle != nullptr, "BufferManager::Handle of unallocated buffer '%s'",
               entry.label.c_str());
  return entry.handle;
}

const void* BufferManager::Data(BufferId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry& entry = Get(id);
  LAZYCL_CHECK(!device_, "BufferManager::Data of device buffer '%s'", entry.label.c_str());
  LAZYCL_CHECK(entry.source.file == nullptr, "BufferManager::Data of '%s' before Load",
               entry.label.c_str());
  return entry.handle;
}

void* BufferManager::Data(BufferId id) { return const_cast<void*>(std::as_const(*this).Data(id)); }

const BufferManager::Entry& BufferManager::Get(BufferId id) const {
  auto it = entries_.find(id);
  LAZYCL_CHECK(it != entries_.end(), "unknown buffer id %llu", static_cast<unsigned long long>(id));
  return it->second;
}

BufferManager::Entry& BufferManager::Get(BufferId id) {
  return const_cast<Entry&>(std::as_const(*this).Get(id));
}

}  // namespace lazycl::backend
