#pragma once

#include <cstdint>

#include <vector>

#include "absl/strings/string_view.h"
#include "ir/op_table.h"
#include "lazycl/dtype.h"
#include "lazycl/tensor.h"

// Helpers shared by ops.cpp, ops_more.cpp and ops_reduce_more.cpp (defined in ops.cpp but Iota).
namespace lazycl::frontend {

// `dim` in [-rank, rank) made non-negative (with `inclusive_end`, [-rank-1, rank]: unsqueeze's
// range); else an Error naming `op`.
int64_t NormalizeDim(int64_t dim, int64_t rank, absl::string_view op, bool inclusive_end = false);

// The reduction `op` of x over `dims` ({} = all; negative dims count from the end; a repeated
// dim is an Error), computed in `compute`; the reduced dims are dropped unless `keepdim`.
Tensor Reduce(ir::Op op, const Tensor& x, std::vector<int64_t> dims, bool keepdim,
              absl::string_view name, DType compute);

// 0, 1, ..., n-1 (i64) along `dim` of a rank-`rank` shape whose other dims are 1.
Tensor Iota(int64_t n, int64_t dim, int64_t rank, Device device);

}  // namespace lazycl::frontend
