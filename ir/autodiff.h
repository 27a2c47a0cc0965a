#pragma once

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ir/ir.h"

// Reverse-mode differentiation of IR graphs (IR -> IR): one vector-Jacobian product per IR op,
// in autodiff.cpp. The frontend's autograd records (frontend/autograd.h) call it.
namespace lazycl::ir {

// Reverse mode over the IR: given adjoints `seeds` of `roots` (a null seed is zero), the adjoint
// of each of `targets` (null where it gets none). The walk does not go below targets. Values of
// forward nodes are read through `values`: each node found there is replaced by the node given
// (a computed buffer of the same value). Non-differentiable paths (comparisons, casts from
// integers, a where's condition) carry no adjoint. max splits its adjoint evenly between tied
// maxima; maximum/minimum split it evenly between equal operands.
std::vector<NodePtr> Backprop(const std::vector<NodePtr>& roots, const std::vector<NodePtr>& seeds,
                              const std::vector<NodePtr>& targets,
                              const absl::flat_hash_map<const Node*, NodePtr>& values);

}  // namespace lazycl::ir
