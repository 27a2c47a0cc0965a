// Graphs that grow without bound: a loop that never syncs is cut into bounded pieces
// (ir::MaxPendingNodes()), and one expression over more buffers than a kernel can take is split.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "frontend/tensor_impl.h"
#include "gtest/gtest.h"
#include "ir/ir.h"
#include "ir/post_order.h"
#include "ir_test_util.h"
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
  // The graph is cut every MaxPendingNodes() adds and the pieces repeat: a handful of compiles,
  // the rest cache hits, and far fewer kernels than adds.
  EXPECT_LE(metrics::counter("GraphCompiles"), 4);
  EXPECT_GE(metrics::counter("GraphCacheHits"), kSteps / (ir::MaxPendingNodes() + 1) - 4);
  EXPECT_LT(metrics::counter("KernelLaunches"), kSteps / 100);
}

// y * sigmoid(y) * 0.5 + y * 0.25 reads y three times, so the pending count through every path
// (ir::Node::pending) triples per step, past ir::MaxPendingNodes() (1024) after seven; the distinct
// nodes grow by six per step, 72 after twelve: no cut.
TEST(UnboundedGraphTest, ANodeReadFromManyPathsCountsOnceTowardTheCut) {
  const std::vector<float> values = {1.5f, -2.0f, 0.25f, 3.0f};
  metrics::reset();
  Tensor y = tensor(values, {4}, kCl);
  Tensor want = tensor(values, {4}, Device::host());
  for (int i = 0; i < 12; ++i) {
    y = y * sigmoid(y) * 0.5 + y * 0.25;
    want = want * sigmoid(want) * 0.5 + want * 0.25;
  }
  EXPECT_GT(y.impl()->node->pending, ir::MaxPendingNodes());
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
    // 80 steps (four nodes each: two broadcast scalars) past a bound of 512, more for a higher one.
    const int64_t steps = 80 + (ir::MaxPendingNodes() - 512) / 4;
    for (int64_t i = 0; i < steps; ++i) t = t * 1.001 + 0.002;
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

// The distinct pending nodes of `n`'s graph, counted one by one: what PastPendingLimit decides on.
int64_t DistinctPending(const ir::NodePtr& n) {
  int64_t count = 0;
  for (const ir::Node* m : ir::PostOrder(std::vector<ir::NodePtr>{n}))
    count += m->pending > 0 && !m->memo.computed() ? 1 : 0;
  return count;
}

// Every non-leaf node a builder makes counts among the live pending nodes until it is destroyed;
// leaves and copies of nodes that no builder made do not.
TEST(UnboundedGraphTest, LivePendingNodesCountsTheNodesBuildersMade) {
  using test::Ok;
  const int64_t before = ir::LivePendingNodes();
  {
    const ir::NodePtr leaf = ir::MakeConstant(1.0, DType::f32, {4});
    EXPECT_EQ(ir::LivePendingNodes(), before);
    const ir::NodePtr a = Ok(ir::MakeUnary(ir::Op::kExp, leaf));
    const ir::NodePtr b = Ok(ir::MakeBinary(ir::Op::kAdd, a, a));
    EXPECT_EQ(ir::LivePendingNodes(), before + 2);
    const ir::Node copy = *b;
    EXPECT_EQ(copy.pending, b->pending);
    EXPECT_EQ(ir::LivePendingNodes(), before + 2);
  }
  EXPECT_EQ(ir::LivePendingNodes(), before);
}

// A small transformer-like stack built op by op: each layer reads its input from many places, so
// the path count (ir::Node::pending) passes the limit after a few layers, while the distinct
// nodes stay under it. No node is past the limit, and while the live pending nodes are at most
// the limit (ir::LivePendingNodes) that decides it without counting any graph node by node: a
// 4-layer char-LM sampling forward built this way walked its graph at joins of branches, 12%
// of the host's instructions a token.
TEST(UnboundedGraphTest, AGraphUnderTheLimitIsNotWalkedWhileFewNodesLive) {
  auto layers = [](Tensor h, const Tensor& w) {
    for (int l = 0; l < 8; ++l) {
      const Tensor x = h * rsqrt(mean(h * h, {1}, true) + 1e-5);
      const Tensor q = matmul(x, w), k = matmul(x, w) * 0.5, v = matmul(x, w) + 0.1;
      const Tensor p = softmax(matmul(q, transpose(k, 0, 1)), 1);
      h = h + matmul(matmul(p, v), w);
      const Tensor y = h * rsqrt(mean(h * h, {1}, true) + 1e-5);
      h = h + matmul(silu(matmul(y, w)) * matmul(y, w), w);
    }
    return h;
  };
  const Tensor h0 = randn({4, 8}, 1, DType::f32, Device::host());
  const Tensor w = randn({8, 8}, 2, DType::f32, Device::host()) * 0.3;
  const Tensor h0d = h0.to(kCl), wd = w.to(kCl);
  sync({h0d, wd});
  ASSERT_LE(ir::LivePendingNodes(), ir::MaxPendingNodes() / 4);
  metrics::reset();
  const Tensor got = layers(h0d, wd);
  ASSERT_GT(got.impl()->node->pending, ir::MaxPendingNodes());
  EXPECT_LT(DistinctPending(got.impl()->node), ir::MaxPendingNodes());
  EXPECT_EQ(metrics::counter("AutomaticCuts"), 0);
  EXPECT_EQ(metrics::counter("PendingCountWalks"), 0);
  const std::vector<float> d = got.to_vector<float>(), h = layers(h0, w).to_vector<float>();
  ASSERT_EQ(d.size(), h.size());
  for (size_t i = 0; i < d.size(); ++i) EXPECT_NEAR(d[i], h[i], 1e-4f * (1 + std::fabs(h[i]))) << i;
}

// A transformer-like stack built op by op, as the frontend builds it: each op's node is checked
// (ir::PastPendingLimit) once its path count passes the limit, and nodes made inside one op (the
// reshapes and 2-D product of a [1, T, D] @ [D, D]) are not. The decision is the exact count's
// every time and the count never errs low, while the walks that count nodes one by one stay
// few: a join inside one walked graph (h + attention(h)), a small branch of its own (a rotary
// table), and the nodes made inside an op all start from what their operands learned.
TEST(UnboundedGraphTest, ATransformerLikeGraphIsCountedExactlyWithFewWalks) {
  using test::Ok;
  const int64_t t = 4, d = 8;
  auto leaf = [](double v, ir::Shape s) { return ir::MakeConstant(v, DType::f32, std::move(s)); };
  int64_t checked = 0, below = 0;
  auto made = [&](ir::NodePtr n) {
    if (n->pending > ir::MaxPendingNodes()) {
      const bool past = ir::PastPendingLimit(*n);
      const int64_t exact = DistinctPending(n);
      EXPECT_EQ(past, exact > ir::MaxPendingNodes()) << ir::NodeString(*n) << " " << exact;
      EXPECT_GE(n->memo.distinct(), std::min<int64_t>(exact, ir::MaxPendingNodes() + 1))
          << ir::NodeString(*n);
      ++checked;
      below += past ? 0 : 1;
    }
    return n;
  };
  auto bin = [&](ir::Op op, ir::NodePtr a, ir::NodePtr b) {
    return made(Ok(ir::MakeBinary(op, std::move(a), std::move(b))));
  };
  auto expand = [&](ir::NodePtr x, ir::Shape s) { return made(Ok(ir::MakeExpand(x, s))); };
  // [t, d] @ [d, n] as matmul([1, t, d], [d, n]) makes it: the inner nodes are not checked.
  auto product = [&](ir::NodePtr x, int64_t n) {
    ir::NodePtr x3 = Ok(ir::MakeReshape(x, {1, t, d}));
    ir::NodePtr m = Ok(ir::MakeMatmul(Ok(ir::MakeReshape(x3, {t, d})), leaf(0.1, {d, n})));
    return made(Ok(ir::MakeReshape(Ok(ir::MakeReshape(m, {1, t, n})), {t, n})));
  };
  auto norm = [&](ir::NodePtr h) {
    ir::NodePtr ss = made(Ok(ir::MakeReduce(ir::Op::kSum, bin(ir::Op::kMul, h, h), {1})));
    return bin(ir::Op::kMul, h, expand(made(Ok(ir::MakeUnary(ir::Op::kRsqrt, ss))), {t, d}));
  };
  // A rotary-style table: a few pending nodes of its own, shared by every layer.
  const ir::NodePtr table = made(Ok(ir::MakeUnary(
      ir::Op::kCos,
      Ok(ir::MakeExpand(
          Ok(ir::MakeReshape(Ok(ir::MakeCast(ir::MakeIota(DType::i32, d), DType::f32)), {1, d})),
          {t, d})))));
  const int64_t walks_before = metrics::counter("PendingCountWalks");
  ir::NodePtr h = made(Ok(ir::MakeUnary(ir::Op::kExp, leaf(0.5, {t, d}))));
  // 12 layers (~700 distinct pending nodes) per 512 of the bound: past it in the stack's middle.
  const int64_t layers = 12 * ir::MaxPendingNodes() / 512;
  for (int64_t layer = 0; layer < layers; ++layer) {
    const ir::NodePtr x = norm(h);
    const ir::NodePtr q = bin(ir::Op::kMul, product(x, d), table);
    const ir::NodePtr k = bin(ir::Op::kMul, product(x, d), table);
    const ir::NodePtr v = product(x, d);
    const ir::NodePtr s = made(Ok(ir::MakeMatmul(q, made(Ok(ir::MakePermute(k, {1, 0}))))));
    const ir::NodePtr e = made(Ok(ir::MakeUnary(ir::Op::kExp, s)));
    const ir::NodePtr sum = made(Ok(ir::MakeReduce(ir::Op::kSum, e, {1})));
    const ir::NodePtr p = bin(ir::Op::kDiv, e, expand(sum, {t, t}));
    h = bin(ir::Op::kAdd, h, product(made(Ok(ir::MakeMatmul(p, v))), d));
    const ir::NodePtr y = norm(h);
    const ir::NodePtr gate = made(Ok(ir::MakeUnary(ir::Op::kSilu, product(y, d))));
    h = bin(ir::Op::kAdd, h, product(bin(ir::Op::kMul, gate, product(y, d)), d));
  }
  const int64_t walks = metrics::counter("PendingCountWalks") - walks_before;
  // The graph passes the limit in the stack's middle: checks on both sides of it.
  EXPECT_GT(below, 20);
  EXPECT_GT(checked - below, 20);
  EXPECT_GT(DistinctPending(h), ir::MaxPendingNodes());
  // Walks where a graph first passes the limit and where branches join whose counts do not
  // start from one walk: 33 of 690 checks at the bound 1024, where adding both branches' counts
  // of one walked graph (q k^T, gate * up: the layer's input counted twice) walked 75 times, and
  // walking at every check past the sum of the operands' counts 134 times at the bound 512.
  EXPECT_LE(walks, checked / 15) << checked;
}

}  // namespace
}  // namespace lazycl
