// Timings behind the choices in frontend/ops_more.cpp and ops_reduce_more.cpp (primitive or
// composite, the argmax and topk formulations, the scan kernel, sin and cos), on the default
// device:
//   build/release/examples/mathops_timing
// Each figure is the best of a few runs after a warm-up run (which compiles), in ms.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include "lazycl/lazycl.h"

using namespace lazycl;

namespace {

double BestMs(const std::function<Tensor()>& f, int reps = 5) {
  sync({f()});
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    sync({f()});
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best;
}

void Row(const char* what, const std::function<Tensor()>& f, int reps = 5) {
  std::printf("  %-28s %9.2f\n", what, BestMs(f, reps));
}

}  // namespace

int main() {
  const Device d = default_env().device();
  std::printf("device %s\n", d.str().c_str());
  const Tensor x = randn({4096, 1024}, 1, DType::f32, d);
  const Tensor xp = rand({4096, 1024}, 2, 0.5, 2.0, DType::f32, d);
  sync({x, xp});
  const Tensor lo = full({}, -1.0, DType::f32, d);
  const Tensor hi = full({}, 1.0, DType::f32, d);
  std::printf("elementwise over [4096, 1024] f32:\n");
  Row("rsqrt (primitive)", [&] { return rsqrt(xp); });
  Row("1 / sqrt(x) (composite)", [&] { return 1.0 / sqrt(xp); });
  Row("silu (primitive)", [&] { return silu(x); });
  Row("x * sigmoid(x) (composite)", [&] { return x * sigmoid(x); });
  Row("gelu (primitive)", [&] { return gelu(x); });
  Row("gelu composite with erf", [&] { return 0.5 * x * (1.0 + erf(x * 0.7071067811865476)); });
  Row("gelu tanh (primitive)", [&] { return gelu(x, true); });
  Row("clamp", [&] { return clamp(x, -1, 1); });
  // sin and cos beside exp, whose time is about the memory traffic (lc_sin/lc_cos, cpu_math.cl).
  Row("exp (memory-bound reference)", [&] { return exp(x); });
  Row("sin", [&] { return sin(x * 100.0); });
  Row("cos", [&] { return cos(x * 100.0); });
  Row("minimum(maximum(x, lo), hi)", [&] { return minimum(maximum(x, lo), hi); });
  std::printf("reductions over the rows of [4096, 1024] f32:\n");
  Row("max", [&] { return max(x, {1}); });
  Row("min", [&] { return min(x, {1}); });
  Row("prod", [&] { return prod(xp, {1}); });
  Row("argmax", [&] { return argmax(x, 1); });
  const Tensor logits = randn({8, 50257}, 3, DType::f32, d);
  sync({logits});
  std::printf("sampling over [8, 50257] f32:\n");
  Row("argmax", [&] { return argmax(logits, -1); });
  Row(
      "topk k = 1", [&] { return topk(logits, 1).second; }, 3);
  Row(
      "topk k = 10", [&] { return topk(logits, 10).second; }, 3);
  Row(
      "topk k = 50", [&] { return topk(logits, 50).second; }, 2);
  Row("cumsum", [&] { return cumsum(logits, 1); });
  const Tensor c = randn({4096, 1024}, 4, DType::f32, d);
  sync({c});
  std::printf("cumsum over [4096, 1024] f32:\n");
  Row("cumsum dim 1", [&] { return cumsum(c, 1); });
  Row("cumsum dim 0", [&] { return cumsum(c, 0); });
  Row("sum dim 1 (for scale)", [&] { return sum(c, {1}); });
  return 0;
}
