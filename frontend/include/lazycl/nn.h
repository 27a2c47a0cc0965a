#pragma once

#include "lazycl/tensor.h"

// Neural-network building blocks, written with the ops of lazycl/ops.h and lazycl/indexing.h.
namespace lazycl::nn {

// Rows of `weight` [num_embeddings, D] looked up by integer `ids` (i32 or i64, any shape):
// the result has shape ids.shape + [D] and weight's dtype. Ids are clamped into range as
// index_select does (lazycl/indexing.h). The gradient w.r.t. weight is a deterministic
// scatter-add of the result's gradient rows (never a one-hot matmul); ids get none.
Tensor embedding(const Tensor& weight, const Tensor& ids);

}  // namespace lazycl::nn
