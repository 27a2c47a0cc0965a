#pragma once

#include "backend/device.h"
#include "backend/settings.h"

// Process-wide state of the frontend: the settings and the OpenCL devices, opened on first use
// and kept until exit (never destroyed, so tensors that outlive main() stay safe).
namespace lazycl::frontend {

// The LAZYCL_* settings; a malformed variable throws lazycl::Error on every use.
const backend::Settings& Settings();

// OpenCL candidate `index` (see lazycl::Device); throws lazycl::Error when it cannot be opened.
backend::Device& OpenClDevice(int index);

}  // namespace lazycl::frontend
