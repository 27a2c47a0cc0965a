// Every op of lazycl/ops.h, computed on the OpenCL device and compared with the host reference
// (frontend/host_eval.h), on random inputs with fixed seeds: broadcasting, size-0 and size-1
// dims, and non-contiguous (transposed, sliced, broadcast) or lazy (fused) device operands.
//
// Tolerances, |device - host| <= rel * scale + abs, where scale is |host| unless noted:
// - f32 arithmetic (+ - * / max min neg abs relu, views, casts): rel 1e-5, abs 1e-6;
// - transcendentals (exp log sqrt tanh sigmoid sin cos pow, softmax, log_softmax): rel 1e-5,
//   abs 2e-6, because OpenCL allows a few ulp where <cmath> rounds (nearly) correctly;
// - sum and mean: rel 1e-5 with scale = the sum (mean) of |x| over the reduced elements, abs 1e-6:
//   the device accumulates in f32, the host in double;
// - matmul: rel 1e-5 with scale = (|a| @ |b|), abs 1e-6, for the same reason;
// - integers and bools: exact. NaN equals NaN; infinities must match exactly.
#include <stdio.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

using Shape = std::vector<int64_t>;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Tol {
  double rel;
  double abs;
};
constexpr Tol kArith{1e-5, 1e-6};
constexpr Tol kTranscendental{1e-5, 2e-6};
constexpr Tol kExact{0, 0};

Device Cl() { return Device::opencl(); }
Device Host() { return Device::host(); }

std::string ShapeStr(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// How a device operand is made from its host values.
enum class Layout {
  kContiguous,  // uploaded as is
  kTransposed,  // uploaded with the last two dims swapped, then transposed on the device
  kSliced,      // uploaded with 3 more elements in the last dim, then sliced on the device
  kBroadcast,   // uploaded with dim 0 of size 1, then broadcast on the device
  kLazy,        // an identity op on the device (maximum(x, x), or x != false), so it fuses
};

const char* LayoutName(Layout l) {
  switch (l) {
    case Layout::kContiguous:
      return "contiguous";
    case Layout::kTransposed:
      return "transposed";
    case Layout::kSliced:
      return "sliced";
    case Layout::kBroadcast:
      return "broadcast";
    case Layout::kLazy:
      return "lazy";
  }
  return "?";
}

constexpr Layout kNonContiguous[] = {Layout::kTransposed, Layout::kSliced, Layout::kBroadcast,
                                     Layout::kLazy};

// Which values a random operand holds.
enum class Domain {
  kAny,       // f32: standard normal; ints: uniform in [-50, 50); bool: fair coin
  kPositive,  // f32 in [0.25, 4)
  kSmallInt,  // integral values in [-3, 3] in any dtype, so that comparisons see ties
  kSpecial,   // f32: cycles through 0, -0, +-inf, NaN, huge and tiny values
};

struct Arg {
  Shape shape;
  DType dtype = DType::f32;
  Layout layout = Layout::kContiguous;
  Domain domain = Domain::kAny;
};

Arg F(Shape s, Layout l = Layout::kContiguous, Domain d = Domain::kAny) {
  return Arg{std::move(s), DType::f32, l, d};
}
Arg A(Shape s, DType t, Layout l = Layout::kContiguous, Domain d = Domain::kAny) {
  return Arg{std::move(s), t, l, d};
}

const std::vector<float>& SpecialValues() {
  static const std::vector<float> values = {
      0.0f,   -0.0f, 1.0f,  -1.0f,  kInf,    -kInf, kNaN,          2.5f,        -2.5f, 1e-30f,
      88.0f,  -90.f, 1e30f, -1e30f, 3e9f,    -3e9f, 1e19f,         -1e19f,      0.5f,  7.0f,
      100.0f, 1e-7f, 0.75f, -1e-3f, 65504.f, 3.0f,  -2147483648.f, 2147483648.f};
  return values;
}

// Host values of `shape` for an operand; cast() truncates toward zero, which keeps ints exact.
Tensor HostValues(const Shape& shape, DType dtype, Domain domain, uint64_t seed) {
  if (domain == Domain::kSpecial) {
    std::vector<float> v;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    for (int64_t i = 0; i < n; ++i) {
      v.push_back(SpecialValues()[(i + seed) % SpecialValues().size()]);
    }
    return cast(tensor(v, shape, Host()), dtype);
  }
  if (dtype == DType::boolean) {
    return lt(rand(shape, seed, 0, 1, DType::f32, Host()), full({}, 0.5, DType::f32, Host()));
  }
  switch (domain) {
    case Domain::kPositive:
      return cast(rand(shape, seed, 0.25, 4.0, DType::f32, Host()), dtype);
    case Domain::kSmallInt:
      // Truncation maps [-3.99, 3.99] onto -3..3.
      return cast(cast(rand(shape, seed, -3.99, 3.99, DType::f32, Host()), DType::i32), dtype);
    default:
      if (dtype == DType::f32) return randn(shape, seed, DType::f32, Host());
      return cast(rand(shape, seed, -50, 50, DType::f32, Host()), dtype);
  }
}

Tensor LazyIdentity(const Tensor& x) {
  if (x.dtype() == DType::boolean) return ne(x, zeros({}, DType::boolean, x.device()));
  return maximum(x, x);
}

struct Operand {
  Tensor host;
  Tensor device;
  Layout layout;  // the one used: a layout that needs more dims falls back
};

Operand MakeOperand(const Arg& a, uint64_t seed) {
  const Shape& s = a.shape;
  const size_t rank = s.size();
  Layout layout = a.layout;
  if (layout == Layout::kTransposed && rank < 2) layout = Layout::kSliced;
  if ((layout == Layout::kSliced || layout == Layout::kBroadcast) && rank == 0) {
    layout = Layout::kLazy;
  }
  switch (layout) {
    case Layout::kContiguous: {
      Tensor h = HostValues(s, a.dtype, a.domain, seed);
      return {h, h.to(Cl()), layout};
    }
    case Layout::kTransposed: {
      Shape t = s;
      std::swap(t[rank - 2], t[rank - 1]);
      Tensor base = HostValues(t, a.dtype, a.domain, seed);
      return {transpose(base, -1, -2), transpose(base.to(Cl()), -1, -2), layout};
    }
    case Layout::kSliced: {
      Shape t = s;
      t[rank - 1] += 3;
      Tensor base = HostValues(t, a.dtype, a.domain, seed);
      const int64_t n = s[rank - 1];
      return {slice(base, -1, 2, 2 + n), slice(base.to(Cl()), -1, 2, 2 + n), layout};
    }
    case Layout::kBroadcast: {
      Shape t = s;
      t[0] = 1;
      Tensor base = HostValues(t, a.dtype, a.domain, seed);
      return {broadcast_to(base, s), broadcast_to(base.to(Cl()), s), layout};
    }
    case Layout::kLazy: {
      Tensor base = HostValues(s, a.dtype, a.domain, seed);
      return {LazyIdentity(base), LazyIdentity(base.to(Cl())), layout};
    }
  }
  return {};
}

// Element values of any dtype as doubles, and as exact int64 for the integral dtypes.
std::vector<double> Floats(const Tensor& t) {
  std::vector<float> v = t.to_vector<float>();
  return std::vector<double>(v.begin(), v.end());
}

std::vector<int64_t> Ints(const Tensor& t) {
  switch (t.dtype()) {
    case DType::i32: {
      std::vector<int32_t> v = t.to_vector<int32_t>();
      return std::vector<int64_t>(v.begin(), v.end());
    }
    case DType::i64:
      return t.to_vector<int64_t>();
    case DType::boolean: {
      std::vector<uint8_t> v = t.to_vector<uint8_t>();
      return std::vector<int64_t>(v.begin(), v.end());
    }
    default:
      return {};
  }
}

// want: the host result; got: the device result. scale: per element, see the file comment.
::testing::AssertionResult Matches(const Tensor& want, const Tensor& got, Tol tol,
                                   const std::vector<float>* scale) {
  if (want.shape() != got.shape() || want.dtype() != got.dtype()) {
    return ::testing::AssertionFailure()
           << "host gives " << dtype_name(want.dtype()) << ShapeStr(want.shape()) << ", device "
           << dtype_name(got.dtype()) << ShapeStr(got.shape());
  }
  std::ostringstream bad;
  int mismatches = 0;
  int64_t n = 0;
  if (want.dtype() == DType::f32) {
    const std::vector<double> w = Floats(want);
    const std::vector<double> g = Floats(got);
    n = static_cast<int64_t>(w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      bool ok = w[i] == g[i] || (std::isnan(w[i]) && std::isnan(g[i]));
      if (!ok && std::isfinite(w[i]) && std::isfinite(g[i])) {
        const double s = scale != nullptr ? (*scale)[i] : std::fabs(w[i]);
        ok = std::fabs(w[i] - g[i]) <= tol.rel * s + tol.abs;
      }
      if (!ok && mismatches++ < 5) {
        bad << "\n  [" << i << "] host " << w[i] << " device " << g[i];
        if (scale != nullptr) bad << " (scale " << (*scale)[i] << ")";
      }
    }
  } else {
    const std::vector<int64_t> w = Ints(want);
    const std::vector<int64_t> g = Ints(got);
    n = static_cast<int64_t>(w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      if (w[i] != g[i] && mismatches++ < 5) {
        bad << "\n  [" << i << "] host " << w[i] << " device " << g[i];
      }
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << mismatches << " of " << n << " elements of " << dtype_name(want.dtype())
         << ShapeStr(want.shape()) << " differ:" << bad.str();
}

std::string Describe(const std::string& op, const std::vector<Arg>& args,
                     const std::vector<Operand>& operands, uint64_t seed) {
  std::string out = op + "(";
  for (size_t i = 0; i < args.size(); ++i) {
    out += (i ? ", " : "") + std::string(dtype_name(args[i].dtype)) + ShapeStr(args[i].shape) +
           " " + LayoutName(operands[i].layout);
  }
  return out + ") seed " + std::to_string(seed);
}

// Device results wait here and are computed together (FlushChecks): one graph, whose new kernels
// build as one OpenCL program, instead of a graph and a build per case. A compile on PoCL costs
// ~75 ms before its first kernel, and this file checks ~1,000 kernels.
struct PendingCheck {
  Tensor want;
  Tensor got;
  Tol tol;
  std::vector<float> scale;
  bool scaled = false;
  std::string what;
};

std::vector<PendingCheck>& PendingChecks() {
  static std::vector<PendingCheck> pending;
  return pending;
}

// Computes the pending device results in one sync and compares each with its host result. A sync
// that throws is retried one result at a time, so the error names its case.
void FlushChecks() {
  std::vector<PendingCheck> pending;
  pending.swap(PendingChecks());
  if (pending.empty()) return;
  std::vector<Tensor> results;
  for (const PendingCheck& p : pending) results.push_back(p.got);
  std::vector<bool> failed(pending.size(), false);
  try {
    sync(results);
  } catch (const Error&) {
    for (size_t i = 0; i < pending.size(); ++i) {
      try {
        sync({pending[i].got});
      } catch (const Error& e) {
        ADD_FAILURE() << pending[i].what << ": device threw " << e.what();
        failed[i] = true;
      }
    }
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    if (failed[i]) continue;
    const PendingCheck& p = pending[i];
    EXPECT_TRUE(Matches(p.want, p.got, p.tol, p.scaled ? &p.scale : nullptr)) << p.what;
  }
}

// Every test flushes what it checked before it ends, so a failure is reported in its test.
class OpsTest : public ::testing::Test {
 protected:
  void TearDown() override { FlushChecks(); }
};

// Runs `fn` on host operands and on device operands made from the same values, and compares
// (when FlushChecks runs: at the end of the test, or after 64 pending cases). `scale`, given the
// host operands, gives the per-element scale of the tolerance.
void Check(const std::string& op, const Fn& fn, const std::vector<Arg>& args, uint64_t seed,
           Tol tol, const Fn& scale = nullptr) {
  std::vector<Operand> operands;
  std::vector<Tensor> host;
  std::vector<Tensor> device;
  for (size_t i = 0; i < args.size(); ++i) {
    operands.push_back(MakeOperand(args[i], seed * 7919 + i));
    host.push_back(operands.back().host);
    device.push_back(operands.back().device);
  }
  const std::string what = Describe(op, args, operands, seed);
  SCOPED_TRACE(what);
  Tensor want;
  Tensor got;
  try {
    want = fn(host);
  } catch (const Error& e) {
    ADD_FAILURE() << what << ": host threw " << e.what();
    return;
  }
  try {
    got = fn(device);
    ASSERT_TRUE(got.device().is_opencl()) << what;
  } catch (const Error& e) {
    ADD_FAILURE() << what << ": device threw " << e.what();
    return;
  }
  PendingCheck pending{want, got, tol, {}, false, what};
  if (scale) {
    pending.scale = scale(host).to_vector<float>();
    pending.scaled = true;
  }
  PendingChecks().push_back(std::move(pending));
  if (PendingChecks().size() >= 64) FlushChecks();
}

// Both backends reject the op with lazycl::Error.
void CheckBothThrow(const std::string& op, const Fn& fn, const std::vector<Arg>& args) {
  std::vector<Tensor> host;
  std::vector<Tensor> device;
  std::vector<Operand> operands;
  for (size_t i = 0; i < args.size(); ++i) {
    operands.push_back(MakeOperand(args[i], i));
    host.push_back(operands.back().host);
    device.push_back(operands.back().device);
  }
  const std::string what = Describe(op, args, operands, 0);
  EXPECT_THROW(fn(host), Error) << what;
  EXPECT_THROW(
      {
        Tensor t = fn(device);
        sync({t});
      },
      Error)
      << what;
}

// ---------------------------------------------------------------------------------------------
// Unary ops and casts

struct UnaryOp {
  const char* name;
  Tensor (*fn)(const Tensor&);
  bool transcendental;
  bool integral;  // also defined on i32/i64 without a cast to f32
};

const UnaryOp kUnary[] = {
    {"neg", &neg, false, true},   {"exp", &exp, true, false},   {"log", &log, true, false},
    {"sqrt", &sqrt, true, false}, {"tanh", &tanh, true, false}, {"sigmoid", &sigmoid, true, false},
    {"relu", &relu, false, true}, {"abs", &abs, false, true},   {"sin", &sin, true, false},
    {"cos", &cos, true, false},
};

const Shape kUnaryShapes[] = {{}, {1}, {7}, {3, 5}, {1, 5, 1}, {2, 3, 4}, {0, 3}, {2, 0, 4}};

TEST_F(OpsTest, UnaryMatchesHost) {
  uint64_t seed = 0;
  for (const UnaryOp& op : kUnary) {
    const Tol tol = op.transcendental ? kTranscendental : kArith;
    Fn fn = [&op](const std::vector<Tensor>& x) { return op.fn(x[0]); };
    const bool positive_only = std::string(op.name) == "log" || std::string(op.name) == "sqrt";
    for (const Shape& s : kUnaryShapes) {
      Check(op.name, fn, {F(s)}, ++seed, tol);
      if (positive_only)
        Check(op.name, fn, {F(s, Layout::kContiguous, Domain::kPositive)}, ++seed, tol);
    }
    for (Layout l : kNonContiguous) {
      for (const Shape& s : {Shape{3, 5}, Shape{2, 3, 4}}) {
        Check(op.name, fn, {F(s, l, positive_only ? Domain::kPositive : Domain::kAny)}, ++seed,
              tol);
      }
    }
    Check(op.name, fn, {F({4, 7}, Layout::kContiguous, Domain::kSpecial)}, ++seed, tol);
    // Integral operands: computed in the integer type, or in f32 after a cast.
    for (DType t : {DType::i32, DType::i64}) {
      Check(op.name, fn, {A({3, 5}, t)}, ++seed, tol);
      Check(op.name, fn, {A({2, 3, 4}, t, Layout::kTransposed)}, ++seed, tol);
    }
  }
}

TEST_F(OpsTest, IntegerNegAndAbsWrap) {
  Fn neg_fn = [](const std::vector<Tensor>& x) { return neg(x[0]); };
  Fn abs_fn = [](const std::vector<Tensor>& x) { return abs(x[0]); };
  for (Fn fn : {neg_fn, abs_fn}) {
    std::vector<int32_t> v32 = {std::numeric_limits<int32_t>::min(), -1, 0, 1,
                                std::numeric_limits<int32_t>::max()};
    std::vector<int64_t> v64 = {std::numeric_limits<int64_t>::min(), -1, 0, 1,
                                std::numeric_limits<int64_t>::max()};
    EXPECT_TRUE(
        Matches(fn({tensor(v32, {5}, Host())}), fn({tensor(v32, {5}, Cl())}), kExact, nullptr));
    EXPECT_TRUE(
        Matches(fn({tensor(v64, {5}, Host())}), fn({tensor(v64, {5}, Cl())}), kExact, nullptr));
  }
}

constexpr DType kDTypes[] = {DType::f32, DType::i32, DType::i64, DType::boolean};

TEST_F(OpsTest, CastMatchesHostForEveryDTypePair) {
  uint64_t seed = 100;
  for (DType from : kDTypes) {
    for (DType to : kDTypes) {
      const std::string name = std::string("cast to ") + dtype_name(to);
      Fn fn = [to](const std::vector<Tensor>& x) { return cast(x[0], to); };
      Check(name, fn, {A({3, 5}, from)}, ++seed, kArith);
      Check(name, fn, {A({2, 3, 4}, from, Layout::kTransposed)}, ++seed, kArith);
      Check(name, fn, {A({2, 3, 4}, from, Layout::kSliced)}, ++seed, kArith);
      Check(name, fn, {A({0, 3}, from)}, ++seed, kArith);
      Check(name, fn, {A({}, from)}, ++seed, kArith);
      if (from == DType::f32) {
        // NaN, infinities, -0 and values out of the integer range (saturation).
        Check(name, fn, {A({4, 7}, from, Layout::kContiguous, Domain::kSpecial)}, ++seed, kArith);
      }
    }
  }
}

TEST_F(OpsTest, CastOfExtremeIntegers) {
  const std::vector<int32_t> v32 = {std::numeric_limits<int32_t>::min(),
                                    std::numeric_limits<int32_t>::max(),
                                    123456789,
                                    -16777217,
                                    0,
                                    1};
  const std::vector<int64_t> v64 = {std::numeric_limits<int64_t>::min(),
                                    std::numeric_limits<int64_t>::max(),
                                    (int64_t{1} << 32) + 5,
                                    -(int64_t{1} << 40) + 3,
                                    123456789012345,
                                    -1};
  for (DType to : kDTypes) {
    SCOPED_TRACE(std::string("cast to ") + dtype_name(to));
    EXPECT_TRUE(Matches(cast(tensor(v32, {6}, Host()), to), cast(tensor(v32, {6}, Cl()), to),
                        kArith, nullptr));
    EXPECT_TRUE(Matches(cast(tensor(v64, {2, 3}, Host()), to), cast(tensor(v64, {2, 3}, Cl()), to),
                        kArith, nullptr));
  }
}

// ---------------------------------------------------------------------------------------------
// Binary ops, comparisons, where

struct BinaryOp {
  const char* name;
  Tensor (*fn)(const Tensor&, const Tensor&);
  bool transcendental;
  bool integral;  // keeps integer operands integral
};

Tensor PowTensor(const Tensor& a, const Tensor& b) { return pow(a, b); }

const BinaryOp kBinary[] = {
    {"add", &add, false, true},         {"sub", &sub, false, true},
    {"mul", &mul, false, true},         {"div", &div, false, false},
    {"maximum", &maximum, false, true}, {"minimum", &minimum, false, true},
    {"pow", &PowTensor, true, false},
};

const std::pair<Shape, Shape> kBinaryShapes[] = {
    {{3, 4}, {3, 4}}, {{3, 1, 4}, {5, 1}}, {{}, {2, 3}},     {{2, 3}, {}},
    {{1}, {4}},       {{0, 3}, {1, 3}},    {{2, 0, 4}, {4}}, {{1, 5, 1}, {2, 1, 1, 6}},
};

TEST_F(OpsTest, BinaryMatchesHost) {
  uint64_t seed = 1000;
  for (const BinaryOp& op : kBinary) {
    const Tol tol = op.transcendental ? kTranscendental : kArith;
    const bool is_pow = std::string(op.name) == "pow";
    // pow: a positive base; negative bases are covered with integral exponents below.
    const Domain base = is_pow ? Domain::kPositive : Domain::kAny;
    Fn fn = [&op](const std::vector<Tensor>& x) { return op.fn(x[0], x[1]); };
    for (const auto& [sa, sb] : kBinaryShapes) {
      Check(op.name, fn, {F(sa, Layout::kContiguous, base), F(sb)}, ++seed, tol);
    }
    for (Layout l : kNonContiguous) {
      Check(op.name, fn, {F({3, 4}, l, base), F({3, 4}, Layout::kTransposed)}, ++seed, tol);
      Check(op.name, fn, {F({5, 3, 4}, l, base), F({3, 1})}, ++seed, tol);
    }
    Check(op.name, fn, {F({4, 7}, Layout::kContiguous, Domain::kSpecial), F({4, 7})}, ++seed, tol);
    Check(op.name, fn, {F({4, 7}), F({4, 7}, Layout::kContiguous, Domain::kSpecial)}, ++seed, tol);
    // Integers, and mixed dtypes that promote (div and pow compute in f32).
    for (DType t : {DType::i32, DType::i64}) {
      const Domain d = is_pow ? Domain::kSmallInt : Domain::kAny;
      Check(op.name, fn, {A({3, 1, 4}, t, Layout::kContiguous, d), A({5, 1}, t)}, ++seed, tol);
      Check(op.name, fn, {A({3, 4}, t, Layout::kTransposed, d), A({3, 4}, t, Layout::kSliced)},
            ++seed, tol);
      Check(op.name, fn, {A({0, 3}, t), A({3}, t)}, ++seed, tol);
    }
    Check(op.name, fn, {A({3, 4}, DType::i32, Layout::kContiguous, base), F({4})}, ++seed, tol);
    Check(op.name, fn, {A({3, 4}, DType::i64, Layout::kContiguous, base), A({3, 1}, DType::i32)},
          ++seed, tol);
    Check(op.name, fn, {A({3, 4}, DType::boolean), A({3, 4}, DType::boolean)}, ++seed, tol);
    Check(op.name, fn, {A({3, 4}, DType::boolean), A({4}, DType::i32)}, ++seed, tol);
  }
}

TEST_F(OpsTest, PowOfNegativeBasesWithIntegralExponents) {
  const std::vector<float> base = {-2, -2, -2, -2, -0.5f, -3, 0, 0, -1, -1.5f, 2, -4};
  const std::vector<float> exponent = {0, 1, 2, 3, -1, -2, 0, -1, 0.5f, 2.5f, -3, 0.25f};
  EXPECT_TRUE(Matches(pow(tensor(base, {12}, Host()), tensor(exponent, {12}, Host())),
                      pow(tensor(base, {12}, Cl()), tensor(exponent, {12}, Cl())), kTranscendental,
                      nullptr));
  for (double e : {2.0, 3.0, -1.0, 0.5}) {
    SCOPED_TRACE("pow(x, " + std::to_string(e) + ")");
    EXPECT_TRUE(Matches(pow(tensor(base, {3, 4}, Host()), e), pow(tensor(base, {3, 4}, Cl()), e),
                        kTranscendental, nullptr));
  }
}

TEST_F(OpsTest, IntegerArithmeticWraps) {
  const std::vector<int32_t> a = {std::numeric_limits<int32_t>::max(),
                                  std::numeric_limits<int32_t>::min(), 123456789, -7};
  const std::vector<int32_t> b = {2, -1, 1000, std::numeric_limits<int32_t>::min()};
  for (auto fn : {&add, &sub, &mul, &maximum, &minimum}) {
    EXPECT_TRUE(Matches(fn(tensor(a, {4}, Host()), tensor(b, {4}, Host())),
                        fn(tensor(a, {4}, Cl()), tensor(b, {4}, Cl())), kExact, nullptr));
  }
}

// Tensor-scalar on both sides; an integral tensor with a fractional scalar computes in f32.
TEST_F(OpsTest, ScalarOperandsOnBothSides) {
  struct ScalarCase {
    const char* name;
    std::function<Tensor(const Tensor&)> fn;
  };
  const std::vector<ScalarCase> cases = {
      {"x + 2", [](const Tensor& x) { return x + 2.0; }},
      {"2 + x", [](const Tensor& x) { return 2.0 + x; }},
      {"x - 3", [](const Tensor& x) { return x - 3.0; }},
      {"3 - x", [](const Tensor& x) { return 3.0 - x; }},
      {"x * -2", [](const Tensor& x) { return x * -2.0; }},
      {"-2 * x", [](const Tensor& x) { return -2.0 * x; }},
      {"x / 4", [](const Tensor& x) { return x / 4.0; }},
      {"4 / x", [](const Tensor& x) { return 4.0 / x; }},
      {"x + 0.5", [](const Tensor& x) { return x + 0.5; }},
      {"0.25 - x", [](const Tensor& x) { return 0.25 - x; }},
      {"x * 1.5", [](const Tensor& x) { return x * 1.5; }},
      {"-x", [](const Tensor& x) { return -x; }},
      {"pow(|x|, 2)", [](const Tensor& x) { return pow(abs(x), 2.0); }},
      {"pow(|x|, 0.5)", [](const Tensor& x) { return pow(abs(x), 0.5); }},
  };
  uint64_t seed = 2000;
  for (const ScalarCase& c : cases) {
    Fn fn = [&c](const std::vector<Tensor>& x) { return c.fn(x[0]); };
    for (DType t : {DType::f32, DType::i32, DType::i64}) {
      Check(c.name, fn, {A({3, 1, 4}, t)}, ++seed, kTranscendental);
      Check(c.name, fn, {A({2, 3}, t, Layout::kTransposed)}, ++seed, kTranscendental);
      Check(c.name, fn, {A({0, 2}, t)}, ++seed, kTranscendental);
    }
  }
}

TEST_F(OpsTest, ComparisonsMatchHost) {
  struct CompareOp {
    const char* name;
    Tensor (*fn)(const Tensor&, const Tensor&);
  };
  const CompareOp ops[] = {{"lt", &lt}, {"le", &le}, {"gt", &gt},
                           {"ge", &ge}, {"eq", &eq}, {"ne", &ne}};
  uint64_t seed = 3000;
  for (const CompareOp& op : ops) {
    Fn fn = [&op](const std::vector<Tensor>& x) { return op.fn(x[0], x[1]); };
    for (DType t : kDTypes) {
      const Domain d = Domain::kSmallInt;  // ties, so that le/ge/eq/ne matter
      Check(op.name, fn,
            {A({3, 1, 4}, t, Layout::kContiguous, d), A({5, 1}, t, Layout::kContiguous, d)}, ++seed,
            kExact);
      Check(op.name, fn, {A({3, 4}, t, Layout::kTransposed, d), A({3, 4}, t, Layout::kSliced, d)},
            ++seed, kExact);
      Check(op.name, fn, {A({}, t, Layout::kContiguous, d), A({0, 3}, t, Layout::kContiguous, d)},
            ++seed, kExact);
      Check(op.name, fn, {A({1}, t, Layout::kLazy, d), A({2, 3}, t, Layout::kBroadcast, d)}, ++seed,
            kExact);
    }
    // NaN and infinities, and mixed dtypes.
    Check(op.name, fn,
          {F({4, 7}, Layout::kContiguous, Domain::kSpecial),
           F({7}, Layout::kContiguous, Domain::kSmallInt)},
          ++seed, kExact);
    Check(op.name, fn,
          {A({3, 4}, DType::i32, Layout::kContiguous, Domain::kSmallInt),
           A({3, 4}, DType::f32, Layout::kContiguous, Domain::kSmallInt)},
          ++seed, kExact);
    Check(op.name, fn,
          {A({3, 4}, DType::boolean, Layout::kContiguous, Domain::kSmallInt),
           A({4}, DType::i64, Layout::kContiguous, Domain::kSmallInt)},
          ++seed, kExact);
  }
}

TEST_F(OpsTest, WhereMatchesHost) {
  Fn fn = [](const std::vector<Tensor>& x) { return where(x[0], x[1], x[2]); };
  uint64_t seed = 4000;
  const DType pairs[][2] = {{DType::f32, DType::f32},
                            {DType::i32, DType::i64},
                            {DType::f32, DType::i32},
                            {DType::boolean, DType::boolean},
                            {DType::i64, DType::i64}};
  for (const auto& p : pairs) {
    Check("where", fn, {A({3, 1, 4}, DType::boolean), A({5, 1}, p[0]), A({4}, p[1])}, ++seed,
          kArith);
    Check("where", fn, {A({2, 3}, DType::boolean), A({}, p[0]), A({2, 3}, p[1])}, ++seed, kArith);
    Check("where", fn, {A({0, 3}, DType::boolean), A({3}, p[0]), A({1}, p[1])}, ++seed, kArith);
    Check("where", fn, {A({1}, DType::boolean), A({1, 1}, p[0]), A({1}, p[1])}, ++seed, kArith);
    for (Layout l : kNonContiguous) {
      Check(
          "where", fn,
          {A({3, 4}, DType::boolean, l), A({3, 4}, p[0], Layout::kTransposed), A({3, 4}, p[1], l)},
          ++seed, kArith);
    }
  }
  Fn scalar_b = [](const std::vector<Tensor>& x) { return where(x[0], x[1], 2.5); };
  Fn scalar_a = [](const std::vector<Tensor>& x) { return where(x[0], -1.0, x[1]); };
  for (DType t : {DType::f32, DType::i32, DType::i64}) {
    Check("where(c, a, 2.5)", scalar_b, {A({3, 1}, DType::boolean), A({4}, t)}, ++seed, kArith);
    Check("where(c, -1, b)", scalar_a,
          {A({3, 4}, DType::boolean, Layout::kSliced), A({3, 4}, t, Layout::kTransposed)}, ++seed,
          kArith);
  }
}

// ---------------------------------------------------------------------------------------------
// Reductions

struct ReduceOp {
  const char* name;
  Tensor (*fn)(const Tensor&, std::vector<int64_t>, bool);
};
const ReduceOp kReduce[] = {{"sum", &sum}, {"mean", &mean}, {"max", &max}};

std::string DimsStr(const std::vector<int64_t>& dims, bool keepdim) {
  std::string out = "{";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? "," : "") + std::to_string(dims[i]);
  return out + (keepdim ? "}, keepdim" : "}");
}

void CheckReduce(const ReduceOp& op, const Arg& arg, std::vector<int64_t> dims, bool keepdim,
                 uint64_t seed) {
  const std::string name = std::string(op.name) + " over " + DimsStr(dims, keepdim);
  Fn fn = [&op, dims, keepdim](const std::vector<Tensor>& x) { return op.fn(x[0], dims, keepdim); };
  if (std::string(op.name) == "max") {
    Check(name, fn, {arg}, seed, kArith);
    return;
  }
  // sum and mean: the tolerance scales with the sum (mean) of |x| over the reduced elements.
  Fn scale = [&op, dims, keepdim](const std::vector<Tensor>& x) {
    return op.fn(abs(cast(x[0], DType::f32)), dims, keepdim);
  };
  Check(name, fn, {arg}, seed, Tol{1e-5, 1e-6}, scale);
}

TEST_F(OpsTest, ReductionsMatchHost) {
  const std::vector<std::vector<int64_t>> dim_sets = {
      {}, {0}, {2}, {-1}, {-3}, {0, 2}, {1, 3}, {3, 0}, {0, 1, 2, 3}, {-1, -4}};
  uint64_t seed = 5000;
  for (const ReduceOp& op : kReduce) {
    for (DType t : kDTypes) {
      if (t == DType::boolean && std::string(op.name) == "mean") continue;
      for (const auto& dims : dim_sets) {
        for (bool keepdim : {false, true}) {
          if (t != DType::f32 && keepdim && dims.size() != 2) continue;
          CheckReduce(op, A({2, 3, 4, 5}, t), dims, keepdim, ++seed);
        }
      }
      for (Layout l : kNonContiguous) {
        for (const std::vector<int64_t>& dims : {std::vector<int64_t>{}, {1}, {0, 2}}) {
          CheckReduce(op, A({2, 3, 4}, t, l), dims, false, ++seed);
        }
      }
      // Size-1 and rank-0 operands.
      CheckReduce(op, A({}, t), {}, false, ++seed);
      CheckReduce(op, A({7}, t), {-1}, true, ++seed);
      CheckReduce(op, A({1, 5, 1}, t), {0, 2}, false, ++seed);
      CheckReduce(op, A({1, 5, 1}, t), {1}, true, ++seed);
      // Size-0 operands: sum and mean of nothing are 0 and NaN; max needs a non-empty dim.
      CheckReduce(op, A({0, 3}, t), {1}, false, ++seed);
      CheckReduce(op, A({2, 0, 4}, t), {0, 2}, true, ++seed);
      if (std::string(op.name) != "max") {
        CheckReduce(op, A({0, 3}, t), {0}, false, ++seed);
        CheckReduce(op, A({0, 3}, t), {}, true, ++seed);
        CheckReduce(op, A({2, 0, 4}, t), {1}, false, ++seed);
      } else {
        Fn over0 = [](const std::vector<Tensor>& x) { return max(x[0], {0}, false); };
        CheckBothThrow("max over an empty dim", over0, {A({0, 3}, t)});
      }
    }
  }
}

// Few outputs and long reductions take the two-stage (partial, then final) path.
TEST_F(OpsTest, LongReductionsMatchHost) {
  uint64_t seed = 6000;
  for (const ReduceOp& op : kReduce) {
    for (DType t : {DType::f32, DType::i64, DType::i32}) {
      if (t != DType::f32 && std::string(op.name) == "mean") continue;
      CheckReduce(op, A({3, 40000}, t), {1}, false, ++seed);
      CheckReduce(op, A({40000, 2}, t), {0}, true, ++seed);
      CheckReduce(op, A({200, 200}, t), {}, false, ++seed);
      CheckReduce(op, A({300, 200}, t, Layout::kTransposed), {0, 1}, false, ++seed);
    }
  }
  CheckReduce(kReduce[0], A({3, 40000}, DType::boolean), {1}, false, ++seed);
  CheckReduce(kReduce[2], A({3, 40000}, DType::boolean), {1}, false, ++seed);
  // Every element NaN in some rows, NaNs mixed in others.
  CheckReduce(kReduce[2], F({40, 7}, Layout::kContiguous, Domain::kSpecial), {1}, false, ++seed);
  CheckReduce(kReduce[2], F({4, 70000}, Layout::kContiguous, Domain::kSpecial), {1}, false, ++seed);
}

TEST_F(OpsTest, MaxOfAllNaNIsNaN) {
  const std::vector<float> v = {kNaN, kNaN, kNaN, 1.0f, kNaN, -kInf};
  EXPECT_TRUE(Matches(max(tensor(v, {2, 3}, Host()), {1}), max(tensor(v, {2, 3}, Cl()), {1}),
                      kExact, nullptr));
}

// ---------------------------------------------------------------------------------------------
// Matmul

TEST_F(OpsTest, MatmulMatchesHost) {
  const std::pair<Shape, Shape> shapes[] = {
      {{5, 7}, {7, 3}},
      {{16, 16}, {16, 16}},
      {{17, 33}, {33, 18}},
      {{1, 1}, {1, 1}},
      {{1, 9}, {9, 1}},
      {{2, 5, 7}, {7, 3}},
      {{5, 7}, {4, 7, 3}},
      {{3, 1, 4, 5}, {2, 5, 6}},
      {{2, 1, 4, 5}, {3, 5, 6}},
      {{0, 4}, {4, 3}},
      {{3, 0}, {0, 4}},
      {{4, 5}, {5, 0}},
      {{2, 0, 3, 5}, {5, 2}},
      {{2, 33, 40}, {2, 40, 17}},
      // Whole register blocks of the CPU kernel (4 x 32) and edges in both directions.
      {{37, 70}, {70, 67}},
      {{2, 8, 16}, {16, 64}},
      // The CPU kernel copies B in chunks of 256 rows of K and gives a work-item up to 128 rows:
      // K = 300 takes two passes that add into C, M = 130 ends in a partial row block.
      {{130, 300}, {300, 45}},
      {{2, 20, 513}, {2, 513, 33}},
  };
  Fn fn = [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); };
  Fn scale = [](const std::vector<Tensor>& x) {
    return matmul(abs(cast(x[0], DType::f32)), abs(cast(x[1], DType::f32)));
  };
  uint64_t seed = 7000;
  const DType pairs[][2] = {{DType::f32, DType::f32},
                            {DType::i32, DType::i32},
                            {DType::i64, DType::i64},
                            {DType::i32, DType::f32}};
  for (const auto& p : pairs) {
    for (const auto& [sa, sb] : shapes) {
      Check("matmul", fn, {A(sa, p[0]), A(sb, p[1])}, ++seed, kArith, scale);
    }
    for (Layout la : {Layout::kContiguous, Layout::kTransposed, Layout::kSliced, Layout::kBroadcast,
                      Layout::kLazy}) {
      for (Layout lb : {Layout::kContiguous, Layout::kTransposed}) {
        Check("matmul", fn, {A({3, 17, 33}, p[0], la), A({3, 33, 18}, p[1], lb)}, ++seed, kArith,
              scale);
        Check("matmul", fn, {A({6, 20}, p[0], la), A({20, 5}, p[1], lb)}, ++seed, kArith, scale);
        Check("matmul", fn, {A({9, 24}, p[0], la), A({24, 40}, p[1], lb)}, ++seed, kArith, scale);
      }
    }
  }
}

// An elementwise chain over a matmul's result runs as the matmul kernel's epilogue
// (tests/fusion_test.cpp counts the kernels): bias broadcast over rows, relu, a second operand of
// the result's shape, batched results, edges of the CPU kernel's blocks (8 x 32, K in chunks of
// 256), and non-contiguous operands of the matmul and of the chain.
TEST_F(OpsTest, MatmulEpilogueMatchesHost) {
  struct Case {
    Shape a, b, out;
  };
  const Case cases[] = {
      {{1, 1}, {1, 1}, {1, 1}},
      {{3, 5}, {5, 3}, {3, 3}},
      {{33, 65}, {65, 33}, {33, 33}},
      {{65, 3}, {3, 65}, {65, 65}},
      {{9, 300}, {300, 40}, {9, 40}},
      {{2, 33, 7}, {2, 7, 65}, {2, 33, 65}},
      {{4, 1, 9, 6}, {3, 6, 5}, {4, 3, 9, 5}},
      {{130, 17}, {17, 31}, {130, 31}},
  };
  // relu(x0 @ x1 + bias), bias broadcast over every dim but the last.
  Fn bias_relu = [](const std::vector<Tensor>& x) { return relu(matmul(x[0], x[1]) + x[2]); };
  Fn bias_scale = [](const std::vector<Tensor>& x) {
    return matmul(abs(x[0]), abs(x[1])) + abs(x[2]);
  };
  // A chain with a second operand of the result's shape, a constant and a transcendental.
  Fn chain = [](const std::vector<Tensor>& x) {
    return tanh(matmul(x[0], x[1]) * x[2] - 0.25) + x[2];
  };
  Fn chain_scale = [](const std::vector<Tensor>& x) {
    return matmul(abs(x[0]), abs(x[1])) * (abs(x[2]) + 1) + abs(x[2]) + 1;
  };
  uint64_t seed = 9000;
  for (const Case& c : cases) {
    const Shape& out = c.out;
    for (Layout la : {Layout::kContiguous, Layout::kTransposed}) {
      for (Layout lb : {Layout::kContiguous, Layout::kTransposed, Layout::kSliced}) {
        Check("relu(matmul + bias)", bias_relu, {F(c.a, la), F(c.b, lb), F({out.back()})}, ++seed,
              kTranscendental, bias_scale);
      }
    }
    for (Layout lc : {Layout::kContiguous, Layout::kTransposed, Layout::kBroadcast}) {
      Check("tanh(matmul * c - 0.25) + c", chain, {F(c.a), F(c.b), F(out, lc)}, ++seed,
            kTranscendental, chain_scale);
    }
  }
  // Integer matmuls take the GPU-style kernel on every device, with the same epilogue.
  Fn int_chain = [](const std::vector<Tensor>& x) {
    return maximum(matmul(x[0], x[1]) - x[2], x[2]);
  };
  Check("maximum(matmul - c, c)", int_chain,
        {A({5, 33}, DType::i32), A({33, 17}, DType::i32), A({17}, DType::i32)}, ++seed, kExact);
}

// ---------------------------------------------------------------------------------------------
// Views, cat, stack

TEST_F(OpsTest, ViewsMatchHost) {
  struct ViewCase {
    std::string name;
    Shape shape;
    std::function<Tensor(const Tensor&)> fn;
  };
  const std::vector<ViewCase> cases = {
      {"reshape [4,6]",
       {2, 3, 4},
       [](const Tensor& x) {
         return reshape(x, {4, 6});
       }},
      {"reshape [-1]", {2, 3, 4}, [](const Tensor& x) { return reshape(x, {-1}); }},
      {"reshape [2,-1,2]",
       {2, 3, 4},
       [](const Tensor& x) {
         return reshape(x, {2, -1, 2});
       }},
      {"reshape [24,1]",
       {2, 3, 4},
       [](const Tensor& x) {
         return reshape(x, {24, 1});
       }},
      {"reshape [1,1]",
       {},
       [](const Tensor& x) {
         return reshape(x, {1, 1});
       }},
      {"reshape []", {1, 1}, [](const Tensor& x) { return reshape(x, {}); }},
      {"reshape [3,0]",
       {0, 3},
       [](const Tensor& x) {
         return reshape(x, {3, 0});
       }},
      {"transpose 0,2", {2, 3, 4}, [](const Tensor& x) { return transpose(x, 0, 2); }},
      {"transpose -1,-2", {2, 3, 4}, [](const Tensor& x) { return transpose(x, -1, -2); }},
      {"transpose 1,1", {2, 3, 4}, [](const Tensor& x) { return transpose(x, 1, 1); }},
      {"transpose 0,1", {0, 3}, [](const Tensor& x) { return transpose(x, 0, 1); }},
      {"permute 3,1,0,2",
       {2, 3, 4, 5},
       [](const Tensor& x) {
         return permute(x, {3, 1, 0, 2});
       }},
      {"permute -1,0,1,2",
       {2, 3, 4, 5},
       [](const Tensor& x) {
         return permute(x, {-1, 0, 1, 2});
       }},
      {"permute", {}, [](const Tensor& x) { return permute(x, {}); }},
      {"broadcast_to [2,3,4]",
       {3, 1},
       [](const Tensor& x) {
         return broadcast_to(x, {2, 3, 4});
       }},
      {"broadcast_to [2,2]",
       {},
       [](const Tensor& x) {
         return broadcast_to(x, {2, 2});
       }},
      {"broadcast_to [0]", {1}, [](const Tensor& x) { return broadcast_to(x, {0}); }},
      {"broadcast_to [5,3,4]",
       {3, 4},
       [](const Tensor& x) {
         return broadcast_to(x, {5, 3, 4});
       }},
      {"slice 0,1,4", {5, 6}, [](const Tensor& x) { return slice(x, 0, 1, 4); }},
      {"slice 1,-4,-1", {5, 6}, [](const Tensor& x) { return slice(x, 1, -4, -1); }},
      {"slice -1,2,100", {5, 6}, [](const Tensor& x) { return slice(x, -1, 2, 100); }},
      {"slice 0,-100,2", {5, 6}, [](const Tensor& x) { return slice(x, 0, -100, 2); }},
      {"slice 0,3,1", {5, 6}, [](const Tensor& x) { return slice(x, 0, 3, 1); }},
      {"slice 1,0,6", {5, 6}, [](const Tensor& x) { return slice(x, 1, 0, 6); }},
      {"slice of slice", {5, 6}, [](const Tensor& x) { return slice(slice(x, 1, 1, 5), 1, 1, 3); }},
      {"unsqueeze 0", {3, 4}, [](const Tensor& x) { return unsqueeze(x, 0); }},
      {"unsqueeze 2", {3, 4}, [](const Tensor& x) { return unsqueeze(x, 2); }},
      {"unsqueeze -1", {3, 4}, [](const Tensor& x) { return unsqueeze(x, -1); }},
      {"unsqueeze -3", {3, 4}, [](const Tensor& x) { return unsqueeze(x, -3); }},
      {"squeeze 1", {3, 1, 4}, [](const Tensor& x) { return squeeze(x, 1); }},
      {"squeeze -2", {3, 1, 4}, [](const Tensor& x) { return squeeze(x, -2); }},
      {"squeeze 0", {1}, [](const Tensor& x) { return squeeze(x, 0); }},
  };
  uint64_t seed = 8000;
  for (const ViewCase& c : cases) {
    Fn fn = [&c](const std::vector<Tensor>& x) { return c.fn(x[0]); };
    for (DType t : kDTypes) Check(c.name, fn, {A(c.shape, t)}, ++seed, kExact);
    for (Layout l : kNonContiguous) Check(c.name, fn, {F(c.shape, l)}, ++seed, kExact);
  }
}

TEST_F(OpsTest, CatAndStackMatchHost) {
  uint64_t seed = 9000;
  Fn cat0 = [](const std::vector<Tensor>& x) { return cat(x, 0); };
  Fn cat1 = [](const std::vector<Tensor>& x) { return cat(x, 1); };
  Fn catm1 = [](const std::vector<Tensor>& x) { return cat(x, -1); };
  for (DType t : kDTypes) {
    Check("cat 0", cat0, {A({2, 3}, t), A({4, 3}, t)}, ++seed, kExact);
    Check("cat 1", cat1, {A({2, 3}, t), A({2, 1}, t), A({2, 0}, t), A({2, 2}, t)}, ++seed, kExact);
    Check("cat -1", catm1, {A({2, 3, 4}, t, Layout::kTransposed), A({2, 3, 1}, t, Layout::kSliced)},
          ++seed, kExact);
    Check("cat 1", cat1,
          {A({2, 3, 4}, t, Layout::kBroadcast), A({2, 5, 4}, t, Layout::kLazy), A({2, 1, 4}, t)},
          ++seed, kExact);
    Check("cat 0", cat0, {A({0, 3}, t), A({0, 3}, t)}, ++seed, kExact);
    Check("cat 0", cat0, {A({1}, t)}, ++seed, kExact);
  }
  // Mixed dtypes promote.
  Check("cat 0", cat0, {A({2, 3}, DType::i32), A({1, 3}, DType::f32), A({1, 3}, DType::boolean)},
        ++seed, kExact);
  Check("cat 1", cat1, {A({2, 3}, DType::boolean), A({2, 2}, DType::i64)}, ++seed, kExact);
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    Fn fn = [dim](const std::vector<Tensor>& x) { return stack(x, dim); };
    const std::string name = "stack " + std::to_string(dim);
    for (DType t : kDTypes) {
      Check(name, fn,
            {A({2, 3}, t), A({2, 3}, t, Layout::kTransposed), A({2, 3}, t, Layout::kSliced)},
            ++seed, kExact);
    }
    Check(name, fn, {F({0, 2}), F({0, 2})}, ++seed, kExact);
  }
  Fn stack0 = [](const std::vector<Tensor>& x) { return stack(x, 0); };
  Check("stack 0", stack0, {F({}), F({}), F({})}, ++seed, kExact);
}

// ---------------------------------------------------------------------------------------------
// softmax, log_softmax

TEST_F(OpsTest, SoftmaxMatchesHost) {
  uint64_t seed = 10000;
  for (bool log_variant : {false, true}) {
    const std::string op = log_variant ? "log_softmax" : "softmax";
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      Fn fn = [dim, log_variant](const std::vector<Tensor>& x) {
        return log_variant ? log_softmax(x[0], dim) : softmax(x[0], dim);
      };
      const std::string name = op + " dim " + std::to_string(dim);
      Check(name, fn, {F({3, 4, 5})}, ++seed, kTranscendental);
      Check(name, fn, {F({2, 1, 6})}, ++seed, kTranscendental);
      Check(name, fn, {F({2, 0, 3})}, ++seed, kTranscendental);
      for (Layout l : kNonContiguous) Check(name, fn, {F({3, 4, 5}, l)}, ++seed, kTranscendental);
    }
    for (int64_t dim : {0, -1}) {
      Fn fn = [dim, log_variant](const std::vector<Tensor>& x) {
        // Large logits: the max subtraction must keep this finite.
        return log_variant ? log_softmax(x[0] * 60.0, dim) : softmax(x[0] * 60.0, dim);
      };
      Check(op + " of 60x dim " + std::to_string(dim), fn, {F({7})}, ++seed, kTranscendental);
      Check(op + " of 60x dim " + std::to_string(dim), fn, {F({1, 6})}, ++seed, kTranscendental);
    }
  }
}

// Rows long and many enough for the CPU row kernel (one work-item per row computing the
// reductions and the result: kernels/codegen.h, EmitRowKernel): rows of 16 (vectors only), 37
// and 40 (vectors and a scalar tail), non-contiguous inputs, nested reductions (layer norm:
// the variance reads the mean) and a fused expression before the reductions. Under
// LAZYCL_CODEGEN=gpu the same checks run the separate reduction kernels.
TEST_F(OpsTest, RowKernelsMatchHost) {
  uint64_t seed = 20000;
  const Fn softmax_last = [](const std::vector<Tensor>& x) { return softmax(x[0], -1); };
  const Fn log_softmax_last = [](const std::vector<Tensor>& x) { return log_softmax(x[0], -1); };
  const Fn scaled = [](const std::vector<Tensor>& x) { return softmax(tanh(x[0]) * 30.0, -1); };
  const Fn layer_norm = [](const std::vector<Tensor>& x) {
    const int64_t n = x[0].shape().back();
    Tensor mean = sum(x[0], {-1}, true) / static_cast<double>(n);
    Tensor centred = x[0] - mean;
    Tensor var = sum(centred * centred, {-1}, true) / static_cast<double>(n);
    return centred / sqrt(var + 1e-5);
  };
  const Fn max_shift = [](const std::vector<Tensor>& x) { return x[0] - max(x[0], {-1}, true); };
  // The result reads exp(x - max) at another row's index (a transpose): the row kernel must not
  // take it from the rows it has stored so far.
  const Fn transposed = [](const std::vector<Tensor>& x) {
    Tensor e = exp(x[0] - max(x[0], {-1}, true));
    return transpose(e, 0, 1) / sum(e, {-1}, true);
  };
  for (const Shape& shape : {Shape{16, 16}, Shape{37, 37}}) {
    Check("row kernel, transposed read", transposed, {F(shape)}, ++seed, kTranscendental);
  }
  for (const Fn* fn : {&softmax_last, &log_softmax_last, &scaled, &layer_norm, &max_shift}) {
    for (const Shape& shape : {Shape{16, 16}, Shape{20, 37}, Shape{17, 3, 40}}) {
      Check("row kernel", *fn, {F(shape)}, ++seed, kTranscendental);
    }
    for (Layout l : kNonContiguous)
      Check("row kernel", *fn, {F({24, 37}, l)}, ++seed, kTranscendental);
  }
}

// Kernels over permuted views of many dims take more integers (sizes, divisors' magic numbers)
// than one vector argument holds (kernels/packed_params.h: 16 to a vector): every one of them,
// in either vector, must reach its use. Elementwise and row kernels, views of every layout.
TEST_F(OpsTest, KernelsWithMoreThanSixteenIntegersMatchHost) {
  uint64_t seed = 31000;
  const Shape shape = {2, 3, 4, 2, 3, 2, 5};
  const Fn fn = [](const std::vector<Tensor>& x) {
    return x[0] * 2.0 + permute(x[1], {6, 5, 4, 3, 2, 1, 0}) -
           permute(x[2], {1, 0, 3, 2, 5, 4, 6}) * x[0];
  };
  const Fn rows = [&fn](const std::vector<Tensor>& x) { return softmax(fn(x), -1); };
  for (Layout l : {Layout::kContiguous, Layout::kTransposed, Layout::kSliced}) {
    const std::vector<Arg> args = {F(shape, l), F({5, 2, 3, 2, 4, 3, 2}), F({3, 2, 2, 4, 2, 3, 5})};
    Check("many dims", fn, args, ++seed, kArith);
    Check("many dims, rows", rows, args, ++seed, kTranscendental);
  }
}

// Constants out of an integer dtype's range saturate like a cast from double (host_eval.h).
// full() saturates a value its integer dtype cannot hold (as a cast does).
TEST_F(OpsTest, OutOfRangeIntegerConstantsSaturate) {
  for (DType t : {DType::i32, DType::i64}) {
    for (double v : {3e9, -3e9, 5e9, 1e19, -1e19, 1e30, 2147483647.0, -2147483648.0}) {
      SCOPED_TRACE(std::string("full ") + dtype_name(t) + " " + std::to_string(v));
      EXPECT_TRUE(Matches(full({3}, v, t, Host()), full({3}, v, t, Cl()), kExact, nullptr));
      // An operator's scalar that the integer dtype cannot hold is an error (as in PyTorch),
      // not a saturated or wrapped value.
      Tensor h = cast(tensor(std::vector<int32_t>{-2, 0, 7}, {3}, Host()), t);
      const double hi = t == DType::i32 ? 2147483647.0 : 9223372036854775807.0;
      if (v >= -hi - 1 && v <= hi) {
        EXPECT_TRUE(Matches(h + v, h.to(Cl()) + v, kExact, nullptr));
      } else {
        EXPECT_THROW(h + v, Error);
        EXPECT_THROW(h.to(Cl()) + v, Error);
      }
    }
    SCOPED_TRACE(std::string("full NaN ") + dtype_name(t));
    EXPECT_TRUE(Matches(full({3}, kNaN, t, Host()), full({3}, kNaN, t, Cl()), kExact, nullptr));
  }
}

// ---------------------------------------------------------------------------------------------
// Regressions

// Kernel names were "ew_<Node::hash>", and Node::hash is absl::Hash, salted per process: every
// run generated different sources, so the on-disk program cache never hit. This runs the same
// small graph in two child processes sharing one cache directory; the second must build nothing.
TEST_F(OpsTest, DiskCacheHitsAcrossProcesses) {
  if (const char* child = getenv("LAZYCL_OPS_TEST_CHILD"); child != nullptr) {
    Tensor x = randn({3, 5}, 1, DType::f32, Cl());
    Tensor y = sum(exp(x) * 2.0 + 1.0, {1});
    sync({y});
    printf("builds=%lld hits=%lld\n", static_cast<long long>(metrics::counter("ProgramBuilds")),
           static_cast<long long>(metrics::counter("ProgramDiskCacheHits")));
    return;
  }
  char dir[] = "/tmp/lazycl-ops-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  // LAZYCL_COMPILE=sync: what is built is the graph's own program, whatever tier would run it.
  const std::string command = std::string("LAZYCL_OPS_TEST_CHILD=1 LAZYCL_COMPILE=sync ") +
                              "LAZYCL_KERNEL_CACHE_DIR=" + dir + " '" + self +
                              "' --gtest_filter=OpsTest.DiskCacheHitsAcrossProcesses 2>&1";
  std::vector<std::pair<long long, long long>> runs;
  for (int run = 0; run < 2; ++run) {
    FILE* pipe = popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string output;
    char buffer[512];
    while (fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
    ASSERT_EQ(pclose(pipe), 0) << output;
    const size_t at = output.find("builds=");
    ASSERT_NE(at, std::string::npos) << output;
    long long builds = -1;
    long long hits = -1;
    ASSERT_EQ(sscanf(output.c_str() + at, "builds=%lld hits=%lld", &builds, &hits), 2) << output;
    runs.push_back({builds, hits});
  }
  std::filesystem::remove_all(dir);
  EXPECT_GT(runs[0].first, 0);
  EXPECT_EQ(runs[1].first, 0) << "the second process rebuilt programs that the first cached";
  EXPECT_EQ(runs[1].second, runs[0].first);
}

// Integer + - * with a constant operand came out as "x + ((int)-2147483648L)": signed overflow
// is undefined in OpenCL C, and PoCL's compiler made -2 + INT_MIN give -2. They must wrap.
TEST_F(OpsTest, IntegerOverflowWithAConstantWraps) {
  for (DType t : {DType::i32, DType::i64}) {
    const double big = t == DType::i32 ? 2147483647.0 : 9.2e18;
    const double min = t == DType::i32 ? -2147483648.0 : -9223372036854775808.0;
    Tensor h = cast(tensor(std::vector<int32_t>{-2, 3, 1 << 30, -(1 << 30)}, {4}, Host()), t);
    Tensor d = h.to(Cl());
    SCOPED_TRACE(dtype_name(t));
    EXPECT_TRUE(Matches(h + min, d + min, kExact, nullptr));
    EXPECT_TRUE(Matches(min + h, min + d, kExact, nullptr));
    EXPECT_TRUE(Matches(h + big, d + big, kExact, nullptr));
    EXPECT_TRUE(Matches(h - big, d - big, kExact, nullptr));
    EXPECT_TRUE(Matches(-big - h, -big - d, kExact, nullptr));
    EXPECT_TRUE(Matches(h * big, d * big, kExact, nullptr));
    EXPECT_TRUE(Matches(-(h - big), -(d - big), kExact, nullptr));
    EXPECT_TRUE(Matches(abs(h - big - 2.0), abs(d - big - 2.0), kExact, nullptr));
  }
}

// softmax and log_softmax along a size-0 dim threw "max: cannot reduce an empty dim" on both
// backends; the result is an empty tensor of the input's shape, as in PyTorch.
TEST_F(OpsTest, SoftmaxOverAnEmptyDimIsEmpty) {
  for (Device d : {Host(), Cl()}) {
    Tensor x = zeros({2, 0, 3}, DType::f32, d);
    EXPECT_EQ(softmax(x, 1).shape(), (Shape{2, 0, 3})) << d.str();
    EXPECT_EQ(log_softmax(x, -2).shape(), (Shape{2, 0, 3})) << d.str();
    EXPECT_TRUE(softmax(x, 1).to_vector<float>().empty()) << d.str();
  }
}

}  // namespace
}  // namespace lazycl
