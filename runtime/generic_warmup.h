#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

// lazycl-bench warmup: gets the generic kernels of tiered execution (kernels/generic_library.h)
// ready on a device ahead of the first graph that needs them.
namespace lazycl::runtime {

struct WarmupReport {
  int64_t kernels = 0;   // entry points launched
  double build_ms = 0;   // building (or loading) their programs
  double launch_ms = 0;  // launching each once over nothing, until the device finished
};

// Builds the generic library and matmul template of OpenCL device `device` for the codegen
// strategy in use (or loads them from the disk cache), then launches every entry point once
// over zero elements, which makes a driver that compiles kernels at their first launch (PoCL,
// per work-group size) compile them now and keep them in its own cache.
absl::StatusOr<WarmupReport> WarmGenericKernels(int device);

}  // namespace lazycl::runtime
