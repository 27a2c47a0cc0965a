#include "lazycl/function.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "frontend/dispatch.h"
#include "frontend/ir.h"
#include "frontend/tensor_impl.h"
#include "frontend/throw.h"
#include "frontend/trace_scope.h"
#include "lazycl/env.h"
#include "lazycl/factories.h"

namespace lazycl {

using frontend::Throw;

// The traced form of a function. The placeholders keep their (declared, never allocated)
// buffers alive so that the traced IR stays valid; the outputs are IR over them.
struct Function::State {
  std::vector<TensorSpec> specs;
  Device device = Device::host();
  std::vector<ir::NodePtr> placeholders;  // per argument
  std::vector<Tensor> outputs;            // as traced
  std::vector<int> used;
};

namespace {

std::string SpecString(const std::vector<int64_t>& shape, DType dtype) {
  return absl::StrCat(dtype_name(dtype), ir::ShapeString(shape));
}

// The storages of every Buffer leaf that `roots` read.
absl::flat_hash_set<const ir::Storage*> LeafStorages(const std::vector<const ir::Node*>& roots) {
  absl::flat_hash_set<const ir::Storage*> storages;
  absl::flat_hash_set<const ir::Node*> seen;
  std::vector<const ir::Node*> stack = roots;
  while (!stack.empty()) {
    const ir::Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (n->op == ir::Op::kBuffer) storages.insert(n->storage.get());
    for (const ir::NodePtr& o : n->operands) stack.push_back(o.get());
  }
  return storages;
}

}  // namespace

Function trace(Fn fn, std::vector<TensorSpec> args, Device device) {
  if (!device.is_opencl()) {
    Throw(absl::InvalidArgumentError(
        absl::StrCat("trace: functions are traced for an OpenCL device, got ", device.str(),
                     "; host tensors run eagerly without tracing")));
  }
  if (!fn) Throw(absl::InvalidArgumentError("trace: the function is empty"));
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
    state->outputs = fn(inputs);
  }
  std::vector<const ir::Node*> roots;
  for (size_t i = 0; i < state->outputs.size(); ++i) {
    const Tensor& out = state->outputs[i];
    if (!out.defined())
      Throw(absl::InvalidArgumentError(absl::StrCat("trace: output ", i, " is undefined")));
    roots.push_back(out.impl()->node.get());
  }
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
    Throw(absl::InvalidArgumentError(
        absl::StrCat("Function: expected ", s.specs.size(), " arguments, got ", args.size())));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const TensorImpl& impl = frontend::ImplOf(args[i], "Function");
    const TensorSpec& spec = s.specs[i];
    if (impl.node->shape != spec.shape || impl.node->dtype != spec.dtype) {
      Throw(absl::InvalidArgumentError(absl::StrCat(
          "Function: argument ", i, " is ", SpecString(impl.node->shape, impl.node->dtype),
          ", expected ", SpecString(spec.shape, spec.dtype))));
    }
  }
  // Only used arguments are substituted, so unused ones are never read nor uploaded.
  absl::flat_hash_map<const ir::Node*, ir::NodePtr> replace;
  for (int i : s.used) {
    replace[s.placeholders[i].get()] = frontend::NodeOn(args[i], s.device, "Function", i);
  }
  std::vector<ir::NodePtr> roots;
  for (const Tensor& out : s.outputs) roots.push_back(out.impl()->node);
  std::vector<ir::NodePtr> substituted = ir::Substitute(roots, replace);
  std::vector<Tensor> results;
  for (size_t k = 0; k < substituted.size(); ++k) {
    auto impl = std::make_shared<TensorImpl>();
    impl->node = substituted[k];
    impl->device = s.outputs[k].device();
    results.push_back(Tensor(std::move(impl)));
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
    specs.push_back({impl.node->shape, impl.node->dtype});
  }
  Device device = frontend::OpDevice(ptrs, "call");
  if (device.is_host()) device = default_env().device();
  return trace(std::move(fn), std::move(specs), device)(args);
}

}  // namespace lazycl
