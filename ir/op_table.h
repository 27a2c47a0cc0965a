#pragma once

// The single source of truth for IR ops: X(name, arity, category).
// Categories: Leaf (no operands), Unary/Binary/Ternary/Compare (elementwise, fused freely),
// View (index arithmetic only), Reduce (one output element per kept index), Matmul, Gather
// (a data-dependent read: fuses like a view whose index along one dim is read from a tensor),
// Scatter (a data-dependent write: always a kernel of its own, kernels/emit_gather.cpp), Scan (a
// running fold along one dim: args = {dim, reverse}; every scan ends a kernel,
// kernels/emit_scan.cpp).
//
// Every pass keeps one table with a row per op, in this order, and a static_assert that it has
// kOpCount rows: ir.cpp's dtype rules, kernels/ OpenCL C expressions, runtime/host_eval.cpp's
// host functions, autodiff.cpp's VJPs. Adding an elementwise op is a line here and a row in each.
//
// Constant and Scalar are both a value filled over a shape. A Constant's value is part of the
// graph's structure (its hash, the kernel's source): the library's own 0, 1, 0.5, -1 and the
// reductions' identities. A Scalar's value is not: it is the user's number (x * lr, full's value,
// mean's 1/count), passed to kernels as an argument, so a new value compiles nothing new.
//
// Composites first: neg (x * -1) and sub (a + neg(b)) are written in frontend/ops.cpp from these
// ops and have no op of their own. Primitives for a measured reason: Exp, Log, Tanh and Erf run
// our own CPU maths (lc_exp, lc_log, lc_tanh, lc_erf in kernels/). Sigmoid: its composite 1 / (1 +
// exp(-x)) differentiates through exp(-x), which overflows below x = -88.7, so the chain rule gives
// 0 * inf = NaN there where Sigmoid's own rule g y (1 - y) gives 0 (tests/op_tables_test.cpp
// measures both). Relu: its composite where(x > 0, x, 0) reads x twice, and a node's pending
// count (ir.h: counted through every path) doubles with each relu of a chain; past
// MaxPendingNodes() every new tensor then counts its graph's distinct nodes one by one
// (PastPendingLimit), where the primitive's count stays exact for free (before that count
// existed, ten relus cut the graph while it was built). Silu and Gelu (erf and tanh forms) are
// primitive for the same reason: their composites read x twice, and they sit in every layer.
// Rsqrt maps to OpenCL's rsqrt. Min and Prod are reductions like Max and Sum.
// RandomUniform(counter, seed): i64 operands, an f32 in (0, 1) per element: splitmix64 of the two,
// its top 23 bits k as (k + 0.5) / 2^23, exact in f32, so host and device give the same bits.
// rand, randn and dropout are written with it over an iota (frontend/factories.cpp): computed
// inside the kernels that use them, never uploaded; the seed is a Scalar, so a new seed compiles
// nothing.
#define LAZYCL_OPS(X)       \
  X(Buffer, 0, Leaf)        \
  X(Constant, 0, Leaf)      \
  X(Scalar, 0, Leaf)        \
  X(Iota, 0, Leaf)          \
  X(Exp, 1, Unary)          \
  X(Log, 1, Unary)          \
  X(Sqrt, 1, Unary)         \
  X(Tanh, 1, Unary)         \
  X(Sigmoid, 1, Unary)      \
  X(Relu, 1, Unary)         \
  X(Abs, 1, Unary)          \
  X(Sin, 1, Unary)          \
  X(Cos, 1, Unary)          \
  X(Erf, 1, Unary)          \
  X(Not, 1, Unary)          \
  X(Cast, 1, Unary)         \
  X(Add, 2, Binary)         \
  X(Mul, 2, Binary)         \
  X(Div, 2, Binary)         \
  X(Maximum, 2, Binary)     \
  X(Minimum, 2, Binary)     \
  X(Pow, 2, Binary)         \
  X(Lt, 2, Compare)         \
  X(Le, 2, Compare)         \
  X(Gt, 2, Compare)         \
  X(Ge, 2, Compare)         \
  X(Eq, 2, Compare)         \
  X(Ne, 2, Compare)         \
  X(Where, 3, Ternary)      \
  X(Reshape, 1, View)       \
  X(Permute, 1, View)       \
  X(Expand, 1, View)        \
  X(Slice, 1, View)         \
  X(Pad, 1, View)           \
  X(Sum, 1, Reduce)         \
  X(Max, 1, Reduce)         \
  X(Matmul, 2, Matmul)      \
  X(Gather, 2, Gather)      \
  X(ScatterAdd, 3, Scatter) \
  /* mathops block */       \
  X(Rsqrt, 1, Unary)        \
  X(Silu, 1, Unary)         \
  X(Gelu, 1, Unary)         \
  X(GeluTanh, 1, Unary)     \
  X(Min, 1, Reduce)         \
  X(Prod, 1, Reduce)        \
  X(Cumsum, 1, Scan)        \
  /* random block */        \
  X(RandomUniform, 2, Binary)

#include <cstddef>

namespace lazycl::ir {

enum class Op : unsigned char {
#define LAZYCL_OP_ENUM(name, arity, category) k##name,
  LAZYCL_OPS(LAZYCL_OP_ENUM)
#undef LAZYCL_OP_ENUM
};

inline constexpr int kOpCount = 0
#define LAZYCL_OP_COUNT(name, arity, category) +1
    LAZYCL_OPS(LAZYCL_OP_COUNT)
#undef LAZYCL_OP_COUNT
    ;

enum class OpCategory : unsigned char {
  Leaf,
  Unary,
  Binary,
  Ternary,
  Compare,
  View,
  Reduce,
  Matmul,
  Gather,
  Scatter,
  Scan
};

const char* OpName(Op op);
int OpArity(Op op);
OpCategory Category(Op op);

// Whether `rows` (each with a field `op`) has a row for every op, in LAZYCL_OPS order: each
// pass's table asserts it, so an op added here without a row in a table is a compile error.
template <typename Row, size_t N>
constexpr bool IsOpTable(const Row (&rows)[N]) {
  if (N != static_cast<size_t>(kOpCount)) return false;
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(rows[i].op) != i) return false;
  }
  return true;
}

inline bool IsElementwise(Op op) {
  OpCategory c = Category(op);
  return c == OpCategory::Unary || c == OpCategory::Binary || c == OpCategory::Ternary ||
         c == OpCategory::Compare;
}
inline bool IsView(Op op) { return Category(op) == OpCategory::View; }
inline bool IsLeaf(Op op) { return Category(op) == OpCategory::Leaf; }
inline bool IsReduce(Op op) { return Category(op) == OpCategory::Reduce; }
inline bool IsScan(Op op) { return Category(op) == OpCategory::Scan; }
// The elementwise ops that cost a library call or a polynomial per element (exp, sin, sqrt, ...),
// not a single instruction: what codegen weighs as expensive (kernels/fusion_rules.h OpCost) and
// constant folding looks for (Node::holds_transcendental).
inline bool IsTranscendental(Op op) {
  switch (op) {
    case Op::kExp:
    case Op::kLog:
    case Op::kSqrt:
    case Op::kRsqrt:
    case Op::kTanh:
    case Op::kSigmoid:
    case Op::kSilu:
    case Op::kGelu:
    case Op::kGeluTanh:
    case Op::kSin:
    case Op::kCos:
    case Op::kErf:
    case Op::kPow:
      return true;
    default:
      return false;
  }
}

}  // namespace lazycl::ir
