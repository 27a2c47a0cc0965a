#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

// The one place where an internal absl::Status becomes the public lazycl::Error, and the one
// helper for the most common status: bad arguments to a named operation.
namespace lazycl::base {

// InvalidArgument "op: what".
absl::Status InvalidArgument(absl::string_view op, absl::string_view what);

// Throws InvalidArgument(op, what) as a lazycl::Error.
[[noreturn]] void ThrowInvalid(absl::string_view op, absl::string_view what);

[[noreturn]] void Throw(const absl::Status& status);

inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) Throw(status);
}

template <class T>
T ValueOrThrow(absl::StatusOr<T> value) {
  if (!value.ok()) Throw(value.status());
  return *std::move(value);
}

}  // namespace lazycl::base
