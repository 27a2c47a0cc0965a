// Graphs that grow without bound: a loop that never syncs is cut into bounded pieces
// (kMaxPendingNodes), and one expression over more buffers than a kernel can take is split.
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

const Device kCl = Device::opencl(0);

TEST(UnboundedGraphTest, HundredThousandAddsRunInBoundedMemoryAndFewCompiles) {
  constexpr int kN = 1024;
  constexpr int kSteps = 100000;
  std::vector<int32_t> a0(kN), bv(kN);
  for (int i = 0; i < kN; ++i) {
    a0[i] = i - 500;
    bv[i] = (i % 7) - 3;
  }
  Tensor a = tensor(a0, {kN}, kCl);
  Tensor b = tensor(bv, {kN}, kCl);
  metrics::reset();  // DevicePeakBytes restarts from the bytes held now (a and b)
  const int64_t live = metrics::counter("DeviceLiveBytes");
  for (int i = 0; i < kSteps; ++i) a = a + b;
  const std::vector<int32_t> got = a.to_vector<int32_t>();  // integers: exact
  for (int i = 0; i < kN; ++i) ASSERT_EQ(got[i], a0[i] + kSteps * bv[i]) << i;

  // At most a few [1024] i32 buffers (4 KiB each) are alive at once beyond a and b.
  EXPECT_LT(metrics::counter("DevicePeakBytes") - live, 64 * 1024);
  // The graph is cut every kMaxPendingNodes and the pieces repeat: a handful of compiles, the
  // rest cache hits, and far fewer kernels than adds.
  EXPECT_LE(metrics::counter("GraphCompiles"), 4);
  EXPECT_GE(metrics::counter("GraphCacheHits"), kSteps / 1024);
  EXPECT_LT(metrics::counter("KernelLaunches"), kSteps / 100);
}

TEST(UnboundedGraphTest, LongFloatChainStaysAccurate) {
  Tensor a = zeros({256}, DType::f32, kCl);
  Tensor b = full({256}, 0.5, DType::f32, kCl);  // exactly representable, as every partial sum
  for (int i = 0; i < 20000; ++i) a = a + b;
  for (float v : a.to_vector<float>()) ASSERT_EQ(v, 10000.0f);
}

// The lowering splits a kernel whose buffer arguments exceed the device's parameter space, so
// one expression may read any number of distinct buffers.
TEST(UnboundedGraphTest, SumOfThreeHundredDistinctBuffersInOneExpression) {
  constexpr int kTerms = 300;
  constexpr int kN = 33;
  std::vector<Tensor> terms;
  int64_t want_total = 0;
  for (int t = 0; t < kTerms; ++t) {
    std::vector<int32_t> v(kN);
    for (int i = 0; i < kN; ++i) v[i] = t * 3 + i;
    terms.push_back(tensor(v, {kN}, kCl));
  }
  const int64_t graphs = metrics::counter("GraphCompiles") + metrics::counter("GraphCacheHits");
  Tensor acc = terms[0];
  for (int t = 1; t < kTerms; ++t) acc = acc + terms[t];
  const std::vector<int32_t> got = acc.to_vector<int32_t>();
  // One graph (300 nodes is under the pending limit), however many kernels it took.
  EXPECT_EQ(metrics::counter("GraphCompiles") + metrics::counter("GraphCacheHits"), graphs + 1);
  for (int i = 0; i < kN; ++i) {
    want_total = 0;
    for (int t = 0; t < kTerms; ++t) want_total += t * 3 + i;
    ASSERT_EQ(got[i], want_total) << i;
  }
}

TEST(UnboundedGraphTest, WideExpressionWithBroadcastsAndViews) {
  // Distinct buffers reached through views (transpose, broadcast) count against the limit too.
  constexpr int kTerms = 200;
  std::vector<Tensor> rows;
  for (int t = 0; t < kTerms; ++t)
    rows.push_back(tensor(std::vector<float>(8, static_cast<float>(t)), {1, 8}, kCl));
  Tensor acc = zeros({8, 8}, DType::f32, kCl);
  for (int t = 0; t < kTerms; ++t) acc = acc + (t % 2 == 0 ? rows[t] : transpose(rows[t], 0, 1));
  const std::vector<float> got = acc.to_vector<float>();
  const float want = kTerms * (kTerms - 1) / 2.0f;
  for (float v : got) ASSERT_EQ(v, want);
}

}  // namespace
}  // namespace lazycl
