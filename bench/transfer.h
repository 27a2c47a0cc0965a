#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lazycl/lazycl.h"

// The transfer-size benchmark's model and measurements (lazycl-bench transfer; SPEC.md).
namespace lazycl::bench {

struct Model {
  int64_t layers = 16, hidden = 256, batch = 32, steps = 10;
  // --train: each step also takes the gradient of mean(output^2) with respect to the weights and
  // biases and applies an SGD step on the device; only the loss is read back.
  bool train = false;
  // "tanh": the stack of tanh(h @ W + b) layers above; "llama": the decoder layers of the
  // Llama-style example model (examples/llama/model.h; `hidden` is its D, `batch` sequences of
  // `seq` tokens, head dim 32, half as many key/value heads, SwiGLU of about 8/3 D).
  std::string arch = "tanh";
  int64_t seq = 64;
};

// What one strategy runs: Setup puts the weights on the device (reported as setup_h2d), Step
// runs one step on a fresh host batch and returns what it reads back.
class Workload {
 public:
  virtual ~Workload() = default;
  virtual void Setup(Device device) = 0;
  virtual std::vector<float> Step(const std::string& strategy, int64_t step) = 0;
};
std::unique_ptr<Workload> MakeTanhWorkload(const Model& model);
std::unique_ptr<Workload> MakeLlamaWorkload(const Model& model);  // bench/transfer_llama.cpp

// Seed 000 at scale (--model llama): traces one step of the layer scan of a Llama-3-405B-shaped
// model on placeholders and prints what it allocated and moved (0) beside what tracing on
// materialized inputs would upload per call, computed from the traced parameters.
void PrintLlama405B();

// One strategy's figures. Bytes, counts, kernels, allocations and wall time cover the measured
// steps only; graph_compiles also counts the unmeasured warm-up step, where compiles happen.
struct Result {
  std::string strategy;
  Model model;
  int64_t setup_h2d_bytes = 0, h2d_bytes = 0, h2d_count = 0, d2h_bytes = 0, d2h_count = 0;
  int64_t trace_h2d_bytes = 0, device_alloc_bytes = 0, device_peak_bytes = 0, kernels = 0,
          graph_compiles = 0;
  double wall_ms = 0, max_abs_diff = 0;
};

// "for_loop", "scan_materialized", "scan_placeholder", in that order.
const std::vector<std::string>& TransferStrategies();

// Runs every strategy on `model` on cl:0; max_abs_diff compares each output with for_loop's.
std::vector<Result> RunTransfer(const Model& model);

// The models of --sweep: width and depth growing together from `base`'s batch and steps.
std::vector<Model> SweepModels(const Model& base);

}  // namespace lazycl::bench
