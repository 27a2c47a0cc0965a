// lazycl-fuzz's gradient check (graph.h, CheckGradients).
#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/graph.h"

namespace lazycl::fuzz {
namespace {

// The dtypes the check differentiates: f32 and f64 (gradients of 16-bit values are 16-bit,
// too coarse for the finite differences).
bool Differentiated(DType t) { return t == DType::f32 || t == DType::f64; }

// Whether the step's maths is smooth everywhere (finite differences can check it).
bool Smooth(const Step& s) {
  switch (s.kind) {
    case Kind::kUnary:  // not abs, relu, clamp, or sqrt and rsqrt of |x|
      return s.which == 0 || s.which == 1 || s.which == 4 || s.which == 5 ||
             (s.which >= 8 && s.which <= 14) || s.which == 19;
    case Kind::kBinary:
      return s.which <= 2;
    case Kind::kCompare:
    case Kind::kWhere:
    case Kind::kMaskedFill:
      return false;
    case Kind::kReduce:
      return s.which != 2 && s.which != 3;
    case Kind::kTopk:
      return false;
    case Kind::kScan:
      return s.which <= 2 &&
             (s.dims[0] == 0 || s.dims[0] == 1 || s.dims[0] == 4 || s.dims[0] == 5 ||
              (s.dims[0] >= 8 && s.dims[0] <= 14) || s.dims[0] == 19);
    default:
      return true;
  }
}

// The steps the last one reads, directly or not (itself included); with `only_gradients`, those
// its gradient reaches: through f32 values only, and not through a comparison, a where's
// condition or an index (grad() says a tensor reached only through those is not in the graph
// of the loss).
std::vector<bool> Reached(const Graph& g, bool only_gradients) {
  std::vector<bool> reached(g.size(), false);
  reached.back() = !only_gradients || Differentiated(g.back().dtype);
  for (size_t i = g.size(); i-- > 0;) {
    const Step& s = g[i];
    if (!reached[i] || (only_gradients && s.kind == Kind::kCompare)) continue;
    for (int o : Operands(s)) {
      const bool index = (s.kind == Kind::kWhere && o == s.a) ||
                         ((s.kind == Kind::kGather || s.kind == Kind::kIndexSelect ||
                           s.kind == Kind::kScatterAdd || s.kind == Kind::kTakeAlongDim ||
                           s.kind == Kind::kCrossEntropy || s.kind == Kind::kIndex2 ||
                           s.kind == Kind::kIndexPut || s.kind == Kind::kMaskedFill) &&
                          o == s.b) ||
                         (s.kind == Kind::kIndex2 && o == s.c);
      if (!only_gradients || (!index && Differentiated(g[static_cast<size_t>(o)].dtype))) {
        reached[static_cast<size_t>(o)] = true;
      }
    }
  }
  return reached;
}

}  // namespace

std::string CheckGradients(const Graph& g, uint64_t data_seed, int palette, Device device,
                           int* checked) {
  if (!Differentiated(g.back().dtype) || g.back().kind == Kind::kInput) return "";
  const std::vector<bool> reached = Reached(g, /*only_gradients=*/true);
  const std::vector<bool> read = Reached(g, /*only_gradients=*/false);
  std::vector<int> wrt;
  bool smooth = true;
  for (size_t i = 0; i < g.size(); ++i) {
    if (read[i]) smooth = smooth && Smooth(g[i]);
    // Attention over an empty head dim: the default scale 1 / sqrt(0) = inf times the empty dot
    // product 0 is NaN (as in PyTorch and JAX), and where the loss does not move with the values
    // the NaN meets a zero cotangent, whose product is a NaN gradient against a finite
    // difference of 0 (seed 41, graph 144).
    // A value rounded to 16 bits is a staircase at the finite differences' step (an f16 ulp
    // near 2 is 2^-9; the step is 1e-2): x * cast(x, f16) measured -3.14 against its gradient
    // -2.94 (seed 53, graph 49).
    if (read[i] && g[i].kind == Kind::kCast && is_half(g[i].dtype)) smooth = false;
    if (read[i] && g[i].kind == Kind::kAttention &&
        Concrete(g[static_cast<size_t>(g[i].a)].shape, palette).back() == 0) {
      smooth = false;
    }
    if (reached[i] && g[i].kind == Kind::kInput && Differentiated(g[i].dtype)) {
      wrt.push_back(static_cast<int>(i));
    }
  }
  if (wrt.empty()) return "";
  const std::vector<int64_t> out_shape = Concrete(g.back().shape, palette);
  const uint64_t ct_seed = data_seed * 7919 + 17;
  // An f64 loss takes an f64 cotangent: an f32 one differs between host and device in its last
  // f32 bits (their sin and log), which the f64 comparison would see.
  const DType ct_dtype = g.back().dtype;

  // loss and d loss / d wrt on `d`, with inputs made leaves that require grad (and each element
  // of them and of the cotangent scaled by 1 + nudge, or with `random` > 0, by a random factor
  // within `nudge` of 1, drawn with `random` in the seed).
  // With `wide`, floating inputs and the cotangent are widened to f64 (Widen).
  auto run = [&](Device d, std::vector<Tensor>* grads, double nudge = 0, int random = 0,
                 bool wide = false) {
    std::vector<Tensor> leaves;
    auto seed = [&](uint64_t base) { return base * 4 + static_cast<uint64_t>(random); };
    const std::vector<Tensor> v =
        Interpret(g, data_seed, palette, d, [&](int step, const Tensor& input) {
          if (!Differentiated(input.dtype())) return input;
          const Tensor x =
              wide ? Widen(input)
                   : Nudge(input, seed(data_seed + static_cast<uint64_t>(step)), nudge, random > 0);
          Tensor leaf = (d.is_host() ? x : x.to(d)).detach().requires_grad_();
          return leaf;
        });
    for (int i : wrt) leaves.push_back(v[static_cast<size_t>(i)]);
    const Tensor c = randn(out_shape, ct_seed, ct_dtype, d);
    const Tensor ct = wide ? Widen(c) : Nudge(c, seed(ct_seed), nudge, random > 0);
    const Tensor loss = sum(v.back() * ct);
    *grads = grad(loss, leaves);
    return loss;
  };
  std::vector<Tensor> host_grads, dev_grads;
  try {
    run(Device::host(), &host_grads);
    run(device, &dev_grads);
  } catch (const Error& e) {
    return std::string("grad threw: ") + e.what();
  }
  const DType coarsest = Coarsest(g, g.size() - 1);
  const bool f32_ancestry = coarsest != DType::f64;
  // On the host, every element of the inputs and the cotangent moved by 2 ulps (of f32, or of
  // f64 for pure f64), all alike, and three times at random.
  std::vector<std::vector<Tensor>> nudged_grads;
  std::vector<Tensor> wide_grads;  // from f64 inputs and cotangent: empty until needed or invalid
  bool wide_tried = false;
  const double nudge = NudgeOf(coarsest);
  for (size_t k = 0; k < wrt.size(); ++k) {
    const std::string bad = Mismatch(host_grads[k], dev_grads[k], coarsest);
    ++*checked;
    if (bad.empty()) continue;
    // An ill-conditioned gradient moves under a 2-ulp nudge of the inputs about as far as host
    // and device differ: that difference is rounding, not a bug. Found by a long run of the
    // pre-f64 generator (seed 2026): the sqrt of a carry that cancels to near 0 through 17 scan
    // steps (graph 17255), of a matmul's near-0 sums (23143), layer_norm of equal values whose
    // gradient is 0 by cancellation of terms of 1/sqrt(eps) (21558). The nudge is random per
    // element too: a uniform scaling leaves such cancellations as they were. The cotangent is
    // nudged too: layer_norm of a row of equal values (a broadcast, which nudging its input
    // keeps equal) has a gradient of 0 by cancellation of terms of 1/sqrt(eps) times the
    // cotangent, whose rounding only the cotangent's bits move (seed 2026, graph 44246).
    if (nudged_grads.empty()) {
      for (int random = 0; random < 4; ++random) {
        run(Device::host(), &nudged_grads.emplace_back(), nudge, random);
      }
    }
    std::vector<std::vector<double>> moved_values;
    for (const std::vector<Tensor>& n : nudged_grads) moved_values.push_back(Doubles(n[k]));
    auto tolerance = [&](double w) { return Tolerance(host_grads[k].dtype(), coarsest, w); };
    const std::vector<double> h = Doubles(host_grads[k]), d = Doubles(dev_grads[k]);
    if (IllConditioned(h, d, moved_values, tolerance)) continue;
    // And a device no farther than the host from the gradient computed in f64 (Widen).
    if (!wide_tried) {
      wide_tried = true;
      try {
        run(Device::host(), &wide_grads, 0, 0, /*wide=*/true);
      } catch (const Error&) {
        wide_grads.clear();  // the widened graph is not valid (a carry f32 by a cast)
      }
    }
    if (k < wide_grads.size() && wide_grads[k].defined() &&
        wide_grads[k].shape() == host_grads[k].shape() &&
        NoFartherFromExact(h, d, Doubles(wide_grads[k]), tolerance)) {
      continue;
    }
    return "d loss / d %" + std::to_string(wrt[k]) + ", device vs host: " + bad;
  }
  if (!smooth) return "";

  // Central differences on the host at up to 3 elements of each input.
  std::mt19937_64 rng(data_seed);
  constexpr double kEps = 1e-2;
  for (size_t k = 0; k < wrt.size(); ++k) {
    const std::vector<double> g_host = Doubles(host_grads[k]);
    if (g_host.empty()) continue;
    for (int trial = 0; trial < 3; ++trial) {
      const size_t e = std::uniform_int_distribution<size_t>(0, g_host.size() - 1)(rng);
      auto loss_at = [&](double delta) {
        const std::vector<Tensor> v =
            Interpret(g, data_seed, palette, Device::host(), [&](int step, const Tensor& input) {
              if (step != wrt[k]) return input;
              std::vector<double> x = Doubles(input);
              x[e] += delta;
              return tensor(x, input.shape(), input.dtype(), Device::host());
            });
        const Tensor ct = randn(out_shape, ct_seed, ct_dtype, Device::host());
        return Doubles(sum(v.back() * ct))[0];
      };
      // Central differences at h and h / 2, extrapolated (Richardson: the h^2 error term
      // cancels). Where the two disagree the loss curves too much at this scale for either to
      // say anything (layer_norm of a row of two close values: seed 2026, graph 7395, whose
      // gradient f64 differences at h = 1e-6 confirm), and the element is skipped.
      double largest = 0;  // |loss| near x
      auto central = [&](double h) {
        const double up = loss_at(h), down = loss_at(-h);
        largest = std::max({largest, std::fabs(up), std::fabs(down)});
        return (up - down) / (2 * h);
      };
      const double coarse = central(kEps);
      const double fine = central(kEps / 2);
      const double fd = (4 * fine - coarse) / 3;
      // A loss that is not finite near x (the mean of an empty tensor is NaN whatever x is) has
      // no finite difference to compare with; the device-vs-host check above still ran.
      if (!std::isfinite(fd)) continue;
      if (!(std::fabs(fd - fine) <= 3e-2 * (1 + std::fabs(fd)))) continue;
      // The loss is rounded to its dtype: a difference quotient of a large loss is that rounding
      // over h (sum(x + 3) of 4913 elements is ~1e4, whose f32 ulp over 5e-3 is 0.2: seed 2026,
      // graph 9415). Skip where that noise reaches a third of the tolerance.
      const double ulp = f32_ancestry ? 0x1p-23 : 0x1p-52;
      if (2 * largest * ulp / kEps > 1e-2 * (1 + std::fabs(fd))) continue;
      ++*checked;
      if (!(std::fabs(fd - g_host[e]) <= 3e-2 * (1 + std::fabs(fd)))) {
        std::ostringstream o;
        o << "d loss / d %" << wrt[k] << "[" << e << "]: grad " << g_host[e]
          << ", finite differences " << fd;
        return o.str();
      }
    }
  }
  return "";
}

}  // namespace lazycl::fuzz
