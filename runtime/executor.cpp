#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backend/device.h"
#include "base/check.h"
#include "base/metrics_registry.h"
#include "ir/half_precision.h"
#include "ir/node_marks.h"
#include "ir/post_order.h"
#include "ir/sink_slices.h"
#include "kernels/generic_library.h"
#include "kernels/lower.h"
#include "kernels/lower_generic.h"
#include "runtime/constant_fold.h"
#include "runtime/devices.h"
#include "runtime/graph_dump.h"
#include "runtime/matmul_tuner.h"
#include "runtime/profile.h"
#include "runtime/storage.h"
#include "runtime/tiering.h"

namespace lazycl::runtime {
namespace {

using ir::Node;

// Graphs compiled for one device: the plan and, once resolved, its kernels.
}  // namespace

// Threads (README, "Threads"). Shared state here and its locks, in the order they may nest:
//   CacheMutex() (the graph caches and their capacity; held only for lookups and inserts, never
//     while lowering, compiling or launching),
//   CachedPlan::kernels_mu (one plan's entry points; held while one is created, which takes the
//     device's ProgramCache mutex inside it),
//   the matmul tuner's (matmul_tuner.h; taken while lowering, outside CacheMutex, and held while
//     a first use tunes, which launches through the backend),
//   then the backend's: Device launch mutex -> BufferManager mutex -> metrics registry.
// A plan is immutable once cached but for `kernels`, so threads run one plan concurrently; the
// device's in-order queue orders their kernels, and a buffer freed to the pool by one thread is
// reused by another only through work enqueued after the first one's.
struct CachedPlan : std::enable_shared_from_this<CachedPlan> {
  uint64_t hash = 0;
  std::vector<uint64_t> key;
  kernels::Plan plan;
  // Tiered execution (runtime/tiering.h): the same graph on the generic kernels, lowered when
  // the plan's programs were neither built nor on disk (or LAZYCL_COMPILE=generic); nullptr
  // where the generic kernels do not cover the graph.
  std::shared_ptr<CachedPlan> generic;  // guarded by kernels_mu once the plan is cached
  bool generic_tried = false;           // guarded by kernels_mu once the plan is cached
  std::mutex kernels_mu;
  // Whether this plan's programs are building on the background builder, or failed to there (a
  // later run then builds them at once, and reports the error).
  enum class Build { kNone, kInBackground, kFailed };
  Build build = Build::kNone;  // guarded by kernels_mu
  // Per kernel, per launch: its entry point, created when the launch first runs.
  std::vector<std::vector<backend::KernelRef>> kernels;  // guarded by kernels_mu
  // Whether the programs of all kernels were built (together) or found.
  bool programs_ready = false;  // guarded by kernels_mu
  // Per kernel: its profiler tag (profile::TagOf) of generation profile_generation.
  std::vector<int64_t> profile_tags;  // guarded by kernels_mu
  int64_t profile_generation = -1;    // guarded by kernels_mu
};

namespace {

// How a graph that RunGraph is given, before BuildGraph rewrites it (half precision, sunk
// slices), binds a cached plan: BuildGraph reads nothing of a node but its fields in
// RawGraph's key (below), so every graph of one key builds one graph, and the plan of one serves
// all, its parameters and scalars taken from the leaves at the same positions of each.
struct Recipe {
  std::vector<uint64_t> key;  // RawGraph::key
  std::weak_ptr<CachedPlan> plan;
  std::vector<int> params;   // per parameter of the plan: the position of a leaf of its buffer
  std::vector<int> scalars;  // per scalar argument: the position of its Scalar leaf
};

// The compiled graphs of one device, least recently used first out. The cache holds one
// reference to each plan; whoever runs a plan (RunGraph, a step loop) holds another for as long
// as it runs it, so an eviction never frees a plan in use.
class GraphCache {
 public:
  // The recipe of the graphs of key `key` (hash `hash`) and its plan, while the plan is still
  // cached (it becomes the most recently used); null otherwise.
  std::shared_ptr<const Recipe> FindRecipe(uint64_t hash, const std::vector<uint64_t>& key,
                                           std::shared_ptr<CachedPlan>& plan) {
    auto it = recipes_.find(hash);
    if (it == recipes_.end() || it->second->key != key) return nullptr;
    plan = it->second->plan.lock();
    auto cached = plan != nullptr ? by_hash_.find(plan->hash) : by_hash_.end();
    if (cached == by_hash_.end() || *cached->second != plan) {  // evicted: lowered again
      recipes_.erase(it);
      plan = nullptr;
      return nullptr;
    }
    order_.splice(order_.begin(), order_, cached->second);
    return it->second;
  }

  // Keeps `recipe` under `hash`, in place of one of the same hash. Recipes of evicted plans are
  // dropped once there are more than twice as many recipes as plans.
  void InsertRecipe(uint64_t hash, std::shared_ptr<const Recipe> recipe) {
    recipes_[hash] = std::move(recipe);
    if (recipes_.size() <= 2 * std::max<size_t>(capacity, 1)) return;
    absl::erase_if(recipes_, [&](const auto& entry) {
      std::shared_ptr<CachedPlan> plan = entry.second->plan.lock();
      auto cached = plan != nullptr ? by_hash_.find(plan->hash) : by_hash_.end();
      return cached == by_hash_.end() || *cached->second != plan;
    });
    if (recipes_.size() > 2 * std::max<size_t>(capacity, 1)) recipes_.clear();
  }

  // The plan cached under `hash` when its key is `key` (it becomes the most recently used).
  std::shared_ptr<CachedPlan> Find(uint64_t hash, const std::vector<uint64_t>& key) {
    auto it = by_hash_.find(hash);
    if (it == by_hash_.end() || (*it->second)->key != key) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return order_.front();
  }

  // Adds `plan` as the most recently used, in place of a plan of the same hash, evicting the
  // least recently used ones past the capacity.
  void Insert(std::shared_ptr<CachedPlan> plan) {
    if (auto it = by_hash_.find(plan->hash); it != by_hash_.end()) {
      order_.erase(it->second);
      by_hash_.erase(it);
    }
    order_.push_front(std::move(plan));
    by_hash_[order_.front()->hash] = order_.begin();
    Trim();
  }

  void Trim() {
    if (capacity == 0) capacity = static_cast<size_t>(base::CurrentSettings().graph_cache_size);
    while (order_.size() > capacity) {
      by_hash_.erase(order_.back()->hash);
      order_.pop_back();
    }
  }

  // LAZYCL_GRAPH_CACHE_SIZE (base::Settings::graph_cache_size) unless a test set it; guarded by
  // CacheMutex().
  static inline size_t capacity = 0;  // 0: not read yet

 private:
  std::list<std::shared_ptr<CachedPlan>> order_;  // most recently used first
  absl::flat_hash_map<uint64_t, std::list<std::shared_ptr<CachedPlan>>::iterator> by_hash_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const Recipe>> recipes_;  // by RawGraph::hash
};

std::mutex& CacheMutex() {
  static auto* mutex = new std::mutex();  // never destroyed, like the caches
  return *mutex;
}

// Guarded by CacheMutex().
std::map<int, GraphCache>& GraphCaches() {
  static auto* caches = new std::map<int, GraphCache>();
  return *caches;
}

// The operands-first order of every node reachable from `outputs` without passing a Buffer leaf
// (Buffer leaves are included, their storage is not followed).
std::vector<const Node*> TopologicalOrder(const std::vector<const Node*>& outputs) {
  return ir::PostOrder(outputs);
}

}  // namespace

bool UsesCpuStrategy(backend::Device& device) {
  const base::Settings& settings = base::CurrentSettings();
  return settings.codegen == base::CodegenStrategy::kCpu ||
         (settings.codegen == base::CodegenStrategy::kAuto &&
          device.info().type != base::DeviceType::kGpu);
}

namespace {

absl::StatusOr<kernels::Target> TargetOf(backend::Device& device, const kernels::Graph& graph) {
  kernels::Target target;
  target.cpu = UsesCpuStrategy(device);
  if (device.info().max_param_bytes > 0) target.max_param_bytes = device.info().max_param_bytes;
  target.compute_units = device.info().compute_units;
  target.local_mem_bytes = device.info().local_mem_bytes;
  target.cache_bytes = device.info().global_mem_cache_bytes;
  target.fp64 = device.info().fp64;
  const bool f64 = std::any_of(graph.nodes.begin(), graph.nodes.end(),
                               [](const Node* n) { return n->dtype == DType::f64; });
  if (f64 && !device.info().fp64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "f64 needs a device with double precision (cl_khr_fp64); ", device.info().device_name, " (",
        device.info().platform_name,
        ") does not report it: cast to f32, or compute this on the host (Device::host())"));
  }
  // The f32 CPU matmul's blocking is chosen (maybe timed) on the first graph that has one.
  const bool f32_matmul = std::any_of(graph.nodes.begin(), graph.nodes.end(), [](const Node* n) {
    return n->op == ir::Op::kMatmul && n->dtype == DType::f32;
  });
  if (target.cpu && f32_matmul) {
    absl::StatusOr<kernels::MatmulBlocking> blocking = MatmulBlockingFor(device);
    if (!blocking.ok()) return blocking.status();
    target.matmul = *blocking;
  }
  return target;
}

// The structure of a graph, exactly: each node's own hash, its operands by position and its
// parameter, then the outputs and the binding mode.
std::vector<uint64_t> GraphKey(const kernels::Graph& graph) {
  const ir::NodePositions index(graph.nodes);
  std::vector<uint64_t> key;
  size_t size = graph.outputs.size() + 2;  // and the caller's one more
  for (const Node* n : graph.nodes) size += 2 + n->operands.size();
  key.reserve(size);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    key.push_back(graph.nodes[i]->hash);
    for (const ir::NodePtr& o : graph.nodes[i]->operands)
      key.push_back(static_cast<uint64_t>(index.at(o.get())));
    key.push_back(static_cast<uint64_t>(graph.param_of[i] + 1));
  }
  for (int o : graph.outputs) key.push_back(static_cast<uint64_t>(o));
  key.push_back(graph.bind_offsets ? 1 : 0);
  return key;
}

// Numbers the leaves of `built.graph.nodes` (PostOrder(roots)): its parameters (Buffer leaves,
// one per buffer, in the order first read), its scalars and its outputs' positions.
void IndexLeaves(const std::vector<const Node*>& roots, BuiltGraph& built) {
  kernels::Graph& graph = built.graph;
  // The outputs' positions: a map of the roots (a few), looked up once per node, where a map of
  // every node's position was a tenth of the host's work per token in a sampling loop.
  absl::flat_hash_map<const Node*, int> root_index;
  for (const Node* out : roots) root_index.emplace(out, -1);
  graph.param_of.assign(graph.nodes.size(), -1);
  absl::flat_hash_map<backend::BufferId, int>
      param_of_buffer;  // parameters de-duplicated by buffer id
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = *graph.nodes[i];
    if (auto it = root_index.find(&n); it != root_index.end()) it->second = static_cast<int>(i);
    if (n.op != ir::Op::kBuffer) continue;
    auto [it, inserted] =
        param_of_buffer.emplace(n.storage->id(), static_cast<int>(built.params.size()));
    if (inserted) built.params.push_back(n.storage);
    graph.param_of[i] = it->second;
  }
  graph.num_params = static_cast<int>(built.params.size());
  graph.scalar_of.assign(graph.nodes.size(), -1);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (graph.nodes[i]->op != ir::Op::kScalar) continue;
    graph.scalar_of[i] = static_cast<int>(built.scalars.size());
    built.scalars.push_back(graph.nodes[i]->value);
  }
  graph.num_scalars = static_cast<int>(built.scalars.size());
  for (const Node* out : roots) graph.outputs.push_back(root_index.at(out));
}

// The structure of a graph as RunGraph is given it: GraphKey over its own nodes (each node's
// hash, which covers its op, dtype, shape and arguments; its operands by position; which leaves
// share a buffer; its outputs), and the matmul blocking's generation. Where two graphs' keys are
// equal, BuildGraph builds one graph of both (Recipe).
struct RawGraph {
  BuiltGraph given;  // the graph as given, its leaves numbered (IndexLeaves)
  std::vector<uint64_t> key;
  uint64_t hash = 0;
};

RawGraph RawGraphOf(const std::vector<const Node*>& order, const std::vector<const Node*>& roots) {
  RawGraph raw;
  raw.given.graph.nodes = order;
  IndexLeaves(roots, raw.given);
  raw.key = GraphKey(raw.given.graph);
  raw.key.push_back(MatmulBlockingGeneration());
  raw.hash = absl::HashOf(raw.key);
  return raw;
}

// The recipe that binds `built`'s plan from the leaves of `raw`'s graph, or null where a parameter
// or scalar of the built graph is no leaf of the given graph nor made in place of one.
std::shared_ptr<const Recipe> RecipeOf(RawGraph& raw, const BuiltGraph& built,
                                       const std::shared_ptr<CachedPlan>& plan) {
  const kernels::Graph& given = raw.given.graph;
  auto recipe = std::make_shared<Recipe>();
  if (!built.params.empty()) {
    absl::flat_hash_map<backend::BufferId, int> leaf_of_buffer;  // its first leaf's position
    for (size_t i = 0; i < given.nodes.size(); ++i) {
      if (given.param_of[i] >= 0)
        leaf_of_buffer.emplace(given.nodes[i]->storage->id(), static_cast<int>(i));
    }
    for (const std::shared_ptr<ir::Storage>& storage : built.params) {
      auto it = leaf_of_buffer.find(storage->id());
      if (it == leaf_of_buffer.end()) return nullptr;
      recipe->params.push_back(it->second);
    }
  }
  if (built.graph.num_scalars > 0) {
    absl::flat_hash_map<const Node*, int> scalar_at;
    for (size_t i = 0; i < given.nodes.size(); ++i) {
      if (given.scalar_of[i] >= 0) scalar_at.emplace(given.nodes[i], static_cast<int>(i));
    }
    for (const auto& [made, given_leaf] : built.scalars_made) {  // a half Scalar's f32 copy
      auto it = scalar_at.find(given_leaf);
      if (it == scalar_at.end()) continue;
      const int position = it->second;  // copied: the emplace below may move the map's slots
      scalar_at.emplace(made, position);
    }
    for (size_t i = 0; i < built.graph.nodes.size(); ++i) {  // in the order of scalar_of
      if (built.graph.scalar_of[i] < 0) continue;
      auto it = scalar_at.find(built.graph.nodes[i]);
      if (it == scalar_at.end()) return nullptr;
      recipe->scalars.push_back(it->second);
    }
  }
  recipe->key = std::move(raw.key);
  recipe->plan = plan;
  return recipe;
}

std::vector<backend::ProgramSource> Sources(const kernels::Plan& plan) {
  std::vector<backend::ProgramSource> sources;
  for (const kernels::KernelSpec& spec : plan.kernels)
    sources.push_back({spec.text(), spec.options});
  return sources;
}

// A deferred value the graph reads only part of, whose producer leaves its last step to the
// reader (runtime/storage.h: Producer::LastStepOf; a device scan's final carry), is read as that
// step's pending graph instead, so that the graph computes only the part of the step it needs
// (ir/sink_slices.h). `roots` and `order` become the rebuilt graph's, whose nodes `held` keeps.
absl::Status InlineLastSteps(std::vector<const Node*>& roots, std::vector<const Node*>& order,
                             std::vector<ir::NodePtr>& held) {
  if (std::none_of(order.begin(), order.end(), [](const Node* n) {
        return n->op == ir::Op::kBuffer && n->storage->has_last_step();
      }))
    return absl::OkStatus();
  absl::flat_hash_map<const Node*, ir::NodePtr> replace;
  for (const Node* leaf : ir::PartlyReadLeaves(roots, order)) {
    if (!leaf->storage->has_last_step()) continue;
    absl::StatusOr<ir::NodePtr> step = leaf->storage->LastStep();
    if (!step.ok()) return step.status();
    if (*step != nullptr) replace[leaf] = *std::move(step);
  }
  if (replace.empty()) return absl::OkStatus();
  held = ir::SubstituteRoots(roots, replace);
  for (size_t k = 0; k < roots.size(); ++k) {
    if (held[k] != nullptr) roots[k] = held[k].get();
  }
  order = TopologicalOrder(roots);
  base::metrics::Add("LastStepsInlined", static_cast<int64_t>(replace.size()));
  return absl::OkStatus();
}

// Computes `outputs` of one device as one graph.
absl::StatusOr<std::vector<std::shared_ptr<ir::Storage>>> RunGraph(
    int device_index, const std::vector<const Node*>& outputs,
    std::span<const Donation> donations) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<const Node*> roots = outputs;
  std::vector<const Node*> order = TopologicalOrder(roots);
  std::vector<ir::NodePtr> held;  // the outputs rebuilt around inlined last steps
  if (absl::Status s = InlineLastSteps(roots, order, held); !s.ok()) return s;
  // Deferred results the graph reads (a scan's steps) are set running first: the device computes
  // them while the host builds and plans the graph that reads them.
  for (const Node* n : order) {
    if (n->op != ir::Op::kBuffer || !n->storage->pending()) continue;
    if (absl::Status s = n->storage->Produce(); !s.ok()) return s;
  }
  // A graph of a structure run before (the same model's next step, built op by op again) takes
  // that one's plan and how it bound it, without BuildGraph's passes: in a sampling loop written
  // as a `for` over the layers, they were 16% of the host's instructions a token. Not with
  // donations (judged on the built graph) nor under LAZYCL_COMPILE=generic (PreparePlan's hit).
  const bool memo = donations.empty() && CurrentCompileMode() != base::CompileMode::kGeneric;
  RawGraph raw;
  std::shared_ptr<CachedPlan> plan;
  std::shared_ptr<const Recipe> recipe;
  if (memo) {
    raw = RawGraphOf(order, roots);
    std::lock_guard<std::mutex> lock(CacheMutex());
    recipe = GraphCaches()[device_index].FindRecipe(raw.hash, raw.key, plan);
  }
  BuiltGraph built;             // where there is no recipe
  std::vector<Binding> params;  // a recipe's here, else after the donations are judged
  std::vector<double> scalars;
  if (recipe != nullptr) {
    base::metrics::Add("GraphCacheHits", 1);
    base::metrics::Add("GraphBuildsReused", 1);
    for (int p : recipe->params) {
      const Node& leaf = *order[static_cast<size_t>(p)];
      LAZYCL_CHECK(leaf.op == ir::Op::kBuffer, "a recipe's parameter is a Buffer leaf");
      // Placeholders are caught before anything runs, with the message that names them.
      if (absl::Status s = PrepareLeaf(leaf); !s.ok()) return s;
      params.push_back({leaf.storage, 0});
    }
    for (int k : recipe->scalars) {
      const Node& leaf = *order[static_cast<size_t>(k)];
      LAZYCL_CHECK(leaf.op == ir::Op::kScalar, "a recipe's scalar is a Scalar leaf");
      scalars.push_back(leaf.value);
    }
  } else {
    built = BuildGraph(roots, /*bind_offsets=*/false, std::move(order));
    for (const Node* n : built.graph.nodes) {
      if (n->op != ir::Op::kBuffer) continue;
      if (absl::Status s = PrepareLeaf(*n); !s.ok()) return s;
    }
    absl::StatusOr<std::shared_ptr<CachedPlan>> prepared = PreparePlan(device_index, built.graph);
    if (!prepared.ok()) return prepared.status();
    plan = *std::move(prepared);
    scalars = built.scalars;
    if (memo) {
      if (std::shared_ptr<const Recipe> made = RecipeOf(raw, built, plan)) {
        std::lock_guard<std::mutex> lock(CacheMutex());
        GraphCaches()[device_index].InsertRecipe(raw.hash, std::move(made));
      }
    }
  }

  backend::BufferManager& buffers = OpenClDevice(device_index).buffers();
  const Device where = Device::opencl(device_index);
  // Offers are judged before the bindings below take more references to the buffers.
  std::vector<std::shared_ptr<ir::Storage>> donated(outputs.size());
  for (const Donation& offer : donations) {
    if (offer.output < 0 || static_cast<size_t>(offer.output) >= outputs.size() ||
        donated[static_cast<size_t>(offer.output)] != nullptr) {
      return absl::InternalError("a donation names no output, or one output twice");
    }
    const std::string refusal =
        DonationRefusal(built.graph, plan->plan, offer, /*storage_holders_in_graph=*/1);
    if (refusal.empty()) {
      donated[static_cast<size_t>(offer.output)] = offer.storage;
      base::metrics::Add("DonatedBytes", static_cast<int64_t>(offer.storage->bytes()));
      continue;
    }
    base::metrics::Add("DonationsDeclined", 1);
    if (base::CurrentSettings().debug >= 1) {
      std::fprintf(stderr, "lazycl: buffer of %s not reused for output %d: %s\n",
                   offer.storage->manager().Label(offer.storage->id()).c_str(), offer.output,
                   refusal.c_str());
    }
  }
  if (recipe == nullptr) {
    for (auto& storage : built.params) params.push_back({storage, 0});
  }
  // Every result is live at the end: a graph whose results cannot all fit fails before any
  // kernel runs, rather than after filling the device with the first ones.
  const std::vector<size_t>& result_bytes = OutputBytes(*plan);
  std::vector<size_t> new_bytes;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (donated[k] == nullptr) new_bytes.push_back(result_bytes[k]);
  }
  if (absl::Status s = buffers.CheckRoom(new_bytes); !s.ok()) return s;
  std::vector<Binding> results;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (donated[k] != nullptr) {
      results.push_back({donated[k], 0});
      continue;
    }
    results.push_back(
        {std::make_shared<ir::Storage>(where, &buffers, result_bytes[k],
                                       absl::StrCat("result ", dtype_name(outputs[k]->dtype),
                                                    ir::ShapeString(outputs[k]->shape))),
         0});
  }
  if (absl::Status s = Execute(device_index, *plan, params, results, scalars); !s.ok()) return s;

  if (base::CurrentSettings().debug >= 1) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(
        stderr,
        "lazycl: graph %016llx on cl:%d: %zu nodes, %zu kernels, %zu params, %.3f ms host%s\n",
        static_cast<unsigned long long>(plan->hash), device_index,
        recipe != nullptr ? order.size() : built.graph.nodes.size(), plan->plan.kernels.size(),
        params.size(), ms, recipe != nullptr ? " (built as before)" : "");
  }
  std::vector<std::shared_ptr<ir::Storage>> storages;
  for (Binding& r : results) storages.push_back(std::move(r.storage));
  return storages;
}

// Computes one node as a graph of its own: what constant folding computes a value with.
ComputeNode ComputeAlone(int device_index) {
  return [device_index](const Node& node) -> absl::StatusOr<std::shared_ptr<ir::Storage>> {
    absl::StatusOr<std::vector<std::shared_ptr<ir::Storage>>> r =
        RunGraph(device_index, {&node}, {});
    if (!r.ok()) return r.status();
    return std::move((*r)[0]);
  };
}

// RunGraph after constant folding (runtime/constant_fold.h). A graph offered donations is run
// as it is: a donation is judged by who holds the donated leaf, and the rebuilt nodes would
// hold it too.
absl::StatusOr<std::vector<std::shared_ptr<ir::Storage>>> RunFolded(
    int device_index, const std::vector<const Node*>& outputs,
    std::span<const Donation> donations) {
  if (!donations.empty()) return RunGraph(device_index, outputs, donations);
  absl::StatusOr<Folded> folded = FoldConstants(device_index, outputs, ComputeAlone(device_index));
  if (!folded.ok()) return folded.status();
  if (!folded->changed) return RunGraph(device_index, outputs, donations);
  std::vector<const Node*> remaining;
  for (const ir::NodePtr& root : folded->roots) {
    if (root != nullptr) remaining.push_back(root.get());
  }
  std::vector<std::shared_ptr<ir::Storage>> results = std::move(folded->ready);
  if (remaining.empty()) return results;
  absl::StatusOr<std::vector<std::shared_ptr<ir::Storage>>> computed =
      RunGraph(device_index, remaining, {});
  if (!computed.ok()) return computed.status();
  size_t next = 0;
  for (auto& r : results) {
    if (r == nullptr) r = std::move((*computed)[next++]);
  }
  return results;
}

}  // namespace

absl::Status PrepareLeaf(const Node& leaf) {
  const ir::Storage& storage = *leaf.storage;
  // A deferred result is computed now, before the kernels that read it are queued.
  if (storage.pending()) {
    if (absl::Status s = storage.Produce(); !s.ok()) return s;
  }
  if (storage.manager().IsWritten(storage.id())) return absl::OkStatus();
  if (storage.placeholder())
    return absl::FailedPreconditionError(PlaceholderMessage(leaf, storage.device()));
  return storage.manager().CheckReadable(storage.id());
}

std::string PlaceholderMessage(const Node& leaf, const Device& device) {
  return absl::StrCat(
      "tensor ", dtype_name(leaf.dtype), ir::ShapeString(leaf.shape), " on ", device.str(),
      " is a placeholder: it has a shape, a dtype and a device but no data, so its values "
      "cannot be read or computed with (pass real data where this value is needed)");
}

BuiltGraph BuildGraph(const std::vector<const Node*>& outputs, bool bind_offsets,
                      std::vector<const Node*> order) {
  BuiltGraph built;
  kernels::Graph& graph = built.graph;
  graph.bind_offsets = bind_offsets;
  graph.nodes = order.empty() ? TopologicalOrder(outputs) : std::move(order);
  // f16 and bf16 values compute in f32 (ir/half_precision.h): the graph lowered is the rewritten
  // one, with the same outputs' shapes and dtypes and the same Buffer leaves.
  std::vector<const Node*> roots = outputs;
  if (std::any_of(graph.nodes.begin(), graph.nodes.end(),
                  [](const Node* n) { return is_half(n->dtype); })) {
    built.rewritten = ir::ComputeHalfInF32(outputs, &built.scalars_made);
    for (size_t k = 0; k < roots.size(); ++k) {
      if (built.rewritten[k] != nullptr) roots[k] = built.rewritten[k].get();
    }
    graph.nodes = TopologicalOrder(roots);
  }
  // A slice of a value that nothing else reads is taken of its operands (ir/sink_slices.h).
  std::vector<ir::NodePtr> sunk = ir::SinkSlices(roots, graph.nodes);
  if (std::any_of(sunk.begin(), sunk.end(), [](const ir::NodePtr& n) { return n != nullptr; })) {
    built.rewritten.resize(roots.size());
    for (size_t k = 0; k < roots.size(); ++k) {
      if (sunk[k] == nullptr) continue;
      roots[k] = sunk[k].get();
      built.rewritten[k] = std::move(sunk[k]);  // holds the half-precision nodes it reads too
    }
    graph.nodes = TopologicalOrder(roots);
  }
  IndexLeaves(roots, built);
  return built;
}

namespace {

// Tiered execution runs a graph on the generic kernels when that is expected to take less than
// building its fused program. Conservative figures, so that it holds on a slow CPU: the generic
// kernels move at least 4 GB/s and their tiled matmul computes at least 2 GFLOP/s (PoCL 3.1 on a
// 2-core AVX-512 VM measured ~11 GB/s and ~4.7 GFLOP/s); a build costs at least 75 ms plus 25 ms
// per kernel (PoCL: ~75 ms a program before its first kernel, ~40 ms per kernel at its first
// launch). A GPU is faster at both and slower to build, so the rule errs to the build there.
constexpr double kGenericBytesPerMs = 4e6;
constexpr double kGenericFlopsPerMs = 2e6;
constexpr double kBuildMs = 75;
constexpr double kBuildMsPerKernel = 25;

// Lowers `graph` onto the generic kernels for `cached` (kernels/lower_generic.h), where they
// cover it and, in tiered mode, faster than its fused program builds (by the figures above). Called
// before the plan is shared, or under its kernels_mu.
void AttachGeneric(const kernels::Graph& graph, const kernels::Target& target, CachedPlan& cached) {
  const base::Settings& settings = base::CurrentSettings();
  cached.generic_tried = true;
  absl::StatusOr<kernels::Plan> generic = kernels::LowerGeneric(graph, target);
  if (!generic.ok()) {
    base::metrics::Add("GenericTierUncovered", 1);
    if (settings.debug >= 1) {
      std::fprintf(stderr, "lazycl: graph %016llx waits for its fused program: %s\n",
                   static_cast<unsigned long long>(cached.hash),
                   std::string(generic.status().message()).c_str());
    }
    return;
  }
  // Where the generic kernels would take longer than building the fused program, it is built at
  // once (LAZYCL_COMPILE=generic runs them whatever they cost).
  int64_t bytes = 0, flops = 0;
  for (const kernels::KernelSpec& spec : generic->kernels) {
    bytes += spec.bytes;
    flops += spec.flops;
  }
  const double generic_ms = static_cast<double>(bytes) / kGenericBytesPerMs +
                            static_cast<double>(flops) / kGenericFlopsPerMs;
  const double build_ms =
      kBuildMs + kBuildMsPerKernel * static_cast<double>(cached.plan.kernels.size());
  if (CurrentCompileMode() == base::CompileMode::kTiered && generic_ms >= build_ms) {
    base::metrics::Add("GenericTierTooCostly", 1);
    if (settings.debug >= 1) {
      std::fprintf(stderr,
                   "lazycl: graph %016llx waits for its fused program: %lld bytes and %lld flops "
                   "on the generic kernels (~%.0f ms) against %zu kernels to build (~%.0f ms)\n",
                   static_cast<unsigned long long>(cached.hash), static_cast<long long>(bytes),
                   static_cast<long long>(flops), generic_ms, cached.plan.kernels.size(), build_ms);
    }
    return;
  }
  auto plan = std::make_shared<CachedPlan>();
  plan->hash = cached.hash;
  plan->plan = *std::move(generic);
  for (const kernels::KernelSpec& spec : plan->plan.kernels) {
    plan->kernels.emplace_back(spec.launches.size(), nullptr);
  }
  if (settings.debug >= 3) {
    std::fprintf(stderr, "lazycl: graph %016llx on the generic kernels:\n",
                 static_cast<unsigned long long>(cached.hash));
    for (const kernels::KernelSpec& spec : plan->plan.kernels)
      std::fprintf(stderr, "  %s\n", spec.summary.c_str());
  }
  cached.generic = std::move(plan);
}

}  // namespace

absl::StatusOr<std::shared_ptr<CachedPlan>> PreparePlan(int device_index,
                                                        const kernels::Graph& graph) {
  backend::Device& device = OpenClDevice(device_index);
  const base::Settings& settings = base::CurrentSettings();
  std::vector<uint64_t> key = GraphKey(graph);
  key.push_back(MatmulBlockingGeneration());  // plans of an overridden blocking are not reused
  const uint64_t hash = absl::HashOf(key);
  std::shared_ptr<CachedPlan> hit;
  {
    std::lock_guard<std::mutex> lock(CacheMutex());
    hit = GraphCaches()[device_index].Find(hash, key);
  }
  if (hit != nullptr) {
    base::metrics::Add("GraphCacheHits", 1);
    // A plan made under another mode (SetCompileMode) gets its generic plan when first asked.
    if (CurrentCompileMode() == base::CompileMode::kGeneric) {
      std::lock_guard<std::mutex> lock(hit->kernels_mu);
      if (!hit->generic_tried) {
        absl::StatusOr<kernels::Target> target = TargetOf(device, graph);
        if (!target.ok()) return target.status();
        AttachGeneric(graph, *target, *hit);
      }
    }
    return hit;
  }
  // Lowered unlocked: two threads may lower one graph at once; the later insert wins.
  absl::StatusOr<kernels::Target> target = TargetOf(device, graph);
  if (!target.ok()) return target.status();
  absl::StatusOr<kernels::Plan> plan = kernels::Lower(graph, *target);
  if (!plan.ok()) return plan.status();
  auto cached = std::make_shared<CachedPlan>();
  cached->hash = hash;
  cached->key = std::move(key);
  cached->plan = *std::move(plan);
  for (const kernels::KernelSpec& spec : cached->plan.kernels) {
    cached->kernels.emplace_back(spec.launches.size(), nullptr);
  }
  // A graph whose fused programs would need the compiler gets its generic plan too.
  const base::CompileMode mode = CurrentCompileMode();
  // (On a driver that compiles kernels at their first launch, not before lazycl-bench warmup
  // has warmed the generic library: until then the tier would never be taken.)
  const backend::ProgramSource library{kernels::GenericLibraryFor(target->cpu, target->fp64).source,
                                       ""};
  if (mode == base::CompileMode::kGeneric ||
      (mode == base::CompileMode::kTiered && !device.ProgramsCached(Sources(cached->plan)) &&
       (!device.CompilesAtFirstLaunch() || device.ProgramsWarm({&library, 1})))) {
    AttachGeneric(graph, *target, *cached);
  }
  {
    std::lock_guard<std::mutex> lock(CacheMutex());
    GraphCaches()[device_index].Insert(cached);
  }
  base::metrics::Add("GraphCompiles", 1);
  if (settings.debug >= 2) {
    std::fprintf(stderr, "lazycl: graph %016llx IR:\n%s", static_cast<unsigned long long>(hash),
                 GraphText(graph).c_str());
  }
  if (settings.debug >= 3) {
    std::fprintf(stderr, "lazycl: graph %016llx OpenCL C:\n%s",
                 static_cast<unsigned long long>(hash), PlanSource(cached->plan).c_str());
  }
  if (!settings.dump_dir.empty()) DumpGraph(settings.dump_dir, hash, graph, cached->plan);
  return cached;
}

const std::vector<size_t>& OutputBytes(const CachedPlan& plan) { return plan.plan.output_bytes; }

size_t SetGraphCacheCapacity(size_t plans) {
  LAZYCL_CHECK(plans > 0, "a graph cache holds at least one plan");
  std::lock_guard<std::mutex> lock(CacheMutex());
  const size_t previous = GraphCache::capacity == 0
                              ? static_cast<size_t>(base::CurrentSettings().graph_cache_size)
                              : GraphCache::capacity;
  GraphCache::capacity = plans;
  for (auto& [device, cache] : GraphCaches()) cache.Trim();
  return previous;
}

namespace {

// Whether the generic plan may run with these bindings: an output that shares its buffer with a
// parameter (a donation, runtime/donation.h) must be written after every read of that parameter,
// which the fused plan's check (DonationRefusal) does not promise for the generic plan's order.
bool GenericBindingsSafe(const kernels::Plan& plan, std::span<const Binding> params,
                         std::span<const Binding> outputs) {
  for (size_t o = 0; o < outputs.size(); ++o) {
    for (size_t p = 0; p < params.size(); ++p) {
      if (params[p].storage->id() != outputs[o].storage->id()) continue;
      int last_write = -1, last_read = -1;
      for (size_t k = 0; k < plan.kernels.size(); ++k) {
        for (const kernels::KernelArgSpec& a : plan.kernels[k].args) {
          if (a.kind != kernels::KernelArgSpec::Kind::kBuffer) continue;
          if (a.buffer.kind == kernels::BufferRef::Kind::kOutput &&
              a.buffer.index == static_cast<int>(o) && a.written)
            last_write = static_cast<int>(k);
          if (a.buffer.kind == kernels::BufferRef::Kind::kParam &&
              a.buffer.index == static_cast<int>(p))
            last_read = static_cast<int>(k);
        }
      }
      if (last_read > last_write) return false;
    }
  }
  return true;
}

// Starts building the fused programs of `cached` on the background builder once `after` is
// ready and the device has finished the work enqueued by then (the generic run that the build
// is for: on a CPU device the compiler would otherwise take cores from it; measured on W1 at
// 2^24 elements, a first result of 16-105 ms with the build beside the run, 14-19 ms without);
// the plan's runs use the programs once they are ready.
void BuildInBackground(int device_index, std::shared_ptr<CachedPlan> cached,
                       std::shared_future<void> after) {
  SubmitBackgroundBuild([device_index, cached = std::move(cached), after = std::move(after)] {
    after.wait();
    (void)OpenClDevice(device_index).Finish();  // a failure there is the run's to report
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = OpenClDevice(device_index).PreparePrograms(Sources(cached->plan));
    base::metrics::RecordTime("BackgroundBuildTime",
                              std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now() - start)
                                  .count());
    std::lock_guard<std::mutex> lock(cached->kernels_mu);
    if (s.ok()) {
      cached->programs_ready = true;
      cached->build = CachedPlan::Build::kNone;
    } else {
      cached->build = CachedPlan::Build::kFailed;
    }
  });
}

// The plan to run now: `cached` once its programs are ready, built at once (LAZYCL_COMPILE=sync,
// or a graph the generic kernels do not cover); otherwise its generic plan, while the fused
// programs build in the background.
absl::StatusOr<CachedPlan*> ChooseTier(int device_index, CachedPlan& cached,
                                       std::span<const Binding> params,
                                       std::span<const Binding> outputs,
                                       std::shared_future<void> enqueued) {
  backend::Device& device = OpenClDevice(device_index);
  const base::CompileMode mode = CurrentCompileMode();
  CachedPlan* generic = nullptr;
  {
    std::lock_guard<std::mutex> lock(cached.kernels_mu);
    // Judged only where the generic plan may run: a plan whose programs are ready (every run of
    // a training step after its first ones) asks nothing.
    auto usable_now = [&] {
      return cached.generic != nullptr &&
             GenericBindingsSafe(cached.generic->plan, params, outputs);
    };
    if (mode == base::CompileMode::kGeneric && usable_now()) {
      generic = cached.generic.get();
    } else if (!cached.programs_ready) {
      const bool usable = usable_now();
      if (usable && cached.build == CachedPlan::Build::kInBackground) {
        generic = cached.generic.get();
      } else if (usable && cached.build == CachedPlan::Build::kNone &&
                 device.ProgramsWarm(Sources(cached.generic->plan))) {
        cached.build = CachedPlan::Build::kInBackground;
        BuildInBackground(device_index, cached.shared_from_this(), std::move(enqueued));
        generic = cached.generic.get();
      } else {
        if (usable && cached.build == CachedPlan::Build::kNone && !device.CompilesAtFirstLaunch()) {
          // The generic kernels are not built on this device yet: built in the background
          // after this graph's own programs, for the graphs after it. (Where the driver compiles
          // each kernel at its first launch, that would leave each generic kernel's first use
          // ~40 ms of compiling, often more than building the graph's own program: there
          // lazycl-bench warmup makes them ready, runtime/generic_warmup.h.)
          SubmitBackgroundBuild([device_index, g = cached.generic] {
            (void)OpenClDevice(device_index).PreparePrograms(Sources(g->plan));
          });
        }
        if (absl::Status s = device.PreparePrograms(Sources(cached.plan)); !s.ok()) return s;
        cached.programs_ready = true;
        cached.build = CachedPlan::Build::kNone;
      }
    }
  }
  if (generic == nullptr) return &cached;
  base::metrics::Add("GenericTierRuns", 1);
  std::lock_guard<std::mutex> lock(generic->kernels_mu);
  if (!generic->programs_ready) {
    if (absl::Status s = device.PreparePrograms(Sources(generic->plan)); !s.ok()) return s;
    generic->programs_ready = true;
  }
  return generic;
}

}  // namespace

absl::Status Execute(int device_index, CachedPlan& chosen, std::span<const Binding> params,
                     std::span<const Binding> outputs, std::span<const double> scalars) {
  backend::Device& device = OpenClDevice(device_index);
  backend::BufferManager& buffers = device.buffers();
  // Opened when this run's kernels are enqueued, or when it fails: a background build that this
  // run starts waits for it (BuildInBackground).
  struct Gate {
    std::promise<void> promise;
    ~Gate() { promise.set_value(); }
  } gate;
  absl::StatusOr<CachedPlan*> tier =
      ChooseTier(device_index, chosen, params, outputs, gate.promise.get_future().share());
  if (!tier.ok()) return tier.status();
  CachedPlan& cached = **tier;
  const kernels::Plan& plan = cached.plan;
  const Device where = Device::opencl(device_index);
  // Size-0 results are written by no kernel but still hold (no) data.
  for (const Binding& out : outputs) {
    if (out.storage->bytes() == 0 && !buffers.IsWritten(out.storage->id())) {
      if (absl::Status s = buffers.PrepareWrite(out.storage->id()); !s.ok()) return s;
    }
  }
  // Intermediates live from their first writer to their last reader; freed ones go back to
  // the pool, where later intermediates of the same size find them.
  // Held in place, not each in an allocation of its own (~50 mallocs a char-LM sampling token).
  std::vector<std::optional<ir::Storage>> temps(plan.temp_bytes.size());
  for (size_t t = 0; t < temps.size(); ++t) {
    temps[t].emplace(where, &buffers, plan.temp_bytes[t], "intermediate");
    if (plan.temp_bytes[t] == 0) {
      if (absl::Status s = buffers.PrepareWrite(temps[t]->id()); !s.ok()) return s;
    }
  }
  auto binding = [&](const kernels::BufferRef& ref) -> std::pair<backend::BufferId, int64_t> {
    switch (ref.kind) {
      case kernels::BufferRef::Kind::kParam:
        return {params[ref.index].storage->id(), params[ref.index].offset};
      case kernels::BufferRef::Kind::kOutput:
        return {outputs[ref.index].storage->id(), outputs[ref.index].offset};
      case kernels::BufferRef::Kind::kTemp:
        return {temps[ref.index]->id(), 0};
    }
    return {0, 0};
  };

  auto arg = [&](const kernels::KernelArgSpec& a) {
    switch (a.kind) {
      case kernels::KernelArgSpec::Kind::kBuffer: {
        const backend::BufferId id = binding(a.buffer).first;
        return a.written ? backend::KernelArg::Write(id) : backend::KernelArg::Read(id);
      }
      case kernels::KernelArgSpec::Kind::kInt32:
        return backend::KernelArg::Int32(static_cast<int32_t>(a.value));
      case kernels::KernelArgSpec::Kind::kInt64:
        return backend::KernelArg::Int64(a.value);
      case kernels::KernelArgSpec::Kind::kOffset: {
        const int64_t value = a.value + binding(a.buffer).second;
        return a.wide ? backend::KernelArg::Int64(value)
                      : backend::KernelArg::Int32(static_cast<int32_t>(value));
      }
      case kernels::KernelArgSpec::Kind::kScalar:
      case kernels::KernelArgSpec::Kind::kNumber: {
        // Stored as the dtype holds it (ir::MakeScalar, ir::MakeConstant), so these conversions
        // are exact.
        const double v = a.kind == kernels::KernelArgSpec::Kind::kNumber
                             ? a.number
                             : scalars[static_cast<size_t>(a.scalar)];
        switch (a.dtype) {
          case DType::f32:
            return backend::KernelArg::Float32(static_cast<float>(v));
          case DType::i64:
            return backend::KernelArg::Int64(static_cast<int64_t>(v));
          case DType::i32:
          case DType::boolean:
            return backend::KernelArg::Int32(static_cast<int32_t>(v));
          case DType::f64:
            return backend::KernelArg::Float64(v);
          case DType::f16:
          case DType::bf16:
            break;  // half scalars are f32 after ir::ComputeHalfInF32
        }
        LAZYCL_CHECK(false, "a %s scalar reached a kernel", dtype_name(a.dtype));
        break;
      }
      case kernels::KernelArgSpec::Kind::kPack:
        LAZYCL_CHECK(false, "a packed argument outside a kernel's leading arguments");
        break;
    }
    return backend::KernelArg::Int32(0);
  };
  // The fields of the kernel's kPack arguments, each 64 bits, in order; reserved before any is
  // added, so that every packed argument's bytes stay where its KernelArg points.
  std::vector<int64_t> packed;
  // Profiling: each kernel's launches carry its row's tag.
  std::vector<int64_t> tags;
  if (profile::Enabled()) {
    const int64_t generation = profile::Generation();
    std::lock_guard<std::mutex> lock(cached.kernels_mu);
    if (cached.profile_generation != generation) {
      cached.profile_tags.clear();
      for (const kernels::KernelSpec& spec : plan.kernels)
        cached.profile_tags.push_back(profile::TagOf(device_index, spec));
      cached.profile_generation = generation;
    }
    tags = cached.profile_tags;
  }
  std::vector<backend::KernelArg> args;
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const kernels::KernelSpec& spec = plan.kernels[k];
    const int64_t tag = tags.empty() ? -1 : tags[k];
    bool counted = false;
    args.clear();
    packed.clear();
    size_t fields = 0;
    for (const kernels::KernelArgSpec& a : spec.args) fields += a.fields.size();
    packed.reserve(fields);
    for (const kernels::KernelArgSpec& a : spec.args) {
      if (a.kind != kernels::KernelArgSpec::Kind::kPack) {
        args.push_back(arg(a));
        continue;
      }
      const size_t first = packed.size();
      for (const kernels::KernelArgSpec& f : a.fields) {
        LAZYCL_CHECK(f.kind == kernels::KernelArgSpec::Kind::kInt64 ||
                         (f.kind == kernels::KernelArgSpec::Kind::kOffset && f.wide),
                     "a packed argument's field is not a 64-bit integer");
        packed.push_back(arg(f).i);
      }
      args.push_back(
          backend::KernelArg::Bytes(packed.data() + first, a.fields.size() * sizeof(int64_t)));
    }
    for (size_t l = 0; l < spec.launches.size(); ++l) {
      const kernels::Launch& launch = spec.launches[l];
      // A launch over nothing is not run, and its entry point is never created: creating one
      // costs a compile step at its first launch.
      if (std::find(launch.global.begin(), launch.global.end(), 0) != launch.global.end()) continue;
      backend::KernelRef kernel;
      {
        std::lock_guard<std::mutex> lock(cached.kernels_mu);
        backend::KernelRef& entry = cached.kernels[k][l];
        if (entry == nullptr) {
          absl::StatusOr<backend::KernelRef> created =
              device.GetKernel(spec.text(), spec.options, launch.name);
          if (!created.ok()) return created.status();
          entry = *created;
        }
        kernel = entry;
      }
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(spec.args.size()), args.end());
      for (const kernels::KernelArgSpec& a : launch.extra_args) args.push_back(arg(a));
      const int64_t launch_tag =
          tag < 0 ? -1
                  : tag + std::min<int64_t>(static_cast<int64_t>(l), profile::kLaunchesPerTag - 1);
      if (absl::Status s =
              device.Launch(kernel.get(), args, launch.global, launch.local, launch_tag);
          !s.ok())
        return s;
      if (tag >= 0 && !counted) {
        profile::CountRun(tag);
        counted = true;
      }
    }
    for (size_t t = 0; t < temps.size(); ++t) {
      if (plan.temp_last_use[t] == static_cast<int>(k)) temps[t].reset();
    }
  }
  if (!tags.empty()) profile::MaybeCollect(device_index, device);
  return absl::OkStatus();
}

FoldedOperands FoldOperands(int device, const ir::NodePtr& node) {
  return FoldOperands(device, node, ComputeAlone(device));
}

absl::StatusOr<std::vector<ir::NodePtr>> FoldOnce(int device,
                                                  const std::vector<ir::NodePtr>& roots) {
  std::vector<const Node*> raw;
  for (const ir::NodePtr& r : roots) raw.push_back(r.get());
  absl::StatusOr<Folded> folded = FoldConstants(device, raw, ComputeAlone(device));
  // What folding computed was only enqueued.
  if (absl::Status s = OpenClDevice(device).Finish(); !s.ok()) return s;
  if (!folded.ok()) return folded.status();
  if (!folded->changed) return roots;
  std::vector<ir::NodePtr> out;
  for (size_t k = 0; k < roots.size(); ++k) {
    out.push_back(folded->roots[k] != nullptr
                      ? folded->roots[k]
                      : ir::MakeBuffer(folded->ready[k], roots[k]->dtype, roots[k]->shape));
  }
  return out;
}

absl::StatusOr<std::vector<std::shared_ptr<ir::Storage>>> Materialize(
    int device, const std::vector<const Node*>& outputs, bool wait,
    std::span<const Donation> donations) {
  absl::StatusOr<std::vector<std::shared_ptr<ir::Storage>>> results =
      RunFolded(device, outputs, donations);
  // A graph that failed half-way may have launched kernels: drain them too.
  if (wait || !results.ok()) {
    if (absl::Status s = OpenClDevice(device).Finish(); !s.ok() && results.ok()) return s;
  }
  return results;
}

}  // namespace lazycl::runtime
