#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/settings.h"

// Choosing an OpenCL device from descriptions alone: no OpenCL calls, so it is testable anywhere.
namespace lazycl::backend {

struct DeviceDesc {
  std::string name;
  base::DeviceType type = base::DeviceType::kOther;
  std::string driver_version;
};

struct PlatformDesc {
  std::string name;
  std::string vendor;
  std::string version;
  std::vector<DeviceDesc> devices;
};

struct DeviceChoice {
  int platform = 0;  // index into the platform list
  int device = 0;    // index into that platform's devices
};

// Applies LAZYCL_PLATFORM, then LAZYCL_DEVICE_TYPE, then LAZYCL_DEVICE (as filled into
// `settings`) and returns the candidates that remain, in platform-then-device order. With
// LAZYCL_DEVICE set, exactly one remains. The default type filter keeps only GPUs when there is
// any GPU, and everything otherwise. No platform, a filter that matches nothing, an index out of
// range or a malformed value is an error whose message lists every platform and device found.
absl::StatusOr<std::vector<DeviceChoice>> SelectDevices(const std::vector<PlatformDesc>& platforms,
                                                        const base::Settings& settings);

// "platform 0: Portable Computing Language (The pocl project, OpenCL 3.0 ...)\n  device 0: ..."
std::string DescribePlatforms(const std::vector<PlatformDesc>& platforms);

}  // namespace lazycl::backend
