#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "base/settings.h"
#include "ir/ir.h"
#include "runtime/executor.h"
#include "runtime/storage.h"

// A graph built, keyed and compiled once and run many times with other buffers bound in place
// of some of its Buffer leaves (its inputs): a traced Function's body, bound to each call's
// arguments (frontend/function.cpp) as the step loop binds a scan body to each step. A run skips
// everything a graph's run does before its kernels are enqueued (walking and rewriting the
// graph, its key and the cache lookup): what XLA's executable cache skips for a jitted call.
namespace lazycl::runtime {

class CompiledGraph {
 public:
  // `outputs`: unique nodes, none of them a Buffer leaf, on OpenCL device `device`. `inputs`:
  // Buffer leaves of their graph (placeholders, say) that each run binds to a buffer of its own;
  // the graph's other leaves are read as they are at each run (a deferred result is produced
  // first; a placeholder among them fails the run, naming it).
  static absl::StatusOr<std::shared_ptr<CompiledGraph>> Make(
      int device, std::vector<ir::NodePtr> outputs, const std::vector<ir::NodePtr>& inputs);

  // Enqueues one run and returns one storage per output, holding its value: `results[k]` where
  // given (of the output's size), else a new one. `inputs[i]` is a written buffer of the device,
  // at least the size of input i, or null where the graph does not read input i. Returns with
  // the kernels queued (reads of the results wait), unless a queued launch may still make the
  // driver compile (backend::Device::MayCompile) or the run failed: then the device is drained.
  absl::StatusOr<std::vector<std::shared_ptr<ir::Storage>>> Run(
      std::span<const std::shared_ptr<ir::Storage>> inputs,
      std::span<const std::shared_ptr<ir::Storage>> results);

  const std::vector<ir::NodePtr>& outputs() const { return outputs_; }
  int device() const { return device_; }

 private:
  CompiledGraph() = default;
  // The plan for this run: prepared again where the matmul blocking or the compile mode changed
  // since it was (PreparePlan keys plans by the one and attaches generic kernels by the other).
  absl::StatusOr<std::shared_ptr<CachedPlan>> Plan();

  int device_ = 0;
  std::vector<ir::NodePtr> outputs_;  // held: the built graph's nodes point into them
  BuiltGraph built_;
  std::vector<int> input_of_param_;  // per parameter: the input bound there, or -1
  std::vector<int> leaf_of_param_;   // per parameter: a node of the graph that reads it
  std::mutex mu_;
  std::shared_ptr<CachedPlan> plan_;  // guarded by mu_
  uint64_t plan_generation_ = 0;      // guarded by mu_
  base::CompileMode plan_mode_{};     // guarded by mu_
};

}  // namespace lazycl::runtime
