#pragma once

// Device memory that lazycl keeps for reuse. Each OpenCL device pools the buffers of dropped
// tensors, up to LAZYCL_DEVICE_POOL_LIMIT bytes (README, "Device memory"), so the next tensor
// of the same size skips an allocation. DevicePoolBytes (lazycl/metrics.h) counts them.
namespace lazycl {

// Frees every pooled buffer of every OpenCL device opened so far, leaving DevicePoolBytes at 0.
// The buffers of live tensors are untouched; no device is opened.
void empty_cache();

}  // namespace lazycl
