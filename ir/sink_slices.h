#pragma once

#include <span>
#include <vector>

#include "ir/ir.h"

// Slices taken early, as XLA's algebraic simplifier moves a slice toward the operands of what it
// slices: where the only reader of a computed value is a Slice, the slice is taken of that value's
// operands instead, through elementwise ops, reductions over other dims, matmuls (batch, row and
// column dims), broadcasts, permutes, reshapes that keep each sliced dim whole, and slices. The
// last position's logits of a language model (`logits[:, -1]`, the next token) then cost the
// final norm and the head matmul of one row instead of the whole window's.
namespace lazycl::ir {

// The graph of `roots` (`order`: PostOrder(roots)) with such slices moved; same shapes, dtypes
// and Buffer leaves. Roots whose graph has nothing to move come back null (unchanged); all null
// when nothing moved.
std::vector<NodePtr> SinkSlices(std::span<const Node* const> roots,
                                std::span<const Node* const> order);

}  // namespace lazycl::ir
