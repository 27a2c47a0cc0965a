#include "kernels/views.h"

#include <algorithm>
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

struct Strided {
  const Node* base = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> strides;
};

// How `n` reads memory when it is a chain of strided views over a materialized node.
std::optional<Strided> StridedOf(const Node& n,
                                 const std::function<bool(const Node&)>& materialized) {
  if (materialized(n)) return Strided{&n, 0, ContiguousStrides(n.shape)};
  const Node& x = n.operands.empty() ? n : *n.operands[0];
  switch (n.op) {
    case Op::kPermute: {
      auto s = StridedOf(x, materialized);
      if (!s) return std::nullopt;
      std::vector<int64_t> strides(n.shape.size());
      for (size_t d = 0; d < strides.size(); ++d) strides[d] = s->strides[n.args[d]];
      s->strides = std::move(strides);
      return s;
    }
    case Op::kExpand: {
      auto s = StridedOf(x, materialized);
      if (!s) return std::nullopt;
      for (size_t d = 0; d < n.shape.size(); ++d) {
        if (x.shape[d] == 1) s->strides[d] = 0;
      }
      return s;
    }
    case Op::kSlice: {
      auto s = StridedOf(x, materialized);
      if (!s) return std::nullopt;
      for (size_t d = 0; d < n.shape.size(); ++d) s->offset += n.args[d] * s->strides[d];
      return s;
    }
    case Op::kReshape: {
      auto s = StridedOf(x, materialized);
      if (!s || s->strides != ContiguousStrides(x.shape)) return std::nullopt;
      s->strides = ContiguousStrides(n.shape);
      return s;
    }
    default:
      return std::nullopt;
  }
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
  // Batch dims of size > 1 must satisfy stride[d] == batch_stride * (batch elements inside d).
  int64_t inner = 1;
  bool have = false;
  for (int d = static_cast<int>(r) - 3; d >= 0; --d) {
    if (n.shape[d] != 1) {
      if (!have) {
        out.batch_stride = s->strides[d] / inner;
        if (out.batch_stride * inner != s->strides[d]) return std::nullopt;
        have = true;
      } else if (s->strides[d] != out.batch_stride * inner) {
        return std::nullopt;
      }
    }
    inner *= std::max<int64_t>(n.shape[d], 1);
  }
  return view;
}

}  // namespace lazycl::kernels
