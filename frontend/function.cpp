#include "lazycl/function.h"

#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "frontend/autograd.h"
#include "frontend/captures.h"
#include "frontend/dispatch.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_scope.h"
#include "frontend/user_code.h"
#include "ir/ir.h"
#include "ir/post_order.h"
#include "lazycl/autograd.h"
#include "lazycl/env.h"
#include "lazycl/factories.h"
#include "runtime/executor.h"

namespace lazycl {

using base::Throw;

// The traced form of a function. The placeholders keep their (declared, never allocated)
// buffers alive so that the traced IR stays valid; the outputs are IR over them.
struct Function::State {
  std::vector<TensorSpec> specs;
  Device device = Device::host();
  std::vector<ir::NodePtr> placeholders;  // per argument
  std::vector<Tensor> outputs;            // as traced
  std::vector<int> used;
  // Closure conversion: tensors the function captured (read without taking them as arguments)
  // that require grad, and the node the traced IR reads for each. They are implicit inputs of
  // every call's gradient record, after the arguments (frontend/captures.h).
  std::vector<std::shared_ptr<TensorImpl>> captures;
  std::vector<ir::NodePtr> capture_nodes;
  // The gradient, traced on first use (autograd): see MakeBackward.
  mutable std::once_flag backward_once;
  mutable std::unique_ptr<Function> backward;

  // The outputs' nodes with their constant subexpressions (a model's rotary tables) folded
  // into buffers, at the first call outside a trace on an OpenCL device (runtime::FoldOnce):
  // every call rebuilds the nodes between the arguments and the outputs, and without this it
  // would rebuild them once more, after each run's constant folding (a traced char-LM forward:
  // a quarter of a token's host time).
  std::vector<ir::NodePtr> Roots() const {
    std::lock_guard<std::mutex> lock(fold_mu);
    if (folded.empty()) {
      std::vector<ir::NodePtr> roots;
      for (const Tensor& out : outputs) roots.push_back(frontend::NodeOf(*out.impl()));
      if (!device.is_opencl() || frontend::TraceScope::active()) return roots;
      absl::StatusOr<std::vector<ir::NodePtr>> done = runtime::FoldOnce(device.index(), roots);
      // Folding is an optimisation: a value it could not compute stays in the graph, whose
      // run reports the error if it has one.
      folded = done.ok() ? *std::move(done) : std::move(roots);
    }
    return folded;
  }
  mutable std::mutex fold_mu;
  mutable std::vector<ir::NodePtr> folded;
};

namespace {

std::string SpecString(const std::vector<int64_t>& shape, DType dtype) {
  return absl::StrCat(dtype_name(dtype), ir::ShapeString(shape));
}

// The storages of every Buffer leaf that `roots` read.
absl::flat_hash_set<const ir::Storage*> LeafStorages(const std::vector<const ir::Node*>& roots) {
  absl::flat_hash_set<const ir::Storage*> storages;
  for (const ir::Node* n : ir::PostOrder(roots)) {
    if (n->op == ir::Op::kBuffer) storages.insert(n->storage.get());
  }
  return storages;
}

// The gradient of a traced function is itself a traced Function, traced once per Function:
// arguments (the forward's arguments, then one cotangent per floating output) -> one gradient
// per differentiable argument (used and floating), then one per capture. It is the VJP
// (Backprop) of the forward's IR, so arguments it does not need are pruned like any other, and
// unused forward arguments are not among its parameters.
std::vector<int> DifferentiableArgs(const Function::State& s) {
  std::vector<int> out;
  for (int i : s.used) {
    if (is_floating(s.specs[i].dtype)) out.push_back(i);
  }
  return out;
}

std::vector<int> FloatingOutputs(const Function::State& s) {
  std::vector<int> out;
  for (size_t k = 0; k < s.outputs.size(); ++k) {
    if (is_floating(s.outputs[k].dtype())) out.push_back(static_cast<int>(k));
  }
  return out;
}

const Function& BackwardOf(const std::shared_ptr<const Function::State>& state) {
  std::call_once(state->backward_once, [&] {
    const Function::State* s = state.get();
    std::vector<TensorSpec> specs = s->specs;
    const std::vector<int> outs = FloatingOutputs(*s);
    for (int k : outs) specs.push_back({s->outputs[k].shape(), s->outputs[k].dtype()});
    Fn bwd = [s, outs](const std::vector<Tensor>& in) {
      const size_t n = s->specs.size();
      absl::flat_hash_map<const ir::Node*, ir::NodePtr> replace;
      for (int i : s->used) replace[s->placeholders[i].get()] = frontend::NodeOf(*in[i].impl());
      std::vector<ir::NodePtr> forward;
      for (const Tensor& out : s->outputs) forward.push_back(frontend::NodeOf(*out.impl()));
      forward = ir::Substitute(forward, replace);
      std::vector<ir::NodePtr> roots, seeds, targets;
      for (size_t j = 0; j < outs.size(); ++j) {
        roots.push_back(forward[outs[j]]);
        seeds.push_back(frontend::NodeOf(*in[n + j].impl()));
      }
      const std::vector<int> diff = DifferentiableArgs(*s);
      for (int i : diff) targets.push_back(frontend::NodeOf(*in[i].impl()));
      // Captures are read by the forward IR as they were at tracing (Substitute keeps what
      // reads no placeholder).
      for (const ir::NodePtr& c : s->capture_nodes) targets.push_back(c);
      std::vector<ir::NodePtr> adjoints = ir::Backprop(roots, seeds, targets, {});
      std::vector<Tensor> grads;
      for (size_t t = 0; t < diff.size(); ++t) {
        grads.push_back(adjoints[t] ? frontend::Wrap(adjoints[t], s->device)
                                    : frontend::ZerosOn(s->specs[diff[t]].shape,
                                                        s->specs[diff[t]].dtype, s->device));
      }
      for (size_t c = 0; c < s->capture_nodes.size(); ++c) {
        const ir::NodePtr& adjoint = adjoints[diff.size() + c];
        const ir::Node& node = *s->capture_nodes[c];
        grads.push_back(adjoint ? frontend::Wrap(adjoint, s->device)
                                : frontend::ZerosOn(node.shape, node.dtype, s->device));
      }
      return grads;
    };
    state->backward = std::make_unique<Function>(trace(std::move(bwd), specs, s->device));
  });
  return *state->backward;
}

// A call of a traced function: its backward calls the traced gradient.
class CallGradFn : public frontend::GradFn {
 public:
  std::shared_ptr<const Function::State> state;
  std::vector<ir::NodePtr> arg_nodes;  // per argument: the node the call read (null: unused)

  std::vector<Tensor> Backward(const std::vector<Tensor>& output_adjoints) override {
    const Function::State& s = *state;
    const Function& bwd = BackwardOf(state);
    std::vector<Tensor> args;
    for (size_t i = 0; i < s.specs.size(); ++i) {
      // A used argument is read as the call read it (on the device), or as its computed
      // buffer if it has one there now; an unused one is a Constant that nothing reads.
      ir::NodePtr node = arg_nodes[i];
      if (node && inputs[i]->device == s.device) node = frontend::NodeOf(*inputs[i]);
      if (!node) node = ir::MakeConstant(0, s.specs[i].dtype, s.specs[i].shape);
      args.push_back(frontend::MakeTensor(std::move(node), s.device));
    }
    for (int k : FloatingOutputs(s)) {
      const Tensor& g = output_adjoints[k];
      args.push_back(g.defined()
                         ? g
                         : frontend::ZerosOn(s.outputs[k].shape(), s.outputs[k].dtype(), s.device));
    }
    std::vector<Tensor> grads = bwd(args);
    std::vector<Tensor> result(inputs.size());
    const std::vector<int> diff = DifferentiableArgs(s);
    for (size_t t = 0; t < diff.size(); ++t) {
      const int i = diff[t];
      if (!inputs[i]->requires_grad) continue;
      result[i] = inputs[i]->device == s.device ? grads[t] : grads[t].to(inputs[i]->device);
    }
    // The captures follow the arguments, in inputs and in the backward's results.
    for (size_t c = 0; c < s.captures.size(); ++c) {
      const size_t i = s.specs.size() + c;
      if (!inputs[i]->requires_grad) continue;
      const Tensor& g = grads[diff.size() + c];
      result[i] = inputs[i]->device == s.device ? g : g.to(inputs[i]->device);
    }
    return result;
  }
  int num_outputs() const override { return static_cast<int>(state->outputs.size()); }
};

}  // namespace

Function trace(Fn fn, std::vector<TensorSpec> args, Device device) {
  if (!device.is_opencl()) {
    base::Throw(absl::InvalidArgumentError(
        absl::StrCat("trace: functions are traced for an OpenCL device, got ", device.str(),
                     "; host tensors run eagerly without tracing")));
  }
  if (!fn) base::Throw(absl::InvalidArgumentError("trace: the function is empty"));
  auto state = std::make_shared<Function::State>();
  state->specs = std::move(args);
  state->device = device;
  std::vector<Tensor> inputs;
  {
    frontend::TraceScope scope;
    for (const TensorSpec& spec : state->specs) {
      inputs.push_back(placeholder(spec.shape, spec.dtype, device));
      state->placeholders.push_back(inputs.back().impl()->node);
    }
    state->outputs =
        frontend::RunUserCode("trace: the traced function", [&] { return fn(inputs); });
  }
  std::vector<const ir::Node*> roots;
  for (size_t i = 0; i < state->outputs.size(); ++i) {
    const Tensor& out = state->outputs[i];
    if (!out.defined())
      base::Throw(absl::InvalidArgumentError(absl::StrCat("trace: output ", i, " is undefined")));
    roots.push_back(frontend::NodeOf(*out.impl()).get());
  }
  frontend::Captures captures = frontend::FindCaptures(state->outputs, state->placeholders);
  state->captures = std::move(captures.tensors);
  state->capture_nodes = std::move(captures.nodes);
  const auto read = LeafStorages(roots);
  for (size_t i = 0; i < state->placeholders.size(); ++i) {
    if (read.contains(state->placeholders[i]->storage.get()))
      state->used.push_back(static_cast<int>(i));
  }
  return Function(std::move(state));
}

std::vector<Tensor> Function::operator()(const std::vector<Tensor>& args) const {
  const State& s = *state_;
  if (args.size() != s.specs.size()) {
    base::Throw(absl::InvalidArgumentError(
        absl::StrCat("Function: expected ", s.specs.size(), " arguments, got ", args.size())));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const TensorImpl& impl = frontend::ImplOf(args[i], "Function");
    const TensorSpec& spec = s.specs[i];
    const ir::NodePtr node = frontend::NodeOf(impl);
    if (node->shape != spec.shape || node->dtype != spec.dtype) {
      base::Throw(absl::InvalidArgumentError(
          absl::StrCat("Function: argument ", i, " is ", SpecString(node->shape, node->dtype),
                       ", expected ", SpecString(spec.shape, spec.dtype))));
    }
  }
  // Only used arguments are substituted, so unused ones are never read nor uploaded.
  absl::flat_hash_map<const ir::Node*, ir::NodePtr> replace;
  for (int i : s.used) {
    replace[s.placeholders[i].get()] = frontend::NodeOn(args[i], s.device, "Function", i);
  }
  std::vector<ir::NodePtr> substituted = ir::Substitute(s.Roots(), replace);
  bool record = false;
  for (const Tensor& a : args) record = record || a.impl()->requires_grad;
  for (const auto& c : s.captures) record = record || c->requires_grad;
  record = record && is_grad_enabled();
  std::vector<Tensor> results;
  for (size_t k = 0; k < substituted.size(); ++k) {
    ir::NodePtr node = substituted[k];
    // A result that is an argument (or another result) gets a node of its own, so that no two
    // tensors share a node in a gradient record.
    if (record) node = base::ValueOrThrow(ir::MakeReshape(node, node->shape));
    results.push_back(frontend::MakeTensor(std::move(node), s.outputs[k].device()));
  }
  if (record) {
    auto fn = std::make_shared<CallGradFn>();
    fn->state = state_;
    for (size_t i = 0; i < args.size(); ++i) {
      fn->inputs.push_back(args[i].impl());
      auto it = replace.find(s.placeholders[i].get());
      fn->arg_nodes.push_back(it == replace.end() ? nullptr : it->second);
    }
    for (const auto& c : s.captures) fn->inputs.push_back(c);
    frontend::RecordOutputs(results, std::move(fn));
  }
  return results;
}

std::vector<int> Function::used_arguments() const { return state_->used; }
int Function::num_parameters() const { return static_cast<int>(state_->used.size()); }
const std::vector<TensorSpec>& Function::arguments() const { return state_->specs; }
Device Function::device() const { return state_->device; }

std::vector<Tensor> call(Fn fn, const std::vector<Tensor>& args) {
  std::vector<const Tensor*> ptrs;
  std::vector<TensorSpec> specs;
  for (const Tensor& a : args) {
    const TensorImpl& impl = frontend::ImplOf(a, "call");
    ptrs.push_back(&a);
    const ir::NodePtr node = frontend::NodeOf(impl);
    specs.push_back({node->shape, node->dtype});
  }
  Device device = frontend::OpDevice(ptrs, "call");
  if (device.is_host()) device = default_env().device();
  return trace(std::move(fn), std::move(specs), device)(args);
}

}  // namespace lazycl
