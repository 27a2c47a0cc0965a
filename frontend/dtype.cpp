#include "lazycl/dtype.h"

#include <algorithm>

namespace lazycl {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::boolean:
      return "bool";
  }
  return "?";
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
    case DType::boolean:
      return 1;
  }
  return 0;
}

bool is_floating(DType dtype) { return dtype == DType::f32; }
bool is_integral(DType dtype) { return dtype == DType::i32 || dtype == DType::i64; }

namespace {
int Rank(DType d) {
  switch (d) {
    case DType::boolean:
      return 0;
    case DType::i32:
      return 1;
    case DType::i64:
      return 2;
    case DType::f32:
      return 3;
  }
  return 0;
}
}  // namespace

DType promote(DType a, DType b) { return Rank(a) >= Rank(b) ? a : b; }

}  // namespace lazycl
