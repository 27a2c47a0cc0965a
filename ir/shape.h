#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

// Shapes and the arithmetic on them. Every shape that enters the IR from outside (factories,
// reshape, broadcast, padding, matmul results) passes ValidateShape, so element and byte counts
// computed from a node's shape never overflow.
namespace lazycl::ir {

using Shape = std::vector<int64_t>;

// The number of elements; the shape must be valid (ValidateShape).
int64_t NumElements(const Shape& shape);

std::string ShapeString(const Shape& shape);  // "[2,3]"

// OK when every dim is >= 0 and the elements of every dtype, in bytes, fit in 63 bits (so
// element counts, strides and byte sizes computed from the shape cannot overflow). Otherwise
// InvalidArgument "op: shape [..] ..." quoting the shape as given.
absl::Status ValidateShape(const Shape& shape, absl::string_view op);

}  // namespace lazycl::ir
