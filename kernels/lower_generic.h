#pragma once

#include "absl/status/statusor.h"
#include "kernels/graph.h"
#include "kernels/lower.h"
#include "kernels/plan.h"

namespace lazycl::kernels {

// Lowers `graph` onto the generic library (generic_library.h): every elementwise op, reduction,
// Constant, Scalar and Iota is one kernel writing its own buffer; Reshape (of a strided value),
// Permute, Expand and Slice are strides of the kernels that read them, Pad and a Reshape that
// strides cannot express are copy kernels; Matmul is the tiled template (matmul.cl), whatever
// the target's strategy. The plan's outputs are those of Lower's plan for the same graph. Each
// kernel's `bytes` counts what it reads and writes, `flops` a matmul's arithmetic (the executor
// weighs the generic run against a build with them).
//
// Unimplemented for what the library does not cover: ranks above
// kGenericRank, and kernels the library lacks (f16/bf16 values other than through Cast, f64
// without target.fp64); the executor then builds the fused program at once.
absl::StatusOr<Plan> LowerGeneric(const Graph& graph, const Target& target);

// The generic tier's matmul kernel for `dtype` (f32, f64, i32 or i64), as it multiplies two
// [1, 1] operands: its source, options and entry point, for lazycl-bench warmup.
KernelSpec GenericMatmulKernel(DType dtype, const Target& target);

}  // namespace lazycl::kernels
