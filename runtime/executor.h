#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/graph.h"
#include "runtime/constant_fold.h"
#include "runtime/donation.h"
#include "runtime/storage.h"

namespace lazycl::backend {
class Device;
}  // namespace lazycl::backend

// The graph executor: the one place that knows the IR, the lowering and the backend.
namespace lazycl::runtime {

// Computes `outputs` (unique, pending nodes of OpenCL device `device`) as one graph and returns
// one new Storage per output, holding its value. A graph that needs the data of a placeholder
// fails with FailedPrecondition before anything runs. The caller (the tensor layer) rebinds its
// own handles to the results; nothing here touches a Tensor.
//
// By default it returns when the device has finished: work still queued when the process exits
// may make PoCL compile kernels while LLVM's static objects are being destroyed (a crash), and a
// read of an empty result would otherwise wait for nothing. `wait = false` only enqueues; the
// caller must Finish the device, or know that nothing queued can compile (scan's step loop:
// backend::Device::MayCompile). On failure the device is drained either way.
//
// `donations` offer buffers for outputs to be written into (runtime/donation.h): an accepted
// offer's output is returned as the offered Storage itself, now holding the new value
// (DonatedBytes); a declined one is computed into a new buffer (DonationsDeclined; LAZYCL_DEBUG
// >= 1 says why).
absl::StatusOr<std::vector<std::shared_ptr<ir::Storage>>> Materialize(
    int device, const std::vector<const ir::Node*>& outputs, bool wait = true,
    std::span<const Donation> donations = {});

// `roots` with their constant subexpressions (runtime/constant_fold.h) read from the folded
// buffers, computing those not folded yet; `roots` themselves where nothing folds. For a graph
// made once and run many times (a traced Function), so that no run folds them again: a run
// rebuilds every node between a folded value and the outputs.
absl::StatusOr<std::vector<ir::NodePtr>> FoldOnce(int device,
                                                  const std::vector<ir::NodePtr>& roots);

// runtime/constant_fold.h's FoldOperands, computing what is not folded yet on `device`.
FoldedOperands FoldOperands(int device, const ir::NodePtr& node);

// Whether kernels for `device` use the CPU strategies (LAZYCL_CODEGEN, else the device's type).
bool UsesCpuStrategy(backend::Device& device);

// Makes a Buffer leaf ready to be read by kernels: runs its deferred Producer if it has one,
// and fails for a placeholder (FailedPrecondition, PlaceholderMessage) or a buffer that cannot
// be read.
absl::Status PrepareLeaf(const ir::Node& leaf);

// The message for reading a placeholder: names the word, the shape, the dtype and the device.
std::string PlaceholderMessage(const ir::Node& leaf, const Device& device);

// The lower-level path, used by scan to run one compiled graph many times.
//
// A graph over `outputs` (unique nodes): its topological order, the storage behind each
// parameter (Buffer leaves de-duplicated by buffer id) and the value of each Scalar leaf, by
// scalar index (the graph's key does not depend on them). The nodes stay owned by the caller.
struct BuiltGraph {
  kernels::Graph graph;
  // The roots ir::ComputeHalfInF32 and ir::SinkSlices made where they changed the graph (the
  // graph's nodes point into them); empty otherwise.
  std::vector<ir::NodePtr> rewritten;
  // The Scalar leaves ir::ComputeHalfInF32 made in place of half ones: (made, given).
  std::vector<std::pair<const ir::Node*, const ir::Node*>> scalars_made;
  std::vector<std::shared_ptr<ir::Storage>> params;
  std::vector<double> scalars;
};
// `order`, when given, is PostOrder(outputs), already walked by the caller.
BuiltGraph BuildGraph(const std::vector<const ir::Node*>& outputs, bool bind_offsets,
                      std::vector<const ir::Node*> order = {});

// A compiled graph. The executor's cache of each device keeps the least recently used plans up
// to a capacity; a caller holds the plan it runs, so an eviction never frees it from under it.
struct CachedPlan;

// Finds the plan of `graph` in the device's cache (GraphCacheHits) or lowers it
// (GraphCompiles), evicting the least recently used plan when the cache is full.
absl::StatusOr<std::shared_ptr<CachedPlan>> PreparePlan(int device, const kernels::Graph& graph);

// How many plans each device's cache keeps: LAZYCL_GRAPH_CACHE_SIZE (default
// base::kDefaultGraphCacheSize).

// Sets the capacity (at least 1) of every device's cache, evicting down to it now; returns the
// previous one. For tests, which fill a small cache past its bound.
size_t SetGraphCacheCapacity(size_t plans);

// A buffer bound to a parameter or an output, at an element offset (non-zero only in graphs
// built with bind_offsets).
struct Binding {
  std::shared_ptr<ir::Storage> storage;
  int64_t offset = 0;
};

// Output sizes of a plan, in bytes.
const std::vector<size_t>& OutputBytes(const CachedPlan& plan);

// Enqueues the plan's kernels with parameters, outputs and scalar values (BuiltGraph::scalars)
// bound as given; does not wait.
absl::Status Execute(int device, CachedPlan& plan, std::span<const Binding> params,
                     std::span<const Binding> outputs, std::span<const double> scalars);

}  // namespace lazycl::runtime
