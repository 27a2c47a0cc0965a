#pragma once

#include <cstdint>
#include <string>
#include <vector>

// The transfer-size benchmark's model and measurements (lazycl-bench transfer; SPEC.md).
namespace lazycl::bench {

struct Model {
  int64_t layers = 16, hidden = 256, batch = 32, steps = 10;
  // --train: each step also takes the gradient of mean(output^2) with respect to the weights and
  // biases and applies an SGD step on the device; only the loss is read back.
  bool train = false;
};

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
