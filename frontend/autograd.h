#pragma once

#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "frontend/tensor_impl.h"
#include "ir/autodiff.h"
#include "ir/ir.h"
#include "lazycl/tensor.h"

// Reverse-mode autodiff as an IR-to-IR transformation.
//
// Why records live beside the IR: the executor replaces a computed tensor's `node` with a Buffer
// leaf, so a tensor's node does not remember how it was computed. A tensor that requires grad
// therefore keeps a GradFn: what computed it, as IR, and the TensorImpls it was computed from
// (real references, like PyTorch's saved tensors; nothing references its users, so there are no
// cycles). Every op records at one place, Wrap(), and only when an operand requires grad, so
// tensors that do not require grad cost one flag test per operand.
//
// Gradients are IR too. Backprop() differentiates an IR graph node by node (one VJP rule per IR
// op, in autodiff.cpp); a GradFn turns the adjoints of its outputs into adjoints of its inputs
// with it, and wraps them like any other result: evaluated at once on the host, lazy on a device
// (they fuse, cache and run only when needed). Forward values a VJP needs (tanh's output, a
// matmul's operands) are read from the tensors' current nodes, so a computed buffer is reused
// rather than recomputed; values inside one op (a broadcast, a cast) are recomputed, as they
// are index arithmetic only.
//
// Three kinds of GradFn: one op (its IR, from Wrap), a traced Function call (function.cpp: the
// backward is itself a traced Function, built once per Function), and a scan (scan.cpp: the
// backward is a reverse scan whose body is the traced VJP of the body). Transfers between
// devices are a fourth, trivial kind. Higher-order gradients are not supported: gradient graphs
// never record.
namespace lazycl::frontend {

// How some tensors were computed from `inputs`.
class GradFn {
 public:
  virtual ~GradFn() = default;
  // Adjoints of the inputs given adjoints of the outputs (an undefined adjoint is zero). An
  // input's adjoint is on that input's device; undefined where the input gets none.
  virtual std::vector<Tensor> Backward(const std::vector<Tensor>& output_adjoints) = 0;
  virtual int num_outputs() const { return 1; }
  // The node the computation read for inputs[i] (on its own device: for a host tensor used on
  // a device, the uploaded copy); null when that is the input's current node.
  virtual ir::NodePtr ReadNode(size_t /*i*/) const { return nullptr; }

  // The tensors read, in the order of Backward's result. Inputs that do not require grad may be
  // kept too (for their values); they get no adjoint.
  std::vector<std::shared_ptr<TensorImpl>> inputs;
};

// An operand of an op as the op read it: the tensor, and the node it used for it (on the op's
// device: for a host tensor used on a device, the uploaded copy).
struct OpInput {
  const Tensor* tensor;
  ir::NodePtr node;
};

bool AnyRequiresGrad(std::span<const OpInput> inputs);

// Makes `out` (the result of `expr`, just wrapped) require grad and remember expr and inputs.
// On a device `out`'s node may be `expr` itself; if that is also an input's node (an identity
// view), it becomes a distinct no-op view first, so that two tensors never share a node in a
// record.
void RecordOp(const std::shared_ptr<TensorImpl>& out, ir::NodePtr expr,
              std::span<const OpInput> inputs);

// Makes `out`, a copy of `from` on another device, require grad; its adjoint is copied back.
void RecordTransfer(TensorImpl& out, const std::shared_ptr<TensorImpl>& from);

// Sets out.grad_fn and requires_grad on every output of a multi-output GradFn.
void RecordOutputs(const std::vector<Tensor>& outputs, std::shared_ptr<GradFn> fn);

// A zero of `shape` and `dtype` on `device`: a Constant, never an upload.
Tensor ZerosOn(const ir::Shape& shape, DType dtype, Device device);

}  // namespace lazycl::frontend
