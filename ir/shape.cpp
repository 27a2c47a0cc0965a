#include "ir/shape.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace lazycl::ir {
namespace {

// The widest dtype's bytes: a valid shape's byte size fits in int64 for every dtype.
constexpr int64_t kMaxElementBytes = 8;

}  // namespace

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

absl::Status ValidateShape(const Shape& shape, absl::string_view op) {
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) {
      return base::InvalidArgument(
          op, absl::StrCat("shape ", ShapeString(shape), " has a negative dimension"));
    }
    empty = empty || d == 0;
  }
  if (empty) return absl::OkStatus();  // 0 elements, however large the other dims
  int64_t n = kMaxElementBytes;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) {
      return base::InvalidArgument(
          op, absl::StrCat("shape ", ShapeString(shape),
                           " has too many elements: its element count or byte size overflows "
                           "64 bits"));
    }
  }
  return absl::OkStatus();
}

}  // namespace lazycl::ir
