#pragma once

#include <cstddef>
#include <iterator>

#include "lazycl/dtype.h"

// The one dtype table: everything the floors need to know about a dtype, in DType's order.
// Adding a dtype is one enumerator in lazycl/dtype.h and one row here.
namespace lazycl::base {

struct DTypeInfo {
  DType dtype;
  const char* name;    // as printed: "f32"
  size_t size;         // bytes per element
  const char* opencl;  // the OpenCL C type it is stored as
  const char* cpp;     // the C++ type of to_vector<T>
  bool floating;
  bool integral;  // integers other than bool
  int rank;       // promotion: the higher rank wins (bool < i32 < i64 < f16, bf16 < f32 < f64)
};

// f16 and bf16 are held as their bits (OpenCL C `ushort`, read and written through the
// conversions of kernels/cl_text.cpp; C++ `uint16_t` through base/half.h).
inline constexpr DTypeInfo kDTypes[] = {
    {DType::f32, "f32", 4, "float", "float", true, false, 4},
    {DType::i32, "i32", 4, "int", "int32_t", false, true, 1},
    {DType::i64, "i64", 8, "long", "int64_t", false, true, 2},
    {DType::boolean, "bool", 1, "uchar", "uint8_t", false, false, 0},
    {DType::f16, "f16", 2, "ushort", "uint16_t", true, false, 3},
    {DType::bf16, "bf16", 2, "ushort", "uint16_t", true, false, 3},
    {DType::f64, "f64", 8, "double", "double", true, false, 5},
};
static_assert(std::size(kDTypes) == static_cast<size_t>(DType::f64) + 1,
              "one row per DType, in enum order");

constexpr const DTypeInfo& Info(DType dtype) { return kDTypes[static_cast<size_t>(dtype)]; }

}  // namespace lazycl::base
