// User errors: each is a lazycl::Error thrown on the caller's line whose message names the
// problem (the op, the shapes, the dim), and the library keeps working after it.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

const Device kCl = Device::opencl(0);

// Runs `f`, expects a lazycl::Error whose message contains every one of `parts`, and then
// checks that a device and a host computation still give the right value.
void ExpectError(const std::function<void()>& f, const std::vector<std::string>& parts) {
  std::string message;
  try {
    f();
    ADD_FAILURE() << "no lazycl::Error was thrown; expected one naming "
                  << testing::PrintToString(parts);
    return;
  } catch (const Error& e) {
    message = e.what();
  }
  for (const std::string& part : parts)
    EXPECT_NE(message.find(part), std::string::npos)
        << "missing \"" << part << "\" in: " << message;
  for (Device d : {kCl, Device::host()}) {
    Tensor x = tensor(std::vector<float>{1, 2, 3}, {3}, d);
    EXPECT_EQ((x * 2 + 1).to_vector<float>(), (std::vector<float>{3, 5, 7}))
        << "after: " << message;
    EXPECT_EQ(sum(x).item<float>(), 6.0f);
  }
}

Tensor F(std::vector<int64_t> shape, Device d = kCl) {
  return zeros(std::move(shape), DType::f32, d);
}

TEST(ErrorsTest, BinaryOpShapeMismatchNamesBothShapesAndTheOp) {
  for (Device d : {kCl, Device::host()}) {
    ExpectError([&] { F({2, 3}, d) + F({4, 3}, d); }, {"add", "[2,3]", "[4,3]"});
    ExpectError([&] { F({5}, d) * F({6}, d); }, {"mul", "[5]", "[6]"});
  }
}

TEST(ErrorsTest, MatmulInnerDimensionMismatchNamesBothShapes) {
  ExpectError([] { matmul(F({2, 3}), F({4, 5})); }, {"matmul", "[2,3]", "[4,5]", "inner"});
  ExpectError([] { matmul(F({3}), F({3, 2})); }, {"matmul", "[3]", "rank"});
}

TEST(ErrorsTest, ReshapeToDifferentElementCountNamesBothShapes) {
  ExpectError([] { reshape(F({2, 3}), {4, 2}); }, {"reshape", "[2,3]", "[4,2]"});
  ExpectError([] { reshape(F({2, 3}), {-1, 4}); }, {"reshape", "[2,3]"});
  ExpectError([] { reshape(F({2, 3}), {-1, -1}); }, {"reshape", "-1"});
}

// Regression: shapes whose element count overflows 64 bits were accepted (zeros({7, kBig})
// whose count wraps to 1 summed to 1.0; a reshape to [7, 7905747460161236407, 6] succeeded;
// broadcast_to a wrapping shape returned 7 values; a 2^62 x 8 placeholder reported numel 0).
TEST(ErrorsTest, ShapesWhoseSizeOverflowsAreErrorsNamingTheShape) {
  // 7 * 7905747460161236407 wraps to 1 in int64 arithmetic.
  const int64_t big = 7905747460161236407;
  for (Device d : {kCl, Device::host()}) {
    ExpectError(
        [&] {
          zeros({7, big}, DType::f32, d);
        },
        {"zeros", "[7,7905747460161236407]", "overflow"});
    ExpectError(
        [&] {
          full({big, 7}, 1.0, DType::f32, d);
        },
        {"[7905747460161236407,7]", "overflow"});
    ExpectError(
        [&] {
          reshape(F({42}, d), {7, big, 6});
        },
        {"reshape", "[7,7905747460161236407,6]", "overflow"});
    ExpectError(
        [&] {
          broadcast_to(F({1, 1}, d), {7, big});
        },
        {"broadcast_to", "[7,7905747460161236407]", "overflow"});
  }
  ExpectError(
      [] {
        placeholder({int64_t{1} << 62, 8}, DType::f32, kCl);
      },
      {"placeholder", "[4611686018427387904,8]", "overflow"});
  // Each operand fits; their broadcast [2^31, 2^31] times 8 bytes does not (lazy device zeros,
  // so nothing is allocated).
  ExpectError(
      [] {
        F({int64_t{1} << 31, 1}) + F({1, int64_t{1} << 31});
      },
      {"[2147483648,2147483648]", "overflow"});
  // Large but valid, and zero-sized with huge other dims: fine (no memory is touched).
  EXPECT_EQ(placeholder({int64_t{1} << 40, 8}, DType::f32, kCl).numel(), int64_t{1} << 43);
  EXPECT_EQ(zeros({0, big}, DType::f32, kCl).numel(), 0);
}

TEST(ErrorsTest, AxisOutOfRangeNamesTheOpAndTheDim) {
  Tensor x = F({2, 3});
  ExpectError([&] { sum(x, {2}); }, {"sum", "dim 2", "rank 2"});
  ExpectError([&] { sum(x, {-3}); }, {"sum", "dim -3"});
  ExpectError([&] { max(x, {5}); }, {"max", "dim 5"});
  ExpectError([&] { transpose(x, 0, 2); }, {"transpose", "dim 2"});
  ExpectError([&] { softmax(x, 3); }, {"softmax", "dim 3"});
  ExpectError([&] { slice(x, -3, 0, 1); }, {"slice", "dim -3"});
  ExpectError([&] { sum(x, {1, -1}); }, {"sum", "repeat"});
}

TEST(ErrorsTest, WhereWithNonBoolConditionNamesTheDtype) {
  ExpectError([] { where(F({3}), F({3}), F({3})); }, {"where", "bool", "f32"});
}

TEST(ErrorsTest, MatmulOfBoolIsRejected) {
  Tensor b = cast(F({2, 2}), DType::boolean);
  ExpectError([&] { matmul(b, b); }, {"matmul", "bool"});
}

// Floating maths on bool computes in f32, as on integers (ops.h): exp(true) == e.
TEST(ErrorsTest, ExpOfBoolComputesInF32) {
  for (Device d : {kCl, Device::host()}) {
    Tensor b = tensor_bool({0, 1}, {2}, d);
    const std::vector<float> got = exp(b).to_vector<float>();
    EXPECT_FLOAT_EQ(got[0], 1.0f);
    EXPECT_FLOAT_EQ(got[1], 2.7182817f);
  }
}

TEST(ErrorsTest, ToVectorWithWrongTypeNamesBothTypes) {
  for (Device d : {kCl, Device::host()}) {
    ExpectError([&] { F({2}, d).to_vector<int32_t>(); }, {"to_vector", "f32", "float"});
    ExpectError([&] { zeros({2}, DType::i64, d).to_vector<float>(); },
                {"to_vector", "i64", "int64_t"});
    ExpectError([&] { zeros({1}, DType::boolean, d).item<int32_t>(); }, {"bool", "uint8_t"});
  }
}

TEST(ErrorsTest, ItemOnMultiElementTensorNamesTheShape) {
  ExpectError([] { F({2, 2}).item<float>(); }, {"item", "4 elements", "[2,2]"});
  ExpectError([] { F({0}).item<float>(); }, {"item", "0 elements"});
}

TEST(ErrorsTest, UndefinedTensorUseSaysUndefined) {
  Tensor undefined;
  EXPECT_FALSE(undefined.defined());
  ExpectError([&] { undefined.shape(); }, {"undefined"});
  ExpectError([&] { undefined + F({1}); }, {"add", "undefined"});
  ExpectError([&] { F({1}) * undefined; }, {"mul", "undefined"});
  ExpectError([&] { exp(undefined); }, {"exp", "undefined"});
  ExpectError([&] { undefined.to_vector<float>(); }, {"undefined"});
  ExpectError([&] { sync({undefined}); }, {"sync", "undefined"});
  ExpectError([&] { sum(undefined); }, {"undefined"});
  ExpectError([&] { reshape(undefined, {1}); }, {"undefined"});
  ExpectError([&] { cat({F({1}), undefined}, 0); }, {"cat", "undefined"});
  EXPECT_EQ(undefined.str(), "Tensor(undefined)");
}

TEST(ErrorsTest, DeviceParseOfGarbageQuotesTheText) {
  ExpectError([] { Device::parse("gpu:x"); }, {"gpu:x", "cl:N"});
  ExpectError([] { Device::parse("cl:"); }, {"\"cl:\""});
  ExpectError([] { Device::parse("cl:1x"); }, {"cl:1x"});
  ExpectError([] { Device::opencl(-1); }, {"-1"});
  EXPECT_EQ(Device::parse("CL:0"), kCl);
  EXPECT_EQ(Device::parse("host"), Device::host());
}

TEST(ErrorsTest, NegativeShapeInFactoryNamesTheShape) {
  ExpectError([] { full({2, -1}, 1.0); }, {"full", "[2,-1]", "negative"});
  ExpectError([] { randn({-1}, 0); }, {"randn", "[-1]", "negative"});
  ExpectError([] { tensor(std::vector<float>{}, {-1, 0}); }, {"tensor", "negative"});
  ExpectError([] { placeholder({-2}, DType::f32, kCl); }, {"placeholder", "[-2]", "negative"});
}

// Regression: zeros() and ones() reported their errors as "full: ...", an op the user never
// called.
TEST(ErrorsTest, ZerosAndOnesErrorsNameTheirOwnOp) {
  ExpectError([] { zeros({2, -1}); }, {"zeros:", "[2,-1]", "negative"});
  ExpectError([] { ones({-3}, DType::i32, kCl); }, {"ones:", "[-3]", "negative"});
}

TEST(ErrorsTest, TensorDataShapeSizeMismatchNamesBoth) {
  ExpectError(
      [] {
        tensor(std::vector<float>{1, 2, 3}, {2, 2});
      },
      {"tensor", "3 values", "[2,2]", "4 elements"});
  ExpectError([] { tensor(std::vector<int32_t>{1}, {3}, kCl); }, {"tensor", "1 values", "[3]"});
}

TEST(ErrorsTest, ZeroElementTensorReadsAsEmptyVector) {
  for (Device d : {kCl, Device::host()}) {
    Tensor e = zeros({0, 3}, DType::f32, d);
    EXPECT_TRUE(e.to_vector<float>().empty()) << d.str();
    Tensor y = exp(e) + 1;
    EXPECT_EQ(y.shape(), (std::vector<int64_t>{0, 3}));
    EXPECT_TRUE(y.to_vector<float>().empty()) << d.str();
    EXPECT_EQ(sum(e, {0}).to_vector<float>(), (std::vector<float>{0, 0, 0})) << d.str();
    EXPECT_TRUE(tensor(std::vector<int32_t>{}, {2, 0}, d).to_vector<int32_t>().empty()) << d.str();
  }
}

TEST(ErrorsTest, MixingTwoOpenClIndicesIsAnErrorNotAGuess) {
  // Only checked where a second device exists; the message is the point.
  Tensor a = F({2});
  try {
    Tensor b = zeros({2}, DType::f32, Device::opencl(1));
    ExpectError([&] { a + b; }, {"add", "cl:0", "cl:1"});
  } catch (const Error& e) {
    GTEST_SKIP() << "no second OpenCL device: " << e.what();
  }
}

}  // namespace
}  // namespace lazycl
