#include "frontend/materialize.h"

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
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
    Group& g = by_device[t->device.index()];
    auto [it, inserted] = g.output_of.emplace(node.get(), static_cast<int>(g.outputs.size()));
    if (inserted) {
      g.outputs.push_back(node.get());
      g.nodes.push_back(std::move(node));
    }
    g.users.push_back({t, it->second});
  }
  for (auto& [device, g] : by_device) {
    absl::StatusOr<std::vector<std::shared_ptr<ir::Storage>>> results =
        runtime::Materialize(device, g.outputs, wait);
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

}  // namespace lazycl::frontend
