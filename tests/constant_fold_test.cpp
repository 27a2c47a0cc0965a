// Constant folding across graphs (runtime/constant_fold.h): a subexpression of iota, constants
// and scalars that holds a transcendental (rotary tables) is computed once per process and
// device, and later graphs read its buffer instead of launching a kernel for it. Values are the
// host interpreter's; a folded value shared with the cache is never written in place; random
// numbers are never folded; a scalar that keeps changing stops being folded.
#include <cmath>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "runtime/constant_fold.h"

namespace lazycl {
namespace {

const Device kCl = Device::opencl(0);

int64_t C(const char* name) { return metrics::counter(name); }

// A rotary-style table [t, f]: cos(pos * exp(-i * step)), from iota alone.
Tensor Table(Device d, int64_t t, int64_t f, double step) {
  Tensor inv = exp(cast(arange(f, DType::i32, d), DType::f32) * -step);
  Tensor pos = cast(arange(t, DType::i32, d), DType::f32);
  return cos(reshape(pos, {t, 1}) * reshape(inv, {1, f}));
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "element " << i;
}

TEST(ConstantFold, ATableReadByDataIsComputedOnceThenRead) {
  runtime::ClearConstantCache();
  const Tensor x = randn({2, 16, 8}, 7, DType::f32, kCl);
  sync({x});
  auto run = [&] { return (x * Table(kCl, 16, 8, 0.3) + 1.0).to_vector<float>(); };
  const int64_t folded = C("ConstantsFolded"), reads = C("FoldedConstantReads");
  const std::vector<float> first = run();
  EXPECT_EQ(C("ConstantsFolded") - folded, 1);
  EXPECT_GT(runtime::ConstantCacheBytes(), 0);

  // Later graphs read the table: one kernel (x * table + 1), where the table took its own.
  const int64_t launches = C("KernelLaunches");
  const std::vector<float> second = run();
  EXPECT_EQ(C("KernelLaunches") - launches, 1);
  EXPECT_EQ(C("ConstantsFolded") - folded, 1);
  EXPECT_EQ(C("FoldedConstantReads") - reads, 1);
  EXPECT_EQ(second, first);

  const Device h = Device::host();
  ExpectNear(first, (x.to(h) * Table(h, 16, 8, 0.3) + 1.0).to_vector<float>());
}

TEST(ConstantFold, AFoldedOutputIsSharedButNeverWrittenInPlace) {
  runtime::ClearConstantCache();
  const std::vector<float> want = Table(Device::host(), 4, 8, 0.25).to_vector<float>();
  Tensor a = Table(kCl, 4, 8, 0.25);
  sync({a});
  ExpectNear(a.to_vector<float>(), want);
  // The same expression again: the cached value, no kernel.
  Tensor b = Table(kCl, 4, 8, 0.25);
  const int64_t launches = C("KernelLaunches");
  sync({b});
  EXPECT_EQ(C("KernelLaunches") - launches, 0);
  ExpectNear(b.to_vector<float>(), want);
  // Writing into one handle must reach neither the other nor the cache.
  const std::vector<float> ones(32, 1.0f);
  b.copy_from_host(ones.data(), ones.size() * sizeof(float));
  EXPECT_EQ(b.to_vector<float>(), ones);
  ExpectNear(a.to_vector<float>(), want);
  ExpectNear(Table(kCl, 4, 8, 0.25).to_vector<float>(), want);
}

TEST(ConstantFold, ViewsAndSiblingsOfAFoldedValueAreComputedFromIt) {
  runtime::ClearConstantCache();
  const Device h = Device::host();
  const Tensor x = randn({4, 8}, 11, DType::f32, kCl);
  sync({x});
  // Outputs: a view of the table (its own buffer, copied from the folded one), the table read
  // by data, and the table itself, in one graph.
  const Tensor t = Table(kCl, 4, 8, 0.5);
  std::vector<Tensor> outs = {reshape(transpose(t, 0, 1), {32}), x * t, t};
  sync(outs);
  const Tensor th = Table(h, 4, 8, 0.5);
  ExpectNear(outs[0].to_vector<float>(), reshape(transpose(th, 0, 1), {32}).to_vector<float>());
  ExpectNear(outs[1].to_vector<float>(), (x.to(h) * th).to_vector<float>());
  ExpectNear(outs[2].to_vector<float>(), th.to_vector<float>());
}

TEST(ConstantFold, RandomNumbersAreNotFolded) {
  runtime::ClearConstantCache();
  const int64_t folded = C("ConstantsFolded");
  // Box-Muller has log and cos, but RandomUniform is data of a kind: computed on every use.
  const std::vector<float> first = (randn({64}, 3, DType::f32, kCl) * 2.0).to_vector<float>();
  const int64_t launches = C("KernelLaunches");
  const std::vector<float> second = (randn({64}, 3, DType::f32, kCl) * 2.0).to_vector<float>();
  EXPECT_GT(C("KernelLaunches") - launches, 0);
  EXPECT_EQ(C("ConstantsFolded") - folded, 0);
  EXPECT_EQ(first, second);
}

TEST(ConstantFold, AScalarThatKeepsChangingStopsBeingFolded) {
  runtime::ClearConstantCache();
  const Tensor x = randn({16, 8}, 9, DType::f32, kCl);
  sync({x});
  const int64_t folded = C("ConstantsFolded"), compiles = C("GraphCompiles");
  for (int step = 0; step < 12; ++step) {
    const double s = 0.05 * (step + 1);  // a scalar argument: no new program for a new value
    const std::vector<float> got = (x * Table(kCl, 16, 8, s)).to_vector<float>();
    ExpectNear(got, (x.to(Device::host()) * Table(Device::host(), 16, 8, s)).to_vector<float>());
  }
  // Four values are folded; from then on the table is computed inside the graph that reads it.
  EXPECT_EQ(C("ConstantsFolded") - folded, 4);
  // The folding graph, the graph reading the table's buffer, and (after four values) the graph
  // that computes it inline: three plans, whatever the number of values.
  EXPECT_LE(C("GraphCompiles") - compiles, 3);
}

TEST(ConstantFold, CheapOrLargeSubexpressionsStayInTheirKernels) {
  runtime::ClearConstantCache();
  const int64_t folded = C("ConstantsFolded");
  const Tensor x = randn({64}, 5, DType::f32, kCl);
  sync({x});
  // An iota mask has no transcendental: it stays fused.
  (void)where(lt(arange(64, DType::i32, kCl), 40), x, 0.0).to_vector<float>();
  // Past 2^20 elements a table read by data is recomputed rather than held.
  const Tensor data = randn({int64_t{1} << 21}, 6, DType::f32, kCl);
  sync({data});
  const Tensor big = cos(cast(arange(int64_t{1} << 21, DType::i32, kCl), DType::f32));
  (void)sum(big * data).item<float>();
  EXPECT_EQ(C("ConstantsFolded") - folded, 0);
}

// The first op that reads data and takes a table folds it as the op is made: the table is
// computed (or read from the cache) then, the op reads its buffer, and the table's tensor holds
// that buffer from then on, so that its next readers (every layer of a model reads the same
// rotary tables) neither fold again nor carry the table's expression into their graphs.
TEST(ConstantFold, AnOpThatReadsATableFoldsItAsItIsMade) {
  runtime::ClearConstantCache();
  const Device h = Device::host();
  const Tensor x = randn({2, 16, 8}, 7, DType::f32, kCl);
  const Tensor w = randn({8, 16}, 8, DType::f32, kCl);
  sync({x, w});
  const int64_t folded = C("ConstantsFolded"), reads = C("FoldedConstantReads");
  const int64_t launches = C("KernelLaunches");
  Tensor t = Table(kCl, 16, 8, 0.3);
  EXPECT_EQ(C("KernelLaunches") - launches, 0);  // a table alone is lazy
  Tensor y = x * t;
  EXPECT_EQ(C("ConstantsFolded") - folded, 1);
  EXPECT_EQ(C("KernelLaunches") - launches, 1);  // the table's kernel; y is still pending
  // Later readers of t, through views too, read its buffer: nothing folds or is read again.
  Tensor z = w * transpose(t, 0, 1) + 2.0;
  Tensor u = exp(t) * x;  // a new expression over the folded table reads data: not folded
  EXPECT_EQ(C("ConstantsFolded") - folded, 1);
  EXPECT_EQ(C("FoldedConstantReads") - reads, 0);
  sync({y, z, u});
  const Tensor th = Table(h, 16, 8, 0.3);
  ExpectNear(y.to_vector<float>(), (x.to(h) * th).to_vector<float>());
  ExpectNear(z.to_vector<float>(), (w.to(h) * transpose(th, 0, 1) + 2.0).to_vector<float>());
  ExpectNear(u.to_vector<float>(), (exp(th) * x.to(h)).to_vector<float>());
  ExpectNear(t.to_vector<float>(), th.to_vector<float>());
  // The same table built again is read from the cache at its first reader.
  Tensor again = x * Table(kCl, 16, 8, 0.3);
  EXPECT_EQ(C("ConstantsFolded") - folded, 1);
  EXPECT_EQ(C("FoldedConstantReads") - reads, 1);
  ExpectNear(again.to_vector<float>(), (x.to(h) * th).to_vector<float>());
}

// Folding as an op is made, at the edges: a table of one element broadcast over data, an empty
// table (never folded: nothing to compute), and a table read by empty data; values are the
// host's, read through a view that is not contiguous (transpose of a transpose).
TEST(ConstantFold, SizeOneAndEmptyTablesAndEmptyData) {
  runtime::ClearConstantCache();
  const Device h = Device::host();
  struct Case {
    int64_t t, f, batch, folds;
  };
  for (const Case c : {Case{1, 1, 3, 1}, Case{0, 8, 2, 0}, Case{4, 1, 2, 1}, Case{5, 3, 0, 1}}) {
    const Tensor x = randn({c.batch, c.t, c.f}, 3, DType::f32, kCl);
    sync({x});
    const int64_t folded = C("ConstantsFolded");
    const Tensor table = Table(kCl, c.t, c.f, 0.3);
    const Tensor y = x * transpose(transpose(table, 0, 1), 0, 1) + table;
    EXPECT_EQ(C("ConstantsFolded") - folded, c.folds) << c.t << "x" << c.f << " batch " << c.batch;
    const Tensor th = Table(h, c.t, c.f, 0.3);
    ExpectNear(y.to_vector<float>(), (x.to(h) * th + th).to_vector<float>());
  }
}

// Gradients flow through an op whose table operand was folded as it was made (the table has
// none of its own), on the device as on the host.
TEST(ConstantFold, GradientsPassThroughAnOpThatFoldedItsTable) {
  runtime::ClearConstantCache();
  const Device h = Device::host();
  auto grads = [](Device d) {
    Tensor w = randn({16, 8}, 21, DType::f32, d).requires_grad_();
    const Tensor t = Table(d, 16, 8, 0.7);
    Tensor loss = sum(sin(w * t) * t);
    loss.backward();
    return std::pair{loss.item<float>(), w.grad().to_vector<float>()};
  };
  const int64_t folded = C("ConstantsFolded");
  const auto [loss, grad] = grads(kCl);
  EXPECT_EQ(C("ConstantsFolded") - folded, 1);
  const auto [want_loss, want_grad] = grads(h);
  EXPECT_NEAR(loss, want_loss, 1e-4 * (1 + std::abs(want_loss)));
  ExpectNear(grad, want_grad);
}

// A scan's body, traced as the scan is made, folds the table it captured as an op outside a
// trace does: the step loop has nothing left to hoist (it hoisted the table again at every call
// of a sampling loop's layers, rebuilding the body around it). A table whose tensor takes part
// in the gradient stays as it is there, and its gradient is the host's.
TEST(ConstantFold, AScanBodyFoldsTheTableItCaptured) {
  runtime::ClearConstantCache();
  using Ts = std::vector<Tensor>;
  auto run = [](Device d, bool with_grad) {
    Tensor scale = full({1}, 0.5, DType::f32, d);  // a constant: the table reads no data
    if (with_grad) scale.requires_grad_();
    const Tensor t = Table(d, 16, 8, 0.4) * exp(scale);
    ScanFn body = [&](const Ts& carry, const Ts& x) {
      return std::make_pair(Ts{carry[0] * t + x[0]}, Ts{});
    };
    const Tensor xs = randn({3, 16, 8}, 5, DType::f32, d);
    const Tensor h = scan(body, {ones({16, 8}, DType::f32, d)}, {xs}).carry[0];
    std::vector<float> out = h.to_vector<float>();
    if (with_grad) {
      sum(h).backward();
      out.push_back(scale.grad().item<float>());
    }
    return out;
  };
  const int64_t hoisted = C("ScanHoistedNodes"), folded = C("ConstantsFolded");
  const std::vector<float> got = run(kCl, false);
  EXPECT_EQ(C("ScanHoistedNodes") - hoisted, 0);
  EXPECT_EQ(C("ConstantsFolded") - folded, 1);
  ExpectNear(got, run(Device::host(), false));

  const int64_t hoisted_grad = C("ScanHoistedNodes");
  const std::vector<float> got_grad = run(kCl, true);
  EXPECT_EQ(C("ScanHoistedNodes") - hoisted_grad, 1);
  ExpectNear(got_grad, run(Device::host(), true));
}

// Every layer reads the same table through a tensor of its own (a cast to the layer's dtype):
// the first op folds it by its structure, the others find the same node among the recent folds.
// Values are the host's.
TEST(ConstantFold, ATableReadThroughSeveralTensorsIsFoldedOnce) {
  runtime::ClearConstantCache();
  const Tensor x = randn({16, 8}, 11, DType::f32, kCl);
  sync({x});
  auto layers = [&](Device d) {
    const Tensor t = Table(d, 16, 8, 0.2);
    Tensor h = x.to(d);
    for (int l = 0; l < 4; ++l) h = h * cast(t, DType::f32) + 0.5;
    return h.to_vector<float>();
  };
  const int64_t folded = C("ConstantsFolded"), reads = C("FoldedConstantReads"),
                by_node = C("FoldedConstantReadsByNode");
  const std::vector<float> got = layers(kCl);
  EXPECT_EQ(C("ConstantsFolded") - folded, 1);
  EXPECT_EQ(C("FoldedConstantReads") - reads, 3);
  EXPECT_EQ(C("FoldedConstantReadsByNode") - by_node, 3);
  ExpectNear(got, layers(Device::host()));
}

// A traced Function folds its constant subexpressions once, at its first call: later calls read
// the folded buffer without folding (or rebuilding the graph around it) again, and a call inside
// another trace folds nothing. Values are the host's.
TEST(ConstantFold, ATracedFunctionFoldsItsTablesAtItsFirstCallOnly) {
  const Fn fn = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{a[0] * Table(a[0].device(), 16, 8, 0.3) + 1.0};
  };
  const Function f = trace(fn, {{{2, 16, 8}, DType::f32}}, kCl);
  const Tensor x = randn({2, 16, 8}, 9, DType::f32, kCl);
  sync({x});
  const Device h = Device::host();
  const std::vector<float> want = (x.to(h) * Table(h, 16, 8, 0.3) + 1.0).to_vector<float>();
  // Inside another trace: no folding (a trace computes nothing).
  const Function outer =
      trace([&](const std::vector<Tensor>& a) { return f(a); }, {{{2, 16, 8}, DType::f32}}, kCl);
  runtime::ClearConstantCache();
  const int64_t folded = C("ConstantsFolded"), reads = C("FoldedConstantReads");
  ExpectNear(f({x})[0].to_vector<float>(), want);
  EXPECT_EQ(C("ConstantsFolded") - folded, 1);
  for (int i = 0; i < 3; ++i) ExpectNear(f({x})[0].to_vector<float>(), want);
  ExpectNear(outer({x})[0].to_vector<float>(), want);
  EXPECT_EQ(C("ConstantsFolded") - folded, 1);
  // The outer Function folded the table too (a cache hit); f's own calls read no cache.
  EXPECT_EQ(C("FoldedConstantReads") - reads, 1);
}

}  // namespace
}  // namespace lazycl
