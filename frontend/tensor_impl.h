#pragma once

#include "frontend/ir.h"
#include "lazycl/device.h"
#include "lazycl/tensor.h"

namespace lazycl {

// What a Tensor handle points to. `node` is the tensor's value: a Buffer leaf once computed, or
// the recorded computation while pending. The executor replaces a pending node with a Buffer
// leaf of the result; other nodes that reference the old node keep it alive.
struct TensorImpl {
  ir::NodePtr node;
  Device device = Device::host();
  bool requires_grad = false;
  Tensor grad;
};

}  // namespace lazycl
