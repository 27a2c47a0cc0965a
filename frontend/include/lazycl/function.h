#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "lazycl/device.h"
#include "lazycl/dtype.h"
#include "lazycl/tensor.h"

// Tracing C++ functions into reusable compiled graphs: a function traced once on placeholders
// (no bytes move), its unused arguments pruned, compiled once and called many times.
namespace lazycl {

struct TensorSpec {
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
};

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// A traced function: `fn` run once on placeholders, its result kept as IR over them, compiled
// once (at the first call that runs) and run with each call's arguments bound in place of the
// placeholders, as JAX runs a jitted function: a call rebuilds no graph. The results are lazy
// (nothing runs until one of them is needed, as for any device tensor) but are computed by the
// Function's own kernels: the caller's ops on them read them as buffers. Inside a trace (a
// Function called by another traced function, a scan body) the body is inlined into the trace
// instead, and so it is where an argument is a placeholder with no data yet. Arguments that `fn`
// does not use (or uses only through their shape or dtype) are not parameters: they are never
// read and never uploaded. Copies share the traced state; calls may come from several threads.
class Function {
 public:
  // Checks the count, shapes and dtypes of `args` (an Error names the argument's index, what
  // was expected and what was given), uploads used host arguments, and returns the results.
  std::vector<Tensor> operator()(const std::vector<Tensor>& args) const;

  std::vector<int> used_arguments() const;  // indices of the arguments that are parameters
  int num_parameters() const;               // how many: used_arguments().size()
  const std::vector<TensorSpec>& arguments() const;
  Device device() const;

  struct State;

 private:
  friend Function trace(Fn fn, std::vector<TensorSpec> args, Device device);
  friend std::vector<Tensor> call(Fn fn, const std::vector<Tensor>& args);
  explicit Function(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

// Runs `fn` once on placeholders of `args` on `device` (an OpenCL device). Moves no bytes and
// allocates nothing (TraceTransferBytes stays 0) unless `fn` itself mixes in host tensors.
// Tensors `fn` captures (reads without taking them as arguments) that require grad get their
// gradients through every call, as if they were arguments.
Function trace(Fn fn, std::vector<TensorSpec> args, Device device);

// trace(fn, specs of args) on the device of the arguments (the first OpenCL one; the default
// environment's device when all are host tensors), then calls it on `args` with its body inlined:
// traced for this call only, it has nothing to reuse, and its lazy results take part in the
// caller's graph (the graph cache compiles that once per structure).
std::vector<Tensor> call(Fn fn, const std::vector<Tensor>& args);

using ScanFn = std::function<std::pair<std::vector<Tensor>, std::vector<Tensor>>(
    const std::vector<Tensor>& carry, const std::vector<Tensor>& x)>;

struct ScanResult {
  std::vector<Tensor> carry;
  std::vector<Tensor> ys;
};

struct ScanOptions {
  // Trace the body on real zero-filled tensors uploaded from the host instead of placeholders:
  // what PyTorch/XLA's scan did with torch.empty "fake" tensors (seed 000). Only for measuring
  // that cost (lazycl-bench transfer, strategy scan_materialized); it moves bytes every call.
  bool trace_on_materialized_inputs = false;
  // Run the steps last to first: step t still reads slice t of every xs tensor and writes slice
  // t of every ys; the carry flows from step T-1 down to step 0 (the backward of a scan).
  bool reverse = false;
};

// fn(carry, x) -> (new_carry, y) over the slices of every xs tensor along dim 0; ys are stacked
// along dim 0. On an OpenCL device the body is traced once on placeholders and compiled once,
// whatever the number of steps; each step reads its xs slices in place and writes its ys into
// one preallocated stacked buffer, with no host round trip. Host tensors run the plain loop.
// The carry must keep its shapes and dtypes (else an Error naming the carry index).
// Gradients flow to init and xs (autograd.h): on a device the backward is a reverse scan over
// the per-step carries, which the forward saves in one stacked buffer per carry when init or xs
// require grad; its body is the VJP of the traced body (intermediate values inside a step are
// recomputed), traced once and compiled once whatever the number of steps. Tensors the body
// captures get their gradient too, summed over the steps. On the host the loop's own ops
// record as usual. Inside a traced body (trace, call, another scan's body) the scan is that
// plain loop too, unrolled into the trace: scans nest.
ScanResult scan(ScanFn fn, std::vector<Tensor> init, std::vector<Tensor> xs,
                ScanOptions options = {});

}  // namespace lazycl
