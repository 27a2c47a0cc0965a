// Random graphs of 1-20 ops, built twice from one op list (on host tensors and on device
// tensors) and compared within tolerance. A failure prints the seed and the op list.
//
// PoCL compiles each distinct kernel in ~0.4 s cold, so the number of distinct structures is
// limited: graph `seed` uses structure seed % kStructures and size palette seed / kStructures.
// Shapes are symbolic (a dim is 0, 1, A or B, or a product of them), and the palettes give A
// and B different values with the same 0/1 pattern, so the palettes re-run each structure with
// other sizes and other data, mostly reusing its kernels.
//
// Tolerance: |device - host| <= 1e-4 * scale + 1e-5, where scale is the host result's
// magnitude computed on |inputs| (|x| propagated through the same graph would be costly, so
// the scale is max(|host|, 1)): chains of up to 20 f32 ops with reductions accumulate more
// rounding than a single op (ops_test checks single ops at 1e-5).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

constexpr int kStructures = 100;
constexpr int kPalettes = 3;
constexpr int kGraphs = kStructures * kPalettes;
constexpr int64_t kA[kPalettes] = {3, 2, 5};
constexpr int64_t kB[kPalettes] = {4, 5, 3};

using Dim = std::array<int64_t, kPalettes>;  // the size of one dim in each palette
using SymShape = std::vector<Dim>;

Dim Const(int64_t v) { return {v, v, v}; }
Dim DimA() { return {kA[0], kA[1], kA[2]}; }
Dim DimB() { return {kB[0], kB[1], kB[2]}; }
bool IsOne(const Dim& d) { return d[0] == 1; }  // 0 and 1 hold in every palette or none
bool IsZero(const Dim& d) { return d[0] == 0; }

std::vector<int64_t> Concrete(const SymShape& s, int p) {
  std::vector<int64_t> out;
  for (const Dim& d : s) out.push_back(d[p]);
  return out;
}

std::string SymStr(const SymShape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    out += (i ? "," : "") + std::to_string(s[i][0]) + "/" + std::to_string(s[i][1]) + "/" +
           std::to_string(s[i][2]);
  }
  return out + "]";
}

enum class Kind {
  kInput,      // shape, dtype
  kUnary,      // a, which
  kBinary,     // a, b, which
  kScalar,     // a, which, scalar
  kCompare,    // a, b, which
  kWhere,      // a (bool), b, c
  kReduce,     // a, which, dims, keepdim
  kTranspose,  // a, dims[0], dims[1]
  kPermute,    // a, dims
  kSlice,      // a, dims[0] = dim, dims[1] = start, dims[2] = end
  kFlatten,    // a
  kUnsqueeze,  // a, dims[0]
  kBroadcast,  // a, shape
  kCat,        // a, b, dims[0]
  kSoftmax,    // a, dims[0], which (0 softmax, 1 log_softmax)
  kMatmul,     // a, b
};

struct Step {
  explicit Step(Kind k) : kind(k) {}
  Kind kind;
  int a = -1, b = -1, c = -1;
  int which = 0;
  std::vector<int64_t> dims;
  bool keepdim = false;
  double scalar = 0;
  SymShape shape;  // kInput, kBroadcast; and the result's shape, for printing
  DType dtype = DType::f32;
};

const char* kUnaryNames[] = {"neg",  "exp(tanh)", "log(|x|+1)", "sqrt(|x|)", "tanh", "sigmoid",
                             "relu", "abs",       "sin",        "cos",       "erf"};
const char* kBinaryNames[] = {"add", "sub", "mul", "div", "maximum", "minimum", "pow(|a|+.5,b)"};
const char* kScalarNames[] = {"x+c", "c-x", "c*x", "x/c"};
const char* kCompareNames[] = {"lt", "le", "gt", "ge", "eq", "ne"};
const char* kReduceNames[] = {"sum", "mean", "max"};

std::string StepStr(const Step& s, int index) {
  std::ostringstream o;
  o << "%" << index << " = ";
  auto dims = [&] {
    std::string d;
    for (size_t i = 0; i < s.dims.size(); ++i) d += (i ? "," : "") + std::to_string(s.dims[i]);
    return d;
  };
  switch (s.kind) {
    case Kind::kInput:
      o << "input " << dtype_name(s.dtype);
      break;
    case Kind::kUnary:
      o << kUnaryNames[s.which] << " %" << s.a;
      break;
    case Kind::kBinary:
      o << kBinaryNames[s.which] << " %" << s.a << " %" << s.b;
      break;
    case Kind::kScalar:
      o << kScalarNames[s.which] << " %" << s.a << " c=" << s.scalar;
      break;
    case Kind::kCompare:
      o << kCompareNames[s.which] << " %" << s.a << " %" << s.b;
      break;
    case Kind::kWhere:
      o << "where %" << s.a << " %" << s.b << " %" << s.c;
      break;
    case Kind::kReduce:
      o << kReduceNames[s.which] << " %" << s.a << " dims {" << dims() << "}"
        << (s.keepdim ? " keepdim" : "");
      break;
    case Kind::kTranspose:
      o << "transpose %" << s.a << " " << dims();
      break;
    case Kind::kPermute:
      o << "permute %" << s.a << " {" << dims() << "}";
      break;
    case Kind::kSlice:
      o << "slice %" << s.a << " dim,start,end " << dims();
      break;
    case Kind::kFlatten:
      o << "reshape %" << s.a << " [-1]";
      break;
    case Kind::kUnsqueeze:
      o << "unsqueeze %" << s.a << " " << dims();
      break;
    case Kind::kBroadcast:
      o << "broadcast_to %" << s.a;
      break;
    case Kind::kCat:
      o << "cat %" << s.a << " %" << s.b << " dim " << dims();
      break;
    case Kind::kSoftmax:
      o << (s.which ? "log_softmax %" : "softmax %") << s.a << " dim " << dims();
      break;
    case Kind::kMatmul:
      o << "matmul %" << s.a << " %" << s.b;
      break;
  }
  o << " -> " << dtype_name(s.dtype) << SymStr(s.shape);
  return o.str();
}

// Builds a random op list from one structure seed.
class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  std::vector<Step> Run() {
    const int inputs = Uniform(1, 3);
    for (int i = 0; i < inputs; ++i) AddInput(RandomShape(), RandomDType());
    const int ops = Uniform(1, 20);
    for (int i = 0; i < ops; ++i) AddOp();
    return steps_;
  }

 private:
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  Dim RandomDim() {
    const int r = Uniform(0, 19);
    if (r == 0) return Const(0);
    if (r < 6) return Const(1);
    return r < 13 ? DimA() : DimB();
  }
  SymShape RandomShape() {
    SymShape s(Uniform(0, 4));
    for (Dim& d : s) d = RandomDim();
    return s;
  }
  DType RandomDType() {
    const int r = Uniform(0, 9);
    return r < 7 ? DType::f32 : r < 9 ? DType::i32 : DType::boolean;
  }

  int Add(Step s) {
    steps_.push_back(std::move(s));
    return static_cast<int>(steps_.size()) - 1;
  }
  int AddInput(SymShape shape, DType dtype) {
    Step s{Kind::kInput};
    s.shape = std::move(shape);
    s.dtype = dtype;
    return Add(s);
  }
  const Step& At(int i) const { return steps_[i]; }
  int Pick() { return Uniform(0, static_cast<int>(steps_.size()) - 1); }
  int PickNumeric() {
    for (int tries = 0; tries < 10; ++tries) {
      int i = Pick();
      if (At(i).dtype != DType::boolean) return i;
    }
    return AddInput(RandomShape(), DType::f32);
  }

  // A shape that broadcasts with `s`: some dims dropped from the front, some set to 1.
  SymShape Partner(const SymShape& s) {
    const int dropped = Uniform(0, static_cast<int>(s.size()));
    SymShape out(s.begin() + dropped, s.end());
    for (Dim& d : out) {
      if (Chance(0.3)) d = Const(1);
    }
    if (dropped == 0 && out.size() < 4 && Chance(0.2)) {
      out.insert(out.begin(), Chance(0.5) ? DimA() : Const(1));
    }
    return out;
  }
  static SymShape Broadcast(const SymShape& x, const SymShape& y) {
    SymShape out(std::max(x.size(), y.size()), Const(1));
    for (const SymShape* s : {&x, &y}) {
      for (size_t i = 0; i < s->size(); ++i) {
        Dim& o = out[out.size() - s->size() + i];
        if (IsOne(o)) o = (*s)[i];
      }
    }
    return out;
  }
  // Another operand for `a`: an earlier value when its shape broadcasts, else a new input.
  int PartnerOf(int a, bool numeric) {
    const int b = numeric ? PickNumeric() : Pick();
    const SymShape& x = At(a).shape;
    const SymShape& y = At(b).shape;
    bool ok = true;
    for (size_t i = 1; i <= std::min(x.size(), y.size()); ++i) {
      const Dim& dx = x[x.size() - i];
      const Dim& dy = y[y.size() - i];
      ok = ok && (dx == dy || IsOne(dx) || IsOne(dy));
    }
    if (ok && Chance(0.7)) return b;
    return AddInput(Partner(x), numeric ? DType::f32 : At(a).dtype);
  }

  void AddOp() {
    const int r = Uniform(0, 99);
    if (r < 18) {
      Step s{Kind::kUnary};
      s.a = PickNumeric();
      s.which = Uniform(0, static_cast<int>(std::size(kUnaryNames)) - 1);
      s.shape = At(s.a).shape;
      // neg, relu and abs keep integers; the others compute in f32.
      const bool keeps = s.which == 0 || s.which == 6 || s.which == 7;
      s.dtype = keeps ? At(s.a).dtype : DType::f32;
      Add(s);
    } else if (r < 36) {
      Step s{Kind::kBinary};
      s.a = PickNumeric();
      s.b = PartnerOf(s.a, true);
      s.which = Uniform(0, 6);
      s.shape = Broadcast(At(s.a).shape, At(s.b).shape);
      const bool ints = At(s.a).dtype == DType::i32 && At(s.b).dtype == DType::i32;
      s.dtype = ints && s.which != 3 && s.which != 6 ? DType::i32 : DType::f32;
      Add(s);
    } else if (r < 46) {
      Step s{Kind::kScalar};
      s.a = PickNumeric();
      s.which = Uniform(0, 3);
      s.scalar = Chance(0.5) ? Uniform(-3, 3) : Uniform(-30, 30) / 8.0;
      if (s.which == 3 && s.scalar == 0) s.scalar = 2;
      s.shape = At(s.a).shape;
      const bool integral = std::floor(s.scalar) == s.scalar;
      s.dtype = At(s.a).dtype == DType::i32 && integral && s.which != 3 ? DType::i32 : DType::f32;
      Add(s);
    } else if (r < 54) {
      Step s{Kind::kCompare};
      s.a = Pick();
      s.b = PartnerOf(s.a, At(s.a).dtype != DType::boolean);
      s.which = Uniform(0, 5);
      s.shape = Broadcast(At(s.a).shape, At(s.b).shape);
      s.dtype = DType::boolean;
      Add(s);
    } else if (r < 60) {
      Step s{Kind::kWhere};
      s.b = PickNumeric();
      s.c = PartnerOf(s.b, true);
      const SymShape both = Broadcast(At(s.b).shape, At(s.c).shape);
      s.a = AddInput(Partner(both), DType::boolean);
      s.shape = Broadcast(both, At(s.a).shape);
      const bool ints = At(s.b).dtype == DType::i32 && At(s.c).dtype == DType::i32;
      s.dtype = ints ? DType::i32 : DType::f32;
      Add(s);
    } else if (r < 70) {
      Step s{Kind::kReduce};
      s.a = Pick();
      s.which = Uniform(0, 2);
      const SymShape& x = At(s.a).shape;
      for (size_t d = 0; d < x.size(); ++d) {
        if (Chance(0.5))
          s.dims.push_back(Chance(0.5) ? static_cast<int64_t>(d)
                                       : static_cast<int64_t>(d) - static_cast<int64_t>(x.size()));
      }
      s.keepdim = Chance(0.5);
      // max has no identity: it needs non-empty reduced dims.
      bool empty = false;
      for (size_t d = 0; d < x.size(); ++d) {
        const bool reduced =
            s.dims.empty() || std::any_of(s.dims.begin(), s.dims.end(), [&](int64_t v) {
              return (v + static_cast<int64_t>(x.size())) % static_cast<int64_t>(x.size()) ==
                     static_cast<int64_t>(d);
            });
        if (reduced && IsZero(x[d])) empty = true;
      }
      if (s.which == 2 && empty) s.which = 0;
      const DType t = At(s.a).dtype;
      s.dtype = s.which == 1 ? DType::f32 : s.which == 0 ? (t == DType::f32 ? t : DType::i64) : t;
      for (size_t d = 0; d < x.size(); ++d) {
        const bool reduced =
            s.dims.empty() || std::any_of(s.dims.begin(), s.dims.end(), [&](int64_t v) {
              return (v + static_cast<int64_t>(x.size())) % static_cast<int64_t>(x.size()) ==
                     static_cast<int64_t>(d);
            });
        if (!reduced)
          s.shape.push_back(x[d]);
        else if (s.keepdim)
          s.shape.push_back(Const(1));
      }
      Add(s);
    } else if (r < 82) {
      AddView();
    } else if (r < 88) {
      Step s{Kind::kCat};
      s.a = Pick();
      const SymShape x = At(s.a).shape;  // a copy: AddInput below may move steps_
      if (x.empty()) return;
      const int64_t dim = Uniform(0, static_cast<int>(x.size()) - 1);
      SymShape y = x;
      y[dim] = RandomDim();
      s.b = AddInput(y, At(s.a).dtype);
      s.dims = {Chance(0.5) ? dim : dim - static_cast<int64_t>(x.size())};
      s.shape = x;
      for (int p = 0; p < kPalettes; ++p) s.shape[dim][p] += y[dim][p];
      s.dtype = At(s.a).dtype;
      Add(s);
    } else if (r < 94) {
      Step s{Kind::kSoftmax};
      s.a = PickNumeric();
      const SymShape& x = At(s.a).shape;
      if (x.empty() || At(s.a).dtype != DType::f32) return;
      s.dims = {Uniform(-static_cast<int>(x.size()), static_cast<int>(x.size()) - 1)};
      s.which = Uniform(0, 1);
      s.shape = x;
      Add(s);
    } else {
      Step s{Kind::kMatmul};
      s.a = PickNumeric();
      SymShape x = At(s.a).shape;
      if (x.size() < 2) return;
      SymShape y = Partner(SymShape(x.begin(), x.end() - 2));
      y.push_back(x.back());
      y.push_back(Chance(0.5) ? DimA() : DimB());
      s.b = AddInput(y, At(s.a).dtype == DType::i32 ? DType::i32 : DType::f32);
      s.shape = Broadcast(SymShape(x.begin(), x.end() - 2), SymShape(y.begin(), y.end() - 2));
      s.shape.push_back(x[x.size() - 2]);
      s.shape.push_back(y.back());
      s.dtype = At(s.a).dtype == DType::i32 ? DType::i32 : DType::f32;
      Add(s);
    }
  }

  void AddView() {
    const int a = Pick();
    const SymShape& x = At(a).shape;
    const int rank = static_cast<int>(x.size());
    Step s{Kind::kTranspose};
    s.a = a;
    s.dtype = At(a).dtype;
    s.shape = x;
    const int r = Uniform(0, 5);
    if (r == 0 && rank >= 2) {
      const int d0 = Uniform(0, rank - 1);
      const int d1 = Uniform(-rank, rank - 1);
      s.dims = {d0, d1};
      std::swap(s.shape[d0], s.shape[(d1 + rank) % rank]);
    } else if (r == 1 && rank >= 1) {
      s.kind = Kind::kPermute;
      std::vector<int64_t> perm(rank);
      for (int i = 0; i < rank; ++i) perm[i] = i;
      std::shuffle(perm.begin(), perm.end(), rng_);
      s.dims = perm;
      for (int i = 0; i < rank; ++i) s.shape[i] = x[perm[i]];
    } else if (r == 2 && rank >= 1) {
      s.kind = Kind::kSlice;
      const int d = Uniform(0, rank - 1);
      // Sizes 0 and 1 hold in every palette; A and B are >= 2: keep [1, 2) or the last one.
      if (IsZero(x[d]) || IsOne(x[d])) {
        s.dims = {d, 0, 5};
      } else if (Chance(0.5)) {
        s.dims = {d, 1, 2};
        s.shape[d] = Const(1);
      } else {
        s.dims = {d - rank, -1, 100};  // negative, clamped
        s.shape[d] = Const(1);
      }
    } else if (r == 3) {
      s.kind = Kind::kFlatten;
      Dim n = Const(1);
      for (const Dim& d : x) {
        for (int p = 0; p < kPalettes; ++p) n[p] *= d[p];
      }
      s.shape = {n};
    } else if (r == 4 && rank < 4) {
      s.kind = Kind::kUnsqueeze;
      const int d = Uniform(-rank - 1, rank);
      s.dims = {d};
      s.shape.insert(s.shape.begin() + (d < 0 ? d + rank + 1 : d), Const(1));
    } else {
      s.kind = Kind::kBroadcast;
      for (Dim& d : s.shape) {
        if (IsOne(d) && Chance(0.5)) d = DimB();
      }
      if (rank < 4 && Chance(0.5)) s.shape.insert(s.shape.begin(), DimA());
    }
    Add(s);
  }

  std::mt19937_64 rng_;
  std::vector<Step> steps_;
};

// Input values of step `i` on palette p: small, so that chains of ops stay finite.
Tensor InputValues(const Step& s, uint64_t seed, int p) {
  const std::vector<int64_t> shape = Concrete(s.shape, p);
  const Device host = Device::host();
  switch (s.dtype) {
    case DType::boolean:
      return lt(rand(shape, seed, 0, 1, DType::f32, host), full({}, 0.5, DType::f32, host));
    case DType::i32:
      return cast(rand(shape, seed, -6, 6, DType::f32, host), DType::i32);
    default:
      return randn(shape, seed, DType::f32, host);
  }
}

Tensor Apply(const Step& s, const std::vector<Tensor>& v) {
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
        default:
          return erf(a);
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
        default:
          return a / s.scalar;
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
      return max(a, s.dims, s.keepdim);
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
      return Tensor();  // needs the palette: see Interpret
    case Kind::kCat:
      return cat({a, v[s.b]}, s.dims[0]);
    case Kind::kSoftmax:
      return s.which ? log_softmax(a, s.dims[0]) : softmax(a, s.dims[0]);
    case Kind::kMatmul:
      return matmul(a, v[s.b]);
  }
  return Tensor();
}

// Every value of the graph for palette p, on `device` (inputs are made on the host and copied).
std::vector<Tensor> Interpret(const std::vector<Step>& steps, uint64_t seed, int p, Device device) {
  std::vector<Tensor> v;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    if (s.kind == Kind::kInput) {
      Tensor h = InputValues(s, seed * 1000 + i, p);
      v.push_back(device.is_host() ? h : h.to(device));
    } else if (s.kind == Kind::kBroadcast) {
      v.push_back(broadcast_to(v[s.a], Concrete(s.shape, p)));
    } else {
      v.push_back(Apply(s, v));
    }
  }
  return v;
}

std::string Mismatch(const Tensor& want, const Tensor& got) {
  if (want.shape() != got.shape() || want.dtype() != got.dtype()) {
    return std::string("shape or dtype differ: host ") + want.str() + ", device " + got.str();
  }
  std::ostringstream bad;
  int count = 0;
  auto report = [&](size_t i, double w, double g) {
    if (count++ < 5) bad << " [" << i << "] host " << w << " device " << g << ";";
  };
  switch (want.dtype()) {
    case DType::f32: {
      const std::vector<float> w = want.to_vector<float>();
      const std::vector<float> g = got.to_vector<float>();
      for (size_t i = 0; i < w.size(); ++i) {
        const bool ok = w[i] == g[i] || (std::isnan(w[i]) && std::isnan(g[i])) ||
                        std::fabs(w[i] - g[i]) <= 1e-4 * std::max(1.0f, std::fabs(w[i])) + 1e-5;
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

TEST(FuzzTest, RandomGraphsMatchHost) {
  int compared = 0;
  for (int seed = 0; seed < kGraphs; ++seed) {
    const int structure = seed % kStructures;
    const int palette = seed / kStructures;
    const std::vector<Step> steps = Generator(structure).Run();
    std::string listing;
    for (size_t i = 0; i < steps.size(); ++i)
      listing += "\n  " + StepStr(steps[i], static_cast<int>(i));
    const std::string what = "seed " + std::to_string(seed) + " (structure " +
                             std::to_string(structure) + ", palette " + std::to_string(palette) +
                             "), ops:" + listing;
    std::vector<Tensor> host;
    std::vector<Tensor> device;
    try {
      host = Interpret(steps, seed, palette, Device::host());
      device = Interpret(steps, seed, palette, Device::opencl());
    } catch (const Error& e) {
      ADD_FAILURE() << what << "\nthrew: " << e.what();
      continue;
    }
    // Outputs: the last value, and sometimes a few earlier ones synced together.
    std::vector<size_t> outputs = {steps.size() - 1};
    if (seed % 3 == 0) {
      for (size_t i = 0; i + 1 < steps.size(); i += 3) {
        if (steps[i].kind != Kind::kInput) outputs.push_back(i);
      }
      std::vector<Tensor> group;
      for (size_t i : outputs) group.push_back(device[i]);
      try {
        sync(group);
      } catch (const Error& e) {
        ADD_FAILURE() << what << "\nsync threw: " << e.what();
        continue;
      }
    }
    for (size_t i : outputs) {
      if (steps[i].kind == Kind::kInput) continue;
      const std::string bad = Mismatch(host[i], device[i]);
      EXPECT_EQ(bad, "") << "value %" << i << " of " << what;
      ++compared;
    }
  }
  EXPECT_GE(compared, kGraphs * 9 / 10);
}

}  // namespace
}  // namespace lazycl
