#pragma once

#include <cstddef>
#include <cstdint>

namespace lazycl {

// f16 (IEEE half) and bf16 (bfloat16) are storage types: every op computes them in f32 and
// rounds its result to nearest even (as PyTorch does op by op on the CPU, and JAX's XLA:CPU).
// f64 runs on devices that report cl_khr_fp64 (a graph with f64 on another device is an Error
// naming the device) and on the host.
enum class DType { f32, i32, i64, boolean, f16, bf16, f64 };

const char* dtype_name(DType dtype);  // "f32", "i32", "i64", "bool", "f16", "bf16", "f64"
size_t dtype_size(DType dtype);       // bytes per element; bool is one byte
bool is_floating(DType dtype);        // f32, f16, bf16, f64
bool is_integral(DType dtype);        // i32 and i64 (not bool)
bool is_half(DType dtype);            // f16 and bf16: 16-bit storage, f32 arithmetic

// The dtype both operands of a binary op are computed in, as PyTorch's promotion:
// bool < i32 < i64 < f16, bf16 < f32 < f64, and f16 with bf16 gives f32.
DType promote(DType a, DType b);

}  // namespace lazycl
