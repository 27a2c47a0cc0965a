#pragma once

#include <vector>

#include "lazycl/tensor.h"

// Reverse-mode autodiff (SPEC "grad"). Gradient graphs are lazy IR like any other: on a device
// they fuse, cache and run only when a result is needed; on the host they run at once.
//
// requires_grad propagates as in PyTorch: the floating result of an op with an operand that
// requires grad requires grad and remembers how it was computed; a tensor made by a factory (or
// requires_grad_()) is a leaf. Gradients flow through every differentiable op, views,
// broadcasting (reduced back to the operand's shape), Function calls (trace/call) and scan.
// Not differentiable: comparisons, casts from or to integers, where's condition; they carry no
// gradient. max() splits the gradient evenly between tied maxima, maximum()/minimum() split it
// evenly between equal operands; relu and abs have gradient 0 at 0. Tensors that a traced
// function or a scan body captures (reads without taking them as arguments) get their gradient
// as arguments do (for a scan: summed over the steps).
// Gradient graphs do not record: no higher-order gradients.
namespace lazycl {

// d loss / d wrt[i], each with wrt[i]'s shape, dtype and device. `loss` must have one element
// (else an Error: pass grad_output). Errors: the loss does not require grad; a wrt tensor does
// not require grad, or the loss was not computed from it. A wrt tensor that the loss depends on
// only through non-differentiable ops gets zeros. Leaves' .grad() are not touched.
std::vector<Tensor> grad(const Tensor& loss, const std::vector<Tensor>& wrt);
// The vector-Jacobian product with `grad_output` (loss's shape) for a loss of any shape.
std::vector<Tensor> grad(const Tensor& loss, const std::vector<Tensor>& wrt,
                         const Tensor& grad_output);

// While a NoGradGuard lives, ops on this thread record no gradients (torch.no_grad()): results
// do not require grad, nothing is kept for a backward (a scan saves no per-step carries), and
// the leaves keep requiring grad. Guards nest; each restores what it found.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// False inside a NoGradGuard on this thread.
bool is_grad_enabled();

}  // namespace lazycl
