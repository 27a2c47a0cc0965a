#include "runtime/host_eval.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "backend/host_memory.h"
#include "gtest/gtest.h"
#include "ir/ir.h"
#include "ir_test_util.h"
#include "runtime/storage.h"

namespace lazycl::runtime {
namespace {

using ir::MakeBinary;
using ir::MakeUnary;
using ir::NodePtr;
using ir::Op;
using ir::Shape;
using test::Ok;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

template <typename T>
DType DTypeOf();
template <>
DType DTypeOf<float>() {
  return DType::f32;
}
template <>
DType DTypeOf<int32_t>() {
  return DType::i32;
}
template <>
DType DTypeOf<int64_t>() {
  return DType::i64;
}
template <>
DType DTypeOf<uint8_t>() {
  return DType::boolean;
}

// A host Buffer leaf holding `data`; uint8_t data makes a bool buffer.
template <typename T>
NodePtr Host(std::vector<T> data, Shape shape) {
  EXPECT_EQ(static_cast<int64_t>(data.size()), ir::NumElements(shape));
  backend::BufferManager& memory = backend::HostMemory();
  auto storage =
      std::make_shared<ir::Storage>(Device::host(), &memory, data.size() * sizeof(T), "test input");
  EXPECT_TRUE(memory.Upload(storage->id(), data.data(), 0, data.size() * sizeof(T)).ok());
  return ir::MakeBuffer(std::move(storage), DTypeOf<T>(), std::move(shape));
}

// Evaluates `node` and returns its elements, checking the result's dtype size and shape.
template <typename T>
std::vector<T> Eval(const NodePtr& node) {
  EXPECT_EQ(node->dtype, DTypeOf<T>());
  absl::StatusOr<std::shared_ptr<ir::Storage>> result = EvaluateOnHost(node);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  const ir::Storage& storage = **result;
  std::vector<T> out(ir::NumElements(node->shape));
  EXPECT_EQ(storage.bytes(), out.size() * sizeof(T));
  EXPECT_TRUE(storage.device().is_host());
  EXPECT_TRUE(storage.manager().Download(storage.id(), out.data(), 0, storage.bytes()).ok());
  return out;
}

std::vector<float> Unary(Op op, std::vector<float> x) {
  const Shape shape = {static_cast<int64_t>(x.size())};
  return Eval<float>(Ok(MakeUnary(op, Host(std::move(x), shape))));
}

template <typename T>
std::vector<T> Binary(Op op, std::vector<T> a, std::vector<T> b) {
  const Shape shape = {static_cast<int64_t>(a.size())};
  return Eval<T>(Ok(MakeBinary(op, Host(std::move(a), shape), Host(std::move(b), shape))));
}

template <typename T>
std::vector<uint8_t> Compare(Op op, std::vector<T> a, std::vector<T> b) {
  const Shape shape = {static_cast<int64_t>(a.size())};
  return Eval<uint8_t>(Ok(MakeBinary(op, Host(std::move(a), shape), Host(std::move(b), shape))));
}

template <typename To, typename From>
std::vector<To> Cast(std::vector<From> x) {
  const Shape shape = {static_cast<int64_t>(x.size())};
  return Eval<To>(Ok(ir::MakeCast(Host(std::move(x), shape), DTypeOf<To>())));
}

// 0, 1, ..., n-1 as f32 in `shape`.
NodePtr IotaF32(Shape shape) {
  NodePtr iota = ir::MakeIota(DType::f32, ir::NumElements(shape));
  return Ok(ir::MakeReshape(std::move(iota), std::move(shape)));
}

TEST(HostEvalTest, BufferIsReadBack) {
  EXPECT_EQ(Eval<float>(Host<float>({1.5f, -2, 3, 4, 5, 6}, {2, 3})),
            (std::vector<float>{1.5f, -2, 3, 4, 5, 6}));
  EXPECT_EQ(Eval<int64_t>(Host<int64_t>({kI64Min, kI64Max}, {2})),
            (std::vector<int64_t>{kI64Min, kI64Max}));
}

TEST(HostEvalTest, BoolBufferBytesAreNormalizedToZeroOrOne) {
  EXPECT_EQ(Eval<uint8_t>(Host<uint8_t>({0, 2, 255, 1}, {4})), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(Cast<int32_t>(std::vector<uint8_t>{0, 7}), (std::vector<int32_t>{0, 1}));
}

TEST(HostEvalTest, ResultIsANewHostStorageLabelledWithDtypeAndShape) {
  NodePtr x = Host<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  absl::StatusOr<std::shared_ptr<ir::Storage>> result = EvaluateOnHost(x);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NE(result->get(), x->storage.get());
  EXPECT_EQ(&(*result)->manager(), &backend::HostMemory());
  EXPECT_TRUE((*result)->manager().IsWritten((*result)->id()));
  EXPECT_EQ((*result)->manager().Label((*result)->id()), "host result f32[2,3]");
}

TEST(HostEvalTest, ConstantIsConvertedAndBroadcast) {
  EXPECT_EQ(Eval<float>(ir::MakeConstant(2.5, DType::f32, {2, 2})),
            (std::vector<float>{2.5f, 2.5f, 2.5f, 2.5f}));
  EXPECT_EQ(Eval<int32_t>(ir::MakeConstant(-7, DType::i32, {3})),
            (std::vector<int32_t>{-7, -7, -7}));
  EXPECT_EQ(Eval<uint8_t>(ir::MakeConstant(0.5, DType::boolean, {2})),
            (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(Eval<float>(ir::MakeConstant(3, DType::f32, {})), (std::vector<float>{3}));
  // Out of i32 range: saturates, as Cast from a float does.
  EXPECT_EQ(Eval<int32_t>(ir::MakeConstant(1e10, DType::i32, {1})),
            (std::vector<int32_t>{kI32Max}));
}

TEST(HostEvalTest, IotaCountsFromZero) {
  EXPECT_EQ(Eval<int64_t>(ir::MakeIota(DType::i64, 4)), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(Eval<float>(ir::MakeIota(DType::f32, 3)), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(Eval<uint8_t>(ir::MakeIota(DType::boolean, 3)), (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_TRUE(Eval<int32_t>(ir::MakeIota(DType::i32, 0)).empty());
}

TEST(HostEvalTest, FloatUnaryOps) {
  EXPECT_EQ(Unary(Op::kAbs, {1, -2, -kInf}), (std::vector<float>{1, 2, kInf}));
  EXPECT_EQ(Unary(Op::kExp, {0, 1}), (std::vector<float>{1, std::exp(1.0f)}));
  EXPECT_EQ(Unary(Op::kLog, {1, 0}), (std::vector<float>{0, -kInf}));
  EXPECT_EQ(Unary(Op::kSqrt, {4, 2.25f}), (std::vector<float>{2, 1.5f}));
  EXPECT_EQ(Unary(Op::kTanh, {0, 100}), (std::vector<float>{0, 1}));
  EXPECT_EQ(Unary(Op::kSin, {0, 1}), (std::vector<float>{0, std::sin(1.0f)}));
  EXPECT_EQ(Unary(Op::kCos, {0, 1}), (std::vector<float>{1, std::cos(1.0f)}));
  std::vector<float> sigmoid = Unary(Op::kSigmoid, {0, 2, -200});
  EXPECT_EQ(sigmoid[0], 0.5f);
  EXPECT_FLOAT_EQ(sigmoid[1], 0.880797f);
  EXPECT_EQ(sigmoid[2], 0.0f);
  EXPECT_TRUE(std::isnan(Unary(Op::kSqrt, {-1})[0]));
}

TEST(HostEvalTest, ReluClampsNegativesAndNaNToZero) {
  std::vector<float> relu = Unary(Op::kRelu, {-1, 0, 2.5f, kNaN, -0.0f});
  EXPECT_EQ(relu, (std::vector<float>{0, 0, 2.5f, 0, 0}));
  EXPECT_FALSE(std::signbit(relu[4]));
  EXPECT_EQ(Eval<int32_t>(Ok(MakeUnary(Op::kRelu, Host<int32_t>({-3, 0, 5}, {3})))),
            (std::vector<int32_t>{0, 0, 5}));
}

// neg and sub are composites (frontend/ops.cpp); tests/op_tables_test.cpp checks them.
TEST(HostEvalTest, IntegerAbsWrapsAtMinimum) {
  EXPECT_EQ(Eval<int32_t>(Ok(MakeUnary(Op::kAbs, Host<int32_t>({-5, kI32Min, 7}, {3})))),
            (std::vector<int32_t>{5, kI32Min, 7}));
  EXPECT_EQ(Eval<int64_t>(Ok(MakeUnary(Op::kAbs, Host<int64_t>({kI64Min, -3}, {2})))),
            (std::vector<int64_t>{kI64Min, 3}));
}

TEST(HostEvalTest, NotFlipsBool) {
  EXPECT_EQ(Eval<uint8_t>(Ok(MakeUnary(Op::kNot, Host<uint8_t>({0, 1, 1}, {3})))),
            (std::vector<uint8_t>{1, 0, 0}));
}

TEST(HostEvalTest, CastFloatToIntTruncatesSaturatesAndMapsNaNToZero) {
  EXPECT_EQ(
      Cast<int32_t>(std::vector<float>{1.9f, -1.9f, 3e9f, -3e9f, kNaN, kInf, -kInf, 2147483520.0f,
                                       -2147483648.0f}),
      (std::vector<int32_t>{1, -1, kI32Max, kI32Min, 0, kI32Max, kI32Min, 2147483520, kI32Min}));
  EXPECT_EQ(
      Cast<int64_t>(std::vector<float>{2.5f, -2.5f, 1e19f, -1e19f, kNaN, 9223371487098961920.0f}),
      (std::vector<int64_t>{2, -2, kI64Max, kI64Min, 0, 9223371487098961920}));
}

TEST(HostEvalTest, CastI64ToI32KeepsLowBits) {
  EXPECT_EQ(Cast<int32_t>(std::vector<int64_t>{(int64_t{1} << 32) + 5, int64_t{1} << 31, -1,
                                               0x1FFFFFFFF, -(int64_t{1} << 32) - 2}),
            (std::vector<int32_t>{5, kI32Min, -1, -1, -2}));
}

TEST(HostEvalTest, CastBetweenIntBoolAndFloat) {
  EXPECT_EQ(Cast<uint8_t>(std::vector<float>{0, -0.0f, 0.5f, kNaN, -kInf}),
            (std::vector<uint8_t>{0, 0, 1, 1, 1}));
  EXPECT_EQ(Cast<uint8_t>(std::vector<int64_t>{0, -7, kI64Min}), (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_EQ(Cast<float>(std::vector<uint8_t>{1, 0}), (std::vector<float>{1, 0}));
  EXPECT_EQ(Cast<int64_t>(std::vector<uint8_t>{1, 0}), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(Cast<float>(std::vector<int32_t>{16777217, -3}), (std::vector<float>{16777216, -3}));
  EXPECT_EQ(Cast<int64_t>(std::vector<int32_t>{-5, kI32Min}), (std::vector<int64_t>{-5, kI32Min}));
  EXPECT_EQ(Cast<float>(std::vector<float>{1.25f}), (std::vector<float>{1.25f}));
}

TEST(HostEvalTest, FloatBinaryOps) {
  EXPECT_EQ(Binary<float>(Op::kAdd, {1, 2}, {0.5f, -3}), (std::vector<float>{1.5f, -1}));
  EXPECT_EQ(Binary<float>(Op::kMul, {1.5f, 2}, {2, -3}), (std::vector<float>{3, -6}));
  EXPECT_EQ(Binary<float>(Op::kDiv, {1, 1, -1}, {4, 0, 0}),
            (std::vector<float>{0.25f, kInf, -kInf}));
  EXPECT_EQ(Binary<float>(Op::kPow, {2, 9, 0}, {10, 0.5f, 0}), (std::vector<float>{1024, 3, 1}));
}

TEST(HostEvalTest, FloatMaximumAndMinimumIgnoreNaN) {
  std::vector<float> a = {kNaN, 1, 5, kNaN};
  std::vector<float> b = {2, kNaN, -5, kNaN};
  std::vector<float> max = Binary<float>(Op::kMaximum, a, b);
  std::vector<float> min = Binary<float>(Op::kMinimum, a, b);
  EXPECT_EQ(std::vector<float>(max.begin(), max.end() - 1), (std::vector<float>{2, 1, 5}));
  EXPECT_EQ(std::vector<float>(min.begin(), min.end() - 1), (std::vector<float>{2, 1, -5}));
  EXPECT_TRUE(std::isnan(max[3]));
  EXPECT_TRUE(std::isnan(min[3]));
}

TEST(HostEvalTest, IntegerArithmeticWraps) {
  EXPECT_EQ(Binary<int32_t>(Op::kAdd, {kI32Max, 2}, {1, 3}), (std::vector<int32_t>{kI32Min, 5}));
  EXPECT_EQ(Binary<int32_t>(Op::kMul, {65536, 3, kI32Min}, {65536, -4, -1}),
            (std::vector<int32_t>{0, -12, kI32Min}));
  EXPECT_EQ(Binary<int64_t>(Op::kAdd, {kI64Max}, {1}), (std::vector<int64_t>{kI64Min}));
  EXPECT_EQ(Binary<int64_t>(Op::kMul, {int64_t{1} << 62, kI64Min}, {4, -1}),
            (std::vector<int64_t>{0, kI64Min}));
}

TEST(HostEvalTest, IntegerMaximumAndMinimum) {
  EXPECT_EQ(Binary<int32_t>(Op::kMaximum, {-1, 5}, {-2, 7}), (std::vector<int32_t>{-1, 7}));
  EXPECT_EQ(Binary<int64_t>(Op::kMinimum, {-1, 5}, {-2, 7}), (std::vector<int64_t>{-2, 5}));
}

TEST(HostEvalTest, ComparesAreIeeeWithNaN) {
  std::vector<float> a = {1, 2, 3, kNaN};
  std::vector<float> b = {2, 2, 2, kNaN};
  EXPECT_EQ(Compare<float>(Op::kLt, a, b), (std::vector<uint8_t>{1, 0, 0, 0}));
  EXPECT_EQ(Compare<float>(Op::kLe, a, b), (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(Compare<float>(Op::kGt, a, b), (std::vector<uint8_t>{0, 0, 1, 0}));
  EXPECT_EQ(Compare<float>(Op::kGe, a, b), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(Compare<float>(Op::kEq, a, b), (std::vector<uint8_t>{0, 1, 0, 0}));
  EXPECT_EQ(Compare<float>(Op::kNe, a, b), (std::vector<uint8_t>{1, 0, 1, 1}));
  EXPECT_EQ(Compare<int64_t>(Op::kLt, {kI64Min, 0}, {kI64Max, 0}), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(Compare<uint8_t>(Op::kEq, {0, 1, 1}, {0, 0, 1}), (std::vector<uint8_t>{1, 0, 1}));
}

TEST(HostEvalTest, WhereSelectsByCondition) {
  NodePtr cond = Host<uint8_t>({1, 0, 0, 1}, {2, 2});
  NodePtr a = Host<int32_t>({1, 2, 3, 4}, {2, 2});
  NodePtr b = Host<int32_t>({-1, -2, -3, -4}, {2, 2});
  EXPECT_EQ(Eval<int32_t>(Ok(ir::MakeWhere(cond, a, b))), (std::vector<int32_t>{1, -2, -3, 4}));
}

TEST(HostEvalTest, ReshapeKeepsRowMajorOrder) {
  EXPECT_EQ(Eval<float>(Ok(ir::MakeReshape(IotaF32({2, 3}), {3, 1, 2}))),
            (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST(HostEvalTest, PermuteOfNonSquareTransposes) {
  // [[0,1,2],[3,4,5]] -> [[0,3],[1,4],[2,5]]
  NodePtr t = Ok(ir::MakePermute(IotaF32({2, 3}), {1, 0}));
  EXPECT_EQ(t->shape, (Shape{3, 2}));
  EXPECT_EQ(Eval<float>(t), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(HostEvalTest, PermuteOfRankThreeMovesEveryDim) {
  // x[i,j,k] = 12i + 4j + k, shape [2,3,4]; y = permute(x, (2,0,1)) has y[k,i,j] = x[i,j,k].
  NodePtr y = Ok(ir::MakePermute(IotaF32({2, 3, 4}), {2, 0, 1}));
  ASSERT_EQ(y->shape, (Shape{4, 2, 3}));
  std::vector<float> expected;
  for (int k = 0; k < 4; ++k) {
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) expected.push_back(static_cast<float>(12 * i + 4 * j + k));
    }
  }
  EXPECT_EQ(Eval<float>(y), expected);
}

TEST(HostEvalTest, ReshapeOfPermuteUsesPermutedOrder) {
  NodePtr t = Ok(ir::MakePermute(IotaF32({2, 3}), {1, 0}));
  EXPECT_EQ(Eval<float>(Ok(ir::MakeReshape(t, {6}))), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(Eval<float>(Ok(ir::MakeReshape(t, {2, 3}))), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(HostEvalTest, ExpandBroadcastsSizeOneDims) {
  NodePtr column = Host<int32_t>({1, 2}, {2, 1});
  NodePtr row = Host<int32_t>({10, 20, 30}, {1, 3});
  EXPECT_EQ(Eval<int32_t>(Ok(ir::MakeExpand(column, {2, 3}))),
            (std::vector<int32_t>{1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(Eval<int32_t>(Ok(ir::MakeExpand(row, {2, 3}))),
            (std::vector<int32_t>{10, 20, 30, 10, 20, 30}));
  // Broadcasting add: column + row.
  NodePtr sum =
      Ok(MakeBinary(Op::kAdd, Ok(ir::MakeExpand(column, {2, 3})), Ok(ir::MakeExpand(row, {2, 3}))));
  EXPECT_EQ(Eval<int32_t>(sum), (std::vector<int32_t>{11, 21, 31, 12, 22, 32}));
  EXPECT_EQ(Eval<int32_t>(Ok(ir::MakeExpand(Host<int32_t>({7}, {1, 1}), {2, 2}))),
            (std::vector<int32_t>{7, 7, 7, 7}));
  EXPECT_TRUE(Eval<int32_t>(Ok(ir::MakeExpand(row, {0, 3}))).empty());
}

TEST(HostEvalTest, SliceTakesAWindow) {
  // [[0,1,2,3],[4,5,6,7],[8,9,10,11]]
  EXPECT_EQ(Eval<float>(Ok(ir::MakeSlice(IotaF32({3, 4}), {1, 1}, {2, 2}))),
            (std::vector<float>{5, 6, 9, 10}));
  EXPECT_EQ(Eval<float>(Ok(ir::MakeSlice(IotaF32({3, 4}), {2, 0}, {1, 4}))),
            (std::vector<float>{8, 9, 10, 11}));
  EXPECT_TRUE(Eval<float>(Ok(ir::MakeSlice(IotaF32({3, 4}), {3, 0}, {0, 4}))).empty());
}

TEST(HostEvalTest, PadFillsOutsideWithZero) {
  // [[1,2],[3,4]] placed at (1,0) in [4,3].
  NodePtr x = Host<float>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(Eval<float>(Ok(ir::MakePad(x, {1, 0}, {4, 3}))),
            (std::vector<float>{0, 0, 0, 1, 2, 0, 3, 4, 0, 0, 0, 0}));
  NodePtr b = Host<uint8_t>({1, 1}, {2});
  EXPECT_EQ(Eval<uint8_t>(Ok(ir::MakePad(b, {1}, {4}))), (std::vector<uint8_t>{0, 1, 1, 0}));
  // Padding an empty tensor gives all zeros.
  EXPECT_EQ(Eval<float>(Ok(ir::MakePad(Host<float>({}, {0, 2}), {1, 0}, {2, 2}))),
            (std::vector<float>{0, 0, 0, 0}));
}

TEST(HostEvalTest, SumOverVariousAxes) {
  // x[i,j,k] = 12i + 4j + k, shape [2,3,4].
  auto sum = [](std::vector<int64_t> axes) {
    return Eval<float>(Ok(ir::MakeReduce(Op::kSum, IotaF32({2, 3, 4}), std::move(axes))));
  };
  std::vector<float> all_values;
  for (int i = 0; i < 24; ++i) all_values.push_back(static_cast<float>(i));
  EXPECT_EQ(sum({}), all_values);
  EXPECT_EQ(sum({0}), (std::vector<float>{12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34}));
  EXPECT_EQ(sum({1}), (std::vector<float>{12, 15, 18, 21, 48, 51, 54, 57}));
  EXPECT_EQ(sum({2}), (std::vector<float>{6, 22, 38, 54, 70, 86}));
  EXPECT_EQ(sum({0, 2}), (std::vector<float>{60, 92, 124}));
  EXPECT_EQ(sum({0, 1, 2}), (std::vector<float>{276}));
  EXPECT_EQ(Ok(ir::MakeReduce(Op::kSum, IotaF32({2, 3, 4}), {1}))->shape, (Shape{2, 1, 4}));
}

TEST(HostEvalTest, SumF32AccumulatesInDouble) {
  // In float, 1e8 + 1 == 1e8, so a float accumulator would give 0.
  std::vector<float> x = {1e8f};
  for (int i = 0; i < 16; ++i) x.push_back(1);
  x.push_back(-1e8f);
  NodePtr sum = Ok(ir::MakeReduce(Op::kSum, Host(x, {18}), {0}));
  EXPECT_EQ(Eval<float>(sum), (std::vector<float>{16}));
}

TEST(HostEvalTest, SumI64Wraps) {
  EXPECT_EQ(Eval<int64_t>(Ok(ir::MakeReduce(Op::kSum, Host<int64_t>({kI64Max, 1, 5}, {3}), {0}))),
            (std::vector<int64_t>{kI64Min + 5}));
}

TEST(HostEvalTest, SumOverEmptyAxisIsZero) {
  NodePtr x = Host<float>({}, {2, 0});
  NodePtr s = Ok(ir::MakeReduce(Op::kSum, x, {1}));
  EXPECT_EQ(s->shape, (Shape{2, 1}));
  EXPECT_EQ(Eval<float>(s), (std::vector<float>{0, 0}));
  EXPECT_EQ(Eval<int64_t>(Ok(ir::MakeReduce(Op::kSum, Host<int64_t>({}, {0, 3}), {0}))),
            (std::vector<int64_t>{0, 0, 0}));
  EXPECT_TRUE(Eval<float>(Ok(ir::MakeReduce(Op::kSum, x, {0}))).empty());
}

TEST(HostEvalTest, MaxOverAxesIgnoresNaNUnlessAllNaN) {
  NodePtr x = Host<float>({kNaN, 1, 2, kNaN, kNaN, kNaN, -kInf, -kInf, -kInf}, {3, 3});
  std::vector<float> rows = Eval<float>(Ok(ir::MakeReduce(Op::kMax, x, {1})));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], 2);
  EXPECT_TRUE(std::isnan(rows[1]));
  EXPECT_EQ(rows[2], -kInf);
  EXPECT_EQ(Eval<float>(Ok(ir::MakeReduce(Op::kMax, x, {0}))), (std::vector<float>{-kInf, 1, 2}));
  EXPECT_EQ(Eval<float>(Ok(ir::MakeReduce(Op::kMax, x, {0, 1}))), (std::vector<float>{2}));
}

TEST(HostEvalTest, MaxOfIntegersAndBools) {
  // [[-5,-3],[-7,kI32Min]] over the middle axis of [2,2,1]
  NodePtr x = Host<int32_t>({-5, -3, -7, kI32Min}, {2, 2, 1});
  EXPECT_EQ(Eval<int32_t>(Ok(ir::MakeReduce(Op::kMax, x, {1}))), (std::vector<int32_t>{-3, -7}));
  EXPECT_EQ(Eval<int32_t>(Ok(ir::MakeReduce(Op::kMax, x, {0, 1, 2}))), (std::vector<int32_t>{-3}));
  NodePtr b = Host<uint8_t>({0, 0, 0, 1}, {2, 2});
  EXPECT_EQ(Eval<uint8_t>(Ok(ir::MakeReduce(Op::kMax, b, {1}))), (std::vector<uint8_t>{0, 1}));
  NodePtr big = Host<int64_t>({kI64Min, kI64Max}, {2});
  EXPECT_EQ(Eval<int64_t>(Ok(ir::MakeReduce(Op::kMax, big, {0}))), (std::vector<int64_t>{kI64Max}));
}

TEST(HostEvalTest, MatmulBatched) {
  // Batch 0: [[1,2,3],[4,5,6]] @ [[1,0],[0,1],[1,1]] = [[4,5],[10,11]].
  // Batch 1: [[1,0,-1],[2,2,2]] @ [[1,2],[3,4],[5,6]] = [[-4,-4],[18,24]].
  std::vector<float> a = {1, 2, 3, 4, 5, 6, 1, 0, -1, 2, 2, 2};
  std::vector<float> b = {1, 0, 0, 1, 1, 1, 1, 2, 3, 4, 5, 6};
  NodePtr c = Ok(ir::MakeMatmul(Host(a, {2, 2, 3}), Host(b, {2, 3, 2})));
  EXPECT_EQ(c->shape, (Shape{2, 2, 2}));
  EXPECT_EQ(Eval<float>(c), (std::vector<float>{4, 5, 10, 11, -4, -4, 18, 24}));
  NodePtr ci = Ok(ir::MakeMatmul(Host(std::vector<int32_t>(a.begin(), a.end()), {2, 2, 3}),
                                 Host(std::vector<int32_t>(b.begin(), b.end()), {2, 3, 2})));
  EXPECT_EQ(Eval<int32_t>(ci), (std::vector<int32_t>{4, 5, 10, 11, -4, -4, 18, 24}));
}

TEST(HostEvalTest, MatmulOfNonSquareMatrices) {
  // [1,3] @ [3,2]
  NodePtr c = Ok(
      ir::MakeMatmul(Host<int64_t>({1, 2, 3}, {1, 3}), Host<int64_t>({1, 2, 3, 4, 5, 6}, {3, 2})));
  EXPECT_EQ(Eval<int64_t>(c), (std::vector<int64_t>{22, 28}));
}

TEST(HostEvalTest, MatmulF32AccumulatesInDouble) {
  NodePtr c =
      Ok(ir::MakeMatmul(Host<float>({1e8f, 1, -1e8f}, {1, 3}), Host<float>({1, 1, 1}, {3, 1})));
  EXPECT_EQ(Eval<float>(c), (std::vector<float>{1}));
}

// Each element is its dot product summed in double in k order and rounded once, whatever order
// the evaluator walks the operands in: bit for bit, on random inputs whose sizes are not
// multiples of anything, batched.
TEST(HostEvalTest, MatmulIsEachDotProductInDoubleRoundedOnce) {
  constexpr int64_t kBatches = 3, kM = 5, kK = 37, kN = 11;
  std::vector<float> a(kBatches * kM * kK), b(kBatches * kK * kN);
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  NodePtr c = Ok(ir::MakeMatmul(Host(a, {kBatches, kM, kK}), Host(b, {kBatches, kK, kN})));
  const std::vector<float> got = Eval<float>(c);
  ASSERT_EQ(got.size(), static_cast<size_t>(kBatches * kM * kN));
  for (int64_t s = 0; s < kBatches; ++s) {
    for (int64_t i = 0; i < kM; ++i) {
      for (int64_t j = 0; j < kN; ++j) {
        double dot = 0;
        for (int64_t k = 0; k < kK; ++k) {
          dot += static_cast<double>(a[(s * kM + i) * kK + k]) *
                 static_cast<double>(b[(s * kK + k) * kN + j]);
        }
        EXPECT_EQ(got[(s * kM + i) * kN + j], static_cast<float>(dot))
            << "batch " << s << " row " << i << " column " << j;
      }
    }
  }
}

TEST(HostEvalTest, MatmulIntegersWrap) {
  NodePtr c =
      Ok(ir::MakeMatmul(Host<int32_t>({65536, 7}, {1, 2}), Host<int32_t>({65536, 1}, {2, 1})));
  EXPECT_EQ(Eval<int32_t>(c), (std::vector<int32_t>{7}));
  NodePtr d =
      Ok(ir::MakeMatmul(Host<int64_t>({kI64Max, 1}, {1, 2}), Host<int64_t>({1, 1}, {2, 1})));
  EXPECT_EQ(Eval<int64_t>(d), (std::vector<int64_t>{kI64Min}));
}

TEST(HostEvalTest, MatmulWithEmptyInnerDimIsZero) {
  NodePtr c = Ok(ir::MakeMatmul(Host<float>({}, {2, 0}), Host<float>({}, {0, 3})));
  EXPECT_EQ(Eval<float>(c), (std::vector<float>(6, 0.0f)));
  EXPECT_TRUE(Eval<float>(Ok(ir::MakeMatmul(Host<float>({}, {0, 2}), Host<float>({1, 2}, {2, 1}))))
                  .empty());
  EXPECT_TRUE(
      Eval<float>(Ok(ir::MakeMatmul(Host<float>({}, {0, 1, 2}), Host<float>({}, {0, 2, 1}))))
          .empty());
}

TEST(HostEvalTest, SizeZeroTensorsFlowThroughEveryOpKind) {
  NodePtr x = Host<float>({}, {0, 3});
  NodePtr e = Ok(MakeUnary(Op::kExp, x));
  e = Ok(MakeBinary(Op::kAdd, e, x));
  NodePtr cmp = Ok(MakeBinary(Op::kLt, e, x));
  e = Ok(ir::MakeWhere(cmp, e, x));
  e = Ok(ir::MakePermute(e, {1, 0}));
  e = Ok(ir::MakeReshape(e, {0}));
  EXPECT_TRUE(Eval<float>(e).empty());
  EXPECT_TRUE(Eval<int32_t>(Ok(ir::MakeCast(x, DType::i32))).empty());
  EXPECT_TRUE(Eval<float>(Ok(ir::MakeReduce(Op::kMax, x, {1}))).empty());
  EXPECT_TRUE(Eval<float>(ir::MakeConstant(1, DType::f32, {4, 0})).empty());
}

TEST(HostEvalTest, SizeOneDimsAndScalars) {
  NodePtr x = Host<float>({3}, {1, 1});
  EXPECT_EQ(Eval<float>(Ok(ir::MakeReduce(Op::kSum, x, {0, 1}))), (std::vector<float>{3}));
  EXPECT_EQ(Eval<float>(Ok(ir::MakePermute(x, {1, 0}))), (std::vector<float>{3}));
  NodePtr scalar = Ok(ir::MakeReshape(x, {}));
  EXPECT_EQ(Eval<float>(Ok(MakeBinary(Op::kMul, scalar, scalar))), (std::vector<float>{9}));
  EXPECT_EQ(Eval<float>(Ok(ir::MakeReduce(Op::kSum, scalar, {}))), (std::vector<float>{3}));
  EXPECT_EQ(Eval<float>(Ok(ir::MakeMatmul(x, x))), (std::vector<float>{9}));
}

TEST(HostEvalTest, SharedSubgraphsAreEvaluatedOnce) {
  // 60 doublings through a DAG with 2^60 paths: only a per-node memo finishes this.
  NodePtr x = Host<int64_t>({1, -1, 3}, {3});
  for (int i = 0; i < 60; ++i) x = Ok(MakeBinary(Op::kAdd, x, x));
  const int64_t p = int64_t{1} << 60;
  EXPECT_EQ(Eval<int64_t>(x), (std::vector<int64_t>{p, -p, 3 * p}));
}

TEST(HostEvalTest, UnwrittenBufferIsFailedPrecondition) {
  auto storage = std::make_shared<ir::Storage>(Device::host(), &backend::HostMemory(), 8,
                                               "placeholder weights", /*placeholder=*/true);
  NodePtr x = ir::MakeBuffer(storage, DType::f32, {2});
  NodePtr y = Ok(MakeBinary(Op::kAdd, x, ir::MakeConstant(1, DType::f32, {2})));
  absl::StatusOr<std::shared_ptr<ir::Storage>> result = EvaluateOnHost(y);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(result.status().message()).find("placeholder weights"), std::string::npos)
      << result.status();
}

TEST(HostEvalTest, UnwrittenEmptyBufferIsStillFailedPrecondition) {
  auto storage =
      std::make_shared<ir::Storage>(Device::host(), &backend::HostMemory(), 0, "empty placeholder");
  absl::StatusOr<std::shared_ptr<ir::Storage>> result =
      EvaluateOnHost(ir::MakeBuffer(storage, DType::f32, {0}));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace lazycl::runtime
