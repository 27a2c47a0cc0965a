#include "examples/mlp.h"

#include <cmath>
#include <utility>

namespace lazycl::examples {
namespace {

Tensor Layer(const Tensor& h, const Tensor& w, const Tensor& b) { return tanh(matmul(h, w) + b); }

Tensor Forward(const MlpConfig& config, const Tensor& x, const Tensor& w, const Tensor& b) {
  if (config.use_scan) {
    ScanFn body = [](const std::vector<Tensor>& carry, const std::vector<Tensor>& layer) {
      return std::make_pair(std::vector<Tensor>{Layer(carry[0], layer[0], layer[1])},
                            std::vector<Tensor>{});
    };
    return scan(body, {x}, {w, b}).carry[0];
  }
  Tensor h = x;
  for (int64_t l = 0; l < config.layers; ++l) {
    h = Layer(h, squeeze(slice(w, 0, l, l + 1), 0), squeeze(slice(b, 0, l, l + 1), 0));
  }
  return h;
}

}  // namespace

std::vector<float> TrainMlp(const MlpConfig& config, Device device) {
  const int64_t d = config.hidden;
  // Synthetic data: the target is a fixed smooth function of the input.
  Tensor x = randn({config.batch, d}, 1, DType::f32, device);
  Tensor target = sin(x) * 0.5;
  Tensor w = (randn({config.layers, d, d}, 2, DType::f32, device) * (1.0 / std::sqrt(double(d))))
                 .requires_grad_();
  Tensor b = zeros({config.layers, d}, DType::f32, device).requires_grad_();
  std::vector<float> losses;
  for (int64_t step = 0; step < config.steps; ++step) {
    Tensor diff = Forward(config, x, w, b) - target;
    Tensor loss = mean(diff * diff);
    std::vector<Tensor> g = grad(loss, {w, b});
    w = (w.detach() - g[0] * config.learning_rate).requires_grad_();
    b = (b.detach() - g[1] * config.learning_rate).requires_grad_();
    sync({w, b});
    losses.push_back(loss.item<float>());
  }
  return losses;
}

}  // namespace lazycl::examples
