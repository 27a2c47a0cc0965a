#pragma once

#include <cstdint>
#include <vector>

#include "lazycl/tensor.h"

// Optimizers that update their parameters in place, as torch.optim's do: the parameters are the
// caller's own tensors (every handle of one sees the update), each step reads grad() (filled by
// backward()) and skips a parameter whose grad() is undefined. On an OpenCL device a step is
// one graph per device that writes every new value and state into its own buffer where that is
// safe (nothing else reads the old value; see README "Optimizers"), so a training step holds
// parameters, gradients, state and activations once each. The learning rate, the step count
// and the bias corrections are kernel arguments: changing them compiles nothing.
namespace lazycl::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

// torch.optim.SGD: g += wd * p; with momentum, b = g at the first step and momentum * b +
// (1 - dampening) * g after, then g = g + momentum * b (nesterov) or b; p -= lr * g.
class SGD {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  void step();
  void zero_grad();  // every parameter's grad() becomes undefined (set_to_none=True)
  double lr() const { return options_.lr; }
  void set_lr(double lr);
  const std::vector<Tensor>& params() const { return params_; }
  Tensor momentum_buffer(size_t i) const;  // undefined before parameter i's first step

 private:
  std::vector<Tensor> params_;
  SGDOptions options_;
  std::vector<Tensor> momentum_;
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

// torch.optim.AdamW (amsgrad=False): t += 1; p *= 1 - lr * wd; m = b1 m + (1 - b1) g;
// v = b2 v + (1 - b2) g^2; p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
// t counts the steps that parameter took (a step without its gradient does not count), as
// PyTorch's per-parameter state["step"].
class AdamW {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  void step();
  void zero_grad();
  double lr() const { return options_.lr; }
  void set_lr(double lr);
  int64_t step_count() const { return step_; }  // calls of step()
  const std::vector<Tensor>& params() const { return params_; }
  Tensor exp_avg(size_t i) const;     // m of parameter i; undefined before its first step
  Tensor exp_avg_sq(size_t i) const;  // v of parameter i

 private:
  std::vector<Tensor> params_;
  AdamWOptions options_;
  int64_t step_ = 0;
  std::vector<int64_t> steps_;  // per parameter
  std::vector<Tensor> m_, v_;
};

}  // namespace lazycl::optim
