#pragma once

#include <cstddef>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "ir/op_table.h"
#include "lazycl/dtype.h"

// The generic kernels of tiered execution (README, "Compile latency"): one OpenCL program per
// device whose text depends on no graph, so it is built once and then found in the disk cache. A
// never-seen graph runs on it, one kernel per op, while its fused program is built in the
// background (runtime/tiering.h); kernels/lower_generic.h lowers a graph onto it.
//
// Every kernel takes sizes and strides as arguments over kGenericRank dims (a lower rank is
// padded with leading dims of size 1), writes a contiguous result at an element offset, and runs
// one work-item per result element in groups of kGenericLocal, the tail behind a bounds check.
// Elementwise kernels evaluate the op with the same OpenCL C text as the fused kernels
// (op_expr.h), so both tiers agree bit for bit there; reductions sum in another order.
namespace lazycl::kernels {

inline constexpr int kGenericRank = 6;
inline constexpr size_t kGenericLocal = 64;

struct GenericLibrary {
  std::string source;
  // Every entry point, with its parameters in order: 'b' a buffer, 'l' a long, 'i' an int, 'f' a
  // float, 'd' a double. The third is always the element count n: a launch with n = 0 touches
  // nothing (lazycl-bench warmup launches each kernel so, for the driver to compile it).
  absl::flat_hash_map<std::string, std::string> kernels;
};

// The library of the CPU (`cpu`) or GPU codegen strategy, with f64 kernels where the device has
// them. Built once per process and variant; thread-safe.
const GenericLibrary& GenericLibraryFor(bool cpu, bool fp64);

// Entry point names; GenericLibrary::kernels says which exist.
// An elementwise op (ir::IsElementwise, not Cast) over operands of dtype `operand` (Where: of its
// second and third operands; RandomUniform: i64).
std::string GenericOpKernel(ir::Op op, DType operand);
std::string GenericCastKernel(DType from, DType to);
std::string GenericFillKernel(DType dtype);  // every element one value (Constant, Scalar)
std::string GenericIotaKernel(DType dtype);
std::string GenericCopyKernel(size_t element_bytes);  // a strided view into a contiguous buffer
std::string GenericPadKernel(DType dtype);
std::string GenericReduceKernel(ir::Op op, DType dtype);
std::string GenericGatherKernel(DType dtype, DType index);
std::string GenericCumsumKernel(DType dtype);
std::string GenericScatterAddKernel(DType dtype, DType index);

}  // namespace lazycl::kernels
