#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backend/buffer_manager.h"
#include "backend/cl.h"

// The BufferManager of one OpenCL device (internal to backend/: it exposes cl_mem).
namespace lazycl::backend {

// Storage is obtained lazily (Upload or PrepareWrite), rounded to PoolBinBytes, and goes back to
// a size-binned pool on Release. The manager owns every cl::Buffer it holds, live or pooled; the
// Device owns the manager and the context/queue it uses, which outlive it.
class DeviceBuffers final : public BufferManager {
 public:
  // `memory_limit` > 0 caps live + pooled bytes (LAZYCL_DEVICE_MEMORY_LIMIT). `max_alloc_bytes`
  // is CL_DEVICE_MAX_MEM_ALLOC_SIZE. `host_pages`: the device computes in host memory (a CPU
  // device), so large buffers are allocated by us on 2 MiB-aligned memory advised for huge
  // pages and handed over with CL_MEM_USE_HOST_PTR: a fresh 64 MiB buffer then takes 32 page
  // faults instead of 16384 (~45 ms of kernel time on the first launch that writes it).
  DeviceBuffers(cl::Context context, cl::CommandQueue queue, int64_t memory_limit,
                int64_t max_alloc_bytes, bool host_pages);
  ~DeviceBuffers() override;

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

  // The cl_mem to bind as a kernel argument; the buffer must be allocated. A 0-byte buffer
  // binds a shared 1-element dummy, since OpenCL has no 0-byte buffers.
  absl::StatusOr<cl_mem> Mem(BufferId id);

  // Frees every pooled buffer back to the device.
  void TrimPool();

  int64_t live_bytes() const { return live_bytes_; }
  int64_t pool_bytes() const { return pool_bytes_; }

 private:
  struct Entry {
    size_t bytes = 0;
    std::string label;
    size_t bin_bytes = 0;  // bytes of `buffer`, a PoolBinBytes value; 0 for a 0-byte buffer
    cl::Buffer buffer;     // null until allocated (and always for 0-byte buffers)
    bool allocated = false;
    bool written = false;
  };
  const Entry& Get(BufferId id) const;
  Entry& Get(BufferId id);

  // Gives `entry` storage from the pool or the device.
  absl::Status Allocate(Entry& entry);
  // clCreateBuffer of `bin_bytes`, trimming the pool and retrying once on out-of-memory.
  absl::StatusOr<cl::Buffer> CreateFromDevice(size_t bin_bytes);
  absl::Status OutOfMemory(size_t bin_bytes, std::string_view why) const;
  // Returns the storage of `entry` to the pool, or to the device when `to_pool` is false.
  void Free(Entry& entry, bool to_pool);

  cl::Context context_;
  cl::CommandQueue queue_;
  int64_t memory_limit_;
  int64_t max_alloc_bytes_;
  bool host_pages_;

  absl::flat_hash_map<BufferId, Entry> entries_;
  absl::flat_hash_map<size_t, std::vector<cl::Buffer>> pool_;  // free buffers by bin bytes
  int64_t live_bytes_ = 0;  // bin bytes owned by live ids of this manager
  int64_t peak_bytes_ = 0;
  int64_t pool_bytes_ = 0;
  cl::Buffer dummy_;  // bound for 0-byte buffers; created on first need
};

}  // namespace lazycl::backend
