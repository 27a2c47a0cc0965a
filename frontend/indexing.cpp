// gather, index_select, scatter_add, one_hot (lazycl/indexing.h): argument checks here, the ops
// themselves are the IR's Gather and ScatterAdd (ir/indexing.cpp).
#include "lazycl/indexing.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "frontend/dispatch.h"
#include "ir/ir.h"

namespace lazycl {
namespace {

using base::ThrowInvalid;
using base::ValueOrThrow;
using frontend::NodeOn;
using frontend::Wrap;
using ir::NodePtr;
using ir::Shape;

std::string Describe(const Tensor& t) {
  return absl::StrCat(dtype_name(t.dtype()), ir::ShapeString(t.shape()));
}

void CheckIds(const Tensor& ids, const char* op, const char* what) {
  frontend::ImplOf(ids, op);
  if (ids.dtype() != DType::i32 && ids.dtype() != DType::i64) {
    ThrowInvalid(
        op, absl::StrCat(what, " must be an integer tensor (i32 or i64), got ", Describe(ids)));
  }
}

int64_t Dim(int64_t dim, int64_t rank, const char* op) {
  if (dim < -rank || dim >= rank) {
    ThrowInvalid(op, absl::StrCat("dim ", dim, " is out of range for a tensor of rank ", rank,
                                  " (expected ", -rank, " <= dim < ", rank, ")"));
  }
  return dim < 0 ? dim + rank : dim;
}

void CheckSameRank(const Tensor& x, const Tensor& index, const char* op, const char* what) {
  if (index.dim() != x.dim()) {
    ThrowInvalid(op, absl::StrCat(what, " ", Describe(index), " must have the rank of x ",
                                  Describe(x), " (", index.dim(), " vs ", x.dim(), ")"));
  }
}

// `n` sliced to its leading `shape` (each dim at most n's); `n` itself when equal.
NodePtr Leading(NodePtr n, const Shape& shape) {
  if (n->shape == shape) return n;
  return ValueOrThrow(ir::MakeSlice(std::move(n), std::vector<int64_t>(shape.size(), 0), shape));
}

}  // namespace

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  frontend::ImplOf(x, "gather");
  CheckIds(index, "gather", "index");
  CheckSameRank(x, index, "gather", "index");
  dim = Dim(dim, x.dim(), "gather");
  const Shape xs = x.shape();
  const Shape is = index.shape();
  Shape window = xs;
  for (size_t d = 0; d < xs.size(); ++d) {
    if (static_cast<int64_t>(d) == dim) continue;
    if (is[d] > xs[d]) {
      ThrowInvalid("gather", absl::StrCat("index ", Describe(index), " is larger than x ",
                                          Describe(x), " in dim ", d, " (", is[d], " > ", xs[d],
                                          "); outside dim ", dim, " it must be at most x's"));
    }
    window[d] = is[d];
  }
  const Device device = frontend::OpDevice({&x, &index}, "gather");
  const NodePtr x0 = NodeOn(x, device, "gather", 0);
  const NodePtr i0 = NodeOn(index, device, "gather", 1);
  return Wrap(ir::MakeGather(Leading(x0, window), dim, i0), device, {{&x, x0}, {&index, i0}});
}

Tensor take_along_dim(const Tensor& x, const Tensor& index, int64_t dim) {
  return gather(x, dim, index);
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& ids) {
  frontend::ImplOf(x, "index_select");
  CheckIds(ids, "index_select", "ids");
  if (ids.dim() != 1) {
    ThrowInvalid("index_select", absl::StrCat("ids must be 1-D, got ", Describe(ids)));
  }
  if (x.dim() == 0) ThrowInvalid("index_select", "x must have at least one dim, got a scalar");
  dim = Dim(dim, x.dim(), "index_select");
  const Device device = frontend::OpDevice({&x, &ids}, "index_select");
  const NodePtr x0 = NodeOn(x, device, "index_select", 0);
  const NodePtr i0 = NodeOn(ids, device, "index_select", 1);
  Shape line(x0->shape.size(), 1);
  line[dim] = i0->shape[0];
  Shape out = x0->shape;
  out[dim] = i0->shape[0];
  NodePtr index = ValueOrThrow(ir::MakeReshape(i0, line));
  if (index->shape != out) index = ValueOrThrow(ir::MakeExpand(std::move(index), out));
  return Wrap(ir::MakeGather(x0, dim, std::move(index)), device, {{&x, x0}, {&ids, i0}});
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  frontend::ImplOf(x, "scatter_add");
  frontend::ImplOf(src, "scatter_add");
  CheckIds(index, "scatter_add", "index");
  CheckSameRank(x, index, "scatter_add", "index");
  CheckSameRank(x, src, "scatter_add", "src");
  dim = Dim(dim, x.dim(), "scatter_add");
  if (x.dtype() != src.dtype() || x.dtype() == DType::boolean) {
    ThrowInvalid("scatter_add", absl::StrCat("x ", Describe(x), " and src ", Describe(src),
                                             " must have one numeric dtype (not bool)"));
  }
  const Shape xs = x.shape();
  const Shape is = index.shape();
  const Shape ss = src.shape();
  for (size_t d = 0; d < xs.size(); ++d) {
    if (is[d] > ss[d] || (static_cast<int64_t>(d) != dim && is[d] > xs[d])) {
      ThrowInvalid(
          "scatter_add",
          absl::StrCat("index ", Describe(index), " is larger than ", is[d] > ss[d] ? "src " : "x ",
                       is[d] > ss[d] ? Describe(src) : Describe(x), " in dim ", d,
                       "; index must be at most src in every dim and at "
                       "most x outside dim ",
                       dim));
    }
  }
  const Device device = frontend::OpDevice({&x, &index, &src}, "scatter_add");
  const NodePtr x0 = NodeOn(x, device, "scatter_add", 0);
  const NodePtr i0 = NodeOn(index, device, "scatter_add", 1);
  const NodePtr s0 = NodeOn(src, device, "scatter_add", 2);
  return Wrap(ir::MakeScatterAdd(x0, dim, i0, Leading(s0, is)), device,
              {{&x, x0}, {&index, i0}, {&src, s0}});
}

Tensor one_hot(const Tensor& ids, int64_t classes) {
  CheckIds(ids, "one_hot", "ids");
  if (classes < 0) {
    ThrowInvalid("one_hot", absl::StrCat("classes must be >= 0, got ", classes));
  }
  const Device device = frontend::OpDevice({&ids}, "one_hot");
  const NodePtr i0 = NodeOn(ids, device, "one_hot", 0);
  Shape out = i0->shape;
  out.push_back(classes);
  if (absl::Status s = ir::ValidateShape(out, "one_hot"); !s.ok()) base::Throw(s);
  Shape column = i0->shape;
  column.push_back(1);
  NodePtr id = i0;
  if (id->dtype != DType::i64) id = ValueOrThrow(ir::MakeCast(std::move(id), DType::i64));
  id = ValueOrThrow(ir::MakeExpand(ValueOrThrow(ir::MakeReshape(std::move(id), column)), out));
  Shape row(out.size(), 1);
  row.back() = classes;
  NodePtr cls = ValueOrThrow(ir::MakeReshape(ir::MakeIota(DType::i64, classes), row));
  if (cls->shape != out) cls = ValueOrThrow(ir::MakeExpand(std::move(cls), out));
  NodePtr eq = ValueOrThrow(ir::MakeBinary(ir::Op::kEq, std::move(id), std::move(cls)));
  return Wrap(ir::MakeCast(std::move(eq), DType::i64), device, {{&ids, i0}});
}

}  // namespace lazycl
