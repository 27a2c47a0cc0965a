#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// The one place where an internal absl::Status becomes the public lazycl::Error.
namespace lazycl::frontend {

[[noreturn]] void Throw(const absl::Status& status);

inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) Throw(status);
}

template <class T>
T ValueOrThrow(absl::StatusOr<T> value) {
  if (!value.ok()) Throw(value.status());
  return *std::move(value);
}

}  // namespace lazycl::frontend
