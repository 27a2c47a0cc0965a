#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/cl.h"
#include "backend/keep_awake.h"
#include "backend/memory.h"

// The Memory of one OpenCL device (internal to backend/: it exposes OpenCL types).
namespace lazycl::backend {

// Handles are cl_mem objects, each holding one reference that Free releases. Copies are writes
// and reads on the device's in-order queue, timed by their profiling events: reads blocking, and
// writes of up to kStagedCopyInBytes from a copy of the source that the memory keeps until the
// write has run (the caller neither waits for the driver's threads nor for the work queued
// ahead), larger ones blocking. The Device owns the context and queue; this holds references to
// them, so they outlive every buffer.
class OpenClMemory final : public Memory {
 public:
  static constexpr size_t kStagedCopyInBytes = size_t{256} << 10;
  // The most bytes of staged copies held at once; past it a write blocks (and waits for the
  // ones ahead of it).
  static constexpr size_t kMaxStagedBytes = size_t{64} << 20;

  // `host_pages`: the device computes in host memory (a CPU device), so buffers of 2 MiB and
  // more are allocated by us on 2 MiB-aligned memory advised for huge pages and handed over
  // with CL_MEM_USE_HOST_PTR: a fresh 64 MiB buffer then takes 32 page faults instead of 16384
  // (~45 ms of kernel time on the first launch that writes it).
  // `read_spin_ns`: how long a read's host thread polls for its end before it sleeps
  // (backend/event_wait.h; LAZYCL_HOST_SPIN_US). `keep_awake` (may be null; outlives this): the
  // device's spinners, told of each read's wait and its end.
  OpenClMemory(cl::Context context, cl::CommandQueue queue, bool host_pages, int64_t read_spin_ns,
               KeepAwake* keep_awake = nullptr);

  // OpenCL has no 0-byte buffers: 0 bytes is one shared 1-element buffer.
  absl::StatusOr<MemoryHandle> Allocate(size_t bytes) override;
  void Free(MemoryHandle handle) override;
  absl::StatusOr<int64_t> CopyIn(MemoryHandle dst, size_t offset, const void* src,
                                 size_t bytes) override;
  absl::StatusOr<int64_t> CopyOut(void* dst, MemoryHandle src, size_t offset,
                                  size_t bytes) override;
  bool is_device() const override { return true; }
  ~OpenClMemory() override;  // waits for the staged writes
  // Frees the copies of the staged writes that have run (Device::Finish: all of them), which
  // are otherwise freed at the next copy; and how many bytes of copies are held.
  void ReapStaged();
  size_t staged_bytes();

  static cl_mem Mem(MemoryHandle handle) { return static_cast<cl_mem>(handle); }

 private:
  // A staged write in flight: its event and the copy of the source it reads.
  struct StagedWrite {
    cl::Event event;
    std::unique_ptr<char[]> data;
    size_t bytes = 0;
  };
  // Records the time of the staged writes that have run (all of them with `wait`) and frees
  // their copies; the caller holds staged_mu_.
  void ReapStagedLocked(bool wait);

  cl::Context context_;
  cl::CommandQueue queue_;
  bool host_pages_;
  int64_t read_spin_ns_;
  KeepAwake* keep_awake_;
  cl::Buffer empty_;  // what 0-byte allocations share; created on first need
  std::mutex staged_mu_;
  std::vector<StagedWrite> staged_;  // under staged_mu_, in the order they were queued
  size_t staged_bytes_ = 0;          // under staged_mu_
};

}  // namespace lazycl::backend
