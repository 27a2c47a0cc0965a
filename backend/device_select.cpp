#include "backend/device_select.h"

#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/string_view.h"

namespace lazycl::backend {
namespace {

// A filter value is an index when it is all digits (an optional sign included, so "-1" is a
// malformed index rather than a name), and a case-insensitive name substring otherwise.
struct Filter {
  bool is_index = false;
  int index = 0;
  std::string substring;
};

// absl 20220623 has no StrContainsIgnoreCase.
bool ContainsIgnoreCase(std::string_view text, std::string_view needle) {
  return absl::StrContains(absl::AsciiStrToLower(base::Sv(text)),
                           absl::AsciiStrToLower(base::Sv(needle)));
}

bool LooksNumeric(std::string_view value) {
  if (!value.empty() && (value[0] == '-' || value[0] == '+')) value.remove_prefix(1);
  if (value.empty()) return false;
  for (char c : value) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

absl::StatusOr<Filter> ParseFilter(std::string_view variable, std::string_view value,
                                   const std::vector<PlatformDesc>& platforms) {
  Filter filter;
  if (!LooksNumeric(value)) {
    filter.substring = std::string(value);
    return filter;
  }
  int64_t index = 0;
  if (!absl::SimpleAtoi(base::Sv(value), &index) || index < 0 ||
      index > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(base::Sv(variable), "=\"", base::Sv(value),
                     "\" is malformed: expected a non-negative index or a name substring. "
                     "OpenCL devices found:\n",
                     DescribePlatforms(platforms)));
  }
  filter.is_index = true;
  filter.index = static_cast<int>(index);
  return filter;
}

bool TypeMatches(base::DeviceTypeFilter filter, base::DeviceType type) {
  switch (filter) {
    case base::DeviceTypeFilter::kGpu:
      return type == base::DeviceType::kGpu;
    case base::DeviceTypeFilter::kCpu:
      return type == base::DeviceType::kCpu;
    case base::DeviceTypeFilter::kAccelerator:
      return type == base::DeviceType::kAccelerator;
    case base::DeviceTypeFilter::kDefault:
    case base::DeviceTypeFilter::kAll:
      return true;
  }
  return true;
}

std::string_view FilterName(base::DeviceTypeFilter filter) {
  switch (filter) {
    case base::DeviceTypeFilter::kGpu:
      return "gpu";
    case base::DeviceTypeFilter::kCpu:
      return "cpu";
    case base::DeviceTypeFilter::kAccelerator:
      return "accelerator";
    case base::DeviceTypeFilter::kAll:
      return "all";
    case base::DeviceTypeFilter::kDefault:
      return "default";
  }
  return "default";
}

}  // namespace

std::string DescribePlatforms(const std::vector<PlatformDesc>& platforms) {
  if (platforms.empty()) return "  (no OpenCL platforms)\n";
  std::string out;
  for (size_t p = 0; p < platforms.size(); ++p) {
    const PlatformDesc& platform = platforms[p];
    absl::StrAppend(&out, "platform ", p, ": ", platform.name, " (", platform.vendor, ", ",
                    platform.version, ")\n");
    if (platform.devices.empty()) absl::StrAppend(&out, "  (no devices)\n");
    for (size_t d = 0; d < platform.devices.size(); ++d) {
      const DeviceDesc& device = platform.devices[d];
      absl::StrAppend(&out, "  device ", d, ": ", device.name, " [",
                      base::Sv(base::DeviceTypeName(device.type)), ", driver ",
                      device.driver_version, "]\n");
    }
  }
  return out;
}

absl::StatusOr<std::vector<DeviceChoice>> SelectDevices(const std::vector<PlatformDesc>& platforms,
                                                        const base::Settings& settings) {
  if (platforms.empty()) {
    return absl::NotFoundError(
        "no OpenCL platform found: install an OpenCL ICD (for a CPU, the Debian package "
        "pocl-opencl-icd) and check /etc/OpenCL/vendors");
  }
  auto listing = [&] {
    return absl::StrCat("OpenCL devices found:\n", DescribePlatforms(platforms));
  };

  // Platform filter.
  std::vector<int> platform_ids;
  if (settings.platform.empty()) {
    for (size_t p = 0; p < platforms.size(); ++p) platform_ids.push_back(static_cast<int>(p));
  } else {
    absl::StatusOr<Filter> filter = ParseFilter("LAZYCL_PLATFORM", settings.platform, platforms);
    if (!filter.ok()) return filter.status();
    if (filter->is_index) {
      if (filter->index >= static_cast<int>(platforms.size())) {
        return absl::OutOfRangeError(absl::StrCat("LAZYCL_PLATFORM=", settings.platform,
                                                  " is out of range: there are ", platforms.size(),
                                                  " platforms. ", listing()));
      }
      platform_ids.push_back(filter->index);
    } else {
      for (size_t p = 0; p < platforms.size(); ++p) {
        if (ContainsIgnoreCase(platforms[p].name, filter->substring)) {
          platform_ids.push_back(static_cast<int>(p));
        }
      }
      if (platform_ids.empty()) {
        return absl::NotFoundError(absl::StrCat("LAZYCL_PLATFORM=\"", settings.platform,
                                                "\" matches no platform name. ", listing()));
      }
    }
  }

  // Type filter. The default keeps GPUs when any of the remaining platforms has one.
  base::DeviceTypeFilter type_filter = settings.device_type;
  if (type_filter == base::DeviceTypeFilter::kDefault) {
    for (int p : platform_ids) {
      for (const DeviceDesc& device : platforms[p].devices) {
        if (device.type == base::DeviceType::kGpu) type_filter = base::DeviceTypeFilter::kGpu;
      }
    }
  }
  std::vector<DeviceChoice> candidates;
  for (int p : platform_ids) {
    for (size_t d = 0; d < platforms[p].devices.size(); ++d) {
      if (TypeMatches(type_filter, platforms[p].devices[d].type)) {
        candidates.push_back({p, static_cast<int>(d)});
      }
    }
  }
  if (candidates.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no OpenCL device matches LAZYCL_PLATFORM=\"", settings.platform,
        "\" LAZYCL_DEVICE_TYPE=", base::Sv(FilterName(settings.device_type)), ". ", listing()));
  }

  // Device filter: an index counts among the candidates left so far.
  if (settings.device.empty()) return candidates;
  absl::StatusOr<Filter> filter = ParseFilter("LAZYCL_DEVICE", settings.device, platforms);
  if (!filter.ok()) return filter.status();
  if (filter->is_index) {
    if (filter->index >= static_cast<int>(candidates.size())) {
      return absl::OutOfRangeError(
          absl::StrCat("LAZYCL_DEVICE=", settings.device, " is out of range: ", candidates.size(),
                       " device(s) remain after the platform and type filters. ", listing()));
    }
    return std::vector<DeviceChoice>{candidates[filter->index]};
  }
  for (const DeviceChoice& choice : candidates) {
    if (ContainsIgnoreCase(platforms[choice.platform].devices[choice.device].name,
                           filter->substring)) {
      return std::vector<DeviceChoice>{choice};
    }
  }
  return absl::NotFoundError(absl::StrCat("LAZYCL_DEVICE=\"", settings.device,
                                          "\" matches no device name among the candidates. ",
                                          listing()));
}

}  // namespace lazycl::backend
