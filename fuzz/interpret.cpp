// Runs lazycl-fuzz's op lists through the public API (graph.h).
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/graph.h"

namespace lazycl::fuzz {

ScanBody ScanBodyOf(const Step& scan) {
  ScanBody body;
  body.binary.a = 0;
  body.binary.b = 1;
  body.binary.which = scan.which;
  body.unary.a = 0;
  body.unary.which = static_cast<int>(scan.dims[0]);
  return body;
}

std::vector<int64_t> Concrete(const SymShape& s, int palette) {
  std::vector<int64_t> out;
  for (const Dim& d : s) out.push_back(d[static_cast<size_t>(palette)]);
  return out;
}

namespace {

// Input values of step `i` on palette p: small, so that chains of ops stay finite.
Tensor InputValues(const Step& s, uint64_t seed, int p) {
  const std::vector<int64_t> shape = Concrete(s.shape, p);
  const Device host = Device::host();
  switch (s.dtype) {
    case DType::boolean:
      return lt(rand(shape, seed, 0, 1, DType::f32, host), full({}, 0.5, DType::f32, host));
    case DType::i32:
    case DType::i64:  // scatter_add's src takes x's dtype, and the sum of i32 is i64
      return cast(rand(shape, seed, -6, 6, DType::f32, host), s.dtype);
    case DType::f16:
    case DType::bf16:
      return cast(randn(shape, seed, DType::f32, host), s.dtype);
    case DType::f64:
      return randn(shape, seed, DType::f64, host);
    default:
      return randn(shape, seed, DType::f32, host);
  }
}

Tensor Apply(const Step& s, const std::vector<Tensor>& v, int p);

// Kind::kScan (graph.h): scan() on a device traces the body once; on the host it runs the loop.
Tensor Scan(const Step& s, const std::vector<Tensor>& v, int p) {
  const auto [binary, unary] = ScanBodyOf(s);
  const Tensor captured = s.b >= 0 ? v[s.b] : Tensor();
  const ScanResult r = scan(
      [&](const std::vector<Tensor>& carry, const std::vector<Tensor>& x) {
        Tensor c = Apply(binary, {carry[0], x[0]}, p);
        if (s.b >= 0) c = c + captured * 0.5;
        c = tanh(c);
        Tensor y = Apply(unary, {c}, p);
        return std::make_pair(std::vector<Tensor>{c}, std::vector<Tensor>{y});
      },
      {v[s.c]}, {v[s.a]});
  return s.keepdim ? r.carry[0] : r.ys[0];
}

// The step inside call(): its operands are the arguments of a function traced on placeholders.
Tensor InCall(const Step& s, const std::vector<Tensor>& v, int p) {
  Step inner = s;
  inner.in_call = false;
  std::vector<Tensor> args;
  for (int* o : {&inner.a, &inner.b, &inner.c}) {
    if (*o < 0) continue;
    args.push_back(v[static_cast<size_t>(*o)]);
    *o = static_cast<int>(args.size()) - 1;
  }
  return call(
      [inner, p](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{Apply(inner, in, p)};
      },
      args)[0];
}

Tensor Apply(const Step& s, const std::vector<Tensor>& v, int p) {
  const Tensor& a = s.a >= 0 ? v[s.a] : v[0];
  switch (s.kind) {
    case Kind::kInput:
      return Tensor();
    case Kind::kUnary:
      switch (s.which) {
        case 0:
          return neg(a);
        case 1:
          return exp(tanh(a));
        case 2:
          return log(abs(a) + 1.0);
        case 3:
          return sqrt(abs(a));
        case 4:
          return tanh(a);
        case 5:
          return sigmoid(a);
        case 6:
          return relu(a);
        case 7:
          return abs(a);
        case 8:
          return sin(a);
        case 9:
          return cos(a);
        case 10:
          return erf(a);
        case 11:
          return nn::dropout(cast(a, DType::f32), 0.3, 17);
        case 12:
          return a + randn(a.shape(), 23, DType::f32, a.device());
        case 13:
          return gelu(a);
        case 14:
          return silu(a);
        case 15:
          return rsqrt(abs(a) + 0.5);
        case 16:
          return clamp(a, -0.5, 0.8);
        case 17:
          return clamp_min(a, 0.1);
        case 18:
          return clamp_max(a, 0.3);
        default:
          return gelu(a, /*approximate_tanh=*/true);
      }
    case Kind::kBinary: {
      const Tensor& b = v[s.b];
      switch (s.which) {
        case 0:
          return a + b;
        case 1:
          return a - b;
        case 2:
          return a * b;
        case 3:
          // Keep denominators away from 0.
          return a / (abs(b) + 0.5);
        case 4:
          return maximum(a, b);
        case 5:
          return minimum(a, b);
        default:
          return pow(abs(a) + 0.5, tanh(b));
      }
    }
    case Kind::kScalar:
      switch (s.which) {
        case 0:
          return a + s.scalar;
        case 1:
          return s.scalar - a;
        case 2:
          return s.scalar * a;
        case 3:
          return a / s.scalar;
        case 4:
          return lt(a, s.scalar);
        case 5:
          return le(a, s.scalar);
        case 6:
          return gt(a, s.scalar);
        case 7:
          return ge(a, s.scalar);
        case 8:
          return eq(a, s.scalar);
        default:
          return ne(a, s.scalar);
      }
    case Kind::kCompare: {
      const Tensor& b = v[s.b];
      switch (s.which) {
        case 0:
          return lt(a, b);
        case 1:
          return le(a, b);
        case 2:
          return gt(a, b);
        case 3:
          return ge(a, b);
        case 4:
          return eq(a, b);
        default:
          return ne(a, b);
      }
    }
    case Kind::kWhere:
      return where(a, v[s.b], v[s.c]);
    case Kind::kReduce:
      if (s.which == 0) return sum(a, s.dims, s.keepdim);
      if (s.which == 1) return mean(a, s.dims, s.keepdim);
      if (s.which == 2) return max(a, s.dims, s.keepdim);
      if (s.which == 3) return min(a, s.dims, s.keepdim);
      return prod(a, s.dims, s.keepdim);
    case Kind::kTranspose:
      return transpose(a, s.dims[0], s.dims[1]);
    case Kind::kPermute:
      return permute(a, s.dims);
    case Kind::kSlice:
      return slice(a, s.dims[0], s.dims[1], s.dims[2]);
    case Kind::kFlatten:
      return reshape(a, {-1});
    case Kind::kUnsqueeze:
      return unsqueeze(a, s.dims[0]);
    case Kind::kBroadcast:
      return broadcast_to(a, Concrete(s.shape, p));
    case Kind::kCat:
      return cat({a, v[s.b]}, s.dims[0]);
    case Kind::kSoftmax:
      return s.which ? log_softmax(a, s.dims[0]) : softmax(a, s.dims[0]);
    case Kind::kMatmul:
      return matmul(a, v[s.b]);
    case Kind::kGather:
      return gather(a, s.dims[0], v[s.b]);
    case Kind::kIndexSelect:
      return index_select(a, s.dims[0], v[s.b]);
    case Kind::kScatterAdd:
      return scatter_add(a, s.dims[0], v[s.b], v[s.c]);
    case Kind::kArg:
      return s.which ? argmin(a, s.dims[0], s.keepdim) : argmax(a, s.dims[0], s.keepdim);
    case Kind::kCumsum:
      return cumsum(a, s.dims[0]);
    case Kind::kTri:
      return s.which ? triu(a, s.dims[0]) : tril(a, s.dims[0]);
    case Kind::kTopk: {
      auto [values, indices] = topk(a, s.dims[0], s.dims[1]);
      return s.which ? indices : values;
    }
    case Kind::kStack:
      return stack({a, v[s.b]}, s.dims[0]);
    case Kind::kSqueeze:
      return squeeze(a, s.dims[0]);
    case Kind::kCast:
      return cast(a, s.dtype);
    case Kind::kNorm:
      if (s.which == 0) return nn::rms_norm(a, v[s.b]);
      return s.which == 1 ? nn::layer_norm(a, v[s.b], v[s.c]) : nn::layer_norm(a);
    case Kind::kLinear:
      return nn::linear(a, v[s.b], s.c >= 0 ? v[s.c] : Tensor());
    case Kind::kEmbedding:
      return nn::embedding(v[s.b], a);
    case Kind::kOneHot:
      return one_hot(a, s.dims[0]);
    case Kind::kCrossEntropy:
      return nn::cross_entropy(a, v[s.b]);
    case Kind::kAttention:
      return nn::scaled_dot_product_attention(a, v[s.b], v[s.c], s.keepdim);
    case Kind::kTakeAlongDim:
      return take_along_dim(a, v[s.b], s.dims[0]);
    case Kind::kIndex2: {
      std::vector<TensorIndex> entries(static_cast<size_t>(s.dims[1]) + 1, Slice());
      entries[static_cast<size_t>(s.dims[0])] = v[s.b];
      entries[static_cast<size_t>(s.dims[1])] = v[s.c];
      return index(a, entries);
    }
    case Kind::kIndexPut: {
      std::vector<TensorIndex> entries(static_cast<size_t>(s.dims[0]) + 1, Slice());
      entries[static_cast<size_t>(s.dims[0])] = v[s.b];
      return index_put(a, entries, v[s.c], s.keepdim);
    }
    case Kind::kMaskedFill:
      return masked_fill(a, v[s.b], s.scalar);
    case Kind::kScan:
      return Scan(s, v, p);
  }
  return Tensor();
}

}  // namespace

std::vector<Tensor> Interpret(const Graph& steps, uint64_t seed, int p, Device device,
                              const InputHook& hook, const std::vector<Tensor>& fixed) {
  std::vector<Tensor> v;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    if (i < fixed.size() && fixed[i].defined()) {
      v.push_back(device.is_host() ? fixed[i] : fixed[i].to(device));
    } else if (s.kind == Kind::kInput) {
      Tensor h = InputValues(s, seed * 1000 + static_cast<uint64_t>(s.input_id), p);
      if (hook) h = hook(static_cast<int>(i), h);
      v.push_back(device.is_host() ? h : h.to(device));
    } else if (s.in_call && !device.is_host()) {
      v.push_back(InCall(s, v, p));
    } else {
      v.push_back(Apply(s, v, p));
    }
  }
  return v;
}

namespace {

// Whether a step computes an f32 value inside itself whatever its dtype: x + an f32 randn,
// tanh of an integer exponent in pow(|a| + .5, tanh(b)) (seed 2026, graph 3264: f64 ** f32
// carried the f32 tanh's ulp), |b| + .5 of an integer b.
bool InternalF32(const Graph& graph, const Step& s) {
  auto floating = [&](int i) { return i >= 0 && is_floating(graph[static_cast<size_t>(i)].dtype); };
  if (s.kind == Kind::kUnary) return s.which == 11 || s.which == 12;
  if (s.kind == Kind::kBinary && (s.which == 3 || s.which == 6)) {
    return !floating(s.b) || (s.which == 6 && !floating(s.a));
  }
  return false;
}

}  // namespace

namespace {

// Relative tolerance by dtype: the larger, the coarser.
double Relative(DType t) {
  switch (t) {
    case DType::bf16:
      return 0x1p-5;  // four bf16 ulps
    case DType::f16:
      return 0x1p-8;  // four f16 ulps
    case DType::f32:
      return 1e-4;
    default:
      return 1e-9;
  }
}

}  // namespace

std::vector<double> Doubles(const Tensor& t) {
  if (t.dtype() == DType::f64) return t.to_vector<double>();
  const std::vector<float> f = t.to_vector<float>();
  return std::vector<double>(f.begin(), f.end());
}

DType Coarsest(const Graph& graph, size_t i) {
  DType coarsest = DType::f64;
  auto take = [&](DType t) {
    if (is_floating(t) && Relative(t) > Relative(coarsest)) coarsest = t;
  };
  std::vector<bool> read(i + 1, false);
  read[i] = true;
  for (size_t j = i + 1; j-- > 0;) {
    if (!read[j]) continue;
    take(graph[j].dtype);
    if (InternalF32(graph, graph[j])) take(DType::f32);
    for (int o : Operands(graph[j])) read[static_cast<size_t>(o)] = true;
  }
  return coarsest;
}

double Tolerance(DType t, DType coarsest, double want) {
  const double rel = std::max(Relative(t), Relative(coarsest));
  const double abs = rel == 1e-9 ? 1e-12 : rel / 10;
  return rel * std::max(1.0, std::fabs(want)) + abs;
}

std::string Mismatch(const Tensor& want, const Tensor& got, DType coarsest) {
  if (want.shape() != got.shape() || want.dtype() != got.dtype()) {
    return std::string("shape or dtype differ: host ") + want.str() + ", device " + got.str();
  }
  std::ostringstream bad;
  int count = 0;
  auto report = [&](size_t i, double w, double g) {
    if (count++ < 5) bad << " [" << i << "] host " << w << " device " << g << ";";
  };
  switch (want.dtype()) {
    case DType::f32:
    case DType::f16:
    case DType::bf16:
    case DType::f64: {
      // The coarser of the value's dtype and what went into it: a 16-bit value one ulp apart
      // after a sum whose order differs (the plan, and so the order, depends on which values are
      // outputs) grows through pow and a division, and stays so when cast to f32 (seed 2026,
      // graph 55303); f64 chains differ by the libm's ulp or two per op.
      const std::vector<double> w = Doubles(want);
      const std::vector<double> g = Doubles(got);
      for (size_t i = 0; i < w.size(); ++i) {
        const bool ok = w[i] == g[i] || (std::isnan(w[i]) && std::isnan(g[i])) ||
                        std::fabs(w[i] - g[i]) <= Tolerance(want.dtype(), coarsest, w[i]);
        if (!ok) report(i, w[i], g[i]);
      }
      break;
    }
    case DType::i32: {
      const std::vector<int32_t> w = want.to_vector<int32_t>();
      const std::vector<int32_t> g = got.to_vector<int32_t>();
      for (size_t i = 0; i < w.size(); ++i) {
        if (w[i] != g[i]) report(i, w[i], g[i]);
      }
      break;
    }
    case DType::i64: {
      const std::vector<int64_t> w = want.to_vector<int64_t>();
      const std::vector<int64_t> g = got.to_vector<int64_t>();
      for (size_t i = 0; i < w.size(); ++i) {
        if (w[i] != g[i]) report(i, static_cast<double>(w[i]), static_cast<double>(g[i]));
      }
      break;
    }
    case DType::boolean: {
      const std::vector<uint8_t> w = want.to_vector<uint8_t>();
      const std::vector<uint8_t> g = got.to_vector<uint8_t>();
      for (size_t i = 0; i < w.size(); ++i) {
        if (w[i] != g[i]) report(i, w[i], g[i]);
      }
      break;
    }
  }
  if (count == 0) return "";
  return std::to_string(count) + " elements differ:" + bad.str();
}

}  // namespace lazycl::fuzz
