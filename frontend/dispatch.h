#pragma once

#include <initializer_list>
#include <span>
#include <vector>

#include "absl/strings/string_view.h"
#include "frontend/autograd.h"
#include "frontend/tensor_impl.h"
#include "ir/ir.h"
#include "lazycl/tensor.h"

// How ops reach the IR: which device an op runs on, how operands get there, and how a new node
// becomes a tensor (computed at once on the host, recorded on a device).
namespace lazycl::frontend {

// The impl of a defined tensor; an undefined one is an Error naming the op.
const TensorImpl& ImplOf(const Tensor& t, absl::string_view op);

// The device an op on `operands` runs on: the OpenCL device if any operand is on one (two
// different OpenCL devices are an Error), else the host.
Device OpDevice(std::span<const Tensor* const> operands, absl::string_view op);
inline Device OpDevice(std::initializer_list<const Tensor*> operands, absl::string_view op) {
  return OpDevice(std::span<const Tensor* const>(operands.begin(), operands.size()), op);
}

// The shape `shapes` broadcast together (NumPy's rules); an Error naming `op` and the shapes
// when they cannot be.
ir::Shape BroadcastShapes(const std::vector<const ir::Shape*>& shapes, absl::string_view op);

// `t`'s node on `device`. A host tensor used with a device is uploaded (a counted transfer),
// subject to LAZYCL_TRANSFER_GUARD; `operand` numbers it in messages.
ir::NodePtr NodeOn(const Tensor& t, Device device, absl::string_view op, int operand);

// A tensor whose value is `node` on `device`: evaluated now on the host; recorded on a device,
// and computed now if its pending graph grew past kMaxPendingNodes. `inputs` are the op's
// operands as it read them (autograd.h): when one requires grad, so does a floating result,
// which then remembers `node` and the inputs.
Tensor Wrap(absl::StatusOr<ir::NodePtr> node, Device device, std::span<const OpInput> inputs = {});
inline Tensor Wrap(absl::StatusOr<ir::NodePtr> node, Device device,
                   std::initializer_list<OpInput> inputs) {
  return Wrap(std::move(node), device, std::span<const OpInput>(inputs.begin(), inputs.size()));
}

// Writes t's values, row-major in its dtype, to `dst` (which holds t's bytes): one counted
// device-to-host copy for a computed buffer or a contiguous view of one (computed first if
// pending), a memcpy for a host tensor. Error for a placeholder never written.
void ReadBytes(const Tensor& t, void* dst);

// Copies between host and devices (counted).
Tensor Transfer(const Tensor& t, Device to);

// A declared buffer of `bytes` on `device` (memory is taken at its first write).
std::shared_ptr<ir::Storage> NewStorage(Device device, size_t bytes, std::string label);

// A new tensor holding a copy of `bytes` host bytes.
Tensor FromHostBytes(const void* data, size_t bytes, DType dtype, ir::Shape shape, Device device);

}  // namespace lazycl::frontend
