#pragma once

#include <cstdint>

#include "absl/strings/string_view.h"
#include "lazycl/tensor.h"

// Helpers shared by ops_more.cpp and ops_reduce_more.cpp.
namespace lazycl::frontend {

// `dim` in [-rank, rank) made non-negative; else an Error naming `op`.
int64_t NormalizeDimMore(int64_t dim, int64_t rank, absl::string_view op);

// 0, 1, ..., n-1 (i64) along `dim` of a rank-`rank` shape whose other dims are 1.
Tensor Iota(int64_t n, int64_t dim, int64_t rank, Device device);

}  // namespace lazycl::frontend
