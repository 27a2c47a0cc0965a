#pragma once

#include <span>
#include <vector>

#include "ir/ir.h"

// Slices taken early, as XLA's algebraic simplifier moves a slice toward the operands of what it
// slices, and as Halide infers the bounds of each stage: every computed value is computed over
// the bounding box of what its readers need of it, where its op passes windows through
// (elementwise ops, reductions over other dims, matmuls' batch, row and column dims, broadcasts,
// permutes, reshapes that keep each sliced dim whole, and slices). A root and a reader of any
// other op need all of a value. The next token of a language model (`logits[:, -1]`) then costs
// the last position's final norm and head matmul, and the last layer's feed-forward and
// attention for one query row (its keys and values are still every position's), instead of the
// whole window's.
namespace lazycl::ir {

// The graph of `roots` (`order`: PostOrder(roots)) with such slices moved; same shapes, dtypes
// and Buffer leaves. Roots whose graph has nothing to move come back null (unchanged); all null
// when nothing moved.
std::vector<NodePtr> SinkSlices(std::span<const Node* const> roots,
                                std::span<const Node* const> order);

// The Buffer leaves of `order` (PostOrder(roots)) that the graph reads only part of, by the same
// bounds (a slice of a leaf counted too): where a deferred value could be computed in part
// (runtime/storage.h: Producer::LastStepOf).
std::vector<const Node*> PartlyReadLeaves(std::span<const Node* const> roots,
                                          std::span<const Node* const> order);

}  // namespace lazycl::ir
