#pragma once

#include <memory>
#include <vector>

#include "frontend/tensor_impl.h"
#include "ir/ir.h"
#include "lazycl/tensor.h"

namespace lazycl::frontend {

// Closure conversion for trace, call and scan: the tensors a traced body captured (read without
// taking them as arguments) that require grad, and for each the node the body's IR reads (for a
// host tensor used on the device, its uploaded copy). The caller makes them implicit inputs of
// its gradient record, so they get the gradient they would get as arguments.
struct Captures {
  std::vector<std::shared_ptr<TensorImpl>> tensors;
  std::vector<ir::NodePtr> nodes;  // parallel to tensors; one tensor may be read as two nodes
};

// Walks the gradient records of `outputs` back to the first values (as the ops read them) that
// read none of `placeholders` (the body's inputs): those are the captures. The walk stops there.
Captures FindCaptures(const std::vector<Tensor>& outputs,
                      const std::vector<ir::NodePtr>& placeholders);

}  // namespace lazycl::frontend
