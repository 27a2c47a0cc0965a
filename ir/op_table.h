#pragma once

// The single source of truth for IR ops: X(name, arity, category).
// Categories: Leaf (no operands), Unary/Binary/Ternary/Compare (elementwise, fused freely),
// View (index arithmetic only), Reduce (one output element per kept index), Matmul.
#define LAZYCL_OPS(X)   \
  X(Buffer, 0, Leaf)    \
  X(Constant, 0, Leaf)  \
  X(Iota, 0, Leaf)      \
  X(Neg, 1, Unary)      \
  X(Exp, 1, Unary)      \
  X(Log, 1, Unary)      \
  X(Sqrt, 1, Unary)     \
  X(Tanh, 1, Unary)     \
  X(Sigmoid, 1, Unary)  \
  X(Relu, 1, Unary)     \
  X(Abs, 1, Unary)      \
  X(Sin, 1, Unary)      \
  X(Cos, 1, Unary)      \
  X(Not, 1, Unary)      \
  X(Cast, 1, Unary)     \
  X(Add, 2, Binary)     \
  X(Sub, 2, Binary)     \
  X(Mul, 2, Binary)     \
  X(Div, 2, Binary)     \
  X(Maximum, 2, Binary) \
  X(Minimum, 2, Binary) \
  X(Pow, 2, Binary)     \
  X(Lt, 2, Compare)     \
  X(Le, 2, Compare)     \
  X(Gt, 2, Compare)     \
  X(Ge, 2, Compare)     \
  X(Eq, 2, Compare)     \
  X(Ne, 2, Compare)     \
  X(Where, 3, Ternary)  \
  X(Reshape, 1, View)   \
  X(Permute, 1, View)   \
  X(Expand, 1, View)    \
  X(Slice, 1, View)     \
  X(Pad, 1, View)       \
  X(Sum, 1, Reduce)     \
  X(Max, 1, Reduce)     \
  X(Matmul, 2, Matmul)

namespace lazycl::ir {

enum class Op : unsigned char {
#define LAZYCL_OP_ENUM(name, arity, category) k##name,
  LAZYCL_OPS(LAZYCL_OP_ENUM)
#undef LAZYCL_OP_ENUM
};

enum class OpCategory : unsigned char {
  Leaf,
  Unary,
  Binary,
  Ternary,
  Compare,
  View,
  Reduce,
  Matmul
};

const char* OpName(Op op);
int OpArity(Op op);
OpCategory Category(Op op);

inline bool IsElementwise(Op op) {
  OpCategory c = Category(op);
  return c == OpCategory::Unary || c == OpCategory::Binary || c == OpCategory::Ternary ||
         c == OpCategory::Compare;
}
inline bool IsView(Op op) { return Category(op) == OpCategory::View; }
inline bool IsLeaf(Op op) { return Category(op) == OpCategory::Leaf; }
inline bool IsReduce(Op op) { return Category(op) == OpCategory::Reduce; }

}  // namespace lazycl::ir
