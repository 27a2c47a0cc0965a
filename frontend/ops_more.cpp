// The maths a transformer needs beyond ops.cpp: rsqrt, silu, gelu (primitive ops, see
// ir/op_table.h), clamp and tril/triu (composites), and comparisons with a number.
// Reductions and selections (min, prod, argmax, cumsum, topk) are in ops_reduce_more.cpp.

#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "frontend/dispatch.h"
#include "frontend/ops_more.h"
#include "ir/ir.h"
#include "lazycl/factories.h"
#include "lazycl/ops.h"

namespace lazycl {

namespace frontend {

Tensor Iota(int64_t n, int64_t dim, int64_t rank, Device device) {
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(dim)] = n;
  return reshape(arange(n, DType::i64, device), shape);
}

}  // namespace frontend

namespace {

using frontend::NodeOn;
using frontend::Wrap;
using ir::NodePtr;
using ir::Op;

Tensor FloatingUnary(Op op, const Tensor& x, absl::string_view name) {
  const Device device = frontend::OpDevice({&x}, name);
  const NodePtr x0 = NodeOn(x, device, name, 0);
  NodePtr n = x0;
  if (!is_floating(n->dtype)) n = base::ValueOrThrow(ir::MakeCast(std::move(n), DType::f32));
  return Wrap(ir::MakeUnary(op, std::move(n)), device, {{&x, x0}});
}

// A number as a rank-0 Scalar leaf (a kernel argument) of `dtype` on `like`'s device.
Tensor ScalarOf(double value, DType dtype, const Tensor& like) {
  return Wrap(ir::MakeScalar(value, dtype, {}), like.device());
}

// An all-`value` bool tensor shaped like `x` (a comparison whose answer the number decides).
Tensor Constant(bool value, const Tensor& x) {
  return Wrap(ir::MakeConstant(value ? 1 : 0, DType::boolean, x.shape()), x.device());
}

enum class Cmp { kLt, kLe, kGt, kGe, kEq, kNe };

Tensor CompareTensors(Cmp c, const Tensor& a, const Tensor& b) {
  switch (c) {
    case Cmp::kLt:
      return lt(a, b);
    case Cmp::kLe:
      return le(a, b);
    case Cmp::kGt:
      return gt(a, b);
    case Cmp::kGe:
      return ge(a, b);
    case Cmp::kEq:
      return eq(a, b);
    case Cmp::kNe:
      return ne(a, b);
  }
  return {};
}

// x (op) v. Floating x: v as an f32 Scalar (rounded to f32, as PyTorch and JAX do). Integral or
// bool x: exactly, on integers: x > v is x > floor(v), x < v is x < ceil(v), a fractional v
// equals nothing, and a v past every i64 decides the answer alone.
Tensor CompareNumber(Cmp c, const Tensor& x, double v, absl::string_view name) {
  frontend::ImplOf(x, name);
  if (is_floating(x.dtype()) || std::isnan(v)) {
    return CompareTensors(c, x, ScalarOf(v, DType::f32, x));
  }
  const bool integral = std::floor(v) == v;
  if (!integral && (c == Cmp::kEq || c == Cmp::kNe)) return Constant(c == Cmp::kNe, x);
  double bound = v;
  if (c == Cmp::kGt || c == Cmp::kLe) bound = std::floor(v);
  if (c == Cmp::kLt || c == Cmp::kGe) bound = std::ceil(v);
  constexpr double kTwo63 = 9223372036854775808.0;
  if (bound >= kTwo63) return Constant(c == Cmp::kLt || c == Cmp::kLe || c == Cmp::kNe, x);
  if (bound < -kTwo63) return Constant(c == Cmp::kGt || c == Cmp::kGe || c == Cmp::kNe, x);
  const bool fits_i32 = bound >= -2147483648.0 && bound <= 2147483647.0;
  const DType dtype = fits_i32 && x.dtype() != DType::i64 ? DType::i32 : DType::i64;
  return CompareTensors(c, x, ScalarOf(bound, dtype, x));
}

Cmp Mirror(Cmp c) {
  switch (c) {
    case Cmp::kLt:
      return Cmp::kGt;
    case Cmp::kLe:
      return Cmp::kGe;
    case Cmp::kGt:
      return Cmp::kLt;
    case Cmp::kGe:
      return Cmp::kLe;
    default:
      return c;
  }
}

void CheckClampable(const Tensor& x, absl::string_view name) {
  frontend::ImplOf(x, name);
  if (x.dtype() == DType::boolean) {
    base::ThrowInvalid(name,
                       "not defined for bool tensors; cast to an integer or float dtype first");
  }
}

void CheckBound(double b, absl::string_view name, absl::string_view which) {
  if (std::isnan(b)) base::ThrowInvalid(name, absl::StrCat("the ", which, " bound is NaN"));
}

Tensor Triangle(const Tensor& x, int64_t k, bool lower, absl::string_view name) {
  frontend::ImplOf(x, name);
  if (x.dim() < 2) {
    base::ThrowInvalid(
        name, absl::StrCat("expected a tensor of rank >= 2, got ", ir::ShapeString(x.shape())));
  }
  const int64_t rows = x.size(-2);
  const int64_t cols = x.size(-1);
  const Tensor diff = reshape(arange(cols, DType::i64, x.device()), {1, cols}) -
                      reshape(arange(rows, DType::i64, x.device()), {rows, 1});
  const Tensor keep = lower ? le(diff, static_cast<double>(k)) : ge(diff, static_cast<double>(k));
  return where(keep, x, full({}, 0, x.dtype(), x.device()));
}

}  // namespace

Tensor rsqrt(const Tensor& x) { return FloatingUnary(Op::kRsqrt, x, "rsqrt"); }
Tensor silu(const Tensor& x) { return FloatingUnary(Op::kSilu, x, "silu"); }
Tensor gelu(const Tensor& x, bool approximate_tanh) {
  return FloatingUnary(approximate_tanh ? Op::kGeluTanh : Op::kGelu, x, "gelu");
}

Tensor clamp(const Tensor& x, double lo, double hi) {
  CheckClampable(x, "clamp");
  CheckBound(lo, "clamp", "lower");
  CheckBound(hi, "clamp", "upper");
  if (lo > hi) {
    base::ThrowInvalid("clamp",
                       absl::StrCat("the lower bound ", lo, " is above the upper bound ", hi));
  }
  return where(lt(x, lo), lo, where(gt(x, hi), hi, x));
}
Tensor clamp_min(const Tensor& x, double lo) {
  CheckClampable(x, "clamp_min");
  CheckBound(lo, "clamp_min", "lower");
  return where(lt(x, lo), lo, x);
}
Tensor clamp_max(const Tensor& x, double hi) {
  CheckClampable(x, "clamp_max");
  CheckBound(hi, "clamp_max", "upper");
  return where(gt(x, hi), hi, x);
}

Tensor tril(const Tensor& x, int64_t k) { return Triangle(x, k, true, "tril"); }
Tensor triu(const Tensor& x, int64_t k) { return Triangle(x, k, false, "triu"); }

Tensor lt(const Tensor& a, double b) { return CompareNumber(Cmp::kLt, a, b, "lt"); }
Tensor le(const Tensor& a, double b) { return CompareNumber(Cmp::kLe, a, b, "le"); }
Tensor gt(const Tensor& a, double b) { return CompareNumber(Cmp::kGt, a, b, "gt"); }
Tensor ge(const Tensor& a, double b) { return CompareNumber(Cmp::kGe, a, b, "ge"); }
Tensor eq(const Tensor& a, double b) { return CompareNumber(Cmp::kEq, a, b, "eq"); }
Tensor ne(const Tensor& a, double b) { return CompareNumber(Cmp::kNe, a, b, "ne"); }
Tensor lt(double a, const Tensor& b) { return CompareNumber(Mirror(Cmp::kLt), b, a, "lt"); }
Tensor le(double a, const Tensor& b) { return CompareNumber(Mirror(Cmp::kLe), b, a, "le"); }
Tensor gt(double a, const Tensor& b) { return CompareNumber(Mirror(Cmp::kGt), b, a, "gt"); }
Tensor ge(double a, const Tensor& b) { return CompareNumber(Mirror(Cmp::kGe), b, a, "ge"); }
Tensor eq(double a, const Tensor& b) { return CompareNumber(Cmp::kEq, b, a, "eq"); }
Tensor ne(double a, const Tensor& b) { return CompareNumber(Cmp::kNe, b, a, "ne"); }

}  // namespace lazycl
