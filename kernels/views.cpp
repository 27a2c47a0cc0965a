#include "kernels/views.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace lazycl::kernels {
namespace {

using ir::Node;
using ir::Op;
using ir::Shape;

std::vector<int64_t> ContiguousStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

// (size, stride) of one level of batch elements, outermost first.
using Factors = std::vector<std::pair<int64_t, int64_t>>;

struct Strided {
  const Node* base = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> strides;
  // Set once a Reshape regrouped batch dims that per-dim strides cannot describe (grouped-query
  // attention's [b, kv, rep, t, d] over an Expand of rep, read as [b, kv * rep, t, d]): the
  // leading dims' elements in row-major order as factors. Only the last two entries of
  // `strides` hold then, and later views may not touch the leading dims.
  std::optional<Factors> batch;
};

// Whether dims [0, rank - 2) of `n` and its operand `x` are the same dims, untouched.
bool KeepsBatchDims(const Node& n, const Node& x) {
  const size_t r = n.shape.size();
  if (x.shape.size() != r || r < 2) return false;
  for (size_t d = 0; d + 2 < r; ++d) {
    if (n.shape[d] != x.shape[d]) return false;
    if (n.op == Op::kPermute && n.args[d] != static_cast<int64_t>(d)) return false;
    if (n.op == Op::kSlice && n.args[d] != 0) return false;
  }
  return true;
}

// How `n` reads memory when it is a chain of strided views over a materialized node.
std::optional<Strided> StridedOf(const Node& n,
                                 const std::function<bool(const Node&)>& materialized) {
  if (materialized(n)) return Strided{&n, 0, ContiguousStrides(n.shape), std::nullopt};
  const Node& x = n.operands.empty() ? n : *n.operands[0];
  switch (n.op) {
    case Op::kPermute: {
      auto s = StridedOf(x, materialized);
      if (!s || (s->batch && !KeepsBatchDims(n, x))) return std::nullopt;
      std::vector<int64_t> strides(n.shape.size());
      for (size_t d = 0; d < strides.size(); ++d) strides[d] = s->strides[n.args[d]];
      s->strides = std::move(strides);
      return s;
    }
    case Op::kExpand: {
      auto s = StridedOf(x, materialized);
      if (!s || (s->batch && !KeepsBatchDims(n, x))) return std::nullopt;
      for (size_t d = 0; d < n.shape.size(); ++d) {
        if (x.shape[d] == 1) s->strides[d] = 0;
      }
      return s;
    }
    case Op::kSlice: {
      auto s = StridedOf(x, materialized);
      if (!s || (s->batch && !KeepsBatchDims(n, x))) return std::nullopt;
      for (size_t d = 0; d < n.shape.size(); ++d) s->offset += n.args[d] * s->strides[d];
      return s;
    }
    case Op::kReshape: {
      auto s = StridedOf(x, materialized);
      if (!s) return std::nullopt;
      if (!s->batch && s->strides == ContiguousStrides(x.shape)) {
        s->strides = ContiguousStrides(n.shape);
        return s;
      }
      if (!s->batch) {
        // Unit dims added or dropped ([kv, t, d] -> [kv, 1, t, d] before a repeat): the other
        // dims keep their strides.
        std::vector<int64_t> strides(n.shape.size(), 0);
        size_t d = 0;
        bool same = true;
        for (size_t e = 0; e < n.shape.size() && same; ++e) {
          if (n.shape[e] == 1) continue;
          while (d < x.shape.size() && x.shape[d] == 1) ++d;
          same = d < x.shape.size() && x.shape[d] == n.shape[e];
          if (same) strides[e] = s->strides[d++];
        }
        while (same && d < x.shape.size() && x.shape[d] == 1) ++d;
        if (same && d == x.shape.size()) {
          s->strides = std::move(strides);
          return s;
        }
      }
      // Only the batch dims regrouped, the matrix dims kept: the batch elements keep their
      // row-major order, so the operand's factors carry over.
      const size_t rx = x.shape.size(), rn = n.shape.size();
      if (rx < 2 || rn < 2 || x.shape[rx - 1] != n.shape[rn - 1] ||
          x.shape[rx - 2] != n.shape[rn - 2] || ir::NumElements(x.shape) == 0) {
        return std::nullopt;
      }
      if (!s->batch) {
        Factors f;
        for (size_t d = 0; d + 2 < rx; ++d) f.emplace_back(x.shape[d], s->strides[d]);
        s->batch = std::move(f);
      }
      std::vector<int64_t> strides(rn, 0);
      strides[rn - 2] = s->strides[rx - 2];
      strides[rn - 1] = s->strides[rx - 1];
      s->strides = std::move(strides);
      return s;
    }
    default:
      return std::nullopt;
  }
}

// Batch levels, innermost first: unit factors dropped, a factor merged into the level inside
// it where it continues that level's sequence; false past two levels. An empty batch is read by
// no work-item (any strides do).
bool FoldBatch(const Factors& factors, StridedOperand* out) {
  Factors levels;
  for (auto it = factors.rbegin(); it != factors.rend(); ++it) {
    const auto [size, stride] = *it;
    if (size == 0) return true;
    if (size == 1) continue;
    if (!levels.empty() && stride == levels.back().first * levels.back().second) {
      levels.back().first *= size;
    } else {
      levels.emplace_back(size, stride);
    }
  }
  if (levels.size() > 2) return false;
  if (!levels.empty()) out->batch_stride = levels[0].second;
  if (levels.size() == 2) {
    out->batch_inner = levels[0].first;
    out->group_stride = levels[1].second;
  }
  return true;
}

}  // namespace

std::optional<MatmulView> MatmulAccess(const Node& n,
                                       const std::function<bool(const Node&)>& materialized) {
  auto s = StridedOf(n, materialized);
  if (!s) return std::nullopt;
  const size_t r = n.shape.size();
  MatmulView view;
  view.base = s->base;
  StridedOperand& out = view.access;
  out.offset = s->offset;
  out.row_stride = s->strides[r - 2];
  out.col_stride = s->strides[r - 1];
  Factors factors = s->batch.value_or(Factors{});
  if (!s->batch) {
    for (size_t d = 0; d + 2 < r; ++d) factors.emplace_back(n.shape[d], s->strides[d]);
  }
  if (!FoldBatch(factors, &out)) return std::nullopt;
  return view;
}

std::optional<StridedOperand> PermutedStore(const Node& permute) {
  const size_t r = permute.shape.size();
  if (permute.op != Op::kPermute || r < 2 || permute.args[r - 1] != static_cast<int64_t>(r - 1))
    return std::nullopt;
  const std::vector<int64_t> contiguous = ContiguousStrides(permute.shape);
  std::vector<int64_t> strides(r);  // per dim of the permute's operand
  for (size_t i = 0; i < r; ++i) strides[permute.args[i]] = contiguous[i];
  const Shape& shape = permute.operands[0]->shape;
  StridedOperand out;
  out.row_stride = strides[r - 2];
  out.col_stride = 1;
  Factors factors;
  for (size_t d = 0; d + 2 < r; ++d) factors.emplace_back(shape[d], strides[d]);
  if (!FoldBatch(factors, &out)) return std::nullopt;
  return out;
}

}  // namespace lazycl::kernels
