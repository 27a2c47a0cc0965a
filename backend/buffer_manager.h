#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "backend/memory.h"
#include "base/file.h"

namespace lazycl::backend {

// Identifies one buffer. Ids come from one process-wide counter shared by every BufferManager,
// so an id names one buffer across managers and is never reused. Never 0.
using BufferId = uint64_t;

struct BufferLimits {
  int64_t memory_limit = 0;      // > 0 caps live + pooled bytes (LAZYCL_DEVICE_MEMORY_LIMIT)
  int64_t max_alloc_bytes = 0;   // > 0 caps one allocation (CL_DEVICE_MAX_MEM_ALLOC_SIZE)
  int64_t global_mem_bytes = 0;  // > 0 caps live + pooled bytes (CL_DEVICE_GLOBAL_MEM_SIZE)
  int64_t pool_limit = -1;       // >= 0 caps pooled bytes (LAZYCL_DEVICE_POOL_LIMIT); < 0 none
};

// The pool bound of a device that reports `global_mem_bytes` when LAZYCL_DEVICE_POOL_LIMIT is
// unset: an eighth of it, and at most 512 MiB. Pooled storage is memory nothing uses (on a CPU
// device, host RAM taken from every other process), kept only to skip an allocation; the
// eighth leaves the rest to live buffers on small devices, and the absolute cap stops a large
// one parking gigabytes, where a fresh buffer's cost is small beside the work done in it.
constexpr int64_t DefaultPoolLimit(int64_t global_mem_bytes) {
  constexpr int64_t kMaxDefault = int64_t{512} << 20;
  return global_mem_bytes / 8 < kMaxDefault ? global_mem_bytes / 8 : kMaxDefault;
}

// Where the bytes of a buffer wait until it is first read: `file`, from byte `offset` on (a
// tensor of a checkpoint, lazycl/checkpoint.h). The shared_ptr keeps the file open.
struct HostSource {
  std::shared_ptr<const base::ReadOnlyFile> file;
  uint64_t offset = 0;
};

// A buffer is *declared* (a size and a label, no memory), then *allocated* (storage obtained
// when a kernel is about to write it or data is uploaded), and *written* once data is in it.
// A declared buffer that is never written is what a placeholder is: reading it is an error.
//
// One BufferManager serves one Memory (a device, or host memory), which it owns. It owns every
// allocation too, live or pooled, and frees them all when it goes. It does the checks and the
// accounting; for device memory (Memory::is_device) storage is rounded to PoolBinBytes, goes
// back to a size-binned pool on Release, and every allocation and copy is counted in the
// Device*/Transfer* metrics. The pool holds at most BufferLimits::pool_limit bytes: a release
// that would pass it first frees the buffers pooled longest ago (a buffer bigger than the
// whole bound is freed at once). Thread-safe: every public method takes the manager's mutex
// (a leaf lock but for the metrics registry's; Download copies outside it, while a lazily
// declared buffer's first read, Load, reads its file and uploads under it). A MemoryHandle or
// Data() pointer stays valid while its buffer is not released, so callers use it unlocked.
class BufferManager {
 public:
  explicit BufferManager(std::unique_ptr<Memory> memory, BufferLimits limits = {});
  ~BufferManager();
  BufferManager(const BufferManager&) = delete;
  BufferManager& operator=(const BufferManager&) = delete;

  // Costs no memory. `label` names the buffer in error messages.
  BufferId Declare(size_t bytes, std::string label);

  // Declares a buffer whose bytes are `source`'s next `bytes`: it holds data (IsWritten,
  // CheckReadable) but no storage until its first read (Download, Load; a kernel launch loads
  // the buffers it reads), which allocates it and reads the file into it. For device memory that
  // read is counted as uploads (Transfer*), and both kinds count it in CheckpointReadBytes.
  // Costs no memory and reads nothing until then.
  BufferId Declare(size_t bytes, std::string label, HostSource source);

  // Reads a buffer's pending HostSource into new storage and forgets the source; OK at once for
  // a buffer with none. On an error (the file shrank, a failed copy, no memory) the buffer keeps
  // no storage and still has its source, so a later read tries again. Two threads that load
  // one buffer read it once (the manager's mutex is held throughout).
  absl::Status Load(BufferId id);

  // Load, then CheckReadable, under one lock: what a kernel launch does for each buffer it reads.
  absl::Status PrepareRead(BufferId id);

  // The source of a buffer not loaded yet; nullopt once loaded (or never lazily declared).
  std::optional<HostSource> PendingSource(BufferId id) const;

  // Copies bytes [offset, offset + bytes) from `src` into the buffer, allocating storage first
  // if needed, and marks it written. Counted as a host->device transfer for device memory.
  absl::Status Upload(BufferId id, const void* src, size_t offset, size_t bytes);

  // Copies bytes [offset, offset + bytes) of the buffer into `dst`. FailedPrecondition, naming
  // the buffer, when it was never written.
  absl::Status Download(BufferId id, void* dst, size_t offset, size_t bytes);

  // Obtains storage because a kernel is about to write the buffer, and marks it written.
  // ResourceExhausted when the memory (or BufferLimits) has no room.
  absl::Status PrepareWrite(BufferId id);

  // OK when new storage for every request in `bytes` (buffers about to be allocated together)
  // would fit within BufferLimits beside the live buffers, emptying the pool if that makes
  // room; ResourceExhausted naming the sizes otherwise. Allocates nothing: it lets a caller fail
  // before it starts work that needs all of them.
  absl::Status CheckRoom(std::span<const size_t> bytes);

  // OK when the buffer holds data; FailedPrecondition naming it otherwise.
  absl::Status CheckReadable(BufferId id) const;

  // Forgets the buffer; its storage goes back to the pool (device memory) or the memory.
  void Release(BufferId id);

  size_t Bytes(BufferId id) const;
  bool IsAllocated(BufferId id) const;
  bool IsWritten(BufferId id) const;
  std::string Label(BufferId id) const;

  // The Memory's handle of the buffer, e.g. the cl_mem to bind as a kernel argument. The buffer
  // must be allocated (a bug otherwise: it aborts).
  MemoryHandle Handle(BufferId id) const;

  // Host memory only: the address of the buffer's storage (64-byte aligned), nullptr while it
  // is only declared. A buffer with a pending HostSource must be Load()ed first (a bug
  // otherwise: it aborts).
  void* Data(BufferId id);
  const void* Data(BufferId id) const;

  // Frees every pooled allocation back to the memory (what lazycl::empty_cache() does).
  void TrimPool();

  // Bytes of storage held by this manager's live buffers, the most at once, and pooled.
  int64_t live_bytes() const;
  int64_t peak_bytes() const;
  int64_t pool_bytes() const;

 private:
  struct Entry {
    size_t bytes = 0;
    std::string label;
    MemoryHandle handle = nullptr;  // null until allocated
    size_t storage_bytes = 0;       // bytes obtained for `handle`; 0 for a 0-byte buffer
    bool written = false;
    HostSource source;  // file null unless declared lazily and not loaded yet
  };
  // Everything below runs with mu_ held.
  const Entry& Get(BufferId id) const;
  absl::Status CheckReadableLocked(BufferId id) const;
  void TrimPoolLocked();
  Entry& Get(BufferId id);
  absl::Status LoadLocked(Entry& entry);
  // Copies into allocated `entry` (bounds checked by the caller) and counts the upload.
  // `fresh`: the storage was just obtained, so a ResourceExhausted copy may retry on new storage.
  absl::Status CopyInLocked(Entry& entry, const void* src, size_t offset, size_t bytes, bool fresh);

  // Gives `entry` storage from the pool or the memory.
  absl::Status Allocate(Entry& entry);
  // Memory::Allocate of `storage_bytes` within BufferLimits, emptying the pool and trying once more
  // when the memory is out of room.
  absl::StatusOr<MemoryHandle> AllocateFromMemory(size_t storage_bytes);
  // OK when `bytes` more of storage fits within the memory limit and the device's global
  // memory beside the live buffers, emptying the pool first when only that makes room.
  absl::Status MakeRoom(int64_t bytes);
  // Returns the storage of `entry` to the pool, or to the memory when `to_pool` is false.
  void Free(Entry& entry, bool to_pool);
  // Frees the buffer pooled longest ago.
  void FreeOldestPooled();
  absl::Status OutOfMemory(int64_t storage_bytes, std::string_view why) const;

  mutable std::mutex mu_;  // guards every member below but memory_'s own (thread-safe) calls
  std::unique_ptr<Memory> memory_;
  const bool device_;  // memory_->is_device(): pooled and counted in the Device* metrics
  const BufferLimits limits_;

  absl::flat_hash_map<BufferId, Entry> entries_;
  // Free storage: `pooled_` in the order it was pooled (oldest first), and `pool_` indexing it
  // by bytes, each bin oldest first. Reuse takes a bin's newest; the bound frees the oldest.
  struct Pooled {
    size_t bytes;
    MemoryHandle handle;
  };
  std::list<Pooled> pooled_;
  // A bin emptied by reuse stays, its vector's room kept (PoolBinBytes makes 8 sizes a power of
  // two: a few hundred bins at most).
  absl::flat_hash_map<size_t, std::vector<std::list<Pooled>::iterator>> pool_;
  // Nodes of `pooled_` no longer in it, spliced back in by the next pooling, so that pooling and
  // reuse allocate nothing (a node and a bin's vector were 112 mallocs of the char-LM `for`-loop
  // sampling token); at most kSpareNodes.
  static constexpr size_t kSpareNodes = 256;
  std::list<Pooled> spare_;
  void Unpool(std::list<Pooled>::iterator it);
  int64_t live_bytes_ = 0;
  int64_t peak_bytes_ = 0;
  int64_t pool_bytes_ = 0;
};

}  // namespace lazycl::backend
