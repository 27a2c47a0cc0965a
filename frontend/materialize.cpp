#include "frontend/materialize.h"

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "base/metrics_registry.h"
#include "ir/post_order.h"
#include "runtime/devices.h"
#include "runtime/executor.h"

namespace lazycl::frontend {

namespace {

std::mutex& NodeMutex() {
  static auto* mutex = new std::mutex();  // never destroyed: tensors may outlive main()
  return *mutex;
}

}  // namespace

ir::NodePtr NodeOf(const TensorImpl& impl) {
  std::lock_guard<std::mutex> lock(NodeMutex());
  return impl.node;
}

void RebindNode(TensorImpl& impl, const ir::NodePtr& expected, ir::NodePtr leaf) {
  ir::NodePtr old;  // released after the lock: dropping a graph can take long
  std::lock_guard<std::mutex> lock(NodeMutex());
  if (impl.node != expected) return;
  old = std::exchange(impl.node, std::move(leaf));
}

absl::Status Materialize(const std::vector<TensorImpl*>& tensors, bool wait) {
  struct Group {
    std::vector<ir::NodePtr> nodes;  // held: another thread may rebind the tensors meanwhile
    std::vector<const ir::Node*> outputs;
    absl::flat_hash_map<const ir::Node*, int> output_of;
    std::vector<std::pair<TensorImpl*, int>> users;  // each tensor and the output it takes
  };
  std::map<int, Group> by_device;
  std::set<int> produced;  // devices where a deferred scan was run here
  for (TensorImpl* t : tensors) {
    ir::NodePtr node = NodeOf(*t);
    if (!t->device.is_opencl()) continue;
    if (node->op == ir::Op::kBuffer) {
      // A deferred scan's result (runtime/storage.h: Producer) is computed when first needed.
      if (node->storage->pending()) {
        if (absl::Status s = node->storage->Produce(); !s.ok()) return s;
        produced.insert(t->device.index());
      }
      continue;
    }
    if (std::shared_ptr<ir::Storage> value = node->memo.value()) {  // by an earlier cut
      RebindNode(*t, node, ir::MakeBuffer(std::move(value), node->dtype, node->shape));
      continue;
    }
    Group& g = by_device[t->device.index()];
    auto [it, inserted] = g.output_of.emplace(node.get(), static_cast<int>(g.outputs.size()));
    if (inserted) {
      g.outputs.push_back(node.get());
      g.nodes.push_back(std::move(node));
    }
    g.users.push_back({t, it->second});
  }
  for (auto& [device, g] : by_device) {
    // Nodes an automatic cut computed are read from their buffers (the rebuilt nodes are held
    // until the graph has run).
    const std::vector<ir::NodePtr> roots = ir::ReadComputed(g.nodes);
    std::vector<const ir::Node*> outputs;
    for (const ir::NodePtr& r : roots) outputs.push_back(r.get());
    absl::StatusOr<std::vector<std::shared_ptr<ir::Storage>>> results =
        runtime::Materialize(device, outputs, wait);
    if (!results.ok()) return results.status();
    // Nodes are read before any is replaced: two handles may share one TensorImpl.
    std::vector<ir::NodePtr> leaves;
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      leaves.push_back(ir::MakeBuffer((*results)[k], g.outputs[k]->dtype, g.outputs[k]->shape));
    }
    for (auto& [t, k] : g.users) RebindNode(*t, g.nodes[k], leaves[k]);
  }
  // A scan's steps may be left queued (runtime/step_loop.h); a graph of the same device queued
  // behind them waited above, else wait for them here.
  for (int device : produced) {
    if (!wait || by_device.contains(device)) continue;
    if (absl::Status s = runtime::OpenClDevice(device).Finish(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

namespace {

// Where a cut's graph ends: at leaves and at values earlier cuts computed.
bool Outside(const ir::Node& n) { return n.pending == 0 || n.memo.computed(); }

// The nodes of `root`'s graph (not `root`) that something else holds too: read more often than
// the graph itself reads them (besides the copy taken here).
std::vector<ir::NodePtr> HeldElsewhere(const ir::NodePtr& root) {
  const ir::Node* const root_list[] = {root.get()};
  const std::vector<const ir::Node*> order = ir::PostOrder(root_list, Outside);
  absl::flat_hash_map<const ir::Node*, int64_t> reads;
  std::vector<ir::NodePtr> held;
  for (const ir::Node* n : order) {
    if (Outside(*n)) continue;
    for (const ir::NodePtr& o : n->operands) {
      if (++reads[o.get()] == 1 && !Outside(*o)) held.push_back(o);
    }
  }
  std::erase_if(held, [&](const ir::NodePtr& n) { return n.use_count() <= reads.at(n.get()) + 1; });
  return held;
}

// Which values a cut keeps for the `held` ones. A held value made by an elementwise op or a view
// costs no kernel of its own when a later graph computes it again (fused into what reads it),
// where keeping it costs a kernel and its bytes. Such a value is kept only where computing it
// again would take more than kMaxRecomputedOps of those ops; otherwise the values they read that
// kernels compute (matmuls, reductions, gathers: its cone's frontier) are kept in its place.
// Measured on `lazycl-bench transfer --model llama --train` (a 4-layer loop, whose tape holds
// every value): keeping every held value, 61 MiB peak and 384-429 ms for 10 steps; with the
// rule, 34 MiB and 311-386 ms; with no limit on the recomputing, 19.5 MiB and 356-468 ms.
std::vector<ir::NodePtr> ValuesToKeep(const std::vector<ir::NodePtr>& held) {
  constexpr int kMaxRecomputedOps = 8;
  auto cheap = [](const ir::Node& n) { return ir::IsElementwise(n.op) || ir::IsView(n.op); };
  std::vector<ir::NodePtr> kept;
  absl::flat_hash_set<const ir::Node*> in_kept;
  auto keep = [&](const ir::NodePtr& n) {
    if (in_kept.insert(n.get()).second) kept.push_back(n);
  };
  for (const ir::NodePtr& n : held) {
    if (!cheap(*n)) {
      keep(n);
      continue;
    }
    absl::flat_hash_set<const ir::Node*> seen;
    std::vector<ir::NodePtr> frontier, stack = {n};
    int ops = 0;
    while (!stack.empty() && ops <= kMaxRecomputedOps) {
      ir::NodePtr m = std::move(stack.back());
      stack.pop_back();
      if (Outside(*m) || !seen.insert(m.get()).second) continue;
      if (!cheap(*m)) {
        frontier.push_back(std::move(m));
        continue;
      }
      ++ops;
      for (const ir::NodePtr& o : m->operands) stack.push_back(o);
    }
    if (ops > kMaxRecomputedOps) {
      keep(n);
    } else {
      for (const ir::NodePtr& f : frontier) keep(f);
    }
  }
  return kept;
}

}  // namespace

absl::Status MaterializeCut(TensorImpl& t) {
  const ir::NodePtr root = NodeOf(t);
  if (!t.device.is_opencl() || root->op == ir::Op::kBuffer) return Materialize({&t});
  const std::vector<ir::NodePtr> kept = ValuesToKeep(HeldElsewhere(root));
  std::vector<ir::NodePtr> wanted = {root};
  wanted.insert(wanted.end(), kept.begin(), kept.end());
  const std::vector<ir::NodePtr> computed = ir::ReadComputed(wanted);
  std::vector<const ir::Node*> outputs;
  for (const ir::NodePtr& n : computed) outputs.push_back(n.get());
  base::metrics::Add("AutomaticCutSharedValues", static_cast<int64_t>(kept.size()));
  // The cut waits for the work queued before it (the graph of the cut before, say), then queues
  // its own without waiting: the host builds the next graph while the device runs this one, and
  // the device is never more than one cut graph behind. (Waiting for its own graph kept the
  // device idle while the host built the next: a 4-layer char-LM sampling loop cut every 300
  // nodes took 4.0-4.7 ms a token that way, 2.9-3.1 ms this way; see README.)
  if (absl::Status s = runtime::OpenClDevice(t.device.index()).Finish(); !s.ok()) return s;
  absl::StatusOr<std::vector<std::shared_ptr<ir::Storage>>> results =
      runtime::Materialize(t.device.index(), outputs, /*wait=*/false);
  if (!results.ok()) return results.status();
  for (size_t k = 0; k < kept.size(); ++k) kept[k]->memo.set_value((*results)[k + 1]);
  RebindNode(t, root, ir::MakeBuffer((*results)[0], root->dtype, root->shape));
  return absl::OkStatus();
}

}  // namespace lazycl::frontend
