#pragma once

#include <cstdint>
#include <vector>

#include "lazycl/lazycl.h"

// A small MLP trained with SGD on synthetic regression data, for examples/train_mlp.cpp and its
// test. The hidden layers are stacked: weights [L, D, D] and biases [L, D], applied either by
// scan (compiled once, whatever L) or by a C++ loop over the layers; both give the same losses.
namespace lazycl::examples {

struct MlpConfig {
  int64_t layers = 4;
  int64_t hidden = 16;
  int64_t batch = 32;
  int64_t steps = 20;
  double learning_rate = 0.3;
  bool use_scan = true;
};

// The loss before each SGD step, computed on `device`.
std::vector<float> TrainMlp(const MlpConfig& config, Device device);

}  // namespace lazycl::examples
