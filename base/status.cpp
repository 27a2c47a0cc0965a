#include "base/status.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "lazycl/error.h"

namespace lazycl::base {

[[noreturn]] void Throw(const absl::Status& status) { throw Error(std::string(status.message())); }

absl::Status HostOutOfMemory(absl::string_view op, int64_t bytes) {
  return absl::ResourceExhaustedError(
      absl::StrCat("host out of memory (", op, "): requested ", bytes, " bytes"));
}

absl::Status InvalidArgument(absl::string_view op, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what));
}

[[noreturn]] void ThrowInvalid(absl::string_view op, absl::string_view what) {
  Throw(InvalidArgument(op, what));
}

}  // namespace lazycl::base
