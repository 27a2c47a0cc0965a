// The tape side of autograd (autograd.h): records made by ops, and the reverse walk over them.

#include "frontend/autograd.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/flat_release.h"
#include "base/status.h"
#include "frontend/dispatch.h"
#include "frontend/materialize.h"
#include "lazycl/autograd.h"
#include "lazycl/ops.h"

namespace lazycl::frontend {
namespace {

// One op: `expr` computed the output from the inputs, which it read as `boundary` (per input).
class OpGradFn : public GradFn {
 public:
  ir::NodePtr expr;
  std::vector<ir::NodePtr> boundary;
  Device device = Device::host();
  std::weak_ptr<TensorImpl> output;

  ir::NodePtr ReadNode(size_t i) const override { return boundary[i]; }

  std::vector<Tensor> Backward(const std::vector<Tensor>& output_adjoints) override {
    std::vector<Tensor> result(inputs.size());
    const Tensor& g = output_adjoints[0];
    if (!g.defined()) return result;
    // Reuse computed values: an input's current node (a buffer once computed) and the output's.
    // Every input's node is a target, so that the walk never goes below one: a detached
    // tensor's pending IR may lead to a tensor that requires grad, but no gradient flows there.
    absl::flat_hash_map<const ir::Node*, ir::NodePtr> values;
    for (size_t i = 0; i < inputs.size(); ++i) {
      ir::NodePtr now = NodeOf(*inputs[i]);  // another thread may be computing it
      if (inputs[i]->device == device && now != boundary[i]) values[boundary[i].get()] = now;
    }
    if (std::shared_ptr<TensorImpl> out = output.lock()) {
      if (ir::NodePtr now = NodeOf(*out); now != expr) values[expr.get()] = now;
    }
    std::vector<ir::NodePtr> adjoints = ir::Backprop({expr}, {NodeOf(*g.impl())}, boundary, values);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i]->requires_grad) continue;
      ir::NodePtr a = std::move(adjoints[i]);
      if (!a) continue;
      result[i] = Wrap(std::move(a), device);
      if (inputs[i]->device != device) result[i] = Transfer(result[i], inputs[i]->device);
    }
    return result;
  }
};

// A copy between devices: the adjoint goes back.
class TransferGradFn : public GradFn {
 public:
  std::vector<Tensor> Backward(const std::vector<Tensor>& output_adjoints) override {
    if (!output_adjoints[0].defined()) return {Tensor()};
    return {Transfer(output_adjoints[0], inputs[0]->device)};
  }
};

void Accumulate(Tensor& into, const Tensor& add) {
  into = into.defined() ? lazycl::add(into, add) : add;
}

std::string Describe(const TensorImpl& t) {
  return absl::StrCat(dtype_name(t.node->dtype), ir::ShapeString(t.node->shape), " on ",
                      t.device.str());
}

// The adjoint seed: grad_output, or ones for a one-element loss.
Tensor Seed(const TensorImpl& loss, const Tensor* grad_output, absl::string_view op) {
  if (!loss.requires_grad) {
    base::ThrowInvalid(
        op, absl::StrCat("the tensor (", Describe(loss),
                         ") does not require grad: none of the tensors it was computed from "
                         "requires grad (call requires_grad_() on the inputs first)"));
  }
  if (grad_output == nullptr) {
    if (ir::NumElements(loss.node->shape) != 1) {
      base::ThrowInvalid(op, absl::StrCat("the tensor (", Describe(loss),
                                          ") is not a scalar; a gradient can be implied only for a "
                                          "one-element tensor, so pass the gradient of its shape"));
    }
    return Wrap(ir::MakeConstant(1, loss.node->dtype, loss.node->shape), loss.device);
  }
  const TensorImpl& g = ImplOf(*grad_output, op);
  if (g.node->shape != loss.node->shape || g.node->dtype != loss.node->dtype) {
    base::ThrowInvalid(
        op, absl::StrCat("the gradient is ", Describe(g), " but the tensor is ", Describe(loss),
                         "; they must have the same shape and dtype"));
  }
  // Only its value: the seed never records.
  return Wrap(NodeOn(*grad_output, loss.device, op, 0), loss.device);
}

// The adjoints of everything the loss was computed from.
struct Adjoints {
  absl::flat_hash_map<const GradFn*, std::vector<Tensor>> outputs;  // per GradFn output
  absl::flat_hash_map<const TensorImpl*, Tensor> leaves;
  std::vector<const TensorImpl*> leaf_order;           // `leaves`' keys in a deterministic order
  absl::flat_hash_set<const TensorImpl*> leaves_seen;  // reached, even with no adjoint
  absl::flat_hash_set<const GradFn*> fns_seen;
};

[[noreturn]] void ThrowFreed() {
  base::ThrowInvalid("backward",
                     "the tensor's graph was freed by an earlier backward() (as PyTorch's "
                     "retain_graph=False frees it); compute it again, or use lazycl::grad(), "
                     "which keeps the graph");
}

Adjoints Propagate(const std::shared_ptr<TensorImpl>& loss, const Tensor& seed) {
  Adjoints adj;
  if (loss->graph_freed) ThrowFreed();
  if (!loss->grad_fn) {
    adj.leaves[loss.get()] = seed;
    adj.leaf_order.push_back(loss.get());
    adj.leaves_seen.insert(loss.get());
    return adj;
  }
  // Post-order over the GradFns (iterative: recorded loops can be long).
  std::vector<GradFn*> order;
  std::vector<std::pair<GradFn*, size_t>> stack = {{loss->grad_fn.get(), 0}};
  adj.fns_seen.insert(loss->grad_fn.get());
  while (!stack.empty()) {
    auto& [fn, next] = stack.back();
    if (next < fn->inputs.size()) {
      const TensorImpl& in = *fn->inputs[next++];
      if (!in.requires_grad) continue;
      if (in.graph_freed) ThrowFreed();
      if (!in.grad_fn) {
        adj.leaves_seen.insert(&in);
      } else if (adj.fns_seen.insert(in.grad_fn.get()).second) {
        stack.push_back({in.grad_fn.get(), 0});
      }
      continue;
    }
    order.push_back(fn);
    stack.pop_back();
  }
  auto outputs_of = [&](const GradFn* fn) -> std::vector<Tensor>& {
    std::vector<Tensor>& v = adj.outputs[fn];
    if (v.empty()) v.resize(fn->num_outputs());
    return v;
  };
  outputs_of(loss->grad_fn.get())[loss->grad_output] = seed;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    GradFn* fn = *it;
    const std::vector<Tensor>& outs = outputs_of(fn);
    bool any = false;
    for (const Tensor& o : outs) any = any || o.defined();
    if (!any) continue;
    std::vector<Tensor> ins = fn->Backward(outs);
    for (size_t i = 0; i < fn->inputs.size(); ++i) {
      const TensorImpl& in = *fn->inputs[i];
      if (!in.requires_grad || !ins[i].defined()) continue;
      if (in.grad_fn) {
        Accumulate(outputs_of(in.grad_fn.get())[in.grad_output], ins[i]);
      } else {
        auto [it, inserted] = adj.leaves.try_emplace(&in);
        if (inserted) adj.leaf_order.push_back(&in);
        Accumulate(it->second, ins[i]);
      }
    }
  }
  return adj;
}

}  // namespace

bool AnyRequiresGrad(std::span<const OpInput> inputs) {
  if (!is_grad_enabled()) return false;
  for (const OpInput& in : inputs) {
    if (in.tensor->impl()->requires_grad) return true;
  }
  return false;
}

void RecordOp(const std::shared_ptr<TensorImpl>& result, ir::NodePtr expr,
              std::span<const OpInput> inputs) {
  TensorImpl& out = *result;
  auto fn = std::make_shared<OpGradFn>();
  fn->output = result;
  for (const OpInput& in : inputs) {
    if (in.node == expr) {  // an identity view: give the result a node of its own
      const bool same = out.node == expr;
      expr = base::ValueOrThrow(ir::MakeReshape(expr, expr->shape));
      if (same) out.node = expr;
      break;
    }
  }
  // One input per node: x * x reads x once for its adjoint. Two tensors sharing a node is
  // avoided (identity views above, detach() below); should it happen, the one that requires
  // grad gets the adjoint.
  absl::flat_hash_map<const ir::Node*, size_t> seen;
  for (const OpInput& in : inputs) {
    auto [it, inserted] = seen.emplace(in.node.get(), fn->inputs.size());
    if (!inserted) {
      if (!fn->inputs[it->second]->requires_grad) fn->inputs[it->second] = in.tensor->impl();
      continue;
    }
    fn->inputs.push_back(in.tensor->impl());
    fn->boundary.push_back(in.node);
  }
  fn->expr = std::move(expr);
  fn->device = out.device;
  out.requires_grad = true;
  out.grad_fn = std::move(fn);
  out.grad_output = 0;
}

void RecordTransfer(TensorImpl& out, const std::shared_ptr<TensorImpl>& from) {
  auto fn = std::make_shared<TransferGradFn>();
  fn->inputs.push_back(from);
  out.requires_grad = true;
  out.grad_fn = std::move(fn);
  out.grad_output = 0;
}

void RecordOutputs(const std::vector<Tensor>& outputs, std::shared_ptr<GradFn> fn) {
  for (size_t k = 0; k < outputs.size(); ++k) {
    TensorImpl& impl = *outputs[k].impl();
    if (!is_floating(impl.node->dtype)) continue;
    impl.requires_grad = true;
    impl.grad_fn = fn;
    impl.grad_output = static_cast<int>(k);
  }
}

Tensor ZerosOn(const ir::Shape& shape, DType dtype, Device device) {
  return Wrap(ir::MakeConstant(0, dtype, shape), device);
}

}  // namespace lazycl::frontend

namespace lazycl {

TensorImpl::~TensorImpl() {
  if (grad_fn == nullptr) return;
  std::vector<std::shared_ptr<frontend::GradFn>> records;
  records.push_back(std::move(grad_fn));
  base::ReleaseFlat<TensorImpl>(records);
}

using frontend::ImplOf;

namespace {

std::vector<Tensor> Grad(const Tensor& loss, const std::vector<Tensor>& wrt,
                         const Tensor* grad_output) {
  const TensorImpl& l = ImplOf(loss, "grad");
  for (size_t i = 0; i < wrt.size(); ++i) {
    const TensorImpl& w = ImplOf(wrt[i], "grad");
    if (!w.requires_grad) {
      base::Throw(absl::InvalidArgumentError(absl::StrCat(
          "grad: wrt[", i, "] (", frontend::Describe(w),
          ") does not require grad; call requires_grad_() on it before computing the loss")));
    }
  }
  const Tensor seed = frontend::Seed(l, grad_output, "grad");
  frontend::Adjoints adj = frontend::Propagate(loss.impl(), seed);
  std::vector<Tensor> out;
  for (size_t i = 0; i < wrt.size(); ++i) {
    const TensorImpl& w = *wrt[i].impl();
    Tensor g;
    bool found = false;
    if (w.grad_fn) {
      found = adj.fns_seen.contains(w.grad_fn.get());
      auto it = adj.outputs.find(w.grad_fn.get());
      if (it != adj.outputs.end()) g = it->second[w.grad_output];
    } else {
      found = adj.leaves_seen.contains(&w);
      auto it = adj.leaves.find(&w);
      if (it != adj.leaves.end()) g = it->second;
    }
    if (!found) {
      base::Throw(absl::InvalidArgumentError(
          absl::StrCat("grad: wrt[", i, "] (", frontend::Describe(w),
                       ") is not in the graph of the loss: the loss was not computed from it")));
    }
    out.push_back(g.defined() ? g : frontend::ZerosOn(w.node->shape, w.node->dtype, w.device));
  }
  return out;
}

void Backward(const Tensor& t, const Tensor* gradient) {
  const TensorImpl& l = ImplOf(t, "backward");
  const Tensor seed = frontend::Seed(l, gradient, "backward");
  frontend::Adjoints adj = frontend::Propagate(t.impl(), seed);
  // In the order the leaves were reached, so that every step's graph has the same key.
  std::vector<TensorImpl*> computed = {const_cast<TensorImpl*>(&l)};
  for (const TensorImpl* leaf : adj.leaf_order) {
    TensorImpl& impl = const_cast<TensorImpl&>(*leaf);
    frontend::Accumulate(impl.grad, adj.leaves.at(leaf));
    computed.push_back(impl.grad.impl().get());
  }
  // backward() computes, as PyTorch's does: the tensor and the gradients, as one graph per
  // device (forward and backward fuse). Left pending, the tensor's value would keep the
  // parameters' old buffers alive into the optimizer step (which could not update them in place).
  base::ThrowIfError(frontend::Materialize(computed));
  // The record goes now (retain_graph=False), not when the last handle of `t` does.
  if (l.grad_fn != nullptr) {
    TensorImpl& root = const_cast<TensorImpl&>(l);
    root.graph_freed = true;
    root.grad_fn.reset();
  }
}

}  // namespace

std::vector<Tensor> grad(const Tensor& loss, const std::vector<Tensor>& wrt) {
  return Grad(loss, wrt, nullptr);
}
std::vector<Tensor> grad(const Tensor& loss, const std::vector<Tensor>& wrt,
                         const Tensor& grad_output) {
  return Grad(loss, wrt, &grad_output);
}

Tensor Tensor::grad() const { return ImplOf(*this, "grad").grad; }
void Tensor::backward() const { Backward(*this, nullptr); }
void Tensor::backward(const Tensor& gradient) const { Backward(*this, &gradient); }
Tensor Tensor::detach() const {
  const TensorImpl& impl = ImplOf(*this, "detach");
  // A node of its own (the same buffer, or a no-op view of the pending computation), so that a
  // record never sees the detached tensor and the original as one input. A placeholder's is a
  // view too: trace() and scan() substitute their arguments for the placeholder's node, which
  // a second buffer node of the same storage would escape (argmax in call() read the
  // placeholder: lazycl-fuzz seed 11, graph 120). The view stops the gradient in the IR too,
  // where a traced or scanned body is differentiated as a whole (ir::Backprop).
  const ir::NodePtr n = frontend::NodeOf(impl);
  return frontend::MakeTensor(n->op == ir::Op::kBuffer && !is_placeholder()
                                  ? ir::MakeBuffer(n->storage, n->dtype, n->shape)
                                  : ir::MakeStopGradient(n),
                              impl.device);
}
bool Tensor::is_leaf() const {
  const TensorImpl& impl = ImplOf(*this, "is_leaf");
  return impl.grad_fn == nullptr && !impl.graph_freed;
}

namespace {
thread_local bool grad_enabled = true;
}  // namespace

NoGradGuard::NoGradGuard() : previous_(grad_enabled) { grad_enabled = false; }
NoGradGuard::~NoGradGuard() { grad_enabled = previous_; }
bool is_grad_enabled() { return grad_enabled; }

}  // namespace lazycl
