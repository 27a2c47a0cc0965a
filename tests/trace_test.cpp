// trace / call (MISSION.md section 3, SPEC "trace/call"): a C++ function traced once on
// placeholders, compiled once, with unused arguments pruned and never uploaded.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/tensor_impl.h"
#include "frontend/trace_scope.h"
#include "gtest/gtest.h"
#include "ir/ir.h"
#include "lazycl/lazycl.h"
#include "runtime/executor.h"
#include "test_util.h"

namespace lazycl {
namespace {

using test::C;
using test::ErrorOf;
using test::Has;
using test::Iota;
using test::NumParams;

const Device kCl = Device::opencl(0);
const Device kHost = Device::host();

Fn Wrap1(Tensor (*f)(const std::vector<Tensor>&)) {
  return [f](const std::vector<Tensor>& a) { return std::vector<Tensor>{f(a)}; };
}

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sync({ones({1}, DType::f32, kCl) + 1});
    metrics::reset();
    live_ = C("DeviceLiveBytes");
  }
  int64_t live_ = 0;
};

// f(a, b, c, d) = a + sin(b)
Tensor APlusSinB(const std::vector<Tensor>& a) { return a[0] + sin(a[1]); }

TEST_F(TraceTest, TracingMovesAndAllocatesNothing) {
  int calls = 0;
  Function f = trace(
      [&calls](const std::vector<Tensor>& a) {
        ++calls;
        for (const Tensor& t : a) EXPECT_TRUE(t.is_placeholder());
        return std::vector<Tensor>{a[0] + sin(a[1])};
      },
      {{{64, 64}, DType::f32}, {{64, 64}, DType::f32}, {{8}, DType::i32}, {{3}, DType::f32}}, kCl);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(f.used_arguments(), (std::vector<int>{0, 1}));
  EXPECT_EQ(f.num_parameters(), 2);
  EXPECT_EQ(f.device(), kCl);
  ASSERT_EQ(f.arguments().size(), 4u);
  EXPECT_EQ(f.arguments()[2].shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(f.arguments()[2].dtype, DType::i32);
  EXPECT_EQ(C("TraceTransferBytes"), 0);
  EXPECT_EQ(C("TransferToDeviceBytes"), 0);
  EXPECT_EQ(C("TransferFromDeviceBytes"), 0);
  EXPECT_EQ(C("DeviceAllocBytes"), 0);
  EXPECT_EQ(C("DeviceLiveBytes"), live_);
  EXPECT_EQ(C("KernelLaunches"), 0);
  EXPECT_EQ(C("GraphCompiles"), 0);
  // Calling does not trace again.
  f({ones({64, 64}, DType::f32, kCl), ones({64, 64}, DType::f32, kCl), zeros({8}, DType::i32, kCl),
     zeros({3}, DType::f32, kCl)});
  EXPECT_EQ(calls, 1);
}

TEST_F(TraceTest, FourHostArgumentsUploadOnlyTheUsedTwo) {
  Function f = trace(
      Wrap1(APlusSinB),
      {{{2, 3}, DType::f32}, {{2, 3}, DType::f32}, {{5}, DType::f32}, {{1000}, DType::f32}}, kCl);
  EXPECT_EQ(f.used_arguments(), (std::vector<int>{0, 1}));
  EXPECT_EQ(f.num_parameters(), 2);
  const std::vector<float> a = Iota(6, 1, 1), b = Iota(6, -1, 0.4f);
  Tensor ha = tensor(a, {2, 3}, kHost), hb = tensor(b, {2, 3}, kHost);
  Tensor hc = tensor(Iota(5, 0, 1), {5}, kHost), hd = tensor(Iota(1000, 0, 1), {1000}, kHost);
  metrics::reset();
  std::vector<Tensor> out = f({ha, hb, hc, hd});
  EXPECT_EQ(C("TransferToDeviceBytes"), 2 * 6 * 4);
  EXPECT_EQ(C("TransferToDeviceCount"), 2);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].device(), kCl);
  const std::vector<float> got = out[0].to_vector<float>();
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(got[i], a[i] + std::sin(b[i]), 1e-6) << i;
  // The Function's compiled graph ran once, with the two used arguments bound.
  EXPECT_EQ(C("CompiledGraphRuns"), 1);
  EXPECT_EQ(C("CompiledGraphInputsBound"), 2);
  EXPECT_EQ(C("TransferToDeviceBytes"), 2 * 6 * 4);  // computing uploaded nothing more
  EXPECT_EQ(C("TraceTransferBytes"), 0);
}

TEST_F(TraceTest, CallWithFourHostArgumentsUploadsOnlyTheUsedTwo) {
  const std::vector<float> a = Iota(6, 0.5f, 1), b = Iota(6, 2, -0.3f);
  std::vector<Tensor> args = {tensor(a, {3, 2}, kHost), tensor(b, {3, 2}, kHost),
                              tensor(Iota(7, 0, 1), {7}, kHost),
                              tensor(std::vector<int32_t>{1, 2, 3}, {3}, kHost)};
  metrics::reset();
  std::vector<Tensor> out = call(Wrap1(APlusSinB), args);
  EXPECT_EQ(C("TransferToDeviceBytes"), 2 * 6 * 4);
  EXPECT_EQ(C("TraceTransferBytes"), 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].device(), default_env().device());
  EXPECT_EQ(NumParams(out), 2);
  const std::vector<float> got = out[0].to_vector<float>();
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(got[i], a[i] + std::sin(b[i]), 1e-6) << i;
  EXPECT_EQ(C("TransferToDeviceBytes"), 2 * 6 * 4);
}

// Which arguments are unused, first, middle or last; the rest must bind to the right
// parameters (the bodies are not symmetric in their arguments).
struct Case {
  const char* name;
  Fn fn;
  std::vector<int> used;
  std::vector<float> want;  // for arguments A, B, C below
};

TEST_F(TraceTest, UnusedArgumentPositions) {
  const std::vector<float> A = {1, 2, 3, 4}, B = {10, 20, 30, 40}, Cv = {100, 200, 300, 400};
  std::vector<Case> cases = {
      {"unused first",
       [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[1] - a[2]}; },
       {1, 2},
       {-90, -180, -270, -360}},
      {"unused middle",
       [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[2] - a[0] * 2}; },
       {0, 2},
       {98, 196, 294, 392}},
      {"unused last",
       [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] - a[1]}; },
       {0, 1},
       {-9, -18, -27, -36}},
      {"unused first and last",
       [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[1] / 10}; },
       {1},
       {1, 2, 3, 4}},
      {"only last",
       [](const std::vector<Tensor>& a) { return std::vector<Tensor>{-a[2]}; },
       {2},
       {-100, -200, -300, -400}},
      {"reversed",
       [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[2] - a[1] - a[0]}; },
       {0, 1, 2},
       {89, 178, 267, 356}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<TensorSpec> specs(3, TensorSpec{{4}, DType::f32});
    Function f = trace(c.fn, specs, kCl);
    EXPECT_EQ(f.used_arguments(), c.used);
    EXPECT_EQ(f.num_parameters(), static_cast<int>(c.used.size()));
    // Host arguments: only the used ones are uploaded.
    metrics::reset();
    std::vector<Tensor> out =
        f({tensor(A, {4}, kHost), tensor(B, {4}, kHost), tensor(Cv, {4}, kHost)});
    EXPECT_EQ(C("TransferToDeviceBytes"), static_cast<int64_t>(c.used.size()) * 16);
    EXPECT_EQ(out[0].to_vector<float>(), c.want);
    // Device arguments give the same, and the unused ones are not bound to the graph.
    std::vector<Tensor> dev = {tensor(A, {4}, kCl), tensor(B, {4}, kCl), tensor(Cv, {4}, kCl)};
    const int64_t bound = C("CompiledGraphInputsBound");
    std::vector<Tensor> out2 = f(dev);
    EXPECT_EQ(out2[0].to_vector<float>(), c.want);
    EXPECT_EQ(C("CompiledGraphInputsBound") - bound, static_cast<int64_t>(c.used.size()));
    // Through call too, whose inlined body makes the unused ones no parameters of the graph.
    std::vector<Tensor> out3 = call(c.fn, dev);
    EXPECT_EQ(NumParams(out3), static_cast<int>(c.used.size()));
    EXPECT_EQ(out3[0].to_vector<float>(), c.want);
  }
  EXPECT_EQ(C("TraceTransferBytes"), 0);
}

TEST_F(TraceTest, UnusedArgumentMayEvenBeAPlaceholder) {
  Function f = trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] * 2}; },
                     {{{3}, DType::f32}, {{3}, DType::f32}}, kCl);
  Tensor x = tensor(std::vector<float>{1, 2, 3}, {3}, kCl);
  EXPECT_EQ(f({x, placeholder({3}, DType::f32, kCl)})[0].to_vector<float>(),
            (std::vector<float>{2, 4, 6}));
  // A used placeholder argument gives a lazy result that cannot be read.
  Tensor y = f({placeholder({3}, DType::f32, kCl), x})[0];
  try {
    (void)y.to_vector<float>();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(Has(e.what(), "placeholder")) << e.what();
  }
}

TEST_F(TraceTest, ArgumentUsedOnlyThroughItsShapeIsNotAParameter) {
  auto fn = [](const std::vector<Tensor>& a) {
    // b's shape and dtype, never its data.
    return std::vector<Tensor>{reshape(a[0], a[1].shape()) + static_cast<double>(a[1].numel()) +
                               cast(zeros(a[1].shape(), a[1].dtype(), a[0].device()), DType::f32)};
  };
  Function f = trace(fn, {{{6}, DType::f32}, {{2, 3}, DType::i64}}, kCl);
  EXPECT_EQ(f.used_arguments(), (std::vector<int>{0}));
  EXPECT_EQ(f.num_parameters(), 1);
  Tensor b = tensor(std::vector<int64_t>{7, 7, 7, 7, 7, 7}, {2, 3}, kHost);
  metrics::reset();
  std::vector<Tensor> out = f({tensor(Iota(6, 0, 1), {6}, kHost), b});
  EXPECT_EQ(C("TransferToDeviceBytes"), 6 * 4);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{6, 7, 8, 9, 10, 11}));
}

TEST_F(TraceTest, ReturnsAnInputUnchanged) {
  Function id = trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[1]}; },
                      {{{3}, DType::i32}, {{2, 2}, DType::f32}}, kCl);
  EXPECT_EQ(id.used_arguments(), (std::vector<int>{1}));
  Tensor x = tensor(std::vector<float>{1, 2, 3, 4}, {2, 2}, kCl);
  std::vector<Tensor> out = id({tensor(std::vector<int32_t>{1, 2, 3}, {3}, kCl), x});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  // From host: uploaded once, lands on the device.
  metrics::reset();
  std::vector<Tensor> out2 = id({tensor(std::vector<int32_t>{1, 2, 3}, {3}, kHost),
                                 tensor(std::vector<float>{5, 6, 7, 8}, {2, 2}, kHost)});
  EXPECT_EQ(C("TransferToDeviceBytes"), 16);
  EXPECT_EQ(out2[0].device(), kCl);
  EXPECT_EQ(out2[0].to_vector<float>(), (std::vector<float>{5, 6, 7, 8}));
  // Returning the same input twice, and an input beside a computation.
  Function two = trace(
      [](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{a[0], a[0], a[0] + 1};
      },
      {{{2}, DType::f32}}, kCl);
  std::vector<Tensor> r = two({tensor(std::vector<float>{3, 4}, {2}, kCl)});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].to_vector<float>(), (std::vector<float>{3, 4}));
  EXPECT_EQ(r[1].to_vector<float>(), (std::vector<float>{3, 4}));
  EXPECT_EQ(r[2].to_vector<float>(), (std::vector<float>{4, 5}));
}

TEST_F(TraceTest, ReturnsAConstant) {
  Function k = trace(
      [](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{full({2, 2}, 2.5, DType::f32, a[0].device()),
                                   arange(4, DType::i32, a[0].device())};
      },
      {{{3}, DType::f32}}, kCl);
  EXPECT_EQ(k.num_parameters(), 0);
  EXPECT_TRUE(k.used_arguments().empty());
  EXPECT_EQ(C("TraceTransferBytes"), 0);
  metrics::reset();
  std::vector<Tensor> out = k({tensor(std::vector<float>{1, 2, 3}, {3}, kHost)});
  EXPECT_EQ(C("TransferToDeviceBytes"), 0);
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{2.5, 2.5, 2.5, 2.5}));
  EXPECT_EQ(out[1].to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3}));
  // And with no arguments at all.
  Function none = trace(
      [](const std::vector<Tensor>&) { return std::vector<Tensor>{ones({2}, DType::f32, kCl)}; },
      {}, kCl);
  EXPECT_EQ(none.num_parameters(), 0);
  EXPECT_EQ(none({})[0].to_vector<float>(), (std::vector<float>{1, 1}));
}

TEST_F(TraceTest, CapturedDeviceWeight) {
  Tensor w = tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2}, kCl);
  Function f =
      trace([w](const std::vector<Tensor>& a) { return std::vector<Tensor>{matmul(a[0], w)}; },
            {{{1, 3}, DType::f32}}, kCl);
  EXPECT_EQ(f.num_parameters(), 1);
  EXPECT_EQ(C("TraceTransferBytes"), 0);
  std::vector<Tensor> out = f({tensor(std::vector<float>{1, 0, 2}, {1, 3}, kCl)});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{11, 14}));
}

TEST_F(TraceTest, CompiledOnceAndReusedForEveryCall) {
  // A structure no other test uses, so that its first compile is ours.
  Function f = trace(
      [](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{tanh(a[0] * 1.75) - exp(a[1] * -0.125) + 0.0625};
      },
      {{{5, 3}, DType::f32}, {{5, 3}, DType::f32}}, kCl);
  EXPECT_EQ(C("GraphCompiles"), 0);
  for (int call_index = 0; call_index < 6; ++call_index) {
    SCOPED_TRACE(call_index);
    std::vector<float> a = Iota(15, static_cast<float>(call_index), 0.1f);
    std::vector<float> b = Iota(15, 1, static_cast<float>(call_index) * 0.2f);
    Tensor x = tensor(a, {5, 3}, kCl), y = tensor(b, {5, 3}, kCl);
    const int64_t compiles = C("GraphCompiles"), hits = C("GraphCacheHits"),
                  runs = C("CompiledGraphRuns");
    const std::vector<float> got = f({x, y})[0].to_vector<float>();
    EXPECT_EQ(C("GraphCompiles") - compiles, call_index == 0 ? 1 : 0);
    // Later calls bind the arguments to the graph compiled at the first: no graph is built,
    // keyed nor looked up in the cache.
    EXPECT_EQ(C("GraphCacheHits") - hits, 0);
    EXPECT_EQ(C("CompiledGraphRuns") - runs, 1);
    for (size_t i = 0; i < 15; ++i) {
      EXPECT_NEAR(got[i], std::tanh(a[i] * 1.75f) - std::exp(b[i] * -0.125f) + 0.0625f, 1e-5);
    }
  }
}

TEST_F(TraceTest, CallReusesTheCompiledGraphAndStaysLazy) {
  auto fn = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sigmoid(a[0]) * 3.25 + a[2]};
  };
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    std::vector<float> a = Iota(8, static_cast<float>(round), 0.5f);
    std::vector<float> z = Iota(8, 1, 1);
    Tensor x = tensor(a, {8}, kCl), unused = tensor(Iota(8, 0, 0), {8}, kCl),
           c = tensor(z, {8}, kCl);
    sync({x, unused, c});
    const int64_t compiles = C("GraphCompiles"), hits = C("GraphCacheHits"),
                  launches = C("KernelLaunches");
    std::vector<Tensor> out = call(fn, {x, unused, c});
    // Lazy: nothing ran, the result is pending and feeds the caller's graph.
    EXPECT_EQ(C("KernelLaunches"), launches);
    EXPECT_TRUE(Has(out[0].str(), "pending")) << out[0].str();
    Tensor composed = out[0] * out[0] - c;
    EXPECT_EQ(NumParams({composed}), 2);
    const std::vector<float> got = composed.to_vector<float>();
    // One graph for the whole thing, compiled on the first round only.
    EXPECT_EQ(C("GraphCompiles") - compiles, round == 0 ? 1 : 0);
    EXPECT_EQ(C("GraphCacheHits") - hits, round == 0 ? 0 : 1);
    for (size_t i = 0; i < 8; ++i) {
      const float s = 1.0f / (1.0f + std::exp(-a[i])) * 3.25f + z[i];
      EXPECT_NEAR(got[i], s * s - z[i], 1e-4) << i;
    }
  }
  EXPECT_EQ(C("TraceTransferBytes"), 0);
}

// A Function's call is deferred like any device op: nothing runs until a result is needed; then
// the arguments' pending graphs run (once: the argument keeps its value), then the Function's
// own graph, bound to them.
TEST_F(TraceTest, AFunctionCallIsLazyAndComputesAPendingArgumentOnce) {
  Function f = trace(
      [](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{exp(a[0]) * a[1], a[1] - a[0], a[1]};
      },
      {{{6}, DType::f32}, {{6}, DType::f32}}, kCl);
  const std::vector<float> xv = Iota(6, -1, 0.25f), yv = Iota(6, 2, 0.5f);
  Tensor x0 = tensor(xv, {6}, kCl), y = tensor(yv, {6}, kCl);
  sync({x0, y});
  Tensor x = x0 * 3.0;  // pending
  const int64_t launches = C("KernelLaunches"), deferred = C("CallsDeferred");
  std::vector<Tensor> out = f({x, y});
  EXPECT_EQ(C("KernelLaunches"), launches);
  EXPECT_EQ(C("CallsDeferred") - deferred, 1);
  ASSERT_EQ(out.size(), 3u);
  const std::vector<float> got0 = out[0].to_vector<float>();
  const int64_t after = C("KernelLaunches");
  EXPECT_EQ(x.to_vector<float>()[1], xv[1] * 3);  // read from the value the call computed
  EXPECT_EQ(C("KernelLaunches"), after);
  const std::vector<float> got1 = out[1].to_vector<float>();
  EXPECT_EQ(C("KernelLaunches"), after);  // the call's graph computed both results at once
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(got0[i], std::exp(xv[i] * 3) * yv[i], 1e-5f * std::exp(xv[i] * 3) * yv[i]) << i;
    EXPECT_NEAR(got1[i], yv[i] - xv[i] * 3, 1e-6) << i;
  }
  // A result that is an argument is that argument's value.
  EXPECT_EQ(out[2].to_vector<float>(), yv);
  // One pending tensor passed as both arguments is computed once, for both.
  Tensor z = x0 + 1.0;
  std::vector<Tensor> twice = f({z, z});
  const std::vector<float> got2 = twice[1].to_vector<float>();
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(got2[i], 0.0f) << i;
}

// The results are the function of the arguments as they were at the call, even where an
// argument is overwritten in place before the results are read; a result dropped unread is not
// needed for the others.
TEST_F(TraceTest, ACallReadsItsArgumentsAsTheyWereAtTheCall) {
  Function f = trace(
      [](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{a[0] * 2.0, sum(a[0])};
      },
      {{{4}, DType::f32}}, kCl);
  Tensor x = tensor(std::vector<float>{1, 2, 3, 4}, {4}, kCl);
  sync({x});
  std::vector<Tensor> out = f({x});
  x.copy_(tensor(std::vector<float>{-1, -1, -1, -1}, {4}, kCl));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{-1, -1, -1, -1}));
  out.erase(out.begin());  // the doubled values, dropped unread
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{10}));
}

// A loop that feeds each call's result to the next without reading any defers a chain of calls;
// past frontend::kMaxPendingProducers the chain runs at once (CallChainsCut), so that reading
// the last recurses a bounded number of levels.
TEST_F(TraceTest, AChainOfCallsIsCutEverySixteen) {
  Function step =
      trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] * 0.5 + 1.0}; },
            {{{3}, DType::f32}}, kCl);
  Tensor h = tensor(std::vector<float>{0, 4, -8}, {3}, kCl);
  std::vector<double> want = {0, 4, -8};
  const int n = 40;
  for (int i = 0; i < n; ++i) {
    h = step({h})[0];
    for (double& w : want) w = w * 0.5 + 1.0;
  }
  EXPECT_EQ(C("CallChainsCut"), (n - 1) / 16);  // at calls 17, 33
  const std::vector<float> got = h.to_vector<float>();
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

// A body that reads a placeholder it captured: the call is deferred, and reading its result is
// the placeholder error, naming it, as for any graph that reads one.
TEST_F(TraceTest, ACallWhoseBodyReadsACapturedPlaceholderFailsWhenRead) {
  Tensor ph = placeholder({3}, DType::f32, kCl);
  Function f = trace([ph](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] + ph}; },
                     {{{3}, DType::f32}}, kCl);
  std::vector<Tensor> out = f({ones({3}, DType::f32, kCl)});
  const std::string e = ErrorOf([&] { out[0].to_vector<float>(); });
  EXPECT_TRUE(Has(e, "placeholder") && Has(e, "f32[3]")) << e;
  EXPECT_EQ(C("DeviceLiveBytes"), live_);
}

// A body that captured a deferred scan's result: a call's run computes the scan first.
TEST_F(TraceTest, ACallRunsTheDeferredScanItsBodyCaptured) {
  ScanResult r = scan(
      [](const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        Tensor next = c[0] + x[0];
        return std::make_pair(std::vector<Tensor>{next}, std::vector<Tensor>{});
      },
      {zeros({2}, DType::f32, kCl)}, {tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2}, kCl)});
  const Tensor total = r.carry[0];  // {9, 12}, not computed yet
  Function f =
      trace([total](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] * total}; },
            {{{2}, DType::f32}}, kCl);
  const int64_t launches = C("KernelLaunches");
  std::vector<Tensor> out = f({tensor(std::vector<float>{2, -1}, {2}, kCl)});
  EXPECT_EQ(C("KernelLaunches"), launches);
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{18, -12}));
}

// A compiled call on a non-contiguous view (computed into a buffer of its own before the
// Function's graph binds it), a broadcast inside the body, size-1 and size-0 arguments: the same
// values as the body run on host tensors.
TEST_F(TraceTest, ACompiledCallOnViewsAndSizeZeroAndOneArgumentsMatchesTheHost) {
  Fn body = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{a[0] * a[1] + exp(a[2]), sum(a[3], {1})};
  };
  Function f = trace(
      body,
      {{{3, 2}, DType::f32}, {{1, 2}, DType::f32}, {{1, 1}, DType::f32}, {{0, 3}, DType::f32}},
      kCl);
  const std::vector<float> xv = {1, -2, 3, 0.5f, 4, -1}, bv = {0.25f, -3}, cv = {0.75f};
  const Tensor x = tensor(xv, {2, 3}, kCl), b = tensor(bv, {1, 2}, kCl),
               c = tensor(cv, {1, 1}, kCl), e = zeros({0, 3}, DType::f32, kCl);
  sync({x, b, c, e});
  const int64_t runs = C("CompiledGraphRuns");
  std::vector<Tensor> got = f({transpose(x, 0, 1), b, c, e});
  const std::vector<float> got0 = got[0].to_vector<float>();
  EXPECT_EQ(got[1].shape(), (std::vector<int64_t>{0}));
  EXPECT_TRUE(got[1].to_vector<float>().empty());
  EXPECT_EQ(C("CompiledGraphRuns") - runs, 1);
  const std::vector<float> want =
      body({transpose(tensor(xv, {2, 3}, kHost), 0, 1), tensor(bv, {1, 2}, kHost),
            tensor(cv, {1, 1}, kHost), zeros({0, 3}, DType::f32, kHost)})[0]
          .to_vector<float>();
  ASSERT_EQ(got0.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got0[i], want[i], 1e-5f) << i;
}

TEST_F(TraceTest, TracedFunctionInsideAnotherTrace) {
  Function inner = trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[1] * 2}; },
                         {{{2}, DType::f32}, {{2}, DType::f32}}, kCl);
  Function outer = trace(
      [&inner](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{inner({a[1], a[0]})[0] + inner({a[0], a[2]})[0]};
      },
      {{{2}, DType::f32}, {{2}, DType::f32}, {{2}, DType::f32}}, kCl);
  EXPECT_EQ(outer.used_arguments(), (std::vector<int>{0, 2}));
  EXPECT_EQ(C("TraceTransferBytes"), 0);
  EXPECT_EQ(C("DeviceAllocBytes"), 0);
  std::vector<Tensor> out = outer({tensor(std::vector<float>{1, 2}, {2}, kCl),
                                   tensor(std::vector<float>{10, 20}, {2}, kCl),
                                   tensor(std::vector<float>{100, 200}, {2}, kCl)});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{202, 404}));
}

TEST_F(TraceTest, WrongArgumentCountShapeOrDtypeIsAClearError) {
  Function f = trace(
      Wrap1(APlusSinB),
      {{{2, 3}, DType::f32}, {{2, 3}, DType::f32}, {{4}, DType::i32}, {{1}, DType::f32}}, kCl);
  Tensor ok23 = zeros({2, 3}, DType::f32, kCl), ok4 = zeros({4}, DType::i32, kCl),
         ok1 = zeros({1}, DType::f32, kCl);
  std::string e = ErrorOf([&] { f({ok23, ok23, ok4}); });
  EXPECT_TRUE(Has(e, "4") && Has(e, "3") && Has(e, "argument")) << e;
  e = ErrorOf([&] { f({ok23, ok23, ok4, ok1, ok1}); });
  EXPECT_TRUE(Has(e, "4") && Has(e, "5")) << e;
  // Shape of a used argument.
  e = ErrorOf([&] { f({ok23, zeros({3, 2}, DType::f32, kCl), ok4, ok1}); });
  EXPECT_TRUE(Has(e, "argument 1") && Has(e, "f32[2,3]") && Has(e, "f32[3,2]")) << e;
  // Dtype of an unused argument: still a mismatch with the traced signature.
  e = ErrorOf([&] { f({ok23, ok23, zeros({4}, DType::i64, kCl), ok1}); });
  EXPECT_TRUE(Has(e, "argument 2") && Has(e, "i32[4]") && Has(e, "i64[4]")) << e;
  // Shape of an unused host argument.
  e = ErrorOf([&] { f({ok23, ok23, ok4, zeros({2}, DType::f32, kHost)}); });
  EXPECT_TRUE(Has(e, "argument 3") && Has(e, "f32[1]") && Has(e, "f32[2]")) << e;
  e = ErrorOf([&] { f({ok23, ok23, ok4, Tensor()}); });
  EXPECT_TRUE(Has(e, "undefined")) << e;
  // Tracing for the host, or an empty function.
  e = ErrorOf([&] { trace(Wrap1(APlusSinB), {{{1}, DType::f32}, {{1}, DType::f32}}, kHost); });
  EXPECT_TRUE(Has(e, "OpenCL")) << e;
  EXPECT_THROW(trace(Fn(), {}, kCl), Error);
  // The function still works after all this.
  std::vector<float> got = f({ok23 + 1, ok23, ok4, ok1})[0].to_vector<float>();
  EXPECT_EQ(got, std::vector<float>(6, 1.0f));
}

TEST_F(TraceTest, ExceptionInTracedFunctionSurfaces) {
  auto bad = [](const std::vector<Tensor>& a) -> std::vector<Tensor> {
    if (a[0].numel() > 0) throw std::runtime_error("boom from the traced body");
    return a;
  };
  try {
    trace(bad, {{{4}, DType::f32}}, kCl);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    // Wrapped in a lazycl::Error that names the traced function and keeps the body's message.
    EXPECT_EQ(std::string(e.what()),
              "trace: the traced function threw std::runtime_error: boom from the traced body");
  }
  // An op error inside the body is a lazycl::Error.
  EXPECT_THROW(call([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] + a[1]}; },
                    {zeros({2}, DType::f32, kCl), zeros({3}, DType::f32, kCl)}),
               Error);
  EXPECT_EQ(C("DeviceLiveBytes"), live_);
  EXPECT_FALSE(frontend::TraceScope::active());
  // Tracing is over: a long eager-looking loop still cuts its graph and computes.
  Tensor acc = zeros({2}, DType::f32, kCl);
  for (int i = 0; i < 1200; ++i) acc = acc + 1;
  EXPECT_EQ(acc.to_vector<float>(), (std::vector<float>{1200, 1200}));
}

// detach() of an argument inside a traced body (argmax, topk and friends detach their input)
// reads the argument, not the placeholder it was traced on (lazycl-fuzz seed 11, graph 120:
// "is a placeholder"); in a scan body too.
TEST_F(TraceTest, DetachOfAnArgumentReadsTheArgument) {
  const std::vector<float> xv = {3, -1, 7, 2, 5, 0};
  Tensor x = tensor(xv, {2, 3}, kCl);
  std::vector<Tensor> r = call(
      [](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{a[0].detach() * 2.0, argmax(a[0], 1), topk(a[0], 2, 1).first};
      },
      {x});
  EXPECT_EQ(r[0].to_vector<float>(), (std::vector<float>{6, -2, 14, 4, 10, 0}));
  EXPECT_EQ(r[1].to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(r[2].to_vector<float>(), (std::vector<float>{7, 3, 5, 2}));
  ScanResult s = scan(
      [](const std::vector<Tensor>& c, const std::vector<Tensor>& row) {
        Tensor next = c[0] + row[0].detach();
        return std::make_pair(std::vector<Tensor>{next}, std::vector<Tensor>{argmax(row[0], 0)});
      },
      {zeros({3}, DType::f32, kCl)}, {x});
  EXPECT_EQ(s.carry[0].to_vector<float>(), (std::vector<float>{5, 4, 7}));
  EXPECT_EQ(s.ys[0].to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
}

}  // namespace
}  // namespace lazycl
