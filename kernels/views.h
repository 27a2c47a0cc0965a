#pragma once

#include <functional>
#include <optional>

#include "ir/ir.h"
#include "kernels/codegen.h"

// How a matmul reads an operand in place. A chain of Permute, Expand, Slice and Reshape views
// over a node in memory is one strided access to that node's buffer (a Reshape of a strided
// view only where it regroups batch dims and keeps the matrix dims), so the view needs no
// kernel of its own: the matmul kernel takes offset and strides as arguments. Elementwise
// kernels read views by index arithmetic in codegen instead.
namespace lazycl::kernels {

// A matmul operand as offset, batch strides (one or two levels) and row/col strides over
// `base`, a node in memory. `access.buffer` is left for the caller, who knows where base lives.
struct MatmulView {
  const ir::Node* base = nullptr;
  StridedOperand access;
};

// `n` as a MatmulView, or nullopt when its views are not strided over a node that
// `materialized` names (a root or a Buffer, Partition::IsInput) or its batch elements do not
// lie at one or two levels of arithmetic sequences.
std::optional<MatmulView> MatmulAccess(const ir::Node& n,
                                       const std::function<bool(const ir::Node&)>& materialized);

// Where a matmul's product lands when it is stored straight into `permute`'s buffer (the
// permute of the product, contiguous): row and batch strides of the product's elements there
// (col stride 1), or nullopt when the permute moves the last dim or the batch dims do not fold
// into two levels. Attention's [b, h, t, d] -> [b, t, h, d] before the output projection.
std::optional<StridedOperand> PermutedStore(const ir::Node& permute);

}  // namespace lazycl::kernels
