#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.h"
#include "runtime/storage.h"

// scan's step loop: one compiled body graph run once per step, reading each step's slice of the
// stacked inputs and writing each step's slice of the stacked outputs in place (element offsets
// bound as kernel arguments), with the carries passed from one step to the next. The tensor
// layer (frontend/scan.cpp) traces the body and wraps the results; nothing here touches a Tensor.
namespace lazycl::runtime {

struct StepLoop {
  int device = 0;  // the OpenCL device
  // The traced body's outputs: the new carries (one per carry_in, of its shape and dtype), then
  // the per-step values to stack. DistinctOutputs made them.
  std::vector<ir::NodePtr> outputs;
  // The Buffer leaves the body was traced on: one per carry, one per slice of xs.
  std::vector<ir::NodePtr> carry_in, x_in;
  // Their values: the initial carries, and the xs stacked along a leading dim of `steps`; all
  // written buffers of `device`.
  std::vector<std::shared_ptr<ir::Storage>> init, xs;
  int64_t steps = 0;
  bool reverse = false;  // run from the last step to the first
  // The step whose slice of xs the loop's step 0 reads (a scan whose last step is left to its
  // reader runs the others: frontend/scan.cpp); the stacked outputs still start at 0.
  int64_t first = 0;
  // Where the results go, when declared ahead (a deferred scan declares them when it returns): one
  // per carry (written by the last step; unused when there are no steps) and one per stacked
  // output. Empty, or a null entry: allocated here.
  std::vector<std::shared_ptr<ir::Storage>> carry_out, stacked_out;
};

struct StepLoopResult {
  std::vector<ir::NodePtr> carry;    // Buffer leaves of the final carries (the init when no steps)
  std::vector<ir::NodePtr> stacked;  // Buffer leaves [steps, ...] of the other outputs, by step
};

// The outputs as the step loop needs them: each computed by a kernel of its own, so one that is a
// Buffer leaf (a body input returned as it is) or the same node as an earlier output becomes a
// no-op view of it.
std::vector<ir::NodePtr> DistinctOutputs(std::vector<ir::NodePtr> outputs);

// Compiles the body once (GraphCompiles or GraphCacheHits), allocates the stacked outputs and
// runs the body `steps` times; returns when the device has finished (see Materialize). The body
// may read other buffers it captured; a captured placeholder is FailedPrecondition before
// anything is compiled or run.
absl::StatusOr<StepLoopResult> RunStepLoop(const StepLoop& loop);

}  // namespace lazycl::runtime
