// The ops of frontend/ops_more.cpp and ops_reduce_more.cpp: each against a reference written
// here in plain C++ (on the host tensor's values), and the device against the host on the same
// values: random and special inputs, ties, size-0 and size-1 dims, transposed (non-contiguous)
// and lazy (fused) operands, every dtype the op takes, and the errors. CTest runs this binary
// twice, with LAZYCL_CODEGEN=cpu (the default on PoCL's CPU device) and =gpu.
// Gradients are in ops_more_grad_test.cpp.
//
// Tolerances: elementwise maths rel 1e-5 + abs 2e-6 (OpenCL allows a few ulp); reductions of
// f32 accumulate in f32 on the device and in double on the host: see each test.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "frontend/tensor_impl.h"
#include "gtest/gtest.h"
#include "ir/ir.h"
#include "lazycl/lazycl.h"
#include "ops_more_util.h"

namespace lazycl::more {
namespace {

const Shape kShapes[] = {{}, {1}, {7}, {3, 5}, {1, 5, 1}, {2, 3, 40}, {0, 3}, {2, 0, 4}};

struct UnaryCase {
  const char* name;
  Tensor (*fn)(const Tensor&);
  double (*formula)(double);
};

Tensor GeluErf(const Tensor& x) { return gelu(x); }
Tensor GeluTanh(const Tensor& x) { return gelu(x, true); }

const UnaryCase kUnary[] = {
    {"rsqrt", &rsqrt, [](double x) { return 1 / std::sqrt(x); }},
    {"silu", &silu, [](double x) { return x / (1 + std::exp(-x)); }},
    {"gelu", &GeluErf, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
    {"gelu_tanh", &GeluTanh,
     [](double x) {
       return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
     }},
};

TEST(OpsMoreTest, UnaryHostMatchesFormula) {
  std::vector<float> xs = {0.3f, 1.0f, 2.5f, 4.0f, 10.0f, 0.01f};
  for (float v : {-0.3f, -1.0f, -2.5f, -4.0f, -10.0f, 0.0f, 20.0f, -20.0f}) xs.push_back(v);
  for (const UnaryCase& op : kUnary) {
    const Tensor y = op.fn(tensor(xs, {static_cast<int64_t>(xs.size())}, Host()));
    const std::vector<float> got = y.to_vector<float>();
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = op.formula(xs[i]);
      if (!std::isfinite(want)) {
        EXPECT_TRUE(std::isnan(want) ? std::isnan(got[i]) : got[i] == want)
            << op.name << "(" << xs[i] << ")";
      } else {
        EXPECT_NEAR(got[i], want, 2e-6 * std::fabs(want) + 1e-7) << op.name << "(" << xs[i] << ")";
      }
    }
  }
  // PyTorch's values (torch 2.x, float32): gelu(1) = 0.8413447, gelu(1, tanh) = 0.8411920.
  EXPECT_NEAR(gelu(full({}, 1.0, DType::f32, Host())).item<float>(), 0.8413447f, 1e-6);
  EXPECT_NEAR(gelu(full({}, 1.0, DType::f32, Host()), true).item<float>(), 0.8411920f, 1e-6);
}

TEST(OpsMoreTest, UnaryDeviceMatchesHost) {
  uint64_t seed = 100;
  for (const UnaryCase& op : kUnary) {
    auto fn = [&](const Tensor& x) { return std::vector<Tensor>{op.fn(x)}; };
    const Domain domain = std::string(op.name) == "rsqrt" ? Domain::kPositive : Domain::kAny;
    for (const Shape& s : kShapes) {
      Check(op.name, fn, s, DType::f32, Layout::kContiguous, ++seed, 1e-5, 2e-6, domain);
    }
    Check(op.name, fn, {4, 33}, DType::f32, Layout::kTransposed, ++seed, 1e-5, 2e-6, domain);
    Check(op.name, fn, {4, 33}, DType::f32, Layout::kLazy, ++seed, 1e-5, 2e-6, domain);
    Check(op.name, fn, {3, 6}, DType::i32, Layout::kContiguous, ++seed, 1e-5, 2e-6,
          Domain::kSmallInt);
    Check(op.name, fn, {64}, DType::f32, Layout::kContiguous, ++seed, 1e-5, 2e-6, Domain::kSpecial);
    // Fused into one kernel with other ops.
    auto chain = [&](const Tensor& x) { return std::vector<Tensor>{op.fn(x * 0.5 + 1.0) * 2.0}; };
    Check(op.name, chain, {5, 17}, DType::f32, Layout::kTransposed, ++seed, 1e-5, 2e-6);
  }
  // Integral inputs compute in f32.
  EXPECT_EQ(silu(full({2}, 3, DType::i64, Cl())).dtype(), DType::f32);
  EXPECT_EQ(rsqrt(full({2}, 4, DType::i32, Host())).to_vector<float>(),
            (std::vector<float>{0.5f, 0.5f}));
}

// The measured reason silu and gelu are primitive ops (ir/op_table.h): their composites read x
// twice, so a chain's pending count (ir.h, counted through every path) doubles per op, 2^(n+1) - 2
// after n, and past ir::MaxPendingNodes() (1024 by default) each new tensor would count its graph
// node by node (ir::PastPendingLimit); the primitives count n, exactly, for free.
TEST(OpsMoreTest, SiluAndGeluReadTheirOperandOnce) {
  Tensor x = tensor(std::vector<float>{1, -2, 0.5f}, {3}, Cl());
  Tensor silu_chain = x;
  Tensor gelu_chain = x;
  Tensor composite = x;
  for (int i = 0; i < 8; ++i) {
    silu_chain = silu(silu_chain);
    gelu_chain = gelu(gelu_chain, i % 2 == 0);
    composite = composite * sigmoid(composite);
  }
  EXPECT_EQ(silu_chain.impl()->node->pending, 8);
  EXPECT_EQ(gelu_chain.impl()->node->pending, 8);
  EXPECT_EQ(composite.impl()->node->pending, 510);
  EXPECT_TRUE(Near(composite.to(Host()), silu_chain.to(Host()), 1e-5, 1e-6));
}

// ---------------------------------------------------------------------------------------------
// Comparisons with a number

enum class Cmp { kLt, kLe, kGt, kGe, kEq, kNe };
const Cmp kCmps[] = {Cmp::kLt, Cmp::kLe, Cmp::kGt, Cmp::kGe, Cmp::kEq, Cmp::kNe};

static_assert(std::numeric_limits<long double>::digits >= 64, "the reference needs exact int64");
bool Holds(Cmp c, long double a, long double b) {
  switch (c) {
    case Cmp::kLt:
      return a < b;
    case Cmp::kLe:
      return a <= b;
    case Cmp::kGt:
      return a > b;
    case Cmp::kGe:
      return a >= b;
    case Cmp::kEq:
      return a == b;
    case Cmp::kNe:
      return a != b;
  }
  return false;
}

Tensor Apply(Cmp c, const Tensor& x, double v, bool number_first) {
  if (number_first) {
    switch (c) {
      case Cmp::kLt:
        return lt(v, x);
      case Cmp::kLe:
        return le(v, x);
      case Cmp::kGt:
        return gt(v, x);
      case Cmp::kGe:
        return ge(v, x);
      case Cmp::kEq:
        return eq(v, x);
      case Cmp::kNe:
        return ne(v, x);
    }
  }
  switch (c) {
    case Cmp::kLt:
      return lt(x, v);
    case Cmp::kLe:
      return le(x, v);
    case Cmp::kGt:
      return gt(x, v);
    case Cmp::kGe:
      return ge(x, v);
    case Cmp::kEq:
      return eq(x, v);
    case Cmp::kNe:
      return ne(x, v);
  }
  return {};
}

TEST(OpsMoreTest, ComparisonsWithNumbersMatchExactArithmetic) {
  const double values[] = {0.0,      0.5,       -2.5, 3.0,          -1.0,
                           1e10,     -1e10,     1e19, -1e19,        9.3e18,
                           INFINITY, -INFINITY, NAN,  2147483647.5, -2147483648.0};
  uint64_t seed = 300;
  for (DType t : {DType::f32, DType::i32, DType::i64, DType::boolean}) {
    Operand x = MakeOperand({4, 9}, t, Layout::kTransposed, Domain::kSmallInt, ++seed);
    // Extreme integers, where an inexact comparison would err.
    if (t == DType::i64) {
      Tensor big = tensor(std::vector<int64_t>{INT64_MAX, INT64_MIN, 9100000000000000000,
                                               2147483647, -2147483648, 0},
                          {6}, Host());
      x = {big, big.to(Cl())};
    }
    if (t == DType::i32) {
      Tensor big = tensor(std::vector<int32_t>{INT32_MAX, INT32_MIN, 0, 3, -3, 1}, {6}, Host());
      x = {big, big.to(Cl())};
    }
    const std::vector<double> xs = AsDoubles(x.host);
    const std::vector<int64_t> ints =
        t == DType::f32 ? std::vector<int64_t>{} : cast(x.host, DType::i64).to_vector<int64_t>();
    for (Cmp c : kCmps) {
      for (double v : values) {
        for (bool first : {false, true}) {
          SCOPED_TRACE(::testing::Message() << dtype_name(t) << " op " << static_cast<int>(c)
                                            << " v " << v << " number first " << first);
          const Tensor want = Apply(c, x.host, v, first);
          const Tensor got = Apply(c, x.device, v, first);
          ASSERT_EQ(want.dtype(), DType::boolean);
          EXPECT_TRUE(Near(want, got, 0, 0));
          // The reference: exact arithmetic on the values (f32 tensors compare with v as f32).
          const double w = t == DType::f32 ? static_cast<double>(static_cast<float>(v)) : v;
          const std::vector<double> host = AsDoubles(want);
          for (size_t i = 0; i < xs.size(); ++i) {
            // long double holds every int64 and every double exactly (x86's 64-bit mantissa).
            const long double xi = t == DType::f32 ? xs[i] : static_cast<long double>(ints[i]);
            const bool expect = first ? Holds(c, w, xi) : Holds(c, xi, w);
            EXPECT_EQ(host[i] != 0, expect) << "element " << i << " = " << xs[i];
          }
        }
      }
    }
  }
}

TEST(OpsMoreTest, ANewNumberCompilesNothing) {
  Tensor x = randn({64}, 1, DType::f32, Cl());
  sync({gt(x, 0.25)});
  const int64_t compiles = metrics::counter("GraphCompiles");
  for (double v : {0.5, -1.0, 2.0}) sync({gt(x, v), lt(v, x)});
  sync({gt(x, 0.75), lt(0.1, x)});
  EXPECT_LE(metrics::counter("GraphCompiles") - compiles, 1);
}

// ---------------------------------------------------------------------------------------------
// clamp, tril, triu

TEST(OpsMoreTest, ClampMatchesReferenceAndHost) {
  uint64_t seed = 400;
  for (DType t : {DType::f32, DType::i32, DType::i64}) {
    for (const Shape& s : {Shape{}, Shape{7}, Shape{3, 17}, Shape{0, 2}}) {
      for (Layout l : {Layout::kContiguous, Layout::kTransposed, Layout::kLazy}) {
        auto fn = [](const Tensor& x) {
          return std::vector<Tensor>{clamp(x, -1.0, 2.0), clamp_min(x, 0.5), clamp_max(x, -0.5),
                                     clamp(x, 1.0, 1.0)};
        };
        Check("clamp", fn, s, t, l, ++seed, 0, 0, Domain::kSmallInt);
      }
    }
  }
  Check(
      "clamp of specials", [](const Tensor& x) { return std::vector<Tensor>{clamp(x, -3, 7)}; },
      {40}, DType::f32, Layout::kContiguous, 1, 0, 0, Domain::kSpecial);
  const std::vector<float> xs = {-5, -1, 0, 1.5, 2, 9, NAN, -INFINITY};
  const std::vector<float> got = clamp(tensor(xs, {8}, Host()), -1, 2).to_vector<float>();
  const std::vector<float> want = {-1, -1, 0, 1.5, 2, 2, NAN, -1};
  for (size_t i = 0; i < xs.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i]));
    } else {
      EXPECT_EQ(got[i], want[i]) << i;
    }
  }
  // Integral tensors with fractional bounds give f32, as in PyTorch.
  Tensor ci = clamp(tensor(std::vector<int32_t>{-3, 0, 3}, {3}, Host()), -0.5, 1.5);
  EXPECT_EQ(ci.dtype(), DType::f32);
  EXPECT_EQ(ci.to_vector<float>(), (std::vector<float>{-0.5f, 0.0f, 1.5f}));
  EXPECT_EQ(clamp(tensor(std::vector<int32_t>{-3, 0, 3}, {3}, Host()), -1, 1).dtype(), DType::i32);
}

TEST(OpsMoreTest, ClampErrors) {
  Tensor x = zeros({3}, DType::f32, Cl());
  std::string e = ErrorOf([&] { clamp(x, 2, 1); });
  EXPECT_NE(e.find("clamp"), std::string::npos) << e;
  EXPECT_NE(e.find("above the upper bound"), std::string::npos) << e;
  e = ErrorOf([&] { clamp(x, NAN, 1); });
  EXPECT_NE(e.find("lower bound is NaN"), std::string::npos) << e;
  e = ErrorOf([&] { clamp_max(x, NAN); });
  EXPECT_NE(e.find("upper bound is NaN"), std::string::npos) << e;
  e = ErrorOf([&] { clamp(zeros({3}, DType::boolean, Cl()), 0, 1); });
  EXPECT_NE(e.find("bool"), std::string::npos) << e;
  e = ErrorOf([&] { clamp(Tensor(), 0, 1); });
  EXPECT_NE(e.find("clamp"), std::string::npos) << e;
}

TEST(OpsMoreTest, TrilTriuMatchReferenceAndHost) {
  uint64_t seed = 500;
  for (DType t : {DType::f32, DType::i32, DType::i64, DType::boolean}) {
    for (const Shape& s : {Shape{4, 6}, Shape{2, 5, 3}, Shape{1, 1}, Shape{0, 3}, Shape{3, 0}}) {
      for (int64_t k : {-2, -1, 0, 1, 3, 10}) {
        Operand x = MakeOperand(s, t, Layout::kTransposed, Domain::kSmallInt, ++seed);
        for (bool lower : {true, false}) {
          const Tensor want = lower ? tril(x.host, k) : triu(x.host, k);
          const Tensor got = lower ? tril(x.device, k) : triu(x.device, k);
          ASSERT_EQ(want.dtype(), t);
          EXPECT_TRUE(Near(want, got, 0, 0)) << "k " << k << " lower " << lower;
          const std::vector<double> in = AsDoubles(x.host);
          const std::vector<double> out = AsDoubles(want);
          const int64_t rows = s[s.size() - 2];
          const int64_t cols = s.back();
          for (size_t i = 0; i < in.size(); ++i) {
            const int64_t r = (static_cast<int64_t>(i) / cols) % rows;
            const int64_t c = static_cast<int64_t>(i) % cols;
            const bool keep = lower ? c - r <= k : c - r >= k;
            EXPECT_EQ(out[i], keep ? in[i] : 0.0) << i << " k " << k;
          }
        }
      }
    }
  }
  std::string e = ErrorOf([] { tril(zeros({3}, DType::f32, Cl())); });
  EXPECT_NE(e.find("tril"), std::string::npos) << e;
  EXPECT_NE(e.find("rank >= 2"), std::string::npos) << e;
  EXPECT_NE(e.find("[3]"), std::string::npos) << e;
}

// ---------------------------------------------------------------------------------------------
// Reductions: min, prod

// The reference reduction of `x` over `dims` (kept as size 1), on doubles (exact for the small
// integers used), folding with `f` from `init`.
std::vector<double> RefReduce(const Tensor& x, const std::vector<int64_t>& dims, double init,
                              double (*f)(double, double)) {
  const Shape s = x.shape();
  const std::vector<double> v = AsDoubles(x);
  Shape out_shape = s;
  for (int64_t d : dims) out_shape[d] = 1;
  int64_t out_n = 1;
  for (int64_t d : out_shape) out_n *= d;
  std::vector<double> out(out_n, init);
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t rest = static_cast<int64_t>(i);
    int64_t o = 0;
    int64_t ostride = 1;
    for (size_t d = s.size(); d-- > 0;) {
      const int64_t idx = rest % s[d];
      rest /= s[d];
      o += (out_shape[d] == 1 ? 0 : idx) * ostride;
      ostride *= out_shape[d];
    }
    out[o] = f(out[o], v[i]);
  }
  return out;
}

TEST(OpsMoreTest, MinAndProdMatchReferenceAndHost) {
  const std::vector<std::vector<int64_t>> dim_sets = {{}, {0}, {2}, {-1}, {0, 2}, {1, 2}};
  uint64_t seed = 600;
  for (DType t : {DType::f32, DType::i32, DType::i64, DType::boolean}) {
    for (const auto& dims : dim_sets) {
      for (bool keepdim : {false, true}) {
        for (Layout l : {Layout::kContiguous, Layout::kTransposed, Layout::kLazy}) {
          auto fn = [&](const Tensor& x) {
            return std::vector<Tensor>{min(x, dims, keepdim), prod(x, dims, keepdim)};
          };
          Check("min/prod", fn, {2, 3, 4}, t, l, ++seed, 1e-5, 1e-6, Domain::kSmallInt);
        }
      }
      // Against the reference (keepdim, so the shapes line up).
      Operand x = MakeOperand({2, 3, 4}, t, Layout::kContiguous, Domain::kSmallInt, ++seed);
      std::vector<int64_t> sorted;
      for (int64_t d : dims) sorted.push_back(d < 0 ? d + 3 : d);
      if (sorted.empty()) sorted = {0, 1, 2};
      const std::vector<double> mn =
          RefReduce(x.host, sorted, INFINITY, [](double a, double b) { return std::min(a, b); });
      const std::vector<double> pr =
          RefReduce(x.host, sorted, 1, [](double a, double b) { return a * b; });
      EXPECT_EQ(AsDoubles(min(x.host, dims, true)), mn) << dtype_name(t);
      EXPECT_EQ(AsDoubles(prod(x.host, dims, true)), pr) << dtype_name(t);
    }
    const DType pt = t == DType::f32 ? DType::f32 : DType::i64;
    EXPECT_EQ(prod(zeros({2}, t, Host())).dtype(), pt);
    EXPECT_EQ(min(zeros({2}, t, Host())).dtype(), t);
  }
  // Size-1 dims, rank 0, and empty dims: prod of nothing is 1; min of nothing is an Error.
  for (DType t : {DType::f32, DType::i64}) {
    auto fn = [](const Tensor& x) {
      return std::vector<Tensor>{prod(x, {1}), prod(x), min(x, {0}, true)};
    };
    Check("prod over empty", fn, {2, 0}, t, Layout::kContiguous, ++seed);
    Check(
        "min/prod of rank 0",
        [](const Tensor& x) {
          return std::vector<Tensor>{min(x), prod(x)};
        },
        {}, t, Layout::kContiguous, ++seed);
    Check(
        "min/prod of size 1",
        [](const Tensor& x) {
          return std::vector<Tensor>{min(x, {0, 2}), prod(x, {1})};
        },
        {1, 5, 1}, t, Layout::kContiguous, ++seed);
  }
  EXPECT_EQ(prod(zeros({2, 0}, DType::f32, Cl()), {1}).to_vector<float>(),
            (std::vector<float>{1, 1}));
  std::string e = ErrorOf([] { min(zeros({0, 3}, DType::f32, Cl()), {0}); });
  EXPECT_NE(e.find("min"), std::string::npos) << e;
  EXPECT_NE(e.find("empty dim"), std::string::npos) << e;
  e = ErrorOf([] { min(zeros({2, 3}, DType::f32, Cl()), {2}); });
  EXPECT_NE(e.find("dim 2 is out of range"), std::string::npos) << e;
  e = ErrorOf([] { prod(zeros({2, 3}, DType::f32, Cl()), {1, -1}); });
  EXPECT_NE(e.find("repeat"), std::string::npos) << e;
}

// Long rows take the two-stage (partial, then final) reduction; vectors of 16 on the CPU path.
TEST(OpsMoreTest, LongMinAndProdMatchHost) {
  uint64_t seed = 700;
  for (DType t : {DType::f32, DType::i32, DType::i64}) {
    auto fn = [](const Tensor& x) {
      // Products near 1 stay finite over 40000 factors.
      Tensor f = x.dtype() == DType::f32 ? 1.0 + x * 1e-3 : x;
      return std::vector<Tensor>{min(x, {1}), prod(f, {1}), min(x), min(x, {0}, true)};
    };
    Check("long min/prod", fn, {3, 40000}, t, Layout::kContiguous, ++seed, 2e-4, 1e-6);
    Check("long min/prod", fn, {300, 200}, t, Layout::kTransposed, ++seed, 2e-4, 1e-6);
  }
  // Every element NaN in some rows, NaNs mixed in others: NaN is skipped unless all are NaN.
  Check(
      "min of specials", [](const Tensor& x) { return std::vector<Tensor>{min(x, {1})}; }, {40, 7},
      DType::f32, Layout::kContiguous, 1, 0, 0, Domain::kSpecial);
  const std::vector<float> v = {NAN, NAN, NAN, 1.0f, NAN, -INFINITY};
  for (Device d : {Host(), Cl()}) {
    const std::vector<float> m = min(tensor(v, {2, 3}, d), {1}).to_vector<float>();
    EXPECT_TRUE(std::isnan(m[0])) << d.str();
    EXPECT_EQ(m[1], -INFINITY) << d.str();
  }
}

// ---------------------------------------------------------------------------------------------
// argmax, argmin

// The first index of the extremum along the last dim of [rows, n] values; a row with NaN gives
// its first NaN (NumPy).
std::vector<int64_t> RefArg(const std::vector<double>& v, int64_t n, bool max_wanted) {
  std::vector<int64_t> out;
  for (size_t r = 0; n > 0 && r < v.size() / n; ++r) {
    int64_t best = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double a = v[r * n + j];
      const double b = v[r * n + best];
      if (std::isnan(b)) break;
      if (std::isnan(a) || (max_wanted ? a > b : a < b)) best = j;
    }
    out.push_back(best);
  }
  return out;
}

TEST(OpsMoreTest, ArgmaxArgminMatchReferenceAndHost) {
  uint64_t seed = 800;
  for (DType t : {DType::f32, DType::i32, DType::i64, DType::boolean}) {
    for (Domain domain : {Domain::kSmallInt, Domain::kAny, Domain::kSpecial}) {
      if (domain == Domain::kSpecial && t != DType::f32) continue;
      for (Layout l : {Layout::kContiguous, Layout::kTransposed, Layout::kLazy}) {
        Operand x = MakeOperand({6, 9}, t, l, domain, ++seed);
        for (int64_t dim : {1, -1, 0}) {
          for (bool keepdim : {false, true}) {
            auto fn = [&](const Tensor& v) {
              return std::vector<Tensor>{argmax(v, dim, keepdim), argmin(v, dim, keepdim)};
            };
            const std::vector<Tensor> want = fn(x.host);
            const std::vector<Tensor> got = fn(x.device);
            for (int i = 0; i < 2; ++i) {
              ASSERT_EQ(want[i].dtype(), DType::i64);
              EXPECT_TRUE(Near(want[i], got[i], 0, 0))
                  << dtype_name(t) << " dim " << dim << " " << LayoutName(l);
            }
            // Reference along the last dim of the (transposed for dim 0) values.
            const Tensor rows = dim == 0 ? transpose(x.host, 0, 1) : x.host;
            const std::vector<double> vals = AsDoubles(cast(rows, DType::f32));
            const int64_t n = rows.size(1);
            EXPECT_EQ(want[0].to_vector<int64_t>(), RefArg(vals, n, true));
            EXPECT_EQ(want[1].to_vector<int64_t>(), RefArg(vals, n, false));
            if (keepdim) {
              EXPECT_EQ(want[0].size(dim), 1);
            }
          }
        }
      }
    }
  }
  // Long rows (two-stage reductions), size-1 dims, rank 0.
  auto fn = [](const Tensor& x) {
    return std::vector<Tensor>{argmax(x, 1), argmin(x, 0), argmax(x, -1, true)};
  };
  Check("long argmax", fn, {3, 40000}, DType::f32, Layout::kContiguous, ++seed, 0, 0,
        Domain::kSmallInt);
  Check("argmax of size 1", fn, {1, 1}, DType::f32, Layout::kContiguous, ++seed);
  EXPECT_EQ(argmax(full({}, 3, DType::f32, Cl()), 0).item<int64_t>(), 0);
  EXPECT_EQ(argmax(full({}, 3, DType::f32, Cl()), 0).dim(), 0);
  // Ties take the first index; NaN wins (NumPy).
  const std::vector<float> v = {1, 5, 5, 0, NAN, 9, NAN, 2, -1, -1, -1, -1};
  for (Device d : {Host(), Cl()}) {
    const Tensor x = tensor(v, {3, 4}, d);
    EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0})) << d.str();
    EXPECT_EQ(argmin(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 0})) << d.str();
  }
  std::string e = ErrorOf([] { argmax(zeros({2, 0}, DType::f32, Cl()), 1); });
  EXPECT_NE(e.find("argmax"), std::string::npos) << e;
  EXPECT_NE(e.find("empty dim 1"), std::string::npos) << e;
  e = ErrorOf([] { argmin(zeros({2, 3}, DType::f32, Cl()), 2); });
  EXPECT_NE(e.find("argmin"), std::string::npos) << e;
  EXPECT_NE(e.find("dim 2 is out of range"), std::string::npos) << e;
  e = ErrorOf([] { argmax(zeros({}, DType::f32, Cl()), 1); });
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
}

// ---------------------------------------------------------------------------------------------
// cumsum

TEST(OpsMoreTest, CumsumMatchesReferenceAndHost) {
  uint64_t seed = 900;
  for (DType t : {DType::f32, DType::i32, DType::i64, DType::boolean}) {
    for (const Shape& s :
         {Shape{5, 7}, Shape{2, 3, 4}, Shape{1, 1}, Shape{0, 3}, Shape{3, 0}, Shape{40, 50}}) {
      for (Layout l : {Layout::kContiguous, Layout::kTransposed, Layout::kLazy}) {
        for (int64_t dim = 0; dim < static_cast<int64_t>(s.size()); ++dim) {
          Operand x = MakeOperand(s, t, l, Domain::kAny, ++seed);
          const Tensor want = cumsum(x.host, dim);
          const Tensor got = cumsum(x.device, dim);
          ASSERT_EQ(want.dtype(), t == DType::f32 ? DType::f32 : DType::i64);
          EXPECT_TRUE(Near(want, got, 1e-5, 1e-5)) << dtype_name(t) << ShapeStr(s) << " " << dim;
          // Reference: running sums along the last dim of the values moved there.
          const int64_t last = static_cast<int64_t>(s.size()) - 1;
          const Tensor moved = dim == last ? x.host : transpose(x.host, dim, -1);
          const Tensor w = dim == last ? want : transpose(want, dim, -1);
          const std::vector<double> in = AsDoubles(cast(moved, DType::f32));
          const std::vector<double> out = AsDoubles(cast(w, DType::f32));
          const int64_t n = s[dim];
          double acc = 0;
          for (size_t i = 0; i < in.size(); ++i) {
            if (static_cast<int64_t>(i) % n == 0) acc = 0;
            acc += in[i];
            EXPECT_NEAR(out[i], acc, 1e-5 * (1 + std::fabs(acc))) << i;
          }
        }
      }
    }
  }
  // A long row (one work-item runs it), a fused operand, integers that wrap.
  auto fused = [](const Tensor& x) {
    return std::vector<Tensor>{cumsum(x * 2.0 + 1.0, 1), cumsum(x, 0)};
  };
  Check("long cumsum", fused, {2, 50000}, DType::f32, Layout::kContiguous, ++seed, 1e-4, 1e-3);
  Check(
      "cumsum of i64", [](const Tensor& x) { return std::vector<Tensor>{cumsum(x * x, 0)}; },
      {3, 70}, DType::i64, Layout::kTransposed, ++seed, 0, 0);
  for (Device d : {Host(), Cl()}) {
    const Tensor w = tensor(std::vector<int64_t>{INT64_MAX, 1, 1}, {3}, d);
    EXPECT_EQ(cumsum(w, 0).to_vector<int64_t>(),
              (std::vector<int64_t>{INT64_MAX, INT64_MIN, INT64_MIN + 1}))
        << d.str();
  }
  EXPECT_EQ(cumsum(full({}, 2, DType::i32, Cl()), 0).item<int64_t>(), 2);
  std::string e = ErrorOf([] { cumsum(zeros({2, 3}, DType::f32, Cl()), -3); });
  EXPECT_NE(e.find("cumsum"), std::string::npos) << e;
  EXPECT_NE(e.find("dim -3 is out of range"), std::string::npos) << e;
}

// ---------------------------------------------------------------------------------------------
// topk

// The reference: indices of [rows, n] values sorted by (value descending, index ascending), NaN
// ranking as +inf; the first k of each row.
std::vector<int64_t> RefTopk(const std::vector<double>& v, int64_t n, int64_t k) {
  std::vector<int64_t> out;
  for (size_t r = 0; n > 0 && r < v.size() / n; ++r) {
    std::vector<int64_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    auto key = [&](int64_t j) {
      const double x = v[r * n + j];
      return std::isnan(x) ? INFINITY : x;
    };
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return key(a) > key(b); });
    out.insert(out.end(), idx.begin(), idx.begin() + k);
  }
  return out;
}

TEST(OpsMoreTest, TopkMatchesReferenceAndHost) {
  uint64_t seed = 1000;
  for (DType t : {DType::f32, DType::i32, DType::i64}) {
    for (Domain domain : {Domain::kSmallInt, Domain::kAny, Domain::kSpecial}) {
      if (domain == Domain::kSpecial && t != DType::f32) continue;
      for (Layout l : {Layout::kContiguous, Layout::kTransposed}) {
        for (int64_t k : {0, 1, 3, 7}) {
          for (int64_t dim : {-1, 0}) {
            Operand x = MakeOperand({7, 7}, t, l, domain, ++seed);
            auto [wv, wi] = topk(x.host, k, dim);
            auto [gv, gi] = topk(x.device, k, dim);
            ASSERT_EQ(wv.dtype(), t);
            ASSERT_EQ(wi.dtype(), DType::i64);
            EXPECT_TRUE(Near(wv, gv, 0, 0)) << "k " << k << " dim " << dim;
            EXPECT_TRUE(Near(wi, gi, 0, 0)) << "k " << k << " dim " << dim;
            const Tensor rows = dim == 0 ? transpose(x.host, 0, 1) : x.host;
            const std::vector<double> vals = AsDoubles(cast(rows, DType::f32));
            const std::vector<int64_t> want = RefTopk(vals, 7, k);
            const Tensor wi_rows = dim == 0 ? transpose(wi, 0, 1) : wi;
            const Tensor wv_rows = dim == 0 ? transpose(wv, 0, 1) : wv;
            EXPECT_EQ(wi_rows.to_vector<int64_t>(), want) << "k " << k << " dim " << dim;
            const std::vector<double> got_values = AsDoubles(cast(wv_rows, DType::f32));
            for (size_t i = 0; i < want.size(); ++i) {
              const double w = vals[(i / k) * 7 + want[i]];
              EXPECT_TRUE(got_values[i] == w || (std::isnan(w) && std::isnan(got_values[i]))) << i;
            }
          }
        }
      }
    }
  }
  // A long row (the vocabulary of a sampler) and k = n.
  auto fn = [](const Tensor& x) {
    auto [v, i] = topk(x, 5);
    return std::vector<Tensor>{v, i};
  };
  Check("topk of a long row", fn, {2, 5000}, DType::f32, Layout::kContiguous, ++seed, 0, 0);
  auto all = [](const Tensor& x) {
    auto [v, i] = topk(x, 4, 1);
    return std::vector<Tensor>{v, i};
  };
  Check("topk k = n", all, {3, 4, 2}, DType::f32, Layout::kContiguous, ++seed, 0, 0,
        Domain::kSmallInt);
  Tensor x = zeros({3, 4}, DType::f32, Cl());
  std::string e = ErrorOf([&] { topk(x, 5); });
  EXPECT_NE(e.find("topk"), std::string::npos) << e;
  EXPECT_NE(e.find("k = 5 is out of range"), std::string::npos) << e;
  EXPECT_NE(e.find("0 <= k <= 4"), std::string::npos) << e;
  e = ErrorOf([&] { topk(x, -1); });
  EXPECT_NE(e.find("k = -1"), std::string::npos) << e;
  e = ErrorOf([&] { topk(x, 1, 2); });
  EXPECT_NE(e.find("dim 2 is out of range"), std::string::npos) << e;
  e = ErrorOf([] { topk(zeros({3}, DType::boolean, Cl()), 1); });
  EXPECT_NE(e.find("bool"), std::string::npos) << e;
  e = ErrorOf([] { topk(zeros({}, DType::f32, Cl()), 1); });
  EXPECT_NE(e.find("rank >= 1"), std::string::npos) << e;
}

// Sums and maxima over leading dims that keep the last one (a bias's gradient, a column
// statistic). The CPU strategy reduces 16 neighbouring columns per work-item as one vector
// (emit_reduce.cpp, EmitColumns) and the columns past the last whole 16 one at a time; rows of
// 15 or fewer columns, views it cannot read 16 at a time (transposed) and the GPU strategy take
// the one-output-per-item kernel. Every case against the host on the same values.
TEST(OpsMoreTest, ReductionsThatKeepTheLastDimMatchHost) {
  const Shape shapes[] = {{300, 1000}, {7, 17},    {5, 16},    {9, 15},    {0, 32},
                          {1, 48},     {3, 5, 40}, {4, 6, 33}, {2, 1, 64}, {6, 0, 20}};
  uint64_t seed = 900;
  for (const Shape& s : shapes) {
    const bool empty = s[0] == 0 || (s.size() > 2 && s[1] == 0);
    for (Layout l : {Layout::kContiguous, Layout::kTransposed, Layout::kLazy}) {
      Check(
          "sum over dim 0",
          [](const Tensor& x) {
            return std::vector<Tensor>{sum(x, {0}), sum(x, {0}, true)};
          },
          s, DType::f32, l, ++seed, 1e-4, 1e-4);
      // x times a broadcast row of its own column maxima (an Expand that keeps the last dim),
      // then summed over the rows.
      if (!empty) {
        Check(
            "max over dim 0, and a sum of x scaled by it",
            [](const Tensor& x) {
              const Tensor m = max(x, {0}, true);
              return std::vector<Tensor>{max(x, {0}), sum(relu(x) * m + x, {0})};
            },
            s, DType::f32, l, ++seed, 1e-4, 1e-4);
        // x times a statistic of its own row (broadcast along the last dim: one value for the
        // 16 columns a work-item reduces), then summed over the rows: RMSNorm's weight gradient.
        Check(
            "a sum over rows of x scaled by its row's statistic",
            [](const Tensor& x) {
              const Tensor ms = rsqrt(mean(x * x, {-1}, true) + 1e-5);
              return std::vector<Tensor>{sum(x * ms, {0}), sum(exp(x * 0.1) / ms, {0}, true)};
            },
            s, DType::f32, l, ++seed, 1e-4, 1e-4);
      }
      if (s.size() == 3) {
        Check(
            "sum over the leading dims, and over the middle one",
            [](const Tensor& x) {
              return std::vector<Tensor>{sum(x, {0, 1}), sum(x, {1})};
            },
            s, DType::f32, l, ++seed, 1e-4, 1e-4);
      }
    }
  }
}

// Elementwise chains stored by the matmul kernel (epilogues). The CPU strategy evaluates a
// chain that has a vector form 16 columns at a time on whole panels and one at a time at the
// edges (emit_matmul.cpp, lc_epilogue16): the bias of a layer, relu's gradient (a comparison
// of stored values at the element's index), SGD's update of a detached gradient, a batched
// product, SwiGLU's silu gate; a per-row scale has no vector form and stays scalar; dual
// products (two products of one A read by one chain, matmul_cpu.cl's LC_DUAL: K past a panel's
// depth, N at and between panel edges, batched, through row splits). Against the host, with
// sizes at and between the panel edges. On the GPU strategy (ops_more_gpu_test) 70 x 260 x 200
// takes matmul.cl's 4 x 4 register blocks (8 or more 64-square blocks), with ragged edges and,
// in x^T @ g, a transposed A read in place.
TEST(OpsMoreTest, MatmulEpiloguesMatchHost) {
  struct Case {
    int64_t m, k, n;
  };
  const Case cases[] = {{70, 300, 45},  {33, 64, 64}, {17, 20, 100}, {1, 5, 16},
                        {40, 513, 130}, {9, 7, 1},    {0, 4, 32},    {70, 260, 200}};
  uint64_t seed = 1000;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n));
    auto pair = [&](const Shape& s) {
      const Tensor h = randn(s, ++seed, DType::f32, Host());
      return std::make_pair(h, h.to(Cl()));
    };
    const auto [xh, xd] = pair({c.m, c.k});
    const auto [wh, wd] = pair({c.k, c.n});
    const auto [bh, bd] = pair({c.n});
    const auto [hh, hd] = pair({c.m, c.n});  // a stored activation
    const auto [gh, gd] = pair({c.m, c.n});  // the gradient of the layer's output
    const auto [sh, sd] = pair({c.m, 1});
    const auto [ah, ad] = pair({3, c.m, c.k});
    const auto [ch, cd] = pair({3, c.k, c.n});
    const auto [x3h, x3d] = pair({2, c.m, c.k});  // [B, T, K] @ [K, N]: run as [B * T, K] @ ...
    const auto [r3h, r3d] = pair({2, c.m, c.n});  // ... and read back through a row split
    const auto [w2h, w2d] = pair({c.k, c.n});     // a second product of x: dual products
    const auto [c2h, c2d] = pair({3, c.k, c.n});
    auto run = [&](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& h,
                   const Tensor& g, const Tensor& s, const Tensor& a, const Tensor& cc,
                   const Tensor& x3, const Tensor& r3, const Tensor& w2, const Tensor& c2) {
      const Tensor layer = relu(matmul(x, w) + b);
      const Tensor dh = where(gt(h, 0.0), matmul(x, w), 0.0);
      const Tensor sgd = w - matmul(transpose(x, 0, 1), g).detach() * 0.01;
      const Tensor batched = matmul(a, cc) * 0.5 + b;
      const Tensor per_row = matmul(x, w) * s;
      const Tensor swiglu = silu(matmul(x, w)) * g;  // SwiGLU's gate
      const Tensor residual = r3 + matmul(x3, w) * 0.5 + b;
      const Tensor dual = silu(matmul(x, w)) * matmul(x, w2);  // SwiGLU at inference
      // Scaled so that the sum with r3 does not cancel digits beyond the tolerance.
      const Tensor dual3 = r3 + silu(matmul(x3, w2)) * matmul(x3, w) * s * 0.01;
      const Tensor dual_batched = matmul(a, cc) - matmul(a, c2) * 0.25 + b;
      const std::vector<Tensor> out = {layer,  dh,       sgd,  batched, per_row,
                                       swiglu, residual, dual, dual3,   dual_batched};
      for (const Tensor& t : out) sync({t});  // each its own graph: its own matmul and chain
      return out;
    };
    const std::vector<Tensor> want = run(xh, wh, bh, hh, gh, sh, ah, ch, x3h, r3h, w2h, c2h);
    const std::vector<Tensor> got = run(xd, wd, bd, hd, gd, sd, ad, cd, x3d, r3d, w2d, c2d);
    const char* names[] = {"relu(x @ w + b)",
                           "where(h > 0, x @ w, 0)",
                           "w - 0.01 (x^T @ g)",
                           "(a @ c) * 0.5 + b",
                           "(x @ w) * s",
                           "silu(x @ w) * g",
                           "r + (x3 @ w) * 0.5 + b",
                           "silu(x @ w) * (x @ w2)",
                           "r + silu(x3 @ w2) * (x3 @ w) * s * 0.01",
                           "a @ c - (a @ c2) * 0.25 + b"};
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(got[i].device().is_opencl()) << names[i];
      EXPECT_TRUE(Near(want[i], got[i], 1e-4, 2e-4)) << names[i];
    }
  }
}

// Grouped-query attention's repeated keys and values read by the matmul in place: a batch of
// [b, kv, rep] whose rep level has stride 0 (unsqueeze, broadcast, merge the leading dims) is
// two levels of batch strides, and past two levels (b > 1 over a permuted value) a copy. Scores
// q k^T and the weighted values p v against the host, with kv heads of 1, 2 and 3, batches of
// 1 and 3, and a size-1 repeat.
TEST(OpsMoreTest, RepeatedHeadsReadInPlaceMatchHost) {
  struct Case {
    int64_t b, kv, rep, t, d;
  };
  const Case cases[] = {
      {1, 2, 2, 16, 8}, {3, 2, 2, 5, 4}, {1, 1, 4, 7, 3}, {2, 3, 1, 9, 16}, {1, 2, 3, 33, 17}};
  uint64_t seed = 1300;
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.b, " ", c.kv, " ", c.rep, " ", c.t, " ", c.d));
    const int64_t h = c.kv * c.rep;
    auto pair = [&](const Shape& s) {
      const Tensor x = randn(s, ++seed, DType::f32, Host());
      return std::make_pair(x, x.to(Cl()));
    };
    const auto [qh, qd] = pair({c.b, h, c.t, c.d});
    const auto [kh, kd] = pair({c.b, c.kv, c.t, c.d});
    const auto [vh, vd] = pair({c.b, c.t, c.kv * c.d});  // [b, t, kv * d]: heads by permute
    auto run = [&](const Tensor& q, const Tensor& k, const Tensor& v_rows) {
      auto repeat = [&](const Tensor& x) {
        return reshape(broadcast_to(unsqueeze(x, 2), {c.b, c.kv, c.rep, c.t, c.d}),
                       {c.b, h, c.t, c.d});
      };
      const Tensor v = permute(reshape(v_rows, {c.b, c.t, c.kv, c.d}), {0, 2, 1, 3});
      const Tensor scores = matmul(q, transpose(repeat(k), -1, -2));
      const Tensor weights = softmax(scores, -1);
      return std::vector<Tensor>{scores, matmul(weights, repeat(v)),
                                 matmul(transpose(repeat(k), -1, -2), q * 0.5)};
    };
    const std::vector<Tensor> want = run(qh, kh, vh), got = run(qd, kd, vd);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(got[i].device().is_opencl()) << i;
      EXPECT_TRUE(Near(want[i], got[i], 1e-4, 1e-4)) << i;
    }
  }
}

// A product whose only reader is a permute that keeps the last dim is stored by the matmul
// kernel straight into the permute's layout (attention's [b, h, t, d] -> [b, t, h, d] before
// the output projection; batch strides of two levels, views.h PermutedStore). Against the host:
// the attention layout with batches of 1 and 3, a permute of the batch dims alone, one that
// moves the last dim (a copy), a product with a second reader (stored contiguously), and a
// product over K past one panel.
TEST(OpsMoreTest, ProductsStoredThroughAPermuteMatchHost) {
  struct Case {
    int64_t b, h, t, k, d;
  };
  const Case cases[] = {{1, 4, 16, 16, 8}, {3, 2, 5, 7, 4}, {2, 3, 33, 600, 17}, {1, 1, 1, 1, 1}};
  uint64_t seed = 1400;
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.b, " ", c.h, " ", c.t, " ", c.k, " ", c.d));
    auto pair = [&](const Shape& s) {
      const Tensor x = randn(s, ++seed, DType::f32, Host());
      return std::make_pair(x, x.to(Cl()));
    };
    const auto [ph, pd] = pair({c.b, c.h, c.t, c.k});
    const auto [vh, vd] = pair({c.b, c.h, c.k, c.d});
    const auto [wh, wd] = pair({c.h * c.d, 5});
    auto run = [&](const Tensor& p, const Tensor& v, const Tensor& w) {
      const Tensor heads = permute(matmul(p, v), {0, 2, 1, 3});
      const Tensor projected = matmul(reshape(heads, {c.b * c.t, c.h * c.d}), w);
      const Tensor swapped = permute(matmul(p * 2.0, v), {1, 0, 2, 3});
      const Tensor last_moved = permute(matmul(p, v * 0.5), {0, 1, 3, 2});
      const Tensor shared = matmul(p, v + 1.0);
      return std::vector<Tensor>{heads * 1.0, projected, swapped + 0.0, last_moved * 1.0,
                                 permute(shared, {0, 2, 1, 3}) + sum(shared, {}, false)};
    };
    const std::vector<Tensor> want = run(ph, vh, wh), got = run(pd, vd, wd);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(got[i].device().is_opencl()) << i;
      EXPECT_TRUE(Near(want[i], got[i], 1e-4, 1e-3)) << i;
    }
  }
}

// Products that share their A operand run as one grouped kernel on the CPU strategy (q, k and
// v of one x; SwiGLU's two products; matmul_cpu.cl's groups): against the host, with widths
// that are not whole panels, a transposed B, batched products, a B computed in the same graph
// after the first product (not grouped: it is not ready when the group runs), and more than
// four products sharing A (groups of at most four).
TEST(OpsMoreTest, ProductsSharingAnOperandMatchHost) {
  struct Case {
    int64_t b, m, k;
  };
  const Case cases[] = {{1, 64, 128}, {3, 5, 7}, {1, 1, 1}, {2, 33, 300}};
  uint64_t seed = 1500;
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.b, " ", c.m, " ", c.k));
    auto pair = [&](const Shape& s) {
      const Tensor x = randn(s, ++seed, DType::f32, Host());
      return std::make_pair(x, x.to(Cl()));
    };
    const int64_t widths[] = {45, 17, 100, 32, 64, 1};
    std::vector<Tensor> wh, wd;
    for (int64_t n : widths) {
      auto [h, d] = pair({c.b, c.k, n});
      wh.push_back(h);
      wd.push_back(d);
    }
    const auto [xh, xd] = pair({c.b, c.m, c.k});
    const auto [th, td] = pair({c.b, 24, c.k});  // read transposed
    auto run = [&](const Tensor& x, const std::vector<Tensor>& w, const Tensor& t) {
      std::vector<Tensor> out;
      for (const Tensor& wi : w) out.push_back(matmul(x, wi));
      out.push_back(matmul(x, transpose(t, 1, 2)));
      out.push_back(matmul(x, relu(w[0]) * 2.0));  // B computed after the products above
      return out;
    };
    const std::vector<Tensor> want = run(xh, wh, th), got = run(xd, wd, td);
    sync(got);  // one graph: the products group
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(got[i].device().is_opencl()) << i;
      EXPECT_TRUE(Near(want[i], got[i], 1e-4, 1e-3)) << i;
    }
  }
}

// Elementwise kernels that read memory at another index than the element's (a transposed view,
// a broadcast row, slices and cat) over rows of whole vectors: on the CPU strategy one row of
// the last dim per work-group (emit_elementwise.cpp, FinishRows). Against the host, with rows
// of 16, 32, 48 and 64, size-1 dims, the rotary embedding's slice-and-cat (halves of one width:
// one launch) and a cat of pieces of two widths.
TEST(OpsMoreTest, ElementwiseOverViewsWithWholeVectorRowsMatchesHost) {
  const Shape shapes[] = {{3, 5, 32}, {2, 64}, {4, 1, 48}, {7, 16}, {1, 1, 16}, {2, 3, 4, 32}};
  uint64_t seed = 1200;
  for (const Shape& s : shapes) {
    for (Layout l : {Layout::kContiguous, Layout::kTransposed, Layout::kLazy}) {
      Check(
          "views, broadcasts and the rotary embedding's cat",
          [](const Tensor& x) {
            const int64_t d = x.shape().back(), half = d / 2;
            const Tensor x1 = slice(x, -1, 0, half), x2 = slice(x, -1, half, d);
            const Tensor c = cos(x1), sn = sin(x2);
            const Tensor rotated = cat({x1 * c - x2 * sn, x2 * c + x1 * sn}, -1);
            // Grouped-query attention's repeat: unsqueeze, broadcast, merge the leading dims.
            Shape wide = x.shape();
            wide.insert(wide.begin() + 1, 2);
            Shape merged = x.shape();
            merged[0] *= 2;
            const Tensor repeated = reshape(broadcast_to(unsqueeze(rotated, 1), wide), merged);
            // A cat of pieces of different widths (16 and d - 16 columns; one launch each).
            const Tensor rolled = cat({slice(x, -1, d - 16, d), slice(x, -1, 0, d - 16)}, -1);
            return std::vector<Tensor>{
                x * 2.0 + sum(x, {0}, true),  rotated,        cat({x2, x1}, -1) - x,
                relu(x) * max(x, {-1}, true), repeated * 1.0, rolled * sigmoid(x)};
          },
          s, DType::f32, l, ++seed, 1e-5, 1e-5);
    }
  }
}

}  // namespace
}  // namespace lazycl::more
