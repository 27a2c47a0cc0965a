#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.h"

// Constant folding across graphs, as XLA folds constants at compile time: a subexpression that
// reads no data (no Buffer leaf, no user scalar, no random numbers: only iota and constants) and
// holds a transcendental, such as a model's rotary tables cos(pos * exp(-i * c)), is computed
// once per device and process, and every later graph reads that buffer instead of launching a
// kernel for it (a sampling loop built the same tables every token). The cache holds up to
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

// The bytes the cache holds, and emptying it (tests).
int64_t ConstantCacheBytes();
void ClearConstantCache();

}  // namespace lazycl::runtime
