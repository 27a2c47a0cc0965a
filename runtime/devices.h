#pragma once

#include <functional>

#include "backend/device.h"
#include "base/settings.h"

// The OpenCL devices of the process, opened on first use
// and kept until exit (never destroyed, so tensors that outlive main() stay safe).
namespace lazycl::runtime {

// OpenCL candidate `index` (see lazycl::Device); throws lazycl::Error when it cannot be opened.
backend::Device& OpenClDevice(int index);

// Calls `fn` with every OpenCL device opened so far (not under the devices' lock).
void ForEachOpenDevice(const std::function<void(int, backend::Device&)>& fn);

// Frees the pooled (free, kept for reuse) buffers of every OpenCL device opened so far; live
// buffers are untouched. Opens nothing.
void EmptyPools();

}  // namespace lazycl::runtime
