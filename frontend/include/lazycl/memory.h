#pragma once

#include <cstddef>
#include <memory>

#include "lazycl/device.h"

// Device memory that lazycl keeps for reuse. Each OpenCL device pools the buffers of dropped
// tensors, up to LAZYCL_DEVICE_POOL_LIMIT bytes (README, "Device memory"), so the next tensor
// of the same size skips an allocation. DevicePoolBytes (lazycl/metrics.h) counts them.
namespace lazycl {

// Frees every pooled buffer of every OpenCL device opened so far, leaving DevicePoolBytes at 0.
// The buffers of live tensors are untouched; no device is opened.
void empty_cache();

// Host memory that `device` copies to and from directly, for staging transfers through one
// buffer (PyTorch's pin_memory()): on an OpenCL device, memory its driver allocates in host
// memory (CL_MEM_ALLOC_HOST_PTR) and keeps mapped while this object lives; on a discrete GPU it
// is page-locked, so Tensor::copy_to_host and from_host_memory into or out of it need no
// staging copy inside the driver. On a CPU device it is plain host memory; for Device::host(),
// 64-byte aligned host memory. Contents are uninitialised. Move-only; an allocation the driver
// refuses is an Error naming the size and device.
class PinnedBuffer {
 public:
  PinnedBuffer(size_t bytes, Device device);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&&) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&&) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // Null only after being moved from. size() is the bytes asked for (0 allowed).
  void* data() const;
  size_t size() const;
  Device device() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lazycl
