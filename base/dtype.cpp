#include "lazycl/dtype.h"

#include "base/dtype_table.h"

namespace lazycl {

const char* dtype_name(DType dtype) { return base::Info(dtype).name; }
size_t dtype_size(DType dtype) { return base::Info(dtype).size; }
bool is_floating(DType dtype) { return base::Info(dtype).floating; }
bool is_integral(DType dtype) { return base::Info(dtype).integral; }

bool is_half(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16; }

DType promote(DType a, DType b) {
  if (is_half(a) && is_half(b) && a != b) return DType::f32;
  return base::Info(a).rank >= base::Info(b).rank ? a : b;
}

}  // namespace lazycl
