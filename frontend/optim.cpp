#include "lazycl/optim.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "frontend/assign.h"
#include "frontend/materialize.h"
#include "frontend/tensor_impl.h"
#include "lazycl/autograd.h"
#include "lazycl/factories.h"
#include "lazycl/ops.h"

namespace lazycl::optim {
namespace {

std::string Describe(const Tensor& t) { return t.str(); }

void CheckParams(const char* op, const std::vector<Tensor>& params) {
  if (params.empty()) base::ThrowInvalid(op, "got an empty list of parameters");
  absl::flat_hash_set<const TensorImpl*> seen;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    if (!p.defined()) base::ThrowInvalid(op, absl::StrCat("parameter ", i, " is undefined"));
    if (!is_floating(p.dtype())) {
      base::ThrowInvalid(op, absl::StrCat("parameter ", i, " is ", Describe(p),
                                          "; only floating tensors can be optimized"));
    }
    if (!p.is_leaf()) {
      base::ThrowInvalid(op, absl::StrCat("parameter ", i, " (", Describe(p),
                                          ") was computed from other tensors; only leaves can be "
                                          "optimized (use detach().requires_grad_())"));
    }
    if (p.is_placeholder()) {
      base::ThrowInvalid(op, absl::StrCat("parameter ", i, " (", Describe(p),
                                          ") is a placeholder: it has no data to update"));
    }
    if (!seen.insert(p.impl().get()).second) {
      base::ThrowInvalid(
          op, absl::StrCat("parameter ", i, " (", Describe(p), ") appears more than once"));
    }
  }
}

void CheckNonNegative(const char* op, const char* name, double v) {
  if (!(v >= 0) || !std::isfinite(v))
    base::ThrowInvalid(op, absl::StrCat(name, " must be finite and >= 0, got ", v));
}

void CheckBeta(const char* op, const char* name, double v) {
  if (!(v >= 0 && v < 1)) base::ThrowInvalid(op, absl::StrCat(name, " must be in [0, 1), got ", v));
}

// The gradient of parameter i, checked against it; undefined when it has none.
Tensor GradOf(const char* op, const Tensor& p, size_t i) {
  Tensor g = p.grad();
  if (!g.defined()) return g;
  if (g.shape() != p.shape() || g.dtype() != p.dtype() || !(g.device() == p.device())) {
    base::ThrowInvalid(op, absl::StrCat("parameter ", i, " is ", Describe(p),
                                        " but its gradient is ", Describe(g)));
  }
  return g;
}

// Computes the parameters' pending gradients first, as a graph of their own: the update graph
// then reads each parameter only elementwise, which lets it write the parameter in place (a
// backward graph reads the parameters through matmuls and views, and fused with the update it
// would keep the old values alive).
void ComputeGrads(const std::vector<Tensor>& params) {
  std::vector<TensorImpl*> grads;
  for (const Tensor& p : params) {
    if (p.impl()->grad.defined()) grads.push_back(p.impl()->grad.impl().get());
  }
  base::ThrowIfError(frontend::Materialize(grads));
}

void ZeroGrad(const std::vector<Tensor>& params) {
  for (const Tensor& p : params) p.impl()->grad = Tensor();
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : params_(std::move(params)), options_(options), momentum_(params_.size()) {
  CheckParams("SGD", params_);
  CheckNonNegative("SGD", "lr", options_.lr);
  CheckNonNegative("SGD", "momentum", options_.momentum);
  CheckNonNegative("SGD", "dampening", options_.dampening);
  CheckNonNegative("SGD", "weight_decay", options_.weight_decay);
  if (options_.nesterov && (options_.momentum <= 0 || options_.dampening != 0)) {
    base::ThrowInvalid("SGD",
                       absl::StrCat("nesterov needs momentum > 0 and dampening 0, got "
                                    "momentum ",
                                    options_.momentum, " and dampening ", options_.dampening));
  }
}

void SGD::set_lr(double lr) {
  CheckNonNegative("SGD", "lr", lr);
  options_.lr = lr;
}

void SGD::zero_grad() { ZeroGrad(params_); }

Tensor SGD::momentum_buffer(size_t i) const { return momentum_.at(i); }

void SGD::step() {
  NoGradGuard no_grad;
  const SGDOptions& o = options_;
  ComputeGrads(params_);
  std::vector<TensorImpl*> targets;
  std::vector<Tensor> values;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    Tensor g = GradOf("SGD", p, i);
    if (!g.defined()) continue;
    if (o.weight_decay != 0) g = g + p * o.weight_decay;
    if (o.momentum != 0) {
      Tensor& buf = momentum_[i];
      Tensor updated;
      if (!buf.defined()) {
        buf = zeros(p.shape(), p.dtype(), p.device());
        updated = g + buf;  // a buffer of its own holding g, as PyTorch's clone
      } else {
        updated = buf * o.momentum + g * (1 - o.dampening);
      }
      targets.push_back(buf.impl().get());
      values.push_back(updated);
      g = o.nesterov ? g + updated * o.momentum : updated;
    }
    targets.push_back(p.impl().get());
    values.push_back(p - g * o.lr);
  }
  frontend::AssignInPlace(targets, values);
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : params_(std::move(params)),
      options_(options),
      steps_(params_.size(), 0),
      m_(params_.size()),
      v_(params_.size()) {
  CheckParams("AdamW", params_);
  CheckNonNegative("AdamW", "lr", options_.lr);
  CheckBeta("AdamW", "beta1", options_.beta1);
  CheckBeta("AdamW", "beta2", options_.beta2);
  CheckNonNegative("AdamW", "eps", options_.eps);
  CheckNonNegative("AdamW", "weight_decay", options_.weight_decay);
}

void AdamW::set_lr(double lr) {
  CheckNonNegative("AdamW", "lr", lr);
  options_.lr = lr;
}

void AdamW::zero_grad() { ZeroGrad(params_); }

Tensor AdamW::exp_avg(size_t i) const { return m_.at(i); }
Tensor AdamW::exp_avg_sq(size_t i) const { return v_.at(i); }

void AdamW::step() {
  NoGradGuard no_grad;
  const AdamWOptions& o = options_;
  ++step_;
  ComputeGrads(params_);
  std::vector<TensorImpl*> targets;
  std::vector<Tensor> values;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    const Tensor g = GradOf("AdamW", p, i);
    if (!g.defined()) continue;
    const double t = static_cast<double>(++steps_[i]);
    // Host doubles, passed to the kernels as arguments: no new program as t grows.
    const double c1 = 1 - std::pow(o.beta1, t), c2 = 1 - std::pow(o.beta2, t);
    if (!m_[i].defined()) {
      m_[i] = zeros(p.shape(), p.dtype(), p.device());
      v_[i] = zeros(p.shape(), p.dtype(), p.device());
    }
    Tensor m = m_[i] * o.beta1 + g * (1 - o.beta1);
    Tensor v = v_[i] * o.beta2 + g * (1 - o.beta2) * g;
    Tensor update = (m / c1) / (sqrt(v / c2) + o.eps);
    Tensor np = p * (1 - o.lr * o.weight_decay) - update * o.lr;
    targets.insert(targets.end(), {m_[i].impl().get(), v_[i].impl().get(), p.impl().get()});
    values.insert(values.end(), {m, v, np});
  }
  frontend::AssignInPlace(targets, values);
}

}  // namespace lazycl::optim
