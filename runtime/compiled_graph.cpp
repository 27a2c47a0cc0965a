#include "runtime/compiled_graph.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backend/device.h"
#include "base/check.h"
#include "base/metrics_registry.h"
#include "runtime/devices.h"
#include "runtime/matmul_tuner.h"
#include "runtime/tiering.h"

namespace lazycl::runtime {

absl::StatusOr<std::shared_ptr<CompiledGraph>> CompiledGraph::Make(
    int device, std::vector<ir::NodePtr> outputs, const std::vector<ir::NodePtr>& inputs) {
  std::shared_ptr<CompiledGraph> compiled(new CompiledGraph());
  compiled->device_ = device;
  compiled->outputs_ = std::move(outputs);
  std::vector<const ir::Node*> raw;
  for (const ir::NodePtr& n : compiled->outputs_) {
    LAZYCL_CHECK(n->op != ir::Op::kBuffer, "a compiled graph's output is a Buffer leaf");
    raw.push_back(n.get());
  }
  compiled->built_ = BuildGraph(raw, /*bind_offsets=*/false);
  absl::flat_hash_map<const ir::Storage*, int> input_of;
  for (size_t i = 0; i < inputs.size(); ++i) {
    LAZYCL_CHECK(inputs[i]->op == ir::Op::kBuffer, "a compiled graph's input is not a leaf");
    input_of.emplace(inputs[i]->storage.get(), static_cast<int>(i));
  }
  const kernels::Graph& graph = compiled->built_.graph;
  compiled->input_of_param_.assign(compiled->built_.params.size(), -1);
  compiled->leaf_of_param_.assign(compiled->built_.params.size(), -1);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const int p = graph.param_of[n];
    if (p < 0 || compiled->leaf_of_param_[p] >= 0) continue;
    compiled->leaf_of_param_[p] = static_cast<int>(n);
    auto it = input_of.find(graph.nodes[n]->storage.get());
    if (it != input_of.end()) compiled->input_of_param_[p] = it->second;
  }
  absl::StatusOr<std::shared_ptr<CachedPlan>> plan = compiled->Plan();
  if (!plan.ok()) return plan.status();
  return compiled;
}

absl::StatusOr<std::shared_ptr<CachedPlan>> CompiledGraph::Plan() {
  const uint64_t generation = MatmulBlockingGeneration();
  const base::CompileMode mode = CurrentCompileMode();
  std::lock_guard<std::mutex> lock(mu_);
  if (plan_ == nullptr || plan_generation_ != generation || plan_mode_ != mode) {
    absl::StatusOr<std::shared_ptr<CachedPlan>> plan = PreparePlan(device_, built_.graph);
    if (!plan.ok()) return plan.status();
    plan_ = *std::move(plan);
    plan_generation_ = generation;
    plan_mode_ = mode;
  }
  return plan_;
}

absl::StatusOr<std::vector<std::shared_ptr<ir::Storage>>> CompiledGraph::Run(
    std::span<const std::shared_ptr<ir::Storage>> inputs,
    std::span<const std::shared_ptr<ir::Storage>> results) {
  LAZYCL_CHECK(results.size() == outputs_.size(), "a compiled graph's run needs one result each");
  backend::Device& device = OpenClDevice(device_);
  backend::BufferManager& buffers = device.buffers();
  const kernels::Graph& graph = built_.graph;
  std::vector<Binding> params(built_.params.size());
  int64_t bound = 0;
  for (size_t p = 0; p < params.size(); ++p) {
    const int input = input_of_param_[p];
    if (input < 0) {
      // Read as it is now: a deferred result is computed first, a placeholder fails.
      if (absl::Status s = PrepareLeaf(*graph.nodes[leaf_of_param_[p]]); !s.ok()) return s;
      params[p] = {built_.params[p], 0};
      continue;
    }
    LAZYCL_CHECK(static_cast<size_t>(input) < inputs.size() && inputs[input] != nullptr,
                 "a compiled graph's run lacks an input it reads");
    params[p] = {inputs[input], 0};
    ++bound;
  }
  absl::StatusOr<std::shared_ptr<CachedPlan>> plan = Plan();
  if (!plan.ok()) return plan.status();
  // Every result is live at the end: results that cannot all fit fail before any kernel runs.
  const std::vector<size_t>& bytes = OutputBytes(**plan);
  std::vector<size_t> new_bytes;
  for (size_t k = 0; k < results.size(); ++k) {
    if (results[k] == nullptr) new_bytes.push_back(bytes[k]);
  }
  if (absl::Status s = buffers.CheckRoom(new_bytes); !s.ok()) return s;
  const Device where = Device::opencl(device_);
  std::vector<Binding> outs(results.size());
  for (size_t k = 0; k < results.size(); ++k) {
    if (results[k] != nullptr) {
      LAZYCL_CHECK(results[k]->bytes() == bytes[k], "a declared result's size differs");
      outs[k] = {results[k], 0};
      continue;
    }
    const ir::Node& out = *outputs_[k];
    outs[k] = {std::make_shared<ir::Storage>(
                   where, &buffers, bytes[k],
                   absl::StrCat("result ", dtype_name(out.dtype), ir::ShapeString(out.shape))),
               0};
  }
  absl::Status status = Execute(device_, **plan, params, outs, built_.scalars);
  // As a step loop does (runtime/step_loop.h): left queued unless a queued launch may still
  // compile (a process exiting meanwhile would crash) or kernels were launched half-way.
  if (!status.ok() || device.MayCompile()) {
    if (absl::Status s = device.Finish(); !s.ok() && status.ok()) status = s;
  }
  if (!status.ok()) return status;
  base::metrics::Add("CompiledGraphRuns", 1);
  base::metrics::Add("CompiledGraphInputsBound", bound);
  std::vector<std::shared_ptr<ir::Storage>> storages;
  for (Binding& b : outs) storages.push_back(std::move(b.storage));
  return storages;
}

}  // namespace lazycl::runtime
