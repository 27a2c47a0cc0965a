#include "frontend/executor.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backend/device.h"
#include "backend/metrics_registry.h"
#include "frontend/graph_dump.h"
#include "frontend/runtime.h"
#include "frontend/storage.h"
#include "kernels/lower.h"

namespace lazycl::frontend {
namespace {

using ir::Node;

// Graphs compiled for one device: the plan and, once resolved, its kernels.
struct CachedPlan {
  std::vector<uint64_t> key;
  kernels::Plan plan;
  std::vector<const backend::Kernel*> kernels;  // resolved on first run
};

constexpr size_t kMaxCachedGraphs = 4096;

absl::flat_hash_map<uint64_t, std::unique_ptr<CachedPlan>>& GraphCache(int device) {
  static auto* caches = new std::map<int, absl::flat_hash_map<uint64_t, std::unique_ptr<CachedPlan>>>();
  return (*caches)[device];
}

// The operands-first order of every node reachable from `outputs` without passing a Buffer leaf
// (Buffer leaves are included, their storage is not followed).
std::vector<const Node*> TopologicalOrder(const std::vector<const Node*>& outputs) {
  std::vector<const Node*> order;
  absl::flat_hash_map<const Node*, bool> done;  // false: on the stack, true: emitted
  std::vector<std::pair<const Node*, size_t>> stack;
  for (const Node* out : outputs) {
    if (done.contains(out)) continue;
    stack.push_back({out, 0});
    done[out] = false;
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n->operands.size()) {
        const Node* o = n->operands[next++].get();
        if (!done.contains(o)) {
          done[o] = false;
          stack.push_back({o, 0});
        }
        continue;
      }
      done[n] = true;
      order.push_back(n);
      stack.pop_back();
    }
  }
  return order;
}

kernels::Target TargetOf(const backend::Device& device) {
  kernels::Target target;
  const backend::Settings& settings = Settings();
  target.cpu = settings.codegen == backend::CodegenStrategy::kCpu ||
               (settings.codegen == backend::CodegenStrategy::kAuto &&
                device.info().type != backend::DeviceType::kGpu);
  if (device.info().max_param_bytes > 0) target.max_param_bytes = device.info().max_param_bytes;
  return target;
}

absl::Status RunGraph(int device_index, const std::vector<TensorImpl*>& tensors) {
  backend::Device& device = OpenClDevice(device_index);
  const backend::Settings& settings = Settings();
  const auto start = std::chrono::steady_clock::now();

  // Outputs, one per distinct node.
  std::vector<const Node*> outputs;
  absl::flat_hash_map<const Node*, int> output_of;
  for (TensorImpl* t : tensors) {
    if (output_of.emplace(t->node.get(), static_cast<int>(outputs.size())).second) outputs.push_back(t->node.get());
  }

  kernels::Graph graph;
  graph.nodes = TopologicalOrder(outputs);
  absl::flat_hash_map<const Node*, int> index;
  for (size_t i = 0; i < graph.nodes.size(); ++i) index[graph.nodes[i]] = static_cast<int>(i);
  graph.param_of.assign(graph.nodes.size(), -1);
  std::vector<const ir::Storage*> params;
  absl::flat_hash_map<backend::BufferId, int> param_of_buffer;  // parameters de-duplicated by buffer id
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = *graph.nodes[i];
    if (n.op != ir::Op::kBuffer) continue;
    auto [it, inserted] = param_of_buffer.emplace(n.storage->id(), static_cast<int>(params.size()));
    if (inserted) {
      if (!n.storage->manager().IsWritten(n.storage->id())) {
        if (n.storage->placeholder()) {
          return absl::FailedPreconditionError(PlaceholderMessage(n, n.storage->device()));
        }
        return n.storage->manager().CheckReadable(n.storage->id());
      }
      params.push_back(n.storage.get());
    }
    graph.param_of[i] = it->second;
  }
  graph.num_params = static_cast<int>(params.size());
  for (const Node* out : outputs) graph.outputs.push_back(index.at(out));

  // The structure of the graph, exactly: each node's own hash, its operands by position and
  // its parameter, then the outputs.
  std::vector<uint64_t> key;
  key.reserve(graph.nodes.size() * 3 + graph.outputs.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    key.push_back(graph.nodes[i]->hash);
    for (const ir::NodePtr& o : graph.nodes[i]->operands) key.push_back(static_cast<uint64_t>(index.at(o.get())));
    key.push_back(static_cast<uint64_t>(graph.param_of[i] + 1));
  }
  for (int o : graph.outputs) key.push_back(static_cast<uint64_t>(o));
  const uint64_t hash = absl::HashOf(key);

  auto& cache = GraphCache(device_index);
  CachedPlan* cached = nullptr;
  if (auto it = cache.find(hash); it != cache.end() && it->second->key == key) {
    cached = it->second.get();
    backend::metrics::Add("GraphCacheHits", 1);
  } else {
    absl::StatusOr<kernels::Plan> plan = kernels::Lower(graph, TargetOf(device));
    if (!plan.ok()) return plan.status();
    if (cache.size() >= kMaxCachedGraphs) cache.clear();
    auto entry = std::make_unique<CachedPlan>();
    entry->key = std::move(key);
    entry->plan = *std::move(plan);
    entry->kernels.assign(entry->plan.kernels.size(), nullptr);
    cached = entry.get();
    cache[hash] = std::move(entry);
    backend::metrics::Add("GraphCompiles", 1);
    if (settings.debug >= 2) std::fprintf(stderr, "lazycl: graph %016llx IR:\n%s", static_cast<unsigned long long>(hash), GraphText(graph).c_str());
    if (settings.debug >= 3) std::fprintf(stderr, "lazycl: graph %016llx OpenCL C:\n%s", static_cast<unsigned long long>(hash), PlanSource(cached->plan).c_str());
    if (!settings.dump_dir.empty()) DumpGraph(settings.dump_dir, hash, graph, cached->plan);
  }
  const kernels::Plan& plan = cached->plan;

  // Buffers: outputs become the tensors' new storage; temps live until their last reader.
  backend::BufferManager& buffers = device.buffers();
  const Device where = Device::opencl(device_index);
  std::vector<std::shared_ptr<ir::Storage>> results;
  for (size_t k = 0; k < outputs.size(); ++k) {
    results.push_back(std::make_shared<ir::Storage>(
        where, &buffers, plan.output_bytes[k],
        absl::StrCat("result ", dtype_name(outputs[k]->dtype), ir::ShapeString(outputs[k]->shape))));
    if (plan.output_bytes[k] == 0) {
      if (absl::Status s = buffers.PrepareWrite(results.back()->id()); !s.ok()) return s;
    }
  }
  std::vector<std::unique_ptr<ir::Storage>> temps(plan.temp_bytes.size());
  for (size_t t = 0; t < temps.size(); ++t) {
    temps[t] = std::make_unique<ir::Storage>(where, &buffers, plan.temp_bytes[t], "intermediate");
    if (plan.temp_bytes[t] == 0) {
      if (absl::Status s = buffers.PrepareWrite(temps[t]->id()); !s.ok()) return s;
    }
  }
  auto buffer_id = [&](const kernels::BufferRef& ref) -> backend::BufferId {
    switch (ref.kind) {
      case kernels::BufferRef::Kind::kParam:
        return params[ref.index]->id();
      case kernels::BufferRef::Kind::kOutput:
        return results[ref.index]->id();
      case kernels::BufferRef::Kind::kTemp:
        return temps[ref.index]->id();
    }
    return 0;
  };

  std::vector<backend::KernelArg> args;
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const kernels::KernelSpec& spec = plan.kernels[k];
    if (cached->kernels[k] == nullptr) {
      absl::StatusOr<const backend::Kernel*> kernel = device.GetKernel(spec.source, spec.options, spec.name);
      if (!kernel.ok()) return kernel.status();
      cached->kernels[k] = *kernel;
    }
    args.clear();
    for (const kernels::KernelArgSpec& a : spec.args) {
      switch (a.kind) {
        case kernels::KernelArgSpec::Kind::kBuffer:
          args.push_back(a.written ? backend::KernelArg::Write(buffer_id(a.buffer))
                                   : backend::KernelArg::Read(buffer_id(a.buffer)));
          break;
        case kernels::KernelArgSpec::Kind::kInt32:
          args.push_back(backend::KernelArg::Int32(static_cast<int32_t>(a.value)));
          break;
        case kernels::KernelArgSpec::Kind::kInt64:
          args.push_back(backend::KernelArg::Int64(a.value));
          break;
      }
    }
    if (absl::Status s = device.Launch(cached->kernels[k], args, spec.global, spec.local); !s.ok()) return s;
    for (size_t t = 0; t < temps.size(); ++t) {
      if (plan.temp_last_use[t] == static_cast<int>(k)) temps[t].reset();
    }
  }

  for (TensorImpl* t : tensors) {
    const int k = output_of.at(t->node.get());
    t->node = ir::MakeBuffer(results[k], t->node->dtype, t->node->shape);
  }
  if (settings.debug >= 1) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "lazycl: graph %016llx on cl:%d: %zu nodes, %zu kernels, %zu params, %.3f ms host\n",
                 static_cast<unsigned long long>(hash), device_index, graph.nodes.size(), plan.kernels.size(),
                 params.size(), ms);
  }
  return absl::OkStatus();
}

}  // namespace

std::string PlaceholderMessage(const Node& leaf, const Device& device) {
  return absl::StrCat("tensor ", dtype_name(leaf.dtype), ir::ShapeString(leaf.shape), " on ", device.str(),
                      " is a placeholder: it has a shape, a dtype and a device but no data, so its values "
                      "cannot be read or computed with (pass real data where this value is needed)");
}

absl::Status Materialize(const std::vector<TensorImpl*>& tensors) {
  std::map<int, std::vector<TensorImpl*>> by_device;
  for (TensorImpl* t : tensors) {
    if (t->device.is_opencl() && t->node->op != ir::Op::kBuffer) by_device[t->device.index()].push_back(t);
  }
  for (auto& [device, group] : by_device) {
    if (absl::Status s = RunGraph(device, group); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace lazycl::frontend
