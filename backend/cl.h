#pragma once

// The one place that configures and includes the OpenCL C++ bindings. Every backend file that
// needs OpenCL includes this header, never <CL/opencl.hpp> directly, so the version macros
// cannot disagree between translation units. Exceptions stay off: failures are error codes that
// become absl::Status through ClStatus (backend/cl_error.h).
//
// opencl-clhpp-headers 2023.02 does not compile with minimum version 120 (see shared/POCL.md),
// hence 110.
#define CL_HPP_TARGET_OPENCL_VERSION 300
#define CL_HPP_MINIMUM_OPENCL_VERSION 110

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#pragma GCC diagnostic ignored "-Wignored-attributes"
#endif
#include <CL/opencl.hpp>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
