#pragma once

#include <memory>
#include <utility>

#include "ir/ir.h"
#include "lazycl/device.h"
#include "lazycl/tensor.h"

namespace lazycl {

namespace frontend {
class GradFn;  // frontend/autograd.h
}  // namespace frontend

// What a Tensor handle points to. `node` is the tensor's value: a Buffer leaf once computed, or
// the recorded computation while pending. The executor replaces a pending node with a Buffer
// leaf of the result; other nodes that reference the old node keep it alive.
//
// Autograd (frontend/autograd.h): a tensor that requires grad and was computed from others keeps
// how in `grad_fn` (output `grad_output` of it), because `node` forgets that once computed. A
// leaf that requires grad has no grad_fn; backward() accumulates into its `grad`. Tensors that do
// not require grad record nothing.
struct TensorImpl {
  TensorImpl() = default;
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;
  // Releases a chain of grad_fn -> inputs -> grad_fn ... iteratively (autograd.cpp), so that the
  // record of a long loop does not overflow the stack when its last tensor goes.
  ~TensorImpl();

  ir::NodePtr node;
  Device device = Device::host();
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<frontend::GradFn> grad_fn;
  int grad_output = 0;
  // Set by backward() on the tensor it was called on, whose record it then drops (PyTorch's
  // retain_graph=False): its saved values, e.g. the parameters' old buffers, go as they would
  // in PyTorch, so an optimizer can update them in place. A second backward through it is an
  // Error.
  bool graph_freed = false;
};

namespace frontend {

// The one way to make a TensorImpl: a tensor handle whose value is `node` on `device`, with no
// gradient record (autograd.h adds one where an op needs it). The first call checks every
// LAZYCL_* variable, whatever the device: a malformed value is an Error even in a program that
// only ever makes host tensors.
std::shared_ptr<TensorImpl> NewImpl(ir::NodePtr node, Device device, bool requires_grad = false);

// Threads: `node` is the one field lazycl changes behind a handle's back (Materialize rebinds a
// pending tensor to its result, possibly on another thread that reads the same tensor), so code
// that may see a tensor shared between threads reads it with NodeOf, which copies it under the
// node lock (a leaf lock, held only for the copy), and Materialize rebinds it with RebindNode.
ir::NodePtr NodeOf(const TensorImpl& impl);
// Replaces `impl.node` with `leaf` if it is still `expected` (another thread may have rebound it
// to an equal result already, or an in-place op replaced it).
void RebindNode(TensorImpl& impl, const ir::NodePtr& expected, ir::NodePtr leaf);

inline Tensor MakeTensor(ir::NodePtr node, Device device, bool requires_grad = false) {
  return Tensor(NewImpl(std::move(node), device, requires_grad));
}

}  // namespace frontend
}  // namespace lazycl
