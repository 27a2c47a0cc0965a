#pragma once

#include <span>
#include <utility>
#include <vector>

#include "ir/ir.h"

// f16 and bf16 are storage types (lazycl/dtype.h): before a graph is lowered or evaluated, every
// op on them is rewritten to compute in f32 and round its result, so that kernels and the host
// interpreter only ever convert them (Cast to and from f32) and read and write their bits.
namespace lazycl::ir {

// True when any node reachable from `roots` (through pending nodes) has a half dtype.
bool HasHalf(std::span<const Node* const> roots);

// The graph of `roots` with every node of a half dtype, and every op with a half operand,
// computed in f32: a half value v becomes Cast(f32, v) where it is read from a buffer, an op on
// half values runs on their f32 forms and its result is rounded (Cast to the half dtype and
// back), and each root of a half dtype ends in a Cast to it. Same shapes and dtypes as `roots`;
// Buffer leaves are kept (they are the same nodes), so parameters bind as before. Roots and
// subgraphs without half values come back as the nodes given (null entries: unchanged).
// `scalars_made`, when given, gets each Scalar leaf this made in place of a half one: (the f32
// leaf made, the leaf given), so that a caller can bind the one by the other's position.
std::vector<NodePtr> ComputeHalfInF32(
    std::span<const Node* const> roots,
    std::vector<std::pair<const Node*, const Node*>>* scalars_made = nullptr);

}  // namespace lazycl::ir
