// What the op tables buy. Each pass keeps one row per IR op (ir/op_table.h): the static_asserts
// beside the tables make a missing row a compile error; here the host row of every elementwise
// op is checked, on random and edge-case inputs of every dtype the IR's dtype rules admit,
// against a plain C++ formula written below (a rule admitting a dtype the formula does not
// cover, or the reverse, fails too). Then the composites (neg, sub: no IR op of their own) keep
// the semantics their ops had, on the host and on the device, and the measured reasons that keep
// Sigmoid and Relu primitives.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/host_memory.h"
#include "frontend/tensor_impl.h"
#include "gtest/gtest.h"
#include "ir/ir.h"
#include "lazycl/lazycl.h"
#include "runtime/host_eval.h"
#include "runtime/storage.h"
#include "test_util.h"

namespace lazycl {
namespace {

using ir::NodePtr;
using ir::Op;
using test::ErrorOf;
using test::Has;

using Bool = uint8_t;

template <typename T>
DType DTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  if constexpr (std::is_same_v<T, int32_t>) return DType::i32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::i64;
  return DType::boolean;
}

// Random values of T with its edge cases among them: signed zeros, infinities and NaN for f32,
// the minimum and maximum for integers.
template <typename T>
std::vector<T> Values(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<T> v;
  if constexpr (std::is_same_v<T, float>) {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    v = {0.0f, -0.0f, 1.0f, -1.0f, kInf, -kInf, std::numeric_limits<float>::quiet_NaN(), 0.5f};
    std::uniform_real_distribution<float> d(-4.0f, 4.0f);
    while (v.size() < 64) v.push_back(d(rng));
  } else if constexpr (std::is_same_v<T, Bool>) {
    while (v.size() < 64) v.push_back(static_cast<Bool>(rng() & 1));
  } else {
    v = {0, 1, -1, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()};
    std::uniform_int_distribution<T> d(-1000, 1000);
    while (v.size() < 64) v.push_back(d(rng));
  }
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

template <typename T>
NodePtr HostLeaf(const std::vector<T>& data) {
  backend::BufferManager& memory = backend::HostMemory();
  const size_t bytes = data.size() * sizeof(T);
  auto storage = std::make_shared<ir::Storage>(Device::host(), &memory, bytes, "test input");
  EXPECT_TRUE(memory.Upload(storage->id(), data.data(), 0, bytes).ok());
  return ir::MakeBuffer(std::move(storage), DTypeOf<T>(), {static_cast<int64_t>(data.size())});
}

template <typename R>
std::vector<R> Evaluate(const NodePtr& node) {
  absl::StatusOr<std::shared_ptr<ir::Storage>> result = runtime::EvaluateOnHost(node);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  std::vector<R> out(ir::NumElements(node->shape));
  EXPECT_TRUE(
      (*result)->manager().Download((*result)->id(), out.data(), 0, out.size() * sizeof(R)).ok());
  return out;
}

// Two's complement arithmetic, in the unsigned type.
template <typename T>
T Wrap(uint64_t x) {
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(x));
}

// The formulas: nullopt where the op does not take T. Unary and binary ops give T, comparisons
// bool; Where is checked on its own.
template <typename T>
std::optional<T> UnaryFormula(Op op, T x) {
  if constexpr (std::is_same_v<T, float>) {
    switch (op) {
      case Op::kExp:
        return std::exp(x);
      case Op::kLog:
        return std::log(x);
      case Op::kSqrt:
        return std::sqrt(x);
      case Op::kTanh:
        return std::tanh(x);
      case Op::kSigmoid:
        return 1.0f / (1.0f + std::exp(-x));
      case Op::kRelu:
        return x > 0 ? x : 0.0f;
      case Op::kAbs:
        return std::fabs(x);
      case Op::kSin:
        return std::sin(x);
      case Op::kCos:
        return std::cos(x);
      case Op::kErf:
        return std::erf(x);
      case Op::kRsqrt:
        return 1.0f / std::sqrt(x);
      case Op::kSilu:
        return x / (1.0f + std::exp(-x));
      case Op::kGelu:
        return 0.5f * x * (1.0f + std::erf(x * 0.70710678f));
      case Op::kGeluTanh:
        return x / (1.0f + std::exp(-1.5957691216f * (x + 0.044715f * x * x * x)));
      default:
        return std::nullopt;
    }
  } else if constexpr (std::is_same_v<T, Bool>) {
    if (op == Op::kNot) return static_cast<Bool>(x == 0);
    return std::nullopt;
  } else {
    if (op == Op::kAbs) return x < 0 ? Wrap<T>(0 - static_cast<uint64_t>(x)) : x;
    if (op == Op::kRelu) return x > 0 ? x : T{0};
    return std::nullopt;
  }
}

template <typename T>
std::optional<T> BinaryFormula(Op op, T a, T b) {
  if constexpr (std::is_same_v<T, float>) {
    switch (op) {
      case Op::kAdd:
        return a + b;
      case Op::kMul:
        return a * b;
      case Op::kDiv:
        return a / b;
      case Op::kMaximum:
        return std::fmax(a, b);
      case Op::kMinimum:
        return std::fmin(a, b);
      case Op::kPow:
        return std::pow(a, b);
      default:
        return std::nullopt;
    }
  } else if constexpr (std::is_same_v<T, Bool>) {
    return std::nullopt;
  } else {
    const uint64_t ua = static_cast<uint64_t>(a);
    const uint64_t ub = static_cast<uint64_t>(b);
    switch (op) {
      case Op::kAdd:
        return Wrap<T>(ua + ub);
      case Op::kMul:
        return Wrap<T>(ua * ub);
      case Op::kMaximum:
        return std::max(a, b);
      case Op::kMinimum:
        return std::min(a, b);
      default:
        return std::nullopt;
    }
  }
}

template <typename T>
std::optional<Bool> CompareFormula(Op op, T a, T b) {
  switch (op) {
    case Op::kLt:
      return a < b;
    case Op::kLe:
      return a <= b;
    case Op::kGt:
      return a > b;
    case Op::kGe:
      return a >= b;
    case Op::kEq:
      return a == b;
    case Op::kNe:
      return a != b;
    default:
      return std::nullopt;
  }
}

template <typename T>
bool Same(T a, T b) {
  if constexpr (std::is_same_v<T, float>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return a == b && std::signbit(a) == std::signbit(b);
  }
  return a == b;
}

// Checks `op` on operands of T against its formula. Returns whether the IR admitted it.
template <typename T>
bool CheckOn(Op op) {
  const std::vector<T> a = Values<T>(1 + static_cast<uint32_t>(op));
  const std::vector<T> b = Values<T>(100 + static_cast<uint32_t>(op));
  const std::vector<Bool> cond = Values<Bool>(200);
  const std::string what = absl::StrCat(ir::OpName(op), " on ", dtype_name(DTypeOf<T>()));
  absl::StatusOr<NodePtr> node;
  switch (ir::Category(op)) {
    case ir::OpCategory::Unary:
      node = ir::MakeUnary(op, HostLeaf(a));
      break;
    case ir::OpCategory::Binary:
    case ir::OpCategory::Compare:
      node = ir::MakeBinary(op, HostLeaf(a), HostLeaf(b));
      break;
    case ir::OpCategory::Ternary:
      node = ir::MakeWhere(HostLeaf(cond), HostLeaf(a), HostLeaf(b));
      break;
    default:
      ADD_FAILURE() << what << ": not elementwise";
      return false;
  }
  auto expect = [&](auto formula, const auto& got) {
    for (size_t i = 0; i < a.size(); ++i) {
      auto want = formula(i);
      if (!want.has_value()) {
        ADD_FAILURE() << what << ": the IR admits it but the test has no formula";
        return;
      }
      EXPECT_TRUE(Same(got[i], *want))
          << what << " element " << i << ": got " << +got[i] << ", want " << +*want;
    }
  };
  if (!node.ok()) {
    // Rejected: then there must be no formula either.
    bool formula = false;
    if (ir::Category(op) == ir::OpCategory::Unary) formula = UnaryFormula(op, a[0]).has_value();
    if (ir::Category(op) == ir::OpCategory::Binary)
      formula = BinaryFormula(op, a[0], b[0]).has_value();
    EXPECT_FALSE(formula) << what << " has a formula but the IR rejects it: " << node.status();
    return false;
  }
  switch (ir::Category(op)) {
    case ir::OpCategory::Unary:
      expect([&](size_t i) { return UnaryFormula(op, a[i]); }, Evaluate<T>(*node));
      break;
    case ir::OpCategory::Binary:
      expect([&](size_t i) { return BinaryFormula(op, a[i], b[i]); }, Evaluate<T>(*node));
      break;
    case ir::OpCategory::Compare:
      expect([&](size_t i) { return CompareFormula(op, a[i], b[i]); }, Evaluate<Bool>(*node));
      break;
    default:
      expect([&](size_t i) { return std::optional<T>(cond[i] != 0 ? a[i] : b[i]); },
             Evaluate<T>(*node));
  }
  return true;
}

TEST(OpTablesTest, EveryElementwiseOpOnTheHostMatchesItsFormula) {
  int checked = 0;
  int elementwise = 0;
  for (int i = 0; i < ir::kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    // Cast takes a target dtype: host_eval_test pins its conversions. RandomUniform gives f32
    // from i64: random_test checks it against its formula.
    if (!ir::IsElementwise(op) || op == Op::kCast || op == Op::kRandomUniform) continue;
    ++elementwise;
    bool any = CheckOn<float>(op);
    any = CheckOn<int32_t>(op) || any;
    any = CheckOn<int64_t>(op) || any;
    any = CheckOn<Bool>(op) || any;
    EXPECT_TRUE(any) << ir::OpName(op) << " takes no dtype";
    checked += any ? 1 : 0;
  }
  EXPECT_EQ(checked, elementwise);
  EXPECT_GE(elementwise, 20);
}

// neg and sub have no IR op: they are built from Mul and Add.
// Erf came in through the tables alone: a line in ir/op_table.h and a row in each pass's table
// (ir.cpp dtype rule, kernels/op_expr.cpp, runtime/host_eval.cpp, ir/autodiff.cpp), plus its
// public function. Checked against published values of the error function (Abramowitz & Stegun
// table 7.1) on host and device, and its gradient 2/sqrt(pi) exp(-x^2) at the same points.
TEST(OpTablesTest, ErfThroughTheTablesMatchesPublishedValues) {
  const std::vector<float> xs = {0.0f, 0.5f, -1.0f, 1.5f, 3.0f, -0.1f};
  const std::vector<double> want = {0.0,          0.5204998778, -0.8427007929,
                                    0.9661051465, 0.9999779095, -0.1124629160};
  for (Device d : {Device::host(), test::DefaultCl()}) {
    Tensor x = tensor(xs, {6}, d);
    x.requires_grad_();
    Tensor y = erf(x);
    const std::vector<float> got = y.to_vector<float>();
    const std::vector<float> dy = grad(sum(y), {x})[0].to_vector<float>();
    for (size_t i = 0; i < xs.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 2e-7) << d.str() << " erf(" << xs[i] << ")";
      const double slope = 2.0 / std::sqrt(M_PI) * std::exp(-double{xs[i]} * xs[i]);
      EXPECT_NEAR(dy[i], slope, 2e-6 * slope + 1e-12) << d.str() << " erf'(" << xs[i] << ")";
    }
  }
}

TEST(OpTablesTest, CompositesHaveNoOpOfTheirOwn) {
  const Device cl = test::DefaultCl();
  Tensor x = tensor(std::vector<float>{1, -2}, {2}, cl);
  EXPECT_EQ(neg(x).impl()->node->op, Op::kMul);
  EXPECT_EQ((x - x).impl()->node->op, Op::kAdd);
  EXPECT_EQ(relu(x).impl()->node->op, Op::kRelu);
  EXPECT_EQ(sigmoid(x).impl()->node->op, Op::kSigmoid);
}

void ExpectSameFloats(const std::vector<float>& got, const std::vector<float>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(Same(got[i], want[i]))
        << what << " element " << i << ": " << got[i] << " vs " << want[i];
  }
}

TEST(OpTablesTest, CompositesKeepTheSemanticsOfTheOpsTheyReplace) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> xs = {0.0f, -0.0f, 2.5f, -1.0f, nan, inf, -inf};
  const std::vector<float> ys = {0.0f, 0.0f, -0.0f, 3.0f, 1.0f, inf, 2.0f};
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  for (Device d : {Device::host(), test::DefaultCl()}) {
    const std::string on = d.str();
    Tensor x = tensor(xs, {7}, d);
    Tensor y = tensor(ys, {7}, d);
    std::vector<float> neg_want, sub_want, relu_want;
    for (size_t i = 0; i < xs.size(); ++i) {
      neg_want.push_back(-xs[i]);  // neg(+0) is -0
      sub_want.push_back(xs[i] - ys[i]);
      relu_want.push_back(xs[i] > 0 ? xs[i] : 0.0f);  // relu(NaN) = 0, relu(-0) = +0
    }
    ExpectSameFloats(neg(x).to_vector<float>(), neg_want, "neg on " + on);
    ExpectSameFloats((-x).to_vector<float>(), neg_want, "-x on " + on);
    ExpectSameFloats(sub(x, y).to_vector<float>(), sub_want, "sub on " + on);
    ExpectSameFloats(relu(x).to_vector<float>(), relu_want, "relu on " + on);

    // Integers wrap: -INT_MIN == INT_MIN, INT_MIN - 1 == INT_MAX.
    Tensor i = tensor(std::vector<int32_t>{5, kMin, kMax, 0}, {4}, d);
    EXPECT_EQ(neg(i).to_vector<int32_t>(), (std::vector<int32_t>{-5, kMin, -kMax, 0})) << on;
    EXPECT_EQ(sub(i, i * 0 + 1).dtype(), DType::i32);
    EXPECT_EQ(sub(i, i * 0 + 1).to_vector<int32_t>(), (std::vector<int32_t>{4, kMax, kMax - 1, -1}))
        << on;
    EXPECT_EQ(relu(i).to_vector<int32_t>(), (std::vector<int32_t>{5, 0, kMax, 0})) << on;
    Tensor l = tensor(std::vector<int64_t>{kMin64, -3}, {2}, d);
    EXPECT_EQ(neg(l).to_vector<int64_t>(), (std::vector<int64_t>{kMin64, 3})) << on;

    // Bool: sub computes in i32; neg and relu are errors, naming the op as the user called it.
    Tensor b = tensor_bool({0, 1}, {2}, d);
    EXPECT_EQ(sub(b, b).dtype(), DType::i32);
    EXPECT_EQ(sub(b, tensor_bool({1, 0}, {2}, d)).to_vector<int32_t>(),
              (std::vector<int32_t>{-1, 1}));
    EXPECT_TRUE(Has(ErrorOf([&] { neg(b); }),
                    "neg: not defined for bool tensors; cast to an integer or float dtype first"))
        << ErrorOf([&] { neg(b); });
    EXPECT_TRUE(Has(ErrorOf([&] { relu(b); }),
                    "relu: not defined for bool tensors; cast to an integer or float dtype first"))
        << ErrorOf([&] { relu(b); });
  }
}

// The measured reason Sigmoid stays a primitive: the composite 1 / (1 + exp(-x)) has the same
// values, but its chain-rule gradient goes through exp(-x), which overflows below x = -88.7:
// 0 * inf = NaN there, where Sigmoid's own rule g y (1 - y) gives 0 (as PyTorch does).
TEST(OpTablesTest, SigmoidGradientIsZeroWhereTheCompositeGivesNaN) {
  for (Device d : {Device::host(), test::DefaultCl()}) {
    Tensor x = tensor(std::vector<float>{-100, 0, 100}, {3}, d).requires_grad_();
    const std::vector<float> primitive = grad(sum(sigmoid(x)), {x})[0].to_vector<float>();
    EXPECT_EQ(primitive, (std::vector<float>{0, 0.25f, 0})) << d.str();
    Tensor composite = 1.0 / (1.0 + exp(-x));
    ExpectSameFloats(composite.to_vector<float>(), sigmoid(x).to_vector<float>(), d.str());
    const std::vector<float> chain = grad(sum(composite), {x})[0].to_vector<float>();
    EXPECT_TRUE(std::isnan(chain[0])) << d.str() << ": " << chain[0];
    EXPECT_EQ(chain[1], 0.25f) << d.str();
  }
}

// The measured reason Relu stays a primitive: its composite where(x > 0, x, 0) reads x twice, so
// a node's pending count (counted through every path, ir.h) doubles with each relu of a chain:
// 2^(n+1) - 2 after n, where the primitive's is n. Past ir::MaxPendingNodes() (1024 by default)
// each new tensor counts its graph's distinct nodes one by one (ir::PastPendingLimit) to learn
// whether to cut.
TEST(OpTablesTest, ReluReadsItsOperandOnce) {
  const Device cl = test::DefaultCl();
  Tensor x = tensor(std::vector<float>{1, -2, 0.5f}, {3}, cl);
  Tensor zero = zeros({3}, DType::f32, cl);
  Tensor primitive = x;
  Tensor composite = x;
  for (int i = 0; i < 8; ++i) {
    primitive = relu(primitive);
    composite = where(gt(composite, zero), composite, zero);
  }
  EXPECT_EQ(primitive.impl()->node->pending, 8);
  EXPECT_EQ(composite.impl()->node->pending, 510);
  EXPECT_EQ(composite.to_vector<float>(), primitive.to_vector<float>());
}

// relu's gradient is 0 at 0 (README "Autograd").
TEST(OpTablesTest, ReluGradientIsZeroAtZero) {
  for (Device d : {Device::host(), test::DefaultCl()}) {
    Tensor x = tensor(std::vector<float>{-1, 0, 2}, {3}, d).requires_grad_();
    EXPECT_EQ(grad(sum(relu(x)), {x})[0].to_vector<float>(), (std::vector<float>{0, 0, 1}))
        << d.str();
  }
}

}  // namespace
}  // namespace lazycl
