#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "ir/ir.h"
#include "runtime/storage.h"

// The host reference backend: a plain interpreter of the IR, one row per op in host_eval.cpp. Host
// tensors are computed by it eagerly, and every OpenCL result is tested against it, so these are
// the semantics that the OpenCL code generator must reproduce:
//
// Dtypes: f32 = float, i32 = int32_t, i64 = int64_t, bool = uint8_t holding 0 or 1. Bool bytes
// read from a Buffer are normalized (any non-zero byte is 1).
//
// Leaves. Buffer: the storage bytes, contiguous row-major. Constant: node->value converted to the
// dtype as by Cast from a double (so an out-of-range i32 constant saturates), broadcast. Iota:
// element i is i, converted as by Cast from i64.
//
// Unary (result dtype = operand dtype). Abs; Relu = x > 0 ? x : 0 (so Relu(NaN) = 0 and
// Relu(-0) = +0). Integer Abs wraps (Abs(INT_MIN) = INT_MIN). Exp, Log, Sqrt, Tanh, Sin, Cos: the
// <cmath> float overloads. Sigmoid = 1 / (1 + exp(-x)) in float. Not = !x. (neg and sub are
// composites of these ops: frontend/ops.cpp.)
//
// Cast. To bool: x != 0 (NaN -> true). Float -> i32/i64: truncate toward zero, saturating at the
// type's min and max, NaN -> 0 (OpenCL convert_<int>_sat). Int/bool -> f32: ordinary rounding
// conversion. i64 -> i32: the low 32 bits. Bool -> int: 0/1. i32 -> i64: sign extension.
//
// Binary (same dtype in and out). Add, Mul: integers wrap (two's complement). Div, Pow: f32
// only, Pow = std::pow(float, float). Maximum/Minimum: fmax/fmin for f32 (a NaN operand is
// ignored; NaN only when both are), plain max/min for integers.
//
// Compare (Lt Le Gt Ge Eq Ne): bool result, IEEE (any comparison with NaN is false, except Ne).
// Where(cond, a, b): cond ? a : b.
//
// Views (node->shape is the output shape). Reshape keeps the row-major linear order. Permute:
// output dim i is input dim args[i]. Expand: input dims of size 1 broadcast. Slice: output index
// plus args[d] per dim. Pad: input[idx - args[d]] where that is inside the input, else 0/false.
//
// Reduce over node->args, keeping the reduced axes with size 1. Sum: f32 accumulates in double in
// row-major input order and rounds once; i64 wraps; the sum of nothing is 0. Max: fmax for f32,
// seeded so that NaNs are ignored unless every element is NaN (then NaN; seeding with -INFINITY
// would give -inf there); max for integers and bool. Over nothing (the IR rejects it): -INFINITY
// or the type's minimum.
//
// Matmul [B..,M,K] @ [B..,K,N] -> [B..,M,N]: f32 multiplies and accumulates in double (k
// ascending) and rounds once; i32/i64 wrap.
//
// Gather and ScatterAdd: runtime/host_indexing.h (indices clamped into range for Gather, dropped
// when out of range for ScatterAdd; ScatterAdd adds in row-major order of src, in float).
//
// Size-0 dims are allowed everywhere.
namespace lazycl::runtime {

// Evaluates `node` on the host. Every Buffer leaf must be a host Storage (device().is_host());
// one that holds no data gives FailedPrecondition naming it. Returns a new host Storage, owned
// by the caller and living in backend::HostMemory(), holding the node's value contiguous
// row-major in node->shape. Each node of the DAG is evaluated once however often it is shared.
absl::StatusOr<std::shared_ptr<ir::Storage>> EvaluateOnHost(const ir::NodePtr& node);

}  // namespace lazycl::runtime
