#include "frontend/materialize.h"

#include <map>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "runtime/executor.h"

namespace lazycl::frontend {

absl::Status Materialize(const std::vector<TensorImpl*>& tensors, bool wait) {
  struct Group {
    std::vector<const ir::Node*> outputs;
    absl::flat_hash_map<const ir::Node*, int> output_of;
    std::vector<std::pair<TensorImpl*, int>> users;  // each tensor and the output it takes
  };
  std::map<int, Group> by_device;
  for (TensorImpl* t : tensors) {
    if (!t->device.is_opencl() || t->node->op == ir::Op::kBuffer) continue;
    Group& g = by_device[t->device.index()];
    auto [it, inserted] = g.output_of.emplace(t->node.get(), static_cast<int>(g.outputs.size()));
    if (inserted) g.outputs.push_back(t->node.get());
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
    for (auto& [t, k] : g.users) t->node = leaves[k];
  }
  return absl::OkStatus();
}

}  // namespace lazycl::frontend
