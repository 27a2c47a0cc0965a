// lazycl::nn (lazycl/nn.h): layers written with the public ops.
#include "lazycl/nn.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "frontend/dispatch.h"
#include "ir/shape.h"
#include "lazycl/indexing.h"
#include "lazycl/ops.h"

namespace lazycl::nn {

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  frontend::ImplOf(weight, "embedding");
  frontend::ImplOf(ids, "embedding");
  if (weight.dim() != 2) {
    base::ThrowInvalid("embedding",
                       absl::StrCat("weight must be 2-D [num_embeddings, dim], got ",
                                    dtype_name(weight.dtype()), ir::ShapeString(weight.shape())));
  }
  if (ids.dtype() != DType::i32 && ids.dtype() != DType::i64) {
    base::ThrowInvalid("embedding",
                       absl::StrCat("ids must be an integer tensor (i32 or i64), got ",
                                    dtype_name(ids.dtype()), ir::ShapeString(ids.shape())));
  }
  std::vector<int64_t> out = ids.shape();
  out.push_back(weight.shape()[1]);
  return reshape(index_select(weight, 0, reshape(ids, {ids.numel()})), out);
}

}  // namespace lazycl::nn
