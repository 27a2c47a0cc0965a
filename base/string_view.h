#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

// Debian's Abseil 20220623 is built with its own absl::string_view (ABSL_OPTION_USE_STD_STRING_VIEW
// is 0), which does not convert to or from std::string_view. Interfaces use std::string_view;
// these bridge them where absl functions (StrCat, hash-map lookups) need absl's type.
namespace lazycl::base {

inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }
inline std::string_view StdSv(absl::string_view s) { return std::string_view(s.data(), s.size()); }

}  // namespace lazycl::base
