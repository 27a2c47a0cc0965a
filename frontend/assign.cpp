#include "frontend/assign.h"

#include <map>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "base/status.h"
#include "frontend/dispatch.h"
#include "lazycl/autograd.h"
#include "lazycl/ops.h"
#include "runtime/executor.h"

namespace lazycl::frontend {

void AssignInPlace(const std::vector<TensorImpl*>& targets, const std::vector<Tensor>& values) {
  LAZYCL_CHECK(targets.size() == values.size(), "AssignInPlace: one value per target");
  struct Group {
    std::vector<ir::NodePtr> nodes;  // the pending values, held while they run
    std::vector<const ir::Node*> outputs;
    absl::flat_hash_map<const ir::Node*, int> output_of;
    std::vector<runtime::Donation> donations;
    std::vector<ir::NodePtr> old_leaves;        // each offer's leaf, held here (a known holder)
    std::vector<std::pair<size_t, int>> users;  // target index, output
  };
  std::map<int, Group> by_device;
  for (size_t i = 0; i < targets.size(); ++i) {
    ir::NodePtr value = NodeOf(*values[i].impl());
    if (!targets[i]->device.is_opencl() || value->op == ir::Op::kBuffer) continue;
    Group& g = by_device[targets[i]->device.index()];
    auto [it, inserted] = g.output_of.emplace(value.get(), static_cast<int>(g.outputs.size()));
    if (inserted) {
      g.outputs.push_back(value.get());
      g.nodes.push_back(std::move(value));
      ir::NodePtr old = NodeOf(*targets[i]);
      if (old->op == ir::Op::kBuffer && !old->storage->placeholder()) {
        // Known holders of the old leaf: the target's own node and `old_leaves`.
        g.donations.push_back({it->second, old->storage, 2});
        g.old_leaves.push_back(std::move(old));
      }
    }
    g.users.push_back({i, it->second});
  }
  std::map<size_t, ir::NodePtr> new_nodes;
  for (auto& [device, g] : by_device) {
    absl::StatusOr<std::vector<std::shared_ptr<ir::Storage>>> results =
        runtime::Materialize(device, g.outputs, /*wait=*/true, g.donations);
    base::ThrowIfError(results.status());
    for (auto& [i, k] : g.users) {
      const ir::Node* out = g.outputs[static_cast<size_t>(k)];
      new_nodes[i] = ir::MakeBuffer((*results)[static_cast<size_t>(k)], out->dtype, out->shape);
    }
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    auto it = new_nodes.find(i);
    ir::NodePtr node = it != new_nodes.end() ? it->second : NodeOf(*values[i].impl());
    RebindNode(*targets[i], NodeOf(*targets[i]), std::move(node));
  }
}

}  // namespace lazycl::frontend

namespace lazycl {

Tensor& Tensor::copy_(const Tensor& src) {
  const TensorImpl& impl = frontend::ImplOf(*this, "copy_");
  frontend::ImplOf(src, "copy_");
  if (src.shape() != shape() || src.dtype() != dtype()) {
    base::ThrowInvalid("copy_", absl::StrCat("the source is ", src.str(), " but the tensor is ",
                                             str(), "; copy_ needs one shape and dtype"));
  }
  if (is_placeholder()) {
    base::ThrowInvalid("copy_", absl::StrCat(str(), " is a placeholder: it has no buffer"));
  }
  NoGradGuard no_grad;
  // A value of its own (never the source's node itself), on this tensor's device.
  Tensor value = src.to(impl.device) * 1.0;
  if (!is_floating(dtype())) value = cast(src.to(impl.device), dtype());
  frontend::AssignInPlace({impl_.get()}, {value});
  return *this;
}

Tensor& Tensor::set_grad(const Tensor& g) {
  frontend::ImplOf(*this, "set_grad");
  if (g.defined() && (g.shape() != shape() || g.dtype() != dtype() || !(g.device() == device()))) {
    base::ThrowInvalid("set_grad", absl::StrCat("the gradient is ", g.str(), " but the tensor is ",
                                                str(), "; they need one shape, dtype and device"));
  }
  impl_->grad = g;
  return *this;
}

}  // namespace lazycl
