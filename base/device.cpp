#include "lazycl/device.h"

#include <charconv>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace lazycl {

Device Device::opencl(int index) {
  if (index < 0) {
    base::Throw(
        absl::InvalidArgumentError(absl::StrCat("Device::opencl: index ", index, " is negative")));
  }
  return Device(Kind::opencl, index);
}

Device Device::parse(std::string_view text) {
  const std::string lower = absl::AsciiStrToLower(std::string(text));
  if (lower == "host" || lower == "cpu") return host();
  for (std::string_view prefix : {"opencl", "cl"}) {
    if (!lower.starts_with(prefix)) continue;
    std::string_view rest = std::string_view(lower).substr(prefix.size());
    if (rest.empty()) return opencl(0);
    if (rest[0] == ':' && rest.size() > 1) {
      int index = 0;
      auto [end, error] = std::from_chars(rest.data() + 1, rest.data() + rest.size(), index);
      if (error == std::errc() && end == rest.data() + rest.size()) {
        if (index < 0) {
          base::Throw(absl::InvalidArgumentError(
              absl::StrCat("Device::parse: \"", std::string(text), "\" names device index ", index,
                           ", which is negative; expected \"cl:N\" with N >= 0")));
        }
        return opencl(index);
      }
    }
    break;
  }
  base::Throw(absl::InvalidArgumentError(
      absl::StrCat("Device::parse: \"", std::string(text),
                   "\" is not a device; expected \"host\", \"cl\" or \"cl:N\"")));
}

std::string Device::str() const { return is_host() ? "host" : absl::StrCat("cl:", index_); }

}  // namespace lazycl
