#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/inline_list.h"

// Shapes and the arithmetic on them. Every shape that enters the IR from outside (factories,
// reshape, broadcast, padding, matmul results) passes ValidateShape, so element and byte counts
// computed from a node's shape never overflow.
namespace lazycl::ir {

// A node's dims, held in place up to 4 (most shapes): making a node or copying its shape
// allocates nothing for them. Converts to and from std::vector<int64_t>, the public API's shape.
using Shape = base::InlineList<int64_t, 4>;

// The number of elements; the shape must be valid (ValidateShape).
int64_t NumElements(const Shape& shape);

std::string ShapeString(const Shape& shape);  // "[2,3]"

// OK when every dim is >= 0 and the elements of every dtype, in bytes, fit in 63 bits (so
// element counts, strides and byte sizes computed from the shape cannot overflow). Otherwise
// InvalidArgument "op: shape [..] ..." quoting the shape as given.
absl::Status ValidateShape(const Shape& shape, absl::string_view op);

}  // namespace lazycl::ir
