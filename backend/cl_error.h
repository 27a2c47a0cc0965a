#pragma once

#include <string_view>

#include "absl/status/status.h"

// Naming OpenCL error codes. Free of OpenCL headers so any backend file may use it.
namespace lazycl::backend {

// "CL_OUT_OF_RESOURCES" for -5; "CL_UNKNOWN_ERROR" for a code no standard names.
std::string_view ClErrorName(int code);

// OK for CL_SUCCESS. Otherwise "<what> failed: CL_OUT_OF_RESOURCES (-5)" with a canonical code:
// allocation failures are ResourceExhausted, invalid arguments InvalidArgument, a missing
// platform or device NotFound, build failures InvalidArgument, anything else Internal.
absl::Status ClStatus(int code, std::string_view what);

// True for the codes that mean the device ran out of memory.
bool IsClOutOfMemory(int code);

}  // namespace lazycl::backend
