// Reductions and selections beyond ops.cpp: min and prod (IR reductions like max and sum),
// cumsum (an IR scan), and argmax/argmin and topk, composites of reductions, where and iota
// (their gradients come from the ops they are made of).

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "frontend/dispatch.h"
#include "frontend/ops_more.h"
#include "ir/ir.h"
#include "lazycl/factories.h"
#include "lazycl/ops.h"

namespace lazycl {
namespace {

using frontend::NodeOn;
using frontend::Wrap;
using ir::NodePtr;
using ir::Op;
using ir::Shape;

using frontend::Reduce;

Tensor Or(const Tensor& a, const Tensor& b) { return where(a, a, b); }
Tensor And(const Tensor& a, const Tensor& b) { return where(a, b, a); }

// The lowest value of `dtype` (a masked element of a max).
double Lowest(DType dtype) {
  switch (dtype) {
    case DType::i32:
      return std::numeric_limits<int32_t>::min();
    case DType::i64:
      return -9223372036854775808.0;  // exact: the fill saturates to INT64_MIN
    default:
      return -INFINITY;
  }
}

// argmax (max = true) or argmin of x along dim d (normalized), keepdim'd: the first index
// holding the extremum, or the first NaN of a row that holds one.
Tensor ArgExtremum(const Tensor& x, int64_t dim, bool keepdim, bool max_wanted,
                   absl::string_view name) {
  frontend::ImplOf(x, name);
  if (x.dim() == 0) {  // as PyTorch: a rank-0 tensor is one element along dim 0 or -1
    frontend::NormalizeDim(dim, 1, name);
    return reshape(ArgExtremum(reshape(x, {1}), 0, false, max_wanted, name), {});
  }
  const int64_t d = frontend::NormalizeDim(dim, x.dim(), name);
  const int64_t n = x.size(d);
  if (n == 0) {
    base::ThrowInvalid(name, absl::StrCat("cannot take the ", name, " of the empty dim ", d, " of ",
                                          ir::ShapeString(x.shape())));
  }
  Tensor v = x.detach();
  if (v.dtype() == DType::boolean) v = cast(v, DType::i32);
  const Tensor m = max_wanted ? max(v, {d}, true) : min(v, {d}, true);
  const Tensor index = frontend::Iota(n, d, x.dim(), x.device());
  // The candidates: the index where v is the extremum, n elsewhere; a NaN's index - n, which is
  // below every other candidate, so the row's first NaN wins. One reduction after m's (a bool
  // "row has NaN" max measured 137 ms on [4096, 1024] where this min takes 10 ms).
  Tensor candidate = where(eq(v, m), index, static_cast<double>(n));
  if (!is_floating(v.dtype())) return min(candidate, {d}, keepdim);
  candidate = where(ne(v, v), index - static_cast<double>(n), candidate);
  const Tensor first = min(candidate, {d}, keepdim);
  return where(lt(first, 0.0), first + static_cast<double>(n), first);
}

}  // namespace

Tensor min(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  frontend::ImplOf(x, "min");
  return Reduce(Op::kMin, x, std::move(dims), keepdim, "min", x.dtype());
}

Tensor prod(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  frontend::ImplOf(x, "prod");
  const DType compute = is_floating(x.dtype()) ? x.dtype() : DType::i64;
  return Reduce(Op::kProd, x, std::move(dims), keepdim, "prod", compute);
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return ArgExtremum(x, dim, keepdim, true, "argmax");
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  return ArgExtremum(x, dim, keepdim, false, "argmin");
}

// A Scan op (kernels/emit_scan.cpp): one pass per row. Its gradient is the running sum of the
// cotangent from the other end.
Tensor cumsum(const Tensor& x, int64_t dim) {
  frontend::ImplOf(x, "cumsum");
  if (x.dim() == 0) {
    frontend::NormalizeDim(dim, 1, "cumsum");
    return reshape(cumsum(reshape(x, {1}), 0), {});
  }
  const int64_t d = frontend::NormalizeDim(dim, x.dim(), "cumsum");
  const Device device = frontend::OpDevice({&x}, "cumsum");
  const NodePtr x0 = NodeOn(x, device, "cumsum", 0);
  NodePtr n = x0;
  const DType compute = is_floating(n->dtype) ? n->dtype : DType::i64;
  if (n->dtype != compute) n = base::ValueOrThrow(ir::MakeCast(std::move(n), compute));
  return Wrap(ir::MakeScan(Op::kCumsum, std::move(n), d, /*reverse=*/false), device, {{&x, x0}});
}

// k steps; step r picks the first element (by index) of the largest key among those after pick
// r-1 in the order (key descending, index ascending). The values are then read at the picked
// indices in one masked sum over [.., k, n] (a one-hot where), so that a value's gradient goes
// to its own element only (k one-hot sums, one per step, cost topk(k = 50) of [8, 50257]
// twice as long).
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim) {
  frontend::ImplOf(x, "topk");
  if (x.dtype() == DType::boolean) {
    base::ThrowInvalid("topk", "not defined for bool tensors; cast to an integer dtype first");
  }
  const int64_t rank = x.dim();
  if (rank == 0) {
    base::ThrowInvalid("topk", "expected a tensor of rank >= 1, got a rank-0 tensor");
  }
  const int64_t d = frontend::NormalizeDim(dim, rank, "topk");
  const int64_t n = x.size(d);
  if (k < 0 || k > n) {
    base::ThrowInvalid("topk",
                       absl::StrCat("k = ", k, " is out of range for dim ", d, " of ",
                                    ir::ShapeString(x.shape()), " (expected 0 <= k <= ", n, ")"));
  }
  if (k == 0) {
    Tensor none = slice(x, d, 0, 0);
    return {none, cast(none.detach(), DType::i64)};
  }
  Tensor key = x.detach();
  if (is_floating(key.dtype())) key = where(ne(key, key), INFINITY, key);
  const Tensor index = frontend::Iota(n, d, rank, x.device());
  const double lowest = Lowest(key.dtype());
  std::vector<Tensor> indices;
  Tensor last_key;
  Tensor last_index;
  for (int64_t r = 0; r < k; ++r) {
    Tensor hit;
    Tensor m;
    if (r == 0) {
      m = max(key, {d}, true);
      hit = eq(key, m);
    } else {
      const Tensor after = Or(lt(key, last_key), And(eq(key, last_key), gt(index, last_index)));
      m = max(where(after, key, lowest), {d}, true);
      hit = And(after, eq(key, m));
    }
    last_index = min(where(hit, index, static_cast<double>(n)), {d}, true);
    last_key = m;
    indices.push_back(last_index);
  }
  const Tensor picked = cat(indices, d);
  // [.., k, 1] == [n] -> [.., k, n], with the scanned dim moved last.
  const bool last = d == rank - 1;
  const Tensor rows = last ? x : transpose(x, d, -1);
  const Tensor at = unsqueeze(last ? picked : transpose(picked, d, -1), -1);
  const Tensor one_hot = eq(at, arange(n, DType::i64, x.device()));
  Tensor values = sum(where(one_hot, unsqueeze(rows, -2), 0.0), {-1});
  if (values.dtype() != x.dtype()) values = cast(values, x.dtype());
  return {last ? values : transpose(values, d, -1), picked};
}

}  // namespace lazycl
