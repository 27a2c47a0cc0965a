// rand, randn and dropout on the device: a counter-based generator computed inside the kernels
// (ir/op_table.h, RandomUniform), never uploaded, the same bits as the host for rand and within
// rounding of the device's log/cos for randn; a new seed compiles nothing. Runs with both codegen
// strategies (random_gpu_codegen_test).
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "test_util.h"

namespace lazycl {
namespace {

using test::C;

// RandomUniform written from its definition in ir/op_table.h: splitmix64's finaliser (Vigna)
// over seed * 0x9e3779b97f4a7c15 + (counter + 1) * 0xbf58476d1ce4e5b9, top 23 bits k, then
// (k + 0.5) / 2^23 computed in double (exact in f32).
float Formula(uint64_t counter, uint64_t folded_seed) {
  uint64_t z = folded_seed * 0x9e3779b97f4a7c15ull + (counter + 1) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>((static_cast<double>(z >> 41) + 0.5) / 8388608.0);
}

// The seed as rand folds it to 53 bits (a Scalar holds a double): the same mixing with the seed
// as the counter and 0 as the seed, shifted right by 11.
uint64_t Fold(uint64_t seed) {
  uint64_t z = 0 * 0x9e3779b97f4a7c15ull + (seed + 1) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return z >> 11;
}

TEST(RandomTest, RandIsTheFormulaBitForBitOnHostAndDevice) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{42}, ~uint64_t{0}}) {
    SCOPED_TRACE(seed);
    for (Device d : {Device::host(), test::DefaultCl()}) {
      const std::vector<float> got = rand({7, 13}, seed, 0, 1, DType::f32, d).to_vector<float>();
      ASSERT_EQ(got.size(), 91u);
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i], Formula(i, Fold(seed))) << d.str() << " element " << i;
        ASSERT_GT(got[i], 0.0f);
        ASSERT_LT(got[i], 1.0f);
      }
    }
  }
}

TEST(RandomTest, NothingIsUploadedAndANewSeedCompilesNothing) {
  const Device cl = test::DefaultCl();
  rand({64, 32}, 1, -1, 1, DType::f32, cl).to_vector<float>();
  randn({64, 32}, 1, DType::f32, cl).to_vector<float>();
  const int64_t uploads = C("TransferToDeviceCount"), compiles = C("GraphCompiles");
  for (uint64_t seed = 2; seed < 6; ++seed) {
    rand({64, 32}, seed, -1, 1, DType::f32, cl).to_vector<float>();
    randn({64, 32}, seed, DType::f32, cl).to_vector<float>();
  }
  EXPECT_EQ(C("TransferToDeviceCount"), uploads);
  EXPECT_EQ(C("GraphCompiles"), compiles);
  const Tensor x = ones({64, 32}, DType::f32, cl);
  nn::dropout(x, 0.25, 9).to_vector<float>();
  EXPECT_EQ(C("TransferToDeviceCount"), uploads);
}

TEST(RandomTest, DeviceMatchesHostOverShapesViewsAndBroadcasts) {
  const Device cl = test::DefaultCl(), host = Device::host();
  for (std::vector<int64_t> shape :
       std::vector<std::vector<int64_t>>{{0, 3}, {}, {1}, {257, 33}, {2, 1, 5}, {3, 0}}) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    test::ExpectNear(randn(shape, 5, DType::f32, cl), randn(shape, 5, DType::f32, host), 1e-5);
    EXPECT_EQ(rand(shape, 5, -3, 2, DType::f32, cl).to_vector<float>(),
              rand(shape, 5, -3, 2, DType::f32, host).to_vector<float>());
  }
  // A transposed view and a broadcast of random values, fused into one kernel with other ops.
  const Tensor xd = ones({16, 9}, DType::f32, cl), xh = ones({16, 9}, DType::f32, host);
  test::ExpectNear(transpose(randn({9, 16}, 3, DType::f32, cl), 0, 1) * 2.0 + xd,
                   transpose(randn({9, 16}, 3, DType::f32, host), 0, 1) * 2.0 + xh, 1e-5);
  test::ExpectNear(rand({16, 1}, 4, 0, 1, DType::f32, cl) + xd,
                   rand({16, 1}, 4, 0, 1, DType::f32, host) + xh, 0);
}

TEST(RandomTest, DistributionsHaveTheirMoments) {
  const Device cl = test::DefaultCl();
  const int64_t n = 1 << 18;
  const std::vector<float> z = randn({n}, 11, DType::f32, cl).to_vector<float>();
  const std::vector<float> u = rand({n}, 12, 0, 1, DType::f32, cl).to_vector<float>();
  double zm = 0, zv = 0, um = 0;
  std::vector<int> buckets(16, 0);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(std::isfinite(z[i])) << i;
    zm += z[i];
    zv += static_cast<double>(z[i]) * z[i];
    um += u[i];
    ++buckets[static_cast<size_t>(u[i] * 16)];
  }
  zm /= n;
  zv = zv / n - zm * zm;
  um /= n;
  // Standard errors: mean 1/sqrt(n) = 0.002, variance sqrt(2/n) = 0.0028; 5 of them.
  EXPECT_NEAR(zm, 0.0, 0.01);
  EXPECT_NEAR(zv, 1.0, 0.014);
  EXPECT_NEAR(um, 0.5, 0.003);
  for (int b : buckets) EXPECT_NEAR(b, n / 16.0, 5 * std::sqrt(n / 16.0)) << "bucket";
  // Neighbouring seeds and neighbouring elements are not correlated.
  const std::vector<float> z2 = randn({n}, 12, DType::f32, cl).to_vector<float>();
  double c_seed = 0, c_next = 0;
  for (int64_t i = 0; i + 1 < n; ++i) {
    c_seed += static_cast<double>(z[i]) * z2[i];
    c_next += static_cast<double>(z[i]) * z[i + 1];
  }
  EXPECT_NEAR(c_seed / n, 0.0, 0.01);
  EXPECT_NEAR(c_next / n, 0.0, 0.01);
}

TEST(RandomTest, DropoutKeepsAboutOneMinusPScaled) {
  const Device cl = test::DefaultCl();
  const int64_t n = 1 << 16;
  const std::vector<float> y =
      nn::dropout(full({n}, 3.0, DType::f32, cl), 0.25, 5).to_vector<float>();
  int64_t kept = 0;
  for (float v : y) {
    if (v != 0) {
      ASSERT_FLOAT_EQ(v, 4.0f);
      ++kept;
    }
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.75, 0.01);
  // The mask is rand(seed) >= p, the same on the host.
  EXPECT_EQ(y, nn::dropout(full({n}, 3.0, DType::f32, Device::host()), 0.25, 5).to_vector<float>());
}

TEST(RandomTest, BadInputIsAnError) {
  const Device cl = test::DefaultCl();
  EXPECT_THROW(randn({2}, 1, DType::i32, cl), Error);
  EXPECT_THROW(rand({2}, 1, 1, 0, DType::f32, cl), Error);
  EXPECT_THROW(randn({-1}, 1, DType::f32, cl), Error);
  try {
    rand({3}, 1, 0, 1, DType::i64, cl);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(test::Has(e.what(), "rand")) << e.what();
    EXPECT_TRUE(test::Has(e.what(), "i64")) << e.what();
  }
}

}  // namespace
}  // namespace lazycl
