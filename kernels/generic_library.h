#pragma once

#include <cstddef>
#include <string>
#include <vector>

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

// The expression interpreter (GenericInterpKernel): one kernel that evaluates a whole region of
// f32 elementwise ops (and the comparisons, where and not that select between f32 values) in one
// pass over memory, its program given as kernel arguments, so that a never-seen chain of them
// costs one read of its inputs and one write instead of a kernel and a buffer per op. Each
// work-item evaluates a block of consecutive elements one instruction at a time over the block
// (as numexpr does), in registers of kInterpRegisters x block floats; bool values are 0 and 1.
// An instruction is 32 bits: opcode (8) | d (6) << 8 | x (6) << 14 | y (6) << 20 | z (6) << 26,
// two per `long` argument. kInterpLoad loads input x (f32; mode bit x of `modes`: 1 reads one
// element for all), kInterpLoadBool a bool input as 0/1, kInterpScalar sets every element to
// float argument x; InterpOpcode(op) computes register d from registers x, y, z. The result is
// register `result`, stored as f32.
inline constexpr int kInterpRegisters = 8;
inline constexpr int kInterpInputs = 8;
inline constexpr int kInterpScalars = 8;
inline constexpr int kInterpInstructions = 64;  // 32 long arguments
inline constexpr int kInterpLoad = 0;
inline constexpr int kInterpLoadBool = 1;
inline constexpr int kInterpScalar = 2;
inline int InterpOpcode(ir::Op op) { return 8 + static_cast<int>(op); }

struct GenericLibrary {
  std::string source;
  // Elements per work-item of the interpreter (its kernel's LC_BLK): a block on the CPU strategy,
  // 1 on the GPU one (whose work-items have no room for blocks of registers).
  int interp_block = 1;
  // The ops the interpreter evaluates, by ir::Op: f32 operands to an f32 or bool result, where
  // of a bool and two f32 values, and not of a bool.
  std::vector<bool> interp_ops;
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
std::string GenericInterpKernel();

}  // namespace lazycl::kernels
