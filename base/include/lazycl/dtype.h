#pragma once

#include <cstddef>
#include <cstdint>

namespace lazycl {

enum class DType { f32, i32, i64, boolean };

const char* dtype_name(DType dtype);  // "f32", "i32", "i64", "bool"
size_t dtype_size(DType dtype);       // bytes per element; bool is one byte
bool is_floating(DType dtype);
bool is_integral(DType dtype);  // i32 and i64 (not bool)

// The dtype both operands of a binary op are computed in: bool < i32 < i64 < f32.
DType promote(DType a, DType b);

}  // namespace lazycl
