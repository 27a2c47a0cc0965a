// The random op lists of lazycl-fuzz (graph.h).
#include <algorithm>
#include <cmath>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/graph.h"

namespace lazycl::fuzz {
namespace {

Dim Const(int64_t v) {
  Dim d;
  d.fill(v);
  return d;
}
Dim DimA() { return kA; }
Dim DimB() { return kB; }
bool IsOne(const Dim& d) { return d[0] == 1; }  // 0 and 1 hold in every palette or none
bool IsZero(const Dim& d) { return d[0] == 0; }

std::string SymStr(const SymShape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    out += (i ? "," : "");
    out += IsZero(s[i]) || IsOne(s[i]) ? std::to_string(s[i][0])
           : s[i] == kA                ? "A"
           : s[i] == kB                ? "B"
                        : std::to_string(s[i][0]) + "/" + std::to_string(s[i][1]) + "/..";
  }
  return out + "]";
}

// The last two read random numbers made on the device (rand, randn: computed in the kernel).
const char* kUnaryNames[] = {
    "neg",  "exp(tanh)",     "log(|x|+1)",    "sqrt(|x|)",     "tanh",          "sigmoid",   "relu",
    "abs",  "sin",           "cos",           "erf",           "dropout(.3)",   "x+randn",   "gelu",
    "silu", "rsqrt(|x|+.5)", "clamp(-.5,.8)", "clamp_min(.1)", "clamp_max(.3)", "gelu(tanh)"};
const char* kBinaryNames[] = {"add", "sub", "mul", "div", "maximum", "minimum", "pow(|a|+.5,b)"};
const char* kScalarNames[] = {"x+c",  "c-x", "c*x",  "x/c",  "x<c",
                              "x<=c", "x>c", "x>=c", "x==c", "x!=c"};
const char* kCompareNames[] = {"lt", "le", "gt", "ge", "eq", "ne"};
const char* kReduceNames[] = {"sum", "mean", "max", "min", "prod"};

}  // namespace

std::string StepString(const Step& s, int index) {
  std::ostringstream o;
  o << "%" << index << " = " << (s.in_call ? "call " : "");
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
    case Kind::kGather:
      o << "gather %" << s.a << " dim " << dims() << " index %" << s.b;
      break;
    case Kind::kIndexSelect:
      o << "index_select %" << s.a << " dim " << dims() << " ids %" << s.b;
      break;
    case Kind::kScatterAdd:
      o << "scatter_add %" << s.a << " dim " << dims() << " index %" << s.b << " src %" << s.c;
      break;
    case Kind::kArg:
      o << (s.which ? "argmin %" : "argmax %") << s.a << " dim " << dims()
        << (s.keepdim ? " keepdim" : "");
      break;
    case Kind::kCumsum:
      o << "cumsum %" << s.a << " dim " << dims();
      break;
    case Kind::kTri:
      o << (s.which ? "triu %" : "tril %") << s.a << " k " << dims();
      break;
    case Kind::kTopk:
      o << "topk %" << s.a << " k,dim " << dims() << (s.which ? " indices" : " values");
      break;
    case Kind::kStack:
      o << "stack %" << s.a << " %" << s.b << " dim " << dims();
      break;
    case Kind::kSqueeze:
      o << "squeeze %" << s.a << " dim " << dims();
      break;
    case Kind::kCast:
      o << "cast %" << s.a;
      break;
    case Kind::kNorm:
      o << (s.which == 0 ? "rms_norm %" : "layer_norm %") << s.a;
      if (s.b >= 0) o << " weight %" << s.b;
      if (s.c >= 0) o << " bias %" << s.c;
      break;
    case Kind::kLinear:
      o << "linear %" << s.a << " weight %" << s.b;
      if (s.c >= 0) o << " bias %" << s.c;
      break;
    case Kind::kEmbedding:
      o << "embedding table %" << s.b << " ids %" << s.a;
      break;
    case Kind::kOneHot:
      o << "one_hot %" << s.a << " classes " << dims();
      break;
    case Kind::kCrossEntropy:
      o << "cross_entropy %" << s.a << " labels %" << s.b;
      break;
    case Kind::kAttention:
      o << "attention q %" << s.a << " k %" << s.b << " v %" << s.c << (s.keepdim ? " causal" : "");
      break;
    case Kind::kTakeAlongDim:
      o << "take_along_dim %" << s.a << " index %" << s.b << " dim " << dims();
      break;
    case Kind::kIndex2:
      o << "index %" << s.a << " ids %" << s.b << ", %" << s.c << " at dims " << dims();
      break;
    case Kind::kIndexPut:
      o << "index_put %" << s.a << " ids %" << s.b << " at dim " << dims() << " values %" << s.c
        << (s.keepdim ? " accumulate" : "");
      break;
    case Kind::kMaskedFill:
      o << "masked_fill %" << s.a << " mask %" << s.b << " value " << s.scalar;
      break;
    case Kind::kScan:
      o << "scan %" << s.a << " init %" << s.c << ": carry = tanh(" << kBinaryNames[s.which]
        << "(carry, x)" << (s.b >= 0 ? " + .5 %" + std::to_string(s.b) : "")
        << "), y = " << kUnaryNames[s.dims[0]] << "(carry)" << (s.keepdim ? " -> carry" : "");
      break;
  }
  o << " -> " << dtype_name(s.dtype) << SymStr(s.shape);
  return o.str();
}

namespace {

// Builds a random op list from one structure seed.
class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  Graph Run(int max_ops) {
    const int inputs = Uniform(1, 3);
    for (int i = 0; i < inputs; ++i) AddInput(RandomShape(), RandomDType());
    const int ops = Uniform(1, max_ops);
    for (int i = 0; i < ops; ++i) AddOp();
    return steps_;
  }

  // With the random stream `seed`: ops wrapped in call() (15% of them), and in 30% of graphs a
  // scan appended as the last value.
  Graph Wrap(uint64_t seed) {
    rng_.seed(seed);
    for (Step& s : steps_) {
      if (s.kind != Kind::kInput && Chance(0.15)) s.in_call = true;
    }
    if (Chance(0.3)) AddScan();
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
    const int r = Uniform(0, 12);
    return r < 7    ? DType::f32
           : r < 9  ? DType::i32
           : r < 10 ? DType::boolean
           : r < 11 ? DType::f16
           : r < 12 ? DType::bf16
                    : DType::f64;
  }

  // The library's promotion of two numeric dtypes (PyTorch's): f32 if either is, else i64 if
  // either is (sums of integers are i64), else i32. A wrong guess here made later steps wrong: a
  // scatter_add whose src was drawn as f32 for an x that is i64 (seed 2026, graph 13664).
  // bool < i32 < i64 < f16, bf16 < f32 < f64, and f16 with bf16 gives f32; bool with bool gives
  // i32 in the arithmetic ops that take them.
  static DType Promote(DType a, DType b) {
    if (a == DType::f64 || b == DType::f64) return DType::f64;
    if (a == DType::f32 || b == DType::f32) return DType::f32;
    if (is_half(a) && is_half(b)) return a == b ? a : DType::f32;
    if (is_half(a)) return a;
    if (is_half(b)) return b;
    if (a == DType::i64 || b == DType::i64) return DType::i64;
    return DType::i32;
  }
  // The dtype floating maths on `t` gives: 16-bit floats and f64 stay, the rest compute in f32.
  static DType FloatOf(DType t) { return is_floating(t) ? t : DType::f32; }

  int Add(Step s) {
    steps_.push_back(std::move(s));
    return static_cast<int>(steps_.size()) - 1;
  }
  int AddInput(SymShape shape, DType dtype) {
    Step s{Kind::kInput};
    s.shape = std::move(shape);
    s.dtype = dtype;
    s.input_id = static_cast<int>(steps_.size());
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
    const int r = Uniform(0, 138);
    if (r < 18) {
      Step s{Kind::kUnary};
      s.a = PickNumeric();
      s.which = Uniform(0, static_cast<int>(std::size(kUnaryNames)) - 1);
      s.shape = At(s.a).shape;
      // neg, relu and abs keep integers; the others compute in f32 (16-bit floats and f64
      // stay), but dropout's f32 cast and x + an f32 randn (promoted).
      const bool keeps = s.which == 0 || s.which == 6 || s.which == 7;
      const DType t = At(s.a).dtype;
      s.dtype = keeps           ? t
                : s.which == 11 ? DType::f32
                : s.which == 12 ? Promote(t, DType::f32)
                                : FloatOf(t);
      Add(s);
    } else if (r < 36) {
      Step s{Kind::kBinary};
      s.a = PickNumeric();
      s.b = PartnerOf(s.a, true);
      s.which = Uniform(0, 6);
      s.shape = Broadcast(At(s.a).shape, At(s.b).shape);
      const DType ta = At(s.a).dtype, tb = At(s.b).dtype;
      // a / (|b| + .5) and pow(|a| + .5, tanh(b)): the fractional .5 and tanh make floats.
      s.dtype = s.which == 3   ? Promote(ta, FloatOf(tb))
                : s.which == 6 ? Promote(FloatOf(ta), FloatOf(tb))
                               : Promote(ta, tb);
      Add(s);
    } else if (r < 46) {
      Step s{Kind::kScalar};
      s.a = PickNumeric();
      s.which = Uniform(0, static_cast<int>(std::size(kScalarNames)) - 1);
      s.scalar = Chance(0.5) ? Uniform(-3, 3) : Uniform(-30, 30) / 8.0;
      if (s.which == 3 && s.scalar == 0) s.scalar = 2;
      s.shape = At(s.a).shape;
      const bool integral = std::floor(s.scalar) == s.scalar;
      const DType t = At(s.a).dtype;
      // A number takes the tensor's dtype, but a fraction (or true division) with an integer.
      s.dtype = s.which >= 4                                    ? DType::boolean
                : is_integral(t) && (!integral || s.which == 3) ? DType::f32
                                                                : t;
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
      s.dtype = Promote(At(s.b).dtype, At(s.c).dtype);
      Add(s);
    } else if (r < 70) {
      Step s{Kind::kReduce};
      s.a = Pick();
      s.which = Uniform(0, static_cast<int>(std::size(kReduceNames)) - 1);
      const SymShape& x = At(s.a).shape;
      for (size_t d = 0; d < x.size(); ++d) {
        if (Chance(0.5))
          s.dims.push_back(Chance(0.5) ? static_cast<int64_t>(d)
                                       : static_cast<int64_t>(d) - static_cast<int64_t>(x.size()));
      }
      s.keepdim = Chance(0.5);
      bool empty = false;
      for (size_t d = 0; d < x.size(); ++d) {
        const bool reduced =
            s.dims.empty() || std::any_of(s.dims.begin(), s.dims.end(), [&](int64_t v) {
              return (v + static_cast<int64_t>(x.size())) % static_cast<int64_t>(x.size()) ==
                     static_cast<int64_t>(d);
            });
        if (reduced && IsZero(x[d])) empty = true;
      }
      // max and min have no identity: they need non-empty reduced dims.
      if ((s.which == 2 || s.which == 3) && empty) s.which = 0;
      const DType t = At(s.a).dtype;
      // mean computes in floats; sum and prod of integers and bools give i64.
      s.dtype = s.which == 1                   ? FloatOf(t)
                : s.which == 2 || s.which == 3 ? t
                : is_floating(t)               ? t
                                               : DType::i64;
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
      if (x.empty() || !is_floating(At(s.a).dtype)) return;
      s.dims = {Uniform(-static_cast<int>(x.size()), static_cast<int>(x.size()) - 1)};
      s.dtype = At(s.a).dtype;
      s.which = Uniform(0, 1);
      s.shape = x;
      Add(s);
    } else if (r < 100) {
      Step s{Kind::kMatmul};
      s.a = PickNumeric();
      SymShape x = At(s.a).shape;
      if (x.size() < 2) return;
      SymShape y = Partner(SymShape(x.begin(), x.end() - 2));
      y.push_back(x.back());
      y.push_back(Chance(0.5) ? DimA() : DimB());
      const DType ta = At(s.a).dtype;
      const DType tb = ta == DType::i32 || is_floating(ta) ? ta : DType::f32;
      s.b = AddInput(y, tb);
      s.shape = Broadcast(SymShape(x.begin(), x.end() - 2), SymShape(y.begin(), y.end() - 2));
      s.shape.push_back(x[x.size() - 2]);
      s.shape.push_back(y.back());
      s.dtype = Promote(ta, tb);
      Add(s);
    } else if (r < 105) {
      AddIndexing();
    } else {
      AddMore(r - 105);
    }
  }

  // A dim of `x` whose size is not 0 in any palette, or -1.
  int NonEmptyDim(const SymShape& x) {
    std::vector<int> dims;
    for (size_t d = 0; d < x.size(); ++d) {
      if (!IsZero(x[d])) dims.push_back(static_cast<int>(d));
    }
    return dims.empty() ? -1 : dims[Uniform(0, static_cast<int>(dims.size()) - 1)];
  }
  int64_t MaybeNegative(int d, size_t rank) {
    return Chance(0.5) ? d : d - static_cast<int64_t>(rank);
  }
  // An earlier integral value, or a new i32 input of a random shape.
  int PickIds() {
    for (int tries = 0; tries < 10; ++tries) {
      const int i = Pick();
      if (is_integral(At(i).dtype)) return i;
    }
    return AddInput(RandomShape(), DType::i32);
  }
  // An earlier floating value of rank >= `rank`, or a new f32 input of that rank.
  int PickFloating(size_t rank) {
    for (int tries = 0; tries < 10; ++tries) {
      const int i = Pick();
      if (is_floating(At(i).dtype) && At(i).shape.size() >= rank) return i;
    }
    SymShape shape = RandomShape();
    while (shape.size() < rank) shape.push_back(RandomDim());
    return AddInput(shape, DType::f32);
  }

  // The ops added after the first ones (graph.h, kArg to kTakeAlongDim); `r` in [0, 34).
  void AddMore(int r) {
    if (r < 4) {  // argmax, argmin
      Step s{Kind::kArg};
      s.a = PickNumeric();
      const SymShape x = At(s.a).shape;
      const int d = NonEmptyDim(x);
      if (d < 0) return;
      s.which = Uniform(0, 1);
      s.dims = {MaybeNegative(d, x.size())};
      s.keepdim = Chance(0.5);
      s.shape = x;
      if (s.keepdim) {
        s.shape[d] = Const(1);
      } else {
        s.shape.erase(s.shape.begin() + d);
      }
      s.dtype = DType::i64;
      Add(s);
    } else if (r < 8) {
      Step s{Kind::kCumsum};
      s.a = Pick();
      const SymShape& x = At(s.a).shape;
      if (x.empty()) return;
      s.dims = {MaybeNegative(Uniform(0, static_cast<int>(x.size()) - 1), x.size())};
      s.shape = x;
      s.dtype = is_floating(At(s.a).dtype) ? At(s.a).dtype : DType::i64;
      Add(s);
    } else if (r < 11) {
      Step s{Kind::kTri};
      s.a = Pick();
      if (At(s.a).shape.size() < 2) return;
      s.which = Uniform(0, 1);
      s.dims = {Uniform(-1, 1)};
      s.shape = At(s.a).shape;
      s.dtype = At(s.a).dtype;
      Add(s);
    } else if (r < 15) {
      Step s{Kind::kTopk};
      s.a = PickNumeric();
      const SymShape& x = At(s.a).shape;
      if (x.empty()) return;
      const int d = Uniform(0, static_cast<int>(x.size()) - 1);
      // k <= the dim's size in every palette (A and B are >= 2).
      const int64_t k = IsZero(x[d]) ? 0 : IsOne(x[d]) ? Uniform(0, 1) : Uniform(1, 2);
      s.dims = {k, MaybeNegative(d, x.size())};
      s.which = Uniform(0, 1);
      s.shape = x;
      s.shape[d] = Const(k);
      s.dtype = s.which ? DType::i64 : At(s.a).dtype;
      Add(s);
    } else if (r < 18) {
      Step s{Kind::kStack};
      s.a = Pick();
      const SymShape x = At(s.a).shape;  // a copy: AddInput below may move steps_
      if (x.size() >= 4) return;
      s.b = AddInput(x, At(s.a).dtype);
      const int d = Uniform(0, static_cast<int>(x.size()));
      s.dims = {Chance(0.5) ? d : d - static_cast<int64_t>(x.size()) - 1};
      s.shape = x;
      s.shape.insert(s.shape.begin() + d, Const(2));
      s.dtype = At(s.a).dtype;
      Add(s);
    } else if (r < 20) {
      Step s{Kind::kSqueeze};
      s.a = Pick();
      const SymShape& x = At(s.a).shape;
      std::vector<int> ones;
      for (size_t d = 0; d < x.size(); ++d) {
        if (IsOne(x[d])) ones.push_back(static_cast<int>(d));
      }
      if (ones.empty()) return;
      const int d = ones[Uniform(0, static_cast<int>(ones.size()) - 1)];
      s.dims = {MaybeNegative(d, x.size())};
      s.shape = x;
      s.shape.erase(s.shape.begin() + d);
      s.dtype = At(s.a).dtype;
      Add(s);
    } else if (r < 23) {
      Step s{Kind::kCast};
      s.a = Pick();
      static constexpr DType kTo[] = {DType::f32, DType::i32,  DType::i64, DType::boolean,
                                      DType::f16, DType::bf16, DType::f64};
      s.dtype = kTo[Uniform(0, 6)];
      s.shape = At(s.a).shape;
      Add(s);
    } else if (r < 25) {
      Step s{Kind::kNorm};
      s.a = PickFloating(1);
      const SymShape x = At(s.a).shape;
      const DType t = At(s.a).dtype;
      s.which = Uniform(0, 2);
      if (s.which < 2) s.b = AddInput({x.back()}, t);
      if (s.which == 1) s.c = AddInput({x.back()}, t);
      s.shape = x;
      s.dtype = t;
      Add(s);
    } else if (r < 27) {
      Step s{Kind::kLinear};
      s.a = PickFloating(1);
      const SymShape x = At(s.a).shape;
      const DType t = At(s.a).dtype;
      const Dim n = Chance(0.5) ? DimA() : DimB();
      s.b = AddInput({n, x.back()}, t);
      if (Chance(0.5)) s.c = AddInput({n}, t);
      s.shape = x;
      s.shape.back() = n;
      s.dtype = t;
      Add(s);
    } else if (r < 29) {
      Step s{Kind::kEmbedding};
      if (Chance(0.5)) {
        s.kind = Kind::kOneHot;
        s.a = PickIds();
        const int64_t classes = Uniform(0, 4);
        s.dims = {classes};
        s.shape = At(s.a).shape;
        if (s.shape.size() >= 4) return;
        s.shape.push_back(Const(classes));
        s.dtype = DType::i64;
        Add(s);
        return;
      }
      s.a = PickIds();
      const SymShape ids = At(s.a).shape;
      if (ids.size() >= 4) return;
      const Dim d = RandomDim();
      const DType t = Chance(0.8) ? DType::f32 : Chance(0.5) ? DType::f16 : DType::bf16;
      s.b = AddInput({Chance(0.5) ? DimA() : DimB(), d}, t);
      s.shape = ids;
      s.shape.push_back(d);
      s.dtype = t;
      Add(s);
    } else if (r < 31) {
      Step s{Kind::kCrossEntropy};
      s.a = PickFloating(2);
      const SymShape x = At(s.a).shape;
      if (IsZero(x[1])) return;  // no classes to clamp a label into
      SymShape labels = x;
      labels.erase(labels.begin() + 1);
      s.b = AddInput(labels, DType::i32);
      s.shape = {};
      s.dtype = At(s.a).dtype;
      Add(s);
    } else {
      Step s{Kind::kAttention};
      s.a = PickFloating(2);
      const SymShape q = At(s.a).shape;
      const DType t = At(s.a).dtype;
      SymShape k(q.begin(), q.end() - 2), v = k;
      const Dim keys = RandomDim();
      k.push_back(keys);
      k.push_back(q.back());
      v.push_back(keys);
      v.push_back(RandomDim());
      s.b = AddInput(k, t);
      s.c = AddInput(v, t);
      s.keepdim = Chance(0.5);
      s.shape = q;
      s.shape.back() = v.back();
      s.dtype = t;
      Add(s);
    }
  }

  // gather, index_select or scatter_add along a dim of an earlier value, with i32 indices from
  // [-6, 6): some out of range, which reads clamp and scatter_add drops.
  void AddIndexing() {
    const int a = Pick();
    const SymShape x = At(a).shape;  // a copy: AddInput below may move steps_
    std::vector<int> dims;
    for (size_t d = 0; d < x.size(); ++d) {
      if (!IsZero(x[d])) dims.push_back(static_cast<int>(d));
    }
    if (dims.empty()) return;
    const int dim = dims[Uniform(0, static_cast<int>(dims.size()) - 1)];
    const int rank = static_cast<int>(x.size());
    // scatter_add takes every numeric dtype.
    const DType t = At(a).dtype;
    const bool scatter = t != DType::boolean;
    const int which = Uniform(0, scatter ? 6 : 5);
    if (which >= 3 && which <= 5) return AddIndexingForm(a, x, dim, which);
    Step s{which == 0   ? Kind::kGather
           : which == 1 ? Kind::kIndexSelect
           : which == 2 ? Kind::kTakeAlongDim
                        : Kind::kScatterAdd};
    s.a = a;
    s.dims = {Chance(0.5) ? dim : dim - rank};
    s.dtype = At(a).dtype;
    if (s.kind == Kind::kIndexSelect) {
      s.b = AddInput({RandomDim()}, DType::i32);
      s.shape = x;
      s.shape[dim] = At(s.b).shape[0];
    } else {
      SymShape index = x;
      index[dim] = RandomDim();
      s.b = AddInput(index, DType::i32);
      s.shape = s.kind == Kind::kScatterAdd ? x : index;
      if (s.kind == Kind::kScatterAdd) s.c = AddInput(index, At(a).dtype);
    }
    Add(s);
  }

  // The PyTorch-style forms (graph.h): x.index with two i32 id tensors of one shape (NumPy's
  // rule places their shape at the first of their dims when side by side, else first),
  // index_put along `dim` (values of the selected shape, x's dtype; accumulate for numeric x),
  // masked_fill with a bool mask of x's shape.
  void AddIndexingForm(int a, const SymShape& x, int dim, int which) {
    const int rank = static_cast<int>(x.size());
    const DType t = At(a).dtype;
    if (which == 3) {
      if (rank < 2) return;
      int d1 = dim, d2 = Uniform(0, rank - 1);
      if (d1 == d2) return;
      if (d1 > d2) std::swap(d1, d2);
      if (IsZero(x[d1]) || IsZero(x[d2])) return;
      Step s{Kind::kIndex2};
      s.a = a;
      s.dims = {d1, d2};
      s.dtype = t;
      const SymShape ids = {RandomDim()};
      s.b = AddInput(ids, DType::i32);
      s.c = AddInput(ids, DType::i32);
      SymShape rest;
      for (int d = 0; d < rank; ++d) {
        if (d != d1 && d != d2) rest.push_back(x[d]);
      }
      s.shape = rest;
      const int at = d2 == d1 + 1 ? d1 : 0;
      s.shape.insert(s.shape.begin() + at, ids[0]);
      Add(s);
    } else if (which == 4) {
      Step s{Kind::kIndexPut};
      s.a = a;
      s.dims = {dim};
      s.dtype = t;
      s.keepdim = t != DType::boolean && Chance(0.5);
      SymShape values = x;
      values[dim] = RandomDim();
      s.b = AddInput({values[dim]}, DType::i32);
      s.c = AddInput(values, t);
      s.shape = x;
      Add(s);
    } else {
      Step s{Kind::kMaskedFill};
      s.a = a;
      s.b = AddInput(x, DType::boolean);
      s.scalar = Uniform(0, 2) == 0 ? 0 : Uniform(0, 1) == 0 ? -1.5 : 2;
      s.dtype = t;
      s.shape = x;
      Add(s);
    }
  }

  // A scan over dim 0 of an f32 value (graph.h, Kind::kScan): its init an earlier value of the
  // slice's shape or a new input, in half of them a captured input that broadcasts to the slice.
  void AddScan() {
    int a = -1;
    for (int tries = 0; tries < 10 && a < 0; ++tries) {
      const int i = Pick();
      if (At(i).dtype == DType::f32 && !At(i).shape.empty()) a = i;
    }
    if (a < 0) {
      SymShape shape = RandomShape();
      if (shape.empty()) shape.push_back(DimA());
      a = AddInput(shape, DType::f32);
    }
    const SymShape x = At(a).shape;  // a copy: AddInput below may move steps_
    const SymShape slice(x.begin() + 1, x.end());
    Step s{Kind::kScan};
    s.a = a;
    for (int tries = 0; tries < 10 && s.c < 0; ++tries) {
      const int i = Pick();
      if (At(i).dtype == DType::f32 && At(i).shape == slice) s.c = i;
    }
    if (s.c < 0) s.c = AddInput(slice, DType::f32);
    if (Chance(0.5)) {
      SymShape captured = Partner(slice);
      // The carry keeps its shape: the captured value may not add dims.
      while (captured.size() > slice.size()) captured.erase(captured.begin());
      s.b = AddInput(captured, DType::f32);
    }
    s.which = Uniform(0, static_cast<int>(std::size(kBinaryNames)) - 1);
    s.dims = {Uniform(0, static_cast<int>(std::size(kUnaryNames)) - 1)};
    s.keepdim = Chance(0.3);
    s.shape = s.keepdim ? slice : x;
    s.dtype = DType::f32;
    Add(s);
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
        // Negative start, end clamped: past any size (a flattened dim reaches hundreds).
        s.dims = {d - rank, -1, int64_t{1} << 40};
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

}  // namespace

Graph Generate(uint64_t structure_seed, int max_ops) {
  Generator generator(structure_seed);
  generator.Run(max_ops);
  return generator.Wrap(structure_seed ^ 0x243F6A8885A308D3ull);
}

std::string GraphString(const Graph& graph) {
  std::string out;
  for (size_t i = 0; i < graph.size(); ++i) {
    out += "  " + StepString(graph[i], static_cast<int>(i)) + "\n";
  }
  return out;
}

std::vector<int> Operands(const Step& s) {
  std::vector<int> out;
  for (int i : {s.a, s.b, s.c}) {
    if (i >= 0) out.push_back(i);
  }
  return out;
}

}  // namespace lazycl::fuzz
