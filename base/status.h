#pragma once

#include <cstdint>
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

// ResourceExhausted "host out of memory (op): requested `bytes` bytes": a host allocation that
// threw std::bad_alloc or std::length_error, which must not escape a public entry point.
absl::Status HostOutOfMemory(absl::string_view op, int64_t bytes);

inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) Throw(status);
}

template <class T>
T ValueOrThrow(absl::StatusOr<T> value) {
  if (!value.ok()) Throw(value.status());
  return *std::move(value);
}

}  // namespace lazycl::base
