// Trains a stacked-layer MLP with SGD: once with the layers applied by scan (forward and
// backward each compiled once, whatever the number of layers), once with a C++ loop over the
// layers, and prints both losses per step; they agree to float rounding.
//
//   train_mlp [steps]

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "examples/mlp.h"

int main(int argc, char** argv) {
  using namespace lazycl;
  examples::MlpConfig config;
  if (argc > 1) config.steps = std::atoi(argv[1]);
  try {
    const Device device = default_env().device();
    config.use_scan = true;
    const std::vector<float> scanned = examples::TrainMlp(config, device);
    config.use_scan = false;
    const std::vector<float> looped = examples::TrainMlp(config, device);
    std::printf("device %s, %lld layers of %lldx%lld, batch %lld\n", device.str().c_str(),
                static_cast<long long>(config.layers), static_cast<long long>(config.hidden),
                static_cast<long long>(config.hidden), static_cast<long long>(config.batch));
    std::printf("%5s %12s %12s\n", "step", "scan loss", "loop loss");
    for (size_t i = 0; i < scanned.size(); ++i)
      std::printf("%5zu %12.6f %12.6f\n", i, scanned[i], looped[i]);
  } catch (const Error& e) {
    std::fprintf(stderr, "train_mlp: %s\n", e.what());
    return 1;
  }
  return 0;
}
