#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "ir/ir.h"

// Constant folding across graphs, as XLA folds constants at compile time: a subexpression that
// reads no data (no Buffer leaf, no random numbers: only iota, constants and scalars) and holds a
// transcendental, such as a model's rotary tables cos(pos * exp(-i * c)), is computed once per
// device and process, and every later graph reads that buffer instead of launching a kernel for
// it (a sampling loop built the same tables every token). It is folded where it meets data: as
// the first op that reads data takes it (FoldOperands, called by the frontend as it makes the
// op, outside a trace or in a scan's body; the last few tables folded are found again by node),
// else when a graph that reads it runs (FoldConstants: a graph's output, or an expression made
// inside a trace or call, folded at the Function's first call). A subexpression whose scalars keep
// changing stops being folded after a few values. The cache holds up to
// LAZYCL_CONSTANT_CACHE_BYTES (base::Settings; 0 turns folding off), least recently used out.
namespace lazycl::runtime {

// Computes one node of a device as a graph of its own; the executor's Materialize.
using ComputeNode =
    std::function<absl::StatusOr<std::shared_ptr<ir::Storage>>(const ir::Node& node)>;

// What folding made of a list of outputs. Where nothing was folded, `changed` is false and the
// outputs are computed as they are.
struct Folded {
  bool changed = false;
  // Per output: the node to compute in its place (the output with folded subexpressions read
  // from their buffers), or nullptr where `ready` holds the output's value already.
  std::vector<ir::NodePtr> roots;
  std::vector<std::shared_ptr<ir::Storage>> ready;
};

// Folds the subexpressions of `outputs` that qualify (see above; at most 2^20 elements each),
// computing the ones not cached with `compute` (one that fails to compute is left unfolded). An
// output that qualifies itself is returned in `ready`, shared with the cache: lazycl writes in
// place (copy_from_host, donations) only into buffers that nobody else holds.
absl::StatusOr<Folded> FoldConstants(int device, const std::vector<const ir::Node*>& outputs,
                                     const ComputeNode& compute);

// What FoldOperands made of one op.
struct FoldedOperands {
  // The op with its folded operands read from their buffers; nullptr where nothing folded.
  ir::NodePtr node;
  // Per folded subexpression, the Buffer leaf of its value.
  absl::flat_hash_map<const ir::Node*, ir::NodePtr> leaves;
};

// Folds the operands of `node` (one op, just made, that reads data) that qualify, computing those
// not folded yet with `compute`: the frontend folds a table as the first op that reads data
// takes it, so that the graph is never rebuilt around it at run time (FoldConstants' Substitute
// was a tenth of a `for`-loop sampling token's host time).
FoldedOperands FoldOperands(int device, const ir::NodePtr& node, const ComputeNode& compute);

// `n` (a folded subexpression or a view of one) read from the folded buffer; nullptr where
// `folded` did not fold what `n` reads. The frontend rebinds the tensor that held the table, so
// that its next reader finds the buffer.
ir::NodePtr OverFolded(const ir::NodePtr& n, const FoldedOperands& folded);

// The bytes the cache holds, and emptying it (tests).
int64_t ConstantCacheBytes();
void ClearConstantCache();

}  // namespace lazycl::runtime
