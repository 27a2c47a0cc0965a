#pragma once

#include <cstdint>
#include <optional>

#include "lazycl/tensor.h"

// Neural-network building blocks, written with the ops of lazycl/ops.h and lazycl/indexing.h.
namespace lazycl::nn {

// Rows of `weight` [num_embeddings, D] looked up by integer `ids` (i32 or i64, any shape):
// the result has shape ids.shape + [D] and weight's dtype. Ids are clamped into range as
// index_select does (lazycl/indexing.h). The gradient w.r.t. weight is a deterministic
// scatter-add of the result's gradient rows (never a one-hot matmul); ids get none.
Tensor embedding(const Tensor& weight, const Tensor& ids);

// x @ weight^T + bias, as torch.nn.functional.linear: weight [out, in], bias [out] or undefined,
// x [..., in] -> [..., out].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

// Normalisation over the last dim, as PyTorch's with normalized_shape = [x.size(-1)]:
// rms_norm: x / sqrt(mean(x^2) + eps) * weight; layer_norm: (x - mean) / sqrt(var + eps) *
// weight + bias (biased variance). weight and bias are [x.size(-1)], or undefined for none.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6);
Tensor layer_norm(const Tensor& x, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

// The mean over the rows whose label is not `ignore_index` of -log_softmax(logits)[label], as
// torch.nn.functional.cross_entropy with integer class labels: logits [N, C] and labels [N]
// (i32 or i64), or logits [N, C, d...] and labels [N, d...]. A label outside [0, C) other than
// ignore_index is clamped into range, as gather does (the device does not stop to check
// it); when every label is ignored the loss is NaN, as in PyTorch.
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, int64_t ignore_index = -100);

// softmax(q k^T * scale [+ causal mask]) v, as torch.nn.functional.scaled_dot_product_attention
// without dropout: q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev]; scale defaults
// to 1 / sqrt(E); causal masks key j for query i when j > i (aligned at the top left, as
// PyTorch's is_causal).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    bool causal = false, std::optional<double> scale = {});

// x with each element zeroed with probability p and the rest scaled by 1 / (1 - p), from a
// counter-based generator seeded with `seed` (the same mask on every device for one seed; the
// mask is made on the host and uploaded for now). p must be in [0, 1].
Tensor dropout(const Tensor& x, double p, uint64_t seed);

}  // namespace lazycl::nn
