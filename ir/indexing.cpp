// Builders of the data-dependent indexing ops (ir.h): Gather and ScatterAdd.
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "ir/ir.h"

namespace lazycl::ir {
namespace {

bool IsIndexDType(DType d) { return d == DType::i32 || d == DType::i64; }

absl::Status CheckIndex(const char* op, const Node& x, int64_t dim, const Node& index) {
  if (!IsIndexDType(index.dtype)) {
    return base::InvalidArgument(op,
                                 absl::StrCat("index must be an integer tensor (i32 or i64), got ",
                                              dtype_name(index.dtype), ShapeString(index.shape)));
  }
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (static_cast<int64_t>(index.shape.size()) != rank) {
    return base::InvalidArgument(
        op, absl::StrCat("index ", ShapeString(index.shape), " must have the rank of x ",
                         ShapeString(x.shape), " (", index.shape.size(), " vs ", rank, ")"));
  }
  if (dim < 0 || dim >= rank) {
    return base::InvalidArgument(
        op, absl::StrCat("dim ", dim, " is out of range for ", ShapeString(x.shape)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<NodePtr> MakeGather(NodePtr x, int64_t dim, NodePtr index) {
  if (absl::Status s = CheckIndex("gather", *x, dim, *index); !s.ok()) return s;
  for (size_t d = 0; d < x->shape.size(); ++d) {
    if (static_cast<int64_t>(d) != dim && index->shape[d] != x->shape[d]) {
      return base::InvalidArgument(
          "gather",
          absl::StrCat("index ", ShapeString(index->shape), " and x ", ShapeString(x->shape),
                       " differ in dim ", d, " (not dim ", dim, ")"));
    }
  }
  if (x->shape[dim] == 0 && NumElements(index->shape) > 0) {
    return base::InvalidArgument("gather", absl::StrCat("cannot gather ", ShapeString(index->shape),
                                                        " elements from the empty dim ", dim,
                                                        " of ", ShapeString(x->shape)));
  }
  Node n;
  n.op = Op::kGather;
  n.dtype = x->dtype;
  n.shape = index->shape;
  n.args = {dim};
  n.operands.push_back(std::move(x));
  n.operands.push_back(std::move(index));
  return FinishNode(std::move(n));
}

absl::StatusOr<NodePtr> MakeScatterAdd(NodePtr x, int64_t dim, NodePtr index, NodePtr src) {
  if (absl::Status s = CheckIndex("scatter_add", *x, dim, *index); !s.ok()) return s;
  if (src->shape != index->shape) {
    return base::InvalidArgument("scatter_add",
                                 absl::StrCat("src ", ShapeString(src->shape), " and index ",
                                              ShapeString(index->shape), " must have one shape"));
  }
  for (size_t d = 0; d < x->shape.size(); ++d) {
    if (static_cast<int64_t>(d) != dim && index->shape[d] > x->shape[d]) {
      return base::InvalidArgument(
          "scatter_add",
          absl::StrCat("index ", ShapeString(index->shape), " is larger than x ",
                       ShapeString(x->shape), " in dim ", d, " (not dim ", dim, ")"));
    }
  }
  if (src->dtype != x->dtype || x->dtype == DType::boolean) {
    return base::InvalidArgument(
        "scatter_add", absl::StrCat("expected x and src of one numeric dtype, got ",
                                    dtype_name(x->dtype), " and ", dtype_name(src->dtype)));
  }
  Node n;
  n.op = Op::kScatterAdd;
  n.dtype = x->dtype;
  n.shape = x->shape;
  n.args = {dim};
  n.operands.push_back(std::move(x));
  n.operands.push_back(std::move(index));
  n.operands.push_back(std::move(src));
  return FinishNode(std::move(n));
}

}  // namespace lazycl::ir
