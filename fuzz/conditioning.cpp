// Telling rounding from bugs: a value that moves as far under a tiny change of the inputs as
// host and device differ is ill-conditioned there, and their difference is rounding.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "fuzz/graph.h"

namespace lazycl::fuzz {

double NudgeOf(DType coarsest) { return coarsest == DType::f64 ? 0x1p-50 : 0x1p-21; }

Tensor Nudge(const Tensor& input, uint64_t seed, double nudge, bool random) {
  if (nudge == 0 || !is_floating(input.dtype())) return input;
  if (!random) return input * (1 + nudge);
  return input * rand(input.shape(), seed, 1 - nudge, 1 + nudge, input.dtype(), Device::host());
}

std::string ValueMismatch(const Graph& g, size_t index, uint64_t data_seed, int palette,
                          const Tensor& host, const Tensor& dev) {
  const DType coarsest = Coarsest(g, index);
  const std::string bad = Mismatch(host, dev, coarsest);
  if (bad.empty() || !is_floating(host.dtype()) || host.shape() != dev.shape() ||
      host.dtype() != dev.dtype()) {
    return bad;
  }
  // On the host, every floating input moved by 2 ulps (of f32, or of f64 for pure f64), all
  // alike, and three times each element at random: a uniform scaling leaves a cancellation as
  // it was, and the rounding of one is spread wide (seed 2026, graph 26969: a carry of 3 ulps
  // on the host, 16 on the device, 2, 5 and 12 when nudged).
  const Graph upto(g.begin(), g.begin() + static_cast<long>(index) + 1);
  const double nudge = NudgeOf(coarsest);
  std::vector<std::vector<double>> moved_values;
  for (int run = 0; run < 4; ++run) {
    const std::vector<Tensor> v =
        Interpret(upto, data_seed, palette, Device::host(), [&](int step, const Tensor& input) {
          const uint64_t seed = (data_seed + static_cast<uint64_t>(step)) * 4 + run;
          return Nudge(input, seed, nudge, /*random=*/run > 0);
        });
    moved_values.push_back(Doubles(v.back()));
  }
  const bool rounding = IllConditioned(Doubles(host), Doubles(dev), moved_values, [&](double w) {
    return Tolerance(host.dtype(), coarsest, w);
  });
  return rounding ? "" : bad;
}

bool IllConditioned(const std::vector<double>& want, const std::vector<double>& got,
                    const std::vector<std::vector<double>>& moved,
                    const std::function<double(double)>& tolerance) {
  double off2 = 0, moved2 = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double w = want[i], g = got[i];
    if (w == g || (std::isnan(w) && std::isnan(g))) continue;
    if (std::isnan(w) || std::isnan(g)) return false;
    const double off = std::fabs(g - w);
    if (off <= tolerance(w)) continue;
    double m = 0;
    for (const std::vector<double>& values : moved) {
      if (!std::isnan(values[i])) m = std::max(m, std::fabs(values[i] - w));
    }
    off2 += off * off;
    moved2 += m * m;
  }
  return off2 <= 16 * moved2;
}

}  // namespace lazycl::fuzz
