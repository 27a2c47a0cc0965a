// lazycl::nn's layers (lazycl/nn.h), composed from the public ops: each fuses like any other
// chain of ops (a norm is one row kernel, attention two matmuls around a softmax).
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "frontend/dispatch.h"
#include "ir/shape.h"
#include "lazycl/factories.h"
#include "lazycl/indexing.h"
#include "lazycl/nn.h"
#include "lazycl/ops.h"

namespace lazycl::nn {
namespace {

std::string Spec(const Tensor& t) {
  return absl::StrCat(dtype_name(t.dtype()), ir::ShapeString(t.shape()));
}

void NeedFloating(const Tensor& t, const char* op, const char* what) {
  if (!is_floating(t.dtype())) {
    base::ThrowInvalid(op, absl::StrCat(what, " must be floating, got ", Spec(t)));
  }
}

// weight (or bias) must be undefined or [features].
void NeedFeatureVector(const Tensor& w, int64_t features, const char* op, const char* what) {
  if (!w.defined()) return;
  frontend::ImplOf(w, op);
  if (w.dim() != 1 || w.size(0) != features) {
    base::ThrowInvalid(
        op, absl::StrCat(what, " must be [", features, "] (the last dim of x), got ", Spec(w)));
  }
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  frontend::ImplOf(x, "linear");
  frontend::ImplOf(weight, "linear");
  if (weight.dim() != 2 || x.dim() < 1 || x.size(-1) != weight.size(1)) {
    base::ThrowInvalid("linear", absl::StrCat("x ", Spec(x), " and weight ", Spec(weight),
                                              " do not fit: expected x [..., in] and weight "
                                              "[out, in]"));
  }
  NeedFeatureVector(bias, weight.size(0), "linear", "bias");
  Tensor x2 = x.dim() == 1 ? unsqueeze(x, 0) : x;
  Tensor y = matmul(x2, transpose(weight, 0, 1));
  if (x.dim() == 1) y = squeeze(y, 0);
  return bias.defined() ? y + bias : y;
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  frontend::ImplOf(x, "rms_norm");
  NeedFloating(x, "rms_norm", "x");
  if (x.dim() < 1) base::ThrowInvalid("rms_norm", "x must have at least one dim, got a scalar");
  NeedFeatureVector(weight, x.size(-1), "rms_norm", "weight");
  if (!(eps >= 0)) base::ThrowInvalid("rms_norm", absl::StrCat("eps must be >= 0, got ", eps));
  Tensor y = x * rsqrt(mean(x * x, {-1}, true) + eps);
  return weight.defined() ? y * weight : y;
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  frontend::ImplOf(x, "layer_norm");
  NeedFloating(x, "layer_norm", "x");
  if (x.dim() < 1) base::ThrowInvalid("layer_norm", "x must have at least one dim, got a scalar");
  NeedFeatureVector(weight, x.size(-1), "layer_norm", "weight");
  NeedFeatureVector(bias, x.size(-1), "layer_norm", "bias");
  if (!(eps >= 0)) base::ThrowInvalid("layer_norm", absl::StrCat("eps must be >= 0, got ", eps));
  Tensor centered = x - mean(x, {-1}, true);
  Tensor y = centered * rsqrt(mean(centered * centered, {-1}, true) + eps);
  if (weight.defined()) y = y * weight;
  return bias.defined() ? y + bias : y;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels, int64_t ignore_index) {
  frontend::ImplOf(logits, "cross_entropy");
  frontend::ImplOf(labels, "cross_entropy");
  NeedFloating(logits, "cross_entropy", "logits");
  if (labels.dtype() != DType::i32 && labels.dtype() != DType::i64) {
    base::ThrowInvalid(
        "cross_entropy",
        absl::StrCat("labels must be integer class indices (i32 or i64), got ", Spec(labels),
                     "; for probabilities, compute "
                     "-sum(p * log_softmax(logits, 1))"));
  }
  // labels: logits' shape without the class dim (dim 1).
  std::vector<int64_t> want = logits.shape();
  if (logits.dim() >= 2) want.erase(want.begin() + 1);
  if (logits.dim() < 2 || labels.shape() != want) {
    base::ThrowInvalid("cross_entropy",
                       absl::StrCat("logits ", Spec(logits), " and labels ", Spec(labels),
                                    " do not fit: expected logits [N, C, d...] and labels [N, "
                                    "d...] (here ",
                                    ir::ShapeString(want), ")"));
  }
  const Tensor log_p = log_softmax(logits, 1);
  const Tensor keep = ne(labels, static_cast<double>(ignore_index));
  // Ignored rows read class 0 (any in-range class would do) and are masked out.
  const Tensor safe = where(keep, labels, 0.0);
  const Tensor picked = squeeze(gather(log_p, 1, unsqueeze(cast(safe, DType::i64), 1)), 1);
  const Tensor kept = cast(keep, logits.dtype());
  return -sum(picked * kept) / sum(kept);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    std::optional<double> scale) {
  for (const Tensor* t : {&q, &k, &v}) {
    frontend::ImplOf(*t, "scaled_dot_product_attention");
    NeedFloating(*t, "scaled_dot_product_attention", "q, k and v");
  }
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2 || q.size(-1) != k.size(-1) ||
      k.size(-2) != v.size(-2)) {
    base::ThrowInvalid("scaled_dot_product_attention",
                       absl::StrCat("q ", Spec(q), ", k ", Spec(k), " and v ", Spec(v),
                                    " do not fit: expected q [..., L, E], k [..., S, E], v [..., "
                                    "S, Ev]"));
  }
  const double s = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor scores = matmul(q, transpose(k, -2, -1)) * s;
  if (causal) {
    const int64_t l = q.size(-2), n = k.size(-2);
    const Device d = scores.device();
    const Tensor row = unsqueeze(arange(l, DType::i32, d), 1);
    const Tensor col = unsqueeze(arange(n, DType::i32, d), 0);
    scores = where(le(col, row), scores, -INFINITY);
  }
  return matmul(softmax(scores, -1), v);
}

Tensor dropout(const Tensor& x, double p, uint64_t seed) {
  frontend::ImplOf(x, "dropout");
  NeedFloating(x, "dropout", "x");
  if (!(p >= 0 && p <= 1)) {
    base::ThrowInvalid("dropout", absl::StrCat("p must be in [0, 1], got ", p));
  }
  if (p == 0) return x;
  if (p == 1) return x * 0.0;
  const Tensor u = rand(x.shape(), seed, 0, 1, DType::f32, x.device());
  const Tensor keep = ge(u, p);
  return where(keep, x * (1.0 / (1.0 - p)), 0.0);
}

}  // namespace lazycl::nn
