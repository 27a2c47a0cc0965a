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
#include "runtime/storage.h"

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

Tensor& Tensor::copy_from_host(const void* src, size_t bytes) {
  frontend::ImplOf(*this, "copy_from_host");
  TensorImpl& impl = *impl_;
  const ir::NodePtr old = frontend::NodeOf(impl);
  const int64_t n = ir::NumElements(old->shape);
  const size_t need = static_cast<size_t>(n) * dtype_size(old->dtype);
  if (bytes != need) {
    base::ThrowInvalid(
        "copy_from_host",
        absl::StrCat("the source holds ", bytes, " bytes but ", str(), " has ", n, " elements of ",
                     dtype_size(old->dtype), " bytes = ", need, " bytes"));
  }
  if (src == nullptr && bytes > 0) {
    base::ThrowInvalid("copy_from_host", absl::StrCat("the source is null for ", bytes, " bytes"));
  }
  if (is_placeholder()) {
    base::ThrowInvalid("copy_from_host",
                       absl::StrCat(str(), " is a placeholder: it has no buffer"));
  }
  if (old->dtype == DType::boolean) {
    const auto* b = static_cast<const uint8_t*>(src);
    for (size_t i = 0; i < bytes; ++i) {
      if (b[i] > 1) {
        base::ThrowInvalid("copy_from_host", absl::StrCat("byte ", i, " of the source is ", b[i],
                                                          "; a bool tensor's bytes are 0 or 1"));
      }
    }
  }
  // Into the tensor's own buffer when nobody else can see the old values: its leaf is held only
  // by this tensor and `old`, no other leaf shares its storage, and its bytes are not waiting in
  // a file or for a deferred scan (which would write them later). Commands already enqueued that
  // read it run first (the copy is on the same in-order queue and waits). Otherwise into a new
  // buffer, to which the tensor is rebound.
  if (old->op == ir::Op::kBuffer && old.use_count() == 2 && old->storage.use_count() == 1 &&
      !old->storage->manager().PendingSource(old->storage->id()).has_value() &&
      !old->storage->pending()) {
    if (bytes > 0) {
      base::ThrowIfError(old->storage->manager().Upload(old->storage->id(), src, 0, bytes));
    }
    return *this;
  }
  const Tensor fresh = frontend::FromHostBytes(src, bytes, old->dtype, old->shape, impl.device);
  frontend::RebindNode(impl, old, frontend::NodeOf(*fresh.impl()));
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
