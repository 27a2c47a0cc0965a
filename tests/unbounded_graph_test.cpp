// Graphs that grow without bound: a loop that never syncs is cut into bounded pieces
// (kMaxPendingNodes), and one expression over more buffers than a kernel can take is split.
#include <cstdint>
#include <vector>

#include "frontend/tensor_impl.h"
#include "gtest/gtest.h"
#include "ir/ir.h"
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

// y * sigmoid(y) * 0.5 + y * 0.25 reads y three times, so the pending count through every path
// (ir::Node::pending) triples per step, past ir::kMaxPendingNodes after six; the distinct nodes
// grow by six per step, 72 after twelve: no cut.
TEST(UnboundedGraphTest, ANodeReadFromManyPathsCountsOnceTowardTheCut) {
  const std::vector<float> values = {1.5f, -2.0f, 0.25f, 3.0f};
  metrics::reset();
  Tensor y = tensor(values, {4}, kCl);
  Tensor want = tensor(values, {4}, Device::host());
  for (int i = 0; i < 12; ++i) {
    y = y * sigmoid(y) * 0.5 + y * 0.25;
    want = want * sigmoid(want) * 0.5 + want * 0.25;
  }
  EXPECT_GT(y.impl()->node->pending, ir::kMaxPendingNodes);
  EXPECT_EQ(metrics::counter("AutomaticCuts"), 0);
  const std::vector<float> got = y.to_vector<float>();
  const std::vector<float> host = want.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], host[i], 1e-6f) << i;
}

// A cut computes, with the tensor that grew past the limit, the values of its graph that other
// tensors still read; their graphs read those buffers and compute nothing of it again. `h` holds
// three reductions and ~150 elementwise ops: it is kept, and h * 2 is one kernel, not four.
// `e` = exp(sum(h) * 0.01) is two elementwise ops over a reduction: the reduction is kept in its
// place (computing e again costs nothing, fused), and e * 2 is one kernel too.
TEST(UnboundedGraphTest, ACutComputesTheValuesOtherTensorsRead) {
  constexpr int kN = 64;
  std::vector<float> xv(kN);
  for (int i = 0; i < kN; ++i) xv[i] = 0.01f * static_cast<float>(i % 13) - 0.05f;
  auto layer = [](const Tensor& t) {  // about 100 nodes with a reduction
    Tensor u = t;
    for (int i = 0; i < 25; ++i) u = u * 0.99 + 0.001;
    return u - sum(u) * 0.001;
  };
  auto tail = [](Tensor t) {
    for (int i = 0; i < 80; ++i) t = t * 1.001 + 0.002;
    return t;
  };
  metrics::reset();
  const Tensor h = layer(layer(layer(tensor(xv, {kN}, kCl))));  // under the limit: pending
  const Tensor e = exp(sum(h) * 0.01);
  ASSERT_EQ(metrics::counter("KernelLaunches"), 0) << h.impl()->node->pending;
  const Tensor a = tail(h * e);  // past the limit: cut
  EXPECT_EQ(metrics::counter("AutomaticCuts"), 1);
  EXPECT_TRUE(h.impl()->node->memo.computed());
  EXPECT_FALSE(e.impl()->node->memo.computed());
  int64_t launches = metrics::counter("KernelLaunches");
  const std::vector<float> got_h = (h * 2.0).to_vector<float>();
  EXPECT_EQ(metrics::counter("KernelLaunches") - launches, 1);
  launches = metrics::counter("KernelLaunches");
  const std::vector<float> got_e = (e * 2.0).to_vector<float>();
  EXPECT_EQ(metrics::counter("KernelLaunches") - launches, 1);

  const Tensor wh = layer(layer(layer(tensor(xv, {kN}, Device::host()))));
  const Tensor we = exp(sum(wh) * 0.01);
  const std::vector<float> want_h = (wh * 2.0).to_vector<float>();
  for (int i = 0; i < kN; ++i) EXPECT_NEAR(got_h[i], want_h[i], 1e-5f) << i;
  EXPECT_NEAR(got_e[0], (we * 2.0).item<float>(), 1e-5f);
  const std::vector<float> got_a = a.to_vector<float>(), want_a = tail(wh * we).to_vector<float>();
  for (int i = 0; i < kN; ++i) EXPECT_NEAR(got_a[i], want_a[i], 1e-5f) << i;
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
