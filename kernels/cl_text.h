#pragma once

#include <string>

#include "lazycl/dtype.h"

// How dtypes and values are spelled in OpenCL C. Shared by every part of codegen.
namespace lazycl::kernels {

// The OpenCL C type a dtype is stored as: "float", "int", "long", "uchar".
std::string CType(DType d);

// `v` as a literal of type `d`, exact for every value the dtype holds (NaN and infinities
// included).
std::string Literal(double v, DType d);

std::string Zero(DType d);

// i32 and i64 (not bool).
bool IsInt(DType d);

}  // namespace lazycl::kernels
