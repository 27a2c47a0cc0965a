#include "frontend/dispatch.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backend/host_memory.h"
#include "base/metrics_registry.h"
#include "base/status.h"
#include "frontend/materialize.h"
#include "frontend/trace_scope.h"
#include "lazycl/autograd.h"
#include "runtime/devices.h"
#include "runtime/executor.h"
#include "runtime/host_eval.h"
#include "runtime/storage.h"

namespace lazycl::frontend {

const TensorImpl& ImplOf(const Tensor& t, absl::string_view op) {
  if (!t.defined())
    base::Throw(absl::InvalidArgumentError(
        absl::StrCat(op, ": the tensor is undefined (default-constructed)")));
  return *t.impl();
}

Device OpDevice(std::span<const Tensor* const> operands, absl::string_view op) {
  Device device = Device::host();
  for (const Tensor* t : operands) {
    const Device d = ImplOf(*t, op).device;
    if (d.is_host()) continue;
    if (device.is_opencl() && device != d) {
      base::Throw(absl::InvalidArgumentError(
          absl::StrCat(op, ": operands live on different devices, ", device.str(), " and ", d.str(),
                       "; move one with to()")));
    }
    device = d;
  }
  return device;
}

std::shared_ptr<ir::Storage> NewStorage(Device device, size_t bytes, std::string label) {
  backend::BufferManager* manager =
      device.is_host() ? static_cast<backend::BufferManager*>(&backend::HostMemory())
                       : &runtime::OpenClDevice(device.index()).buffers();
  return std::make_shared<ir::Storage>(device, manager, bytes, std::move(label));
}

namespace {

// Computes a device tensor if it is pending; Error if that needs a placeholder's data. Without
// `wait` the kernels may still be queued on return.
void Compute(const Tensor& t, bool wait) {
  TensorImpl* impl = t.impl().get();
  base::ThrowIfError(Materialize({impl}, wait));
}

// The Buffer holding t's value, computed now if pending (its kernels still queued on return
// without `wait`); Error if that needs a placeholder's data or t is a placeholder that was never
// written.
ir::NodePtr ComputedLeaf(const Tensor& t, bool wait = true) {
  Compute(t, wait);
  ir::NodePtr leaf = NodeOf(*t.impl());
  if (leaf->storage->placeholder() && !leaf->storage->manager().IsWritten(leaf->storage->id())) {
    base::Throw(absl::FailedPreconditionError(runtime::PlaceholderMessage(*leaf, t.device())));
  }
  return leaf;
}

// Where a view's elements lie in its buffer when they are one contiguous run: `leaf` is the
// Buffer, `offset` the first element. Only reshapes and slices of a buffer that holds data
// (computed, uploaded, or a written placeholder) qualify; anything else is nullopt.
struct BufferRange {
  const ir::Node* leaf;
  int64_t offset;
};

std::optional<BufferRange> ReadableRange(const ir::Node& n) {
  switch (n.op) {
    case ir::Op::kBuffer:
      if (n.storage->pending() || !n.storage->manager().IsWritten(n.storage->id()))
        return std::nullopt;
      return BufferRange{&n, 0};
    case ir::Op::kReshape:
      return ReadableRange(*n.operands[0]);
    case ir::Op::kSlice: {
      std::optional<BufferRange> r = ReadableRange(*n.operands[0]);
      if (!r.has_value()) return std::nullopt;
      // Row-major contiguous: leading dims of size 1, then one partial dim, then full dims.
      const ir::Shape& in = n.operands[0]->shape;
      size_t d = 0;
      while (d < in.size() && n.shape[d] == 1) ++d;
      for (size_t e = d + 1; e < in.size(); ++e) {
        if (n.shape[e] != in[e]) return std::nullopt;
      }
      int64_t stride = 1;
      for (size_t e = in.size(); e-- > 0;) {
        r->offset += n.args[e] * stride;
        stride *= in[e];
      }
      return r;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace

Tensor FromHostBytes(const void* data, size_t bytes, DType dtype, ir::Shape shape, Device device) {
  auto storage = NewStorage(device, bytes, absl::StrCat(dtype_name(dtype), ir::ShapeString(shape)));
  base::ThrowIfError(storage->manager().Upload(storage->id(), data, 0, bytes));
  return MakeTensor(ir::MakeBuffer(std::move(storage), dtype, std::move(shape)), device);
}

void ReadBytes(const Tensor& t, void* dst) {
  const TensorImpl& impl = ImplOf(t, "read");
  ir::NodePtr leaf_node = NodeOf(impl);  // held: another thread may rebind `t` meanwhile
  if (auto range = ReadableRange(*leaf_node); range.has_value() && !impl.device.is_host()) {
    // A contiguous view of a computed buffer (slice(y, 0, 0, 1).item()) is read in place: no
    // copy kernel to compile and run, and only its own bytes cross.
    const size_t bytes =
        static_cast<size_t>(ir::NumElements(leaf_node->shape)) * dtype_size(leaf_node->dtype);
    if (bytes > 0) {
      base::ThrowIfError(range->leaf->storage->manager().Download(
          range->leaf->storage->id(), dst,
          static_cast<size_t>(range->offset) * dtype_size(leaf_node->dtype), bytes));
    }
    return;
  }
  if (impl.device.is_host()) {
    const ir::NodePtr leaf = ComputedLeaf(t);
    if (leaf->storage->bytes() == 0) return;
    // Host memory is readable in place once a lazily loaded checkpoint tensor is read in.
    base::ThrowIfError(leaf->storage->manager().Load(leaf->storage->id()));
    std::memcpy(dst, backend::HostMemory().Data(leaf->storage->id()), leaf->storage->bytes());
    return;
  }
  // The kernels are not waited for before the read: the read is a blocking one behind them in the
  // device's in-order queue, so the host waits for the driver's threads once, not twice (drain
  // the queue, wake, enqueue the read, wait again): item() of a one-kernel graph 78-82 -> 51-59
  // us (lazycl-bench models --only scalar_read, 2-core EPYC VM, PoCL 3.1). Finish then has none
  // of this graph's work left to wait for; it does its bookkeeping, as before.
  leaf_node = ComputedLeaf(t, /*wait=*/false);
  const ir::Node& leaf = *leaf_node;
  absl::Status read =
      leaf.storage->bytes() == 0
          ? absl::OkStatus()
          : leaf.storage->manager().Download(leaf.storage->id(), dst, 0, leaf.storage->bytes());
  absl::Status drained = runtime::OpenClDevice(impl.device.index()).Finish();
  base::ThrowIfError(read);
  base::ThrowIfError(drained);
}

Tensor Transfer(const Tensor& t, Device to) {
  const TensorImpl& impl = ImplOf(t, "to");
  if (impl.device == to) return t;
  if (to.is_opencl()) runtime::OpenClDevice(to.index());  // a bad index fails here, before any work
  std::shared_ptr<ir::Storage> host;
  ir::NodePtr leaf_node = NodeOf(impl);
  if (impl.device.is_host()) {
    // Host memory is uploaded from where it lies (once a lazily loaded checkpoint tensor is read
    // in).
    leaf_node = ComputedLeaf(t);
    host = leaf_node->storage;
    base::ThrowIfError(host->manager().Load(host->id()));
  } else {
    // A device buffer is read back into new host memory.
    const size_t bytes =
        static_cast<size_t>(ir::NumElements(leaf_node->shape)) * dtype_size(leaf_node->dtype);
    host = NewStorage(Device::host(), bytes, "download");
    base::ThrowIfError(backend::HostMemory().PrepareWrite(host->id()));
    ReadBytes(t, backend::HostMemory().Data(host->id()));
  }
  const ir::Node* leaf = leaf_node.get();
  if (to.is_host()) {
    std::shared_ptr<TensorImpl> out = NewImpl(ir::MakeBuffer(host, leaf->dtype, leaf->shape), to);
    if (impl.requires_grad && is_grad_enabled()) RecordTransfer(*out, t.impl());
    return Tensor(std::move(out));
  }
  Tensor result = FromHostBytes(backend::HostMemory().Data(host->id()), host->bytes(), leaf->dtype,
                                leaf->shape, to);
  if (impl.requires_grad && is_grad_enabled()) RecordTransfer(*result.impl(), t.impl());
  return result;
}

ir::NodePtr NodeOn(const Tensor& t, Device device, absl::string_view op, int operand) {
  const TensorImpl& impl = ImplOf(t, op);
  ir::NodePtr node = NodeOf(impl);
  if (impl.device == device) return node;
  const base::TransferGuard guard = base::CurrentSettings().transfer_guard;
  const std::string what = absl::StrCat(op, ": operand ", operand, " (", dtype_name(node->dtype),
                                        ir::ShapeString(node->shape), " on ", impl.device.str(),
                                        ") is implicitly moved to ", device.str());
  if (guard == base::TransferGuard::kDisallow) {
    base::Throw(absl::FailedPreconditionError(
        absl::StrCat(what,
                     ", and LAZYCL_TRANSFER_GUARD=disallow forbids implicit "
                     "transfers; move it explicitly with to()")));
  }
  if (guard == base::TransferGuard::kLog) std::fprintf(stderr, "lazycl: %s\n", what.c_str());
  return NodeOf(*Transfer(t, device).impl());
}

Tensor Wrap(absl::StatusOr<ir::NodePtr> node, Device device, std::span<const OpInput> inputs) {
  if (!node.ok()) base::Throw(node.status());
  const bool record = is_floating((*node)->dtype) && AnyRequiresGrad(inputs);
  if (device.is_host()) {
    const ir::Shape shape = (*node)->shape;
    const DType dtype = (*node)->dtype;
    std::shared_ptr<TensorImpl> impl = NewImpl(
        ir::MakeBuffer(base::ValueOrThrow(runtime::EvaluateOnHost(*node)), dtype, shape), device);
    if (record) RecordOp(impl, *std::move(node), inputs);
    return Tensor(std::move(impl));
  }
  // A table that reads no data (rotary cos and sin) is folded as the first op that reads data
  // takes it (runtime/constant_fold.h), in a scan's body too; inside a trace or call, which
  // computes nothing, the Function folds at its first call. A scan's backward finds the tensors
  // its body captured by their nodes, so there a table that takes part in the gradient stays as
  // it is (the step loop hoists it).
  auto folds_here = [&] {
    if (!TraceScope::active()) return true;
    return TraceScope::folds_tables() &&
           std::none_of(inputs.begin(), inputs.end(), [](const OpInput& in) {
             return in.node->holds_transcendental && in.tensor->impl()->requires_grad &&
                    is_grad_enabled();
           });
  };
  ir::NodePtr made = *std::move(node);
  if (!made->reads_no_data &&
      std::any_of(made->operands.begin(), made->operands.end(),
                  [](const ir::NodePtr& o) { return o->holds_transcendental; }) &&
      folds_here()) {
    runtime::FoldedOperands folded = runtime::FoldOperands(device.index(), made);
    if (folded.node != nullptr) {
      made = std::move(folded.node);
      // The tensors that held the tables hold their buffers from now on: their next readers
      // (every layer reads the same tables) fold nothing again.
      for (const OpInput& in : inputs) {
        if (ir::NodePtr over = runtime::OverFolded(in.node, folded))
          RebindNode(*in.tensor->impl(), in.node, std::move(over));
      }
    }
  }
  std::shared_ptr<TensorImpl> impl = NewImpl(std::move(made), device);
  if (record) RecordOp(impl, impl->node, inputs);
  if (impl->node->pending > ir::MaxPendingNodes() && !TraceScope::active() &&
      ir::PastPendingLimit(*impl->node)) {
    base::metrics::Add("AutomaticCuts", 1);
    // The user did not ask for this computation: say why it ran, so that an error from it
    // (a placeholder read, most often) is not a mystery on an arithmetic line.
    if (absl::Status s = MaterializeCut(*impl); !s.ok()) {
      base::Throw(absl::Status(
          s.code(), absl::StrCat("this result's pending graph grew past ", ir::MaxPendingNodes(),
                                 " nodes, so lazycl computed it now (an automatic cut that bounds "
                                 "memory; inside trace/call/scan graphs are not cut): ",
                                 s.message())));
    }
  }
  return Tensor(std::move(impl));
}

}  // namespace lazycl::frontend
