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

Tensor Widen(const Tensor& input) {
  if (!is_floating(input.dtype()) || input.dtype() == DType::f64) return input;
  return cast(input, DType::f64);
}

bool NoFartherFromExact(const std::vector<double>& want, const std::vector<double>& got,
                        const std::vector<double>& exact,
                        const std::function<double(double)>& tolerance) {
  double got2 = 0, want2 = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double w = want[i], g = got[i], e = exact[i];
    if (w == g || (std::isnan(w) && std::isnan(g))) continue;
    if (std::isnan(w) || std::isnan(g) || std::isnan(e)) return false;
    if (std::fabs(g - w) <= tolerance(w)) continue;
    got2 += (g - e) * (g - e);
    want2 += (w - e) * (w - e);
  }
  return got2 <= 4 * want2;
}

namespace {

// Whether `dev`, the indices of step `s` (argmax, argmin, or topk's indices) on the device, picks
// values of its operand `x` (the host's) that equal, up to rounding, those `host`'s indices pick:
// a tie broken the other way (seed 2026, graph 6520 with gpu codegen: argmin over rows of
// layer_norm that are equal up to rounding).
bool PicksTheSameValues(const Graph& g, const Step& s, const Tensor& x, const Tensor& host,
                        const Tensor& dev) {
  const int64_t dim = s.kind == Kind::kArg ? s.dims[0] : s.dims[1];
  if (x.dim() == 0) return false;
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  const std::vector<int64_t> ids = dev.to_vector<int64_t>();
  for (int64_t i : ids) {
    if (i < 0 || i >= x.size(d)) return false;  // out of range is never a tie
  }
  auto picked = [&](const Tensor& idx) {
    const Tensor full_rank = s.kind == Kind::kArg && !s.keepdim ? unsqueeze(idx, d) : idx;
    return take_along_dim(x, full_rank, d);
  };
  return Mismatch(picked(host), picked(dev), Coarsest(g, static_cast<size_t>(s.a))).empty();
}

}  // namespace

// Whether step `s` gives the indices of an extreme of a floating operand.
bool ExtremeIndices(const Graph& g, const Step& s) {
  return (s.kind == Kind::kArg || (s.kind == Kind::kTopk && s.which == 1)) &&
         is_floating(g[static_cast<size_t>(s.a)].dtype);
}

std::string ValuesMismatch(const Graph& g, size_t index, uint64_t data_seed, int palette,
                           const std::vector<Tensor>& host, const std::vector<Tensor>& dev) {
  const std::string bad = ValueMismatch(g, index, data_seed, palette, host[index], dev[index]);
  if (bad.empty()) return bad;
  // The earlier extremes' indices that differ by ties only: the host takes the device's.
  std::vector<Tensor> fixed(index);
  bool any = false;
  for (size_t j = 0; j < index; ++j) {
    if (!ExtremeIndices(g, g[j]) || host[j].shape() != dev[j].shape()) continue;
    const Tensor dj = dev[j].to(Device::host());
    if (Mismatch(host[j], dj).empty()) continue;
    if (!PicksTheSameValues(g, g[j], host[static_cast<size_t>(g[j].a)], host[j], dj)) return bad;
    fixed[j] = dj;
    any = true;
  }
  if (!any) return bad;
  const Graph upto(g.begin(), g.begin() + static_cast<long>(index) + 1);
  const Tensor again = Interpret(upto, data_seed, palette, Device::host(), {}, fixed).back();
  return ValueMismatch(g, index, data_seed, palette, again, dev[index]).empty() ? "" : bad;
}

std::string ValueMismatch(const Graph& g, size_t index, uint64_t data_seed, int palette,
                          const Tensor& host, const Tensor& dev) {
  const DType coarsest = Coarsest(g, index);
  const std::string bad = Mismatch(host, dev, coarsest);
  if (bad.empty() || host.shape() != dev.shape() || host.dtype() != dev.dtype()) return bad;
  const Step& s = g[index];
  if (ExtremeIndices(g, s)) {
    const Graph operand(g.begin(), g.begin() + s.a + 1);
    const Tensor x = Interpret(operand, data_seed, palette, Device::host()).back();
    return PicksTheSameValues(g, s, x, host, dev) ? "" : bad;
  }
  if (!is_floating(host.dtype())) return bad;
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
  auto tolerance = [&](double w) { return Tolerance(host.dtype(), coarsest, w); };
  const std::vector<double> h = Doubles(host), d = Doubles(dev);
  if (IllConditioned(h, d, moved_values, tolerance)) return "";
  // The same graph on the host with its floating inputs widened to f64: a device no farther
  // from that than the host is has only rounded differently.
  try {
    const Tensor exact =
        Interpret(upto, data_seed, palette, Device::host(), [](int, const Tensor& input) {
          return Widen(input);
        }).back();
    if (exact.shape() == host.shape() && NoFartherFromExact(h, d, Doubles(exact), tolerance)) {
      return "";
    }
  } catch (const Error&) {
    // The widened graph is not valid (a scan carry that was f32 by a cast): no such check.
  }
  return bad;
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
