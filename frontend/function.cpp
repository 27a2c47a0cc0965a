#include "lazycl/function.h"

#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/metrics_registry.h"
#include "base/status.h"
#include "frontend/autograd.h"
#include "frontend/captures.h"
#include "frontend/deferred.h"
#include "frontend/dispatch.h"
#include "frontend/tensor_impl.h"
#include "frontend/trace_scope.h"
#include "frontend/user_code.h"
#include "ir/ir.h"
#include "ir/post_order.h"
#include "lazycl/autograd.h"
#include "lazycl/env.h"
#include "lazycl/factories.h"
#include "runtime/compiled_graph.h"
#include "runtime/devices.h"
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

  // The outputs' nodes (Roots) that are not Buffer leaves, compiled once
  // (runtime::CompiledGraph) by the first call that runs (see CallCompiled); a failure is kept
  // and every run reports it, as every run of a graph that fails to compile would.
  struct Compiled {
    std::vector<ir::NodePtr> roots;  // Roots()
    // Per output: its index among the graph's outputs (the distinct roots that are not Buffer
    // leaves), or -1 for a leaf (an argument, a captured or folded buffer, returned as it is).
    std::vector<int> graph_output;
    std::vector<ir::NodePtr> graph_roots;
    // The buffers the graph reads besides the arguments (captured or folded values), whose
    // deferred work a call's run does first.
    std::vector<std::shared_ptr<ir::Storage>> leaf_storages;
    // Made by the first run; null until then, and where every output is a leaf.
    std::shared_ptr<runtime::CompiledGraph> graph;
    absl::Status status;  // of making it
    bool made = false;
  };
  // The roots and which of them a call computes; on an OpenCL device, outside a trace.
  Compiled& GetCompiled() const {
    std::lock_guard<std::mutex> lock(compiled_mu);
    if (compiled == nullptr) {
      auto c = std::make_unique<Compiled>();
      c->roots = Roots();
      absl::flat_hash_map<const ir::Node*, int> seen;
      for (const ir::NodePtr& root : c->roots) {
        if (root->op == ir::Op::kBuffer) {
          c->graph_output.push_back(-1);
          continue;
        }
        auto [it, inserted] = seen.emplace(root.get(), static_cast<int>(c->graph_roots.size()));
        if (inserted) c->graph_roots.push_back(root);
        c->graph_output.push_back(it->second);
      }
      absl::flat_hash_set<const ir::Storage*> arguments;
      for (const ir::NodePtr& p : placeholders) arguments.insert(p->storage.get());
      for (const ir::Node* n : ir::PostOrder(c->graph_roots)) {
        if (n->op == ir::Op::kBuffer && !arguments.contains(n->storage.get()))
          c->leaf_storages.push_back(n->storage);
      }
      compiled = std::move(c);
    }
    return *compiled;
  }
  // The compiled graph (made at the first run), or the error of making it.
  absl::StatusOr<std::shared_ptr<runtime::CompiledGraph>> Graph() const {
    Compiled& c = GetCompiled();
    std::lock_guard<std::mutex> lock(compiled_mu);
    if (!c.made) {
      absl::StatusOr<std::shared_ptr<runtime::CompiledGraph>> graph =
          runtime::CompiledGraph::Make(device.index(), c.graph_roots, placeholders);
      if (graph.ok()) {
        c.graph = *std::move(graph);
      } else {
        c.status = graph.status();
      }
      c.made = true;
    }
    if (!c.status.ok()) return c.status;
    return c.graph;
  }
  mutable std::mutex compiled_mu;
  mutable std::unique_ptr<Compiled> compiled;
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

namespace {

// The deferred run of a compiled call (its Producer): the arguments computed (each pending one
// keeps its value for whoever reads it next, ir::NodeMemo), then the compiled graph on their
// buffers, into the declared results that someone still holds.
absl::Status RunCompiledCall(const Function::State& s, const std::vector<ir::NodePtr>& arg_nodes,
                             const std::vector<std::weak_ptr<ir::Storage>>& results) {
  absl::StatusOr<std::shared_ptr<runtime::CompiledGraph>> graph = s.Graph();
  if (!graph.ok()) return graph.status();
  const int device = s.device.index();
  std::vector<std::shared_ptr<ir::Storage>> inputs(arg_nodes.size());
  std::vector<ir::NodePtr> pending;  // distinct: one tensor may be passed twice
  absl::flat_hash_map<const ir::Node*, size_t> pending_index;
  for (size_t i = 0; i < arg_nodes.size(); ++i) {
    const ir::NodePtr& node = arg_nodes[i];
    if (node == nullptr) continue;  // unused
    if (node->op == ir::Op::kBuffer) {
      if (absl::Status st = runtime::PrepareLeaf(*node); !st.ok()) return st;
      inputs[i] = node->storage;
    } else if (std::shared_ptr<ir::Storage> value = node->memo.value()) {
      inputs[i] = std::move(value);
    } else if (pending_index.emplace(node.get(), pending.size()).second) {
      pending.push_back(node);
    }
  }
  if (!pending.empty()) {
    const std::vector<ir::NodePtr> roots = ir::ReadComputed(pending);
    std::vector<const ir::Node*> raw;
    for (const ir::NodePtr& r : roots) raw.push_back(r.get());
    absl::StatusOr<std::vector<std::shared_ptr<ir::Storage>>> values =
        runtime::Materialize(device, raw, /*wait=*/false);
    if (!values.ok()) return values.status();
    for (size_t j = 0; j < pending.size(); ++j) pending[j]->memo.set_value((*values)[j]);
    for (size_t i = 0; i < arg_nodes.size(); ++i) {
      if (inputs[i] == nullptr && arg_nodes[i] != nullptr)
        inputs[i] = (*values)[pending_index.at(arg_nodes[i].get())];
    }
  }
  std::vector<std::shared_ptr<ir::Storage>> outs;
  for (const auto& w : results) outs.push_back(w.lock());
  absl::StatusOr<std::vector<std::shared_ptr<ir::Storage>>> run = (*graph)->Run(inputs, outs);
  if (run.ok()) return absl::OkStatus();
  // The arguments' kernels may be queued: nothing is left in flight after a failure.
  (void)runtime::OpenClDevice(device).Finish();
  return run.status();
}

// A call outside a trace: its results are declared buffers, computed when one of them is first
// needed by the Function's graph compiled once (runtime::CompiledGraph), bound to this call's
// arguments. Nothing runs now. `arg_nodes`: per argument, the node the call reads (null:
// unused).
std::vector<ir::NodePtr> CompiledCall(const std::shared_ptr<const Function::State>& state,
                                      const std::vector<ir::NodePtr>& arg_nodes) {
  const Function::State& s = *state;
  Function::State::Compiled& c = s.GetCompiled();
  // The pending work the run reads first: deferred results among the arguments' leaves and
  // among the buffers the body reads.
  std::vector<std::shared_ptr<ir::Storage>> pending;
  std::vector<ir::NodePtr> args;
  for (const ir::NodePtr& n : arg_nodes) {
    if (n != nullptr) args.push_back(n);
  }
  for (const ir::Node* n : ir::PostOrder(args)) {
    if (n->op == ir::Op::kBuffer && n->storage->pending()) pending.push_back(n->storage);
  }
  for (const std::shared_ptr<ir::Storage>& storage : c.leaf_storages) {
    if (storage->pending()) pending.push_back(storage);
  }
  const int depth = frontend::DeferredDepth(pending, "CallChainsCut");

  std::vector<std::shared_ptr<ir::Storage>> declared;
  std::vector<ir::NodePtr> declared_nodes;
  for (const ir::NodePtr& root : c.graph_roots) {
    const size_t bytes =
        static_cast<size_t>(ir::NumElements(root->shape)) * dtype_size(root->dtype);
    declared.push_back(frontend::NewStorage(
        s.device, bytes,
        absl::StrCat("call result ", dtype_name(root->dtype), ir::ShapeString(root->shape))));
    declared_nodes.push_back(ir::MakeBuffer(declared.back(), root->dtype, root->shape));
  }
  if (!declared.empty()) {
    // The producer holds the results weakly (they hold it): a result nobody holds any more is
    // written to a buffer of the run's own, then dropped.
    std::vector<std::weak_ptr<ir::Storage>> results(declared.begin(), declared.end());
    auto producer = std::make_shared<ir::Producer>(
        [state, arg_nodes, results = std::move(results)] {
          return RunCompiledCall(*state, arg_nodes, results);
        },
        depth);
    for (const std::shared_ptr<ir::Storage>& storage : declared) storage->set_producer(producer);
    base::metrics::Add("CallsDeferred", 1);
  }
  absl::flat_hash_map<const ir::Node*, ir::NodePtr> replace;
  for (size_t i = 0; i < arg_nodes.size(); ++i) {
    if (arg_nodes[i] != nullptr) replace[s.placeholders[i].get()] = arg_nodes[i];
  }
  std::vector<ir::NodePtr> out;
  for (size_t k = 0; k < c.roots.size(); ++k) {
    const int g = c.graph_output[k];
    if (g >= 0) {
      out.push_back(declared_nodes[g]);
    } else {
      auto it = replace.find(c.roots[k].get());
      out.push_back(it != replace.end() ? it->second : c.roots[k]);
    }
  }
  return out;
}

std::vector<Tensor> CallFunction(const std::shared_ptr<const Function::State>& state,
                                 const std::vector<Tensor>& args, bool inline_body) {
  const Function::State& s = *state;
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
  // Only used arguments are read, so unused ones are never uploaded.
  std::vector<ir::NodePtr> arg_nodes(args.size());
  for (int i : s.used) arg_nodes[i] = frontend::NodeOn(args[i], s.device, "Function", i);
  // Inside a trace the body is inlined into the trace; so is it where an argument is a
  // placeholder (no data to run on now; it may get some before the results are read).
  inline_body = inline_body || frontend::TraceScope::active();
  for (const ir::NodePtr& n : arg_nodes) {
    inline_body =
        inline_body || (n != nullptr && n->op == ir::Op::kBuffer && n->storage->placeholder() &&
                        !n->storage->manager().IsWritten(n->storage->id()));
  }
  std::vector<ir::NodePtr> out_nodes;
  if (inline_body) {
    // The traced IR with the arguments' nodes in place of the placeholders: lazy, part of
    // whatever graph reads the results.
    absl::flat_hash_map<const ir::Node*, ir::NodePtr> replace;
    for (int i : s.used) replace[s.placeholders[i].get()] = arg_nodes[i];
    out_nodes = ir::Substitute(s.Roots(), replace);
  } else {
    out_nodes = CompiledCall(state, arg_nodes);
  }
  bool record = false;
  for (const Tensor& a : args) record = record || a.impl()->requires_grad;
  for (const auto& c : s.captures) record = record || c->requires_grad;
  record = record && is_grad_enabled();
  std::vector<Tensor> results;
  for (size_t k = 0; k < out_nodes.size(); ++k) {
    ir::NodePtr node = out_nodes[k];
    // A result that is an argument (or another result) gets a node of its own, so that no two
    // tensors share a node in a gradient record.
    if (record) node = base::ValueOrThrow(ir::MakeReshape(node, node->shape));
    results.push_back(frontend::MakeTensor(std::move(node), s.outputs[k].device()));
  }
  if (record) {
    auto fn = std::make_shared<CallGradFn>();
    fn->state = state;
    for (size_t i = 0; i < args.size(); ++i) fn->inputs.push_back(args[i].impl());
    fn->arg_nodes = arg_nodes;
    for (const auto& c : s.captures) fn->inputs.push_back(c);
    frontend::RecordOutputs(results, std::move(fn));
  }
  return results;
}

}  // namespace

std::vector<Tensor> Function::operator()(const std::vector<Tensor>& args) const {
  return CallFunction(state_, args, /*inline_body=*/false);
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
  // Traced for this call only, so nothing is kept to reuse: the body is inlined, and its
  // results take part in the caller's graph.
  return CallFunction(trace(std::move(fn), std::move(specs), device).state_, args,
                      /*inline_body=*/true);
}

}  // namespace lazycl
