// Tiered execution (runtime/tiering.h, README "Compile latency"): graphs on the generic kernels
// against the host reference and against their fused programs, and a never-seen graph running
// on the generic kernels at once, then on its fused program once the background build is done.
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/fault.h"
#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "runtime/devices.h"
#include "runtime/generic_warmup.h"
#include "runtime/tiering.h"
#include "test_util.h"

namespace lazycl {
namespace {

using test::C;

// The disk cache of this process starts empty, so that a graph's fused program is never-seen
// (LAZYCL_* variables are read at the first use, after this runs).
// Removed at exit.
struct FreshCache {
  FreshCache() {
    dir = (std::filesystem::temp_directory_path() / "lazycl-tiering-XXXXXX").string();
    if (mkdtemp(dir.data()) != nullptr) setenv("LAZYCL_KERNEL_CACHE_DIR", dir.c_str(), 1);
  }
  ~FreshCache() {
    std::error_code error;
    std::filesystem::remove_all(dir, error);
  }
  std::string dir;
};
const FreshCache kFreshCache;

std::vector<float> Values(int64_t n, float scale, float shift) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = std::sin(static_cast<float>(i) * 1.7f + shift) * scale;
  return v;
}

Tensor Input(std::vector<int64_t> shape, float shift, Device device) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return tensor(Values(n, 2.0f, shift), shape, device);
}

// Every element of `got` within `rel` of `want` (scaled by 1 + |want|); NaN matches NaN.
void ExpectClose(const Tensor& got, const Tensor& want, double rel, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const Tensor g = cast(got.to(Device::host()), DType::f64);
  const Tensor w = cast(want.to(Device::host()), DType::f64);
  const std::vector<double> x = g.to_vector<double>();
  const std::vector<double> y = w.to_vector<double>();
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(y[i])) {
      EXPECT_TRUE(std::isnan(x[i])) << what << " at " << i;
      continue;
    }
    EXPECT_NEAR(x[i], y[i], rel * (1 + std::fabs(y[i]))) << what << " at " << i;
  }
}

struct Case {
  std::string name;
  std::function<Tensor(Device)> fn;  // builds its inputs on the device and computes
  double rel = 1e-5;
};

std::vector<Case> Cases() {
  return {
      {"broadcast tanh(x^T * w + b)",
       [](Device d) {
         Tensor x = transpose(Input({5, 3}, 0.1f, d), 0, 1);
         return tanh(x * Input({3, 5}, 0.2f, d) + Input({1, 5}, 0.3f, d));
       }},
      {"reductions",
       [](Device d) {
         Tensor x = Input({7, 5, 3}, 0.4f, d);
         return cat(
             {reshape(sum(x, {0}), {-1}), reshape(max(x, {1, 2}), {-1}), reshape(min(x, {2}), {-1}),
              reshape(prod(x * 0.5, {0, 2}), {-1}), reshape(sum(x), {1})},
             0);
       }},
      {"batched matmul, transposed and sliced operands",
       [](Device d) {
         Tensor a = Input({2, 3, 4}, 0.5f, d);
         Tensor b = transpose(Input({2, 5, 4}, 0.6f, d), 1, 2);
         Tensor c = slice(Input({6, 7}, 0.7f, d), 1, 2, 6);  // [6, 4]
         return matmul(a, b) + sum(matmul(c, Input({4, 5}, 0.8f, d)), {0}, true);
       }},
      {"reshape of a permuted value, cat, broadcast",
       [](Device d) {
         Tensor x = permute(Input({2, 3, 4}, 0.9f, d), {2, 0, 1});  // [4, 2, 3]
         Tensor y = reshape(x, {8, 3});
         return cat({y, broadcast_to(Input({1, 3}, 1.0f, d), {2, 3})}, 0) * 3.0;
       }},
      {"casts, comparisons, where",
       [](Device d) {
         Tensor x = Input({4, 6}, 1.1f, d);
         Tensor i = cast(x * 10.0, DType::i32);
         Tensor m = gt(x, Input({4, 1}, 1.2f, d));
         return where(m, cast(i, DType::f32), neg(x)) + cast(eq(i, i * 1), DType::f32);
       }},
      {"iota, full, integer arithmetic",
       [](Device d) {
         Tensor i = arange(12, DType::i64, d) * full({12}, 7, DType::i64, d);
         return cast(reshape(i, {3, 4}) - 5 + reshape(cast(gt(i, 40.0), DType::i64), {3, 4}),
                     DType::f32);
       }},
      {"f16 and bf16 storage",
       [](Device d) {
         Tensor h = cast(Input({3, 5}, 1.3f, d), DType::f16);
         Tensor b = cast(Input({3, 5}, 1.4f, d), DType::bf16);
         return cast(h * 2.0, DType::f32) + cast(b, DType::f32);
       }},
      {"size-0 and size-1 dims",
       [](Device d) {
         Tensor e = Input({0, 3}, 1.5f, d) + Input({1, 3}, 1.6f, d);
         return cat({sum(e, {0}, true), exp(Input({1, 3}, 1.7f, d))}, 0);
       }},
      {"gather, index_select, scatter_add, cumsum",
       [](Device d) {
         Tensor x = Input({5, 4}, 2.6f, d);
         Tensor ids = tensor(std::vector<int64_t>{3, 0, 4, 4, 1}, {5}, d);
         Tensor idx = tensor(std::vector<int32_t>{1, 0, 3, 3, 2, 2, 0, 1}, {2, 4}, d);
         Tensor g = gather(x, 1, cast(idx, DType::i64));
         Tensor s = scatter_add(zeros({4, 4}, DType::f32, d), 0, idx, Input({2, 4}, 2.7f, d));
         Tensor c = cumsum(transpose(x, 0, 1), 1);  // [4, 5]
         return cat({reshape(index_select(x, 0, ids), {-1}), reshape(g, {-1}), reshape(s, {-1}),
                     reshape(c, {-1})},
                    0);
       }},
      // One long sum per result: the generic kernel's single accumulator was 1.4e-4 off here
      // (eight lanes now); rel is relative to 1 + |want|, so 1e-5 of a 1e6-sized sum.
      {"sums of 2^20 exps",
       [](Device d) {
         Tensor x = Input({2, 1 << 20}, 0.9f, d);
         return sum(exp(x * 0.5), {1});
       },
       1e-5},
      {"softmax and log_softmax rows",
       [](Device d) {
         Tensor x = Input({6, 9}, 1.8f, d) * 4.0;
         return softmax(x, 1) + transpose(log_softmax(transpose(x, 0, 1), 0), 0, 1);
       },
       2e-5},
  };
}

class TieringTest : public ::testing::Test {
 protected:
  void TearDown() override {
    runtime::WaitForBackgroundBuilds();
    runtime::SetCompileMode(std::nullopt);
  }
};

TEST_F(TieringTest, GenericKernelsMatchTheHostAndTheFusedPrograms) {
  const Device cl = test::DefaultCl();
  for (const Case& c : Cases()) {
    const Tensor want = c.fn(Device::host());
    runtime::SetCompileMode(base::CompileMode::kSync);
    const int64_t generic_before = C("GenericTierRuns");
    const Tensor fused = c.fn(cl).to(Device::host());
    EXPECT_EQ(C("GenericTierRuns"), generic_before) << c.name;
    runtime::SetCompileMode(base::CompileMode::kGeneric);
    const Tensor generic = c.fn(cl).to(Device::host());
    EXPECT_GT(C("GenericTierRuns"), generic_before) << c.name << ": not run on the generic kernels";
    ExpectClose(generic, want, c.rel, c.name + " (generic vs host)");
    ExpectClose(fused, want, c.rel, c.name + " (fused vs host)");
    ExpectClose(generic, fused, c.rel, c.name + " (generic vs fused)");
  }
}

// A region of f32 elementwise ops runs as one interpreter kernel on the generic tier (README,
// "Compile latency"): launches counted per graph, values against the host on random inputs.
TEST_F(TieringTest, ElementwiseRegionsRunAsOneInterpretedKernel) {
  const Device cl = test::DefaultCl();
  runtime::SetCompileMode(base::CompileMode::kGeneric);
  std::mt19937 rng(2026);
  std::normal_distribution<float> normal;
  auto random = [&](std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = normal(rng) * 2;
    return tensor(v, shape, Device::host());
  };
  struct Region {
    std::string name;
    std::vector<std::vector<int64_t>> shapes;  // inputs, random
    std::function<Tensor(const std::vector<Tensor>&)> fn;
    int64_t launches;  // on the generic tier
  };
  auto w1 = [](const std::vector<Tensor>& x) {
    return relu(x[0] * x[1] + x[2]) * 0.5 + tanh(x[0]);
  };
  const std::vector<Region> regions = {
      {"W1, 1000 elements (a partial block)", {{1000}, {1000}, {1000}}, w1, 1},
      {"W1, [3, 100003]", {{3, 100003}, {3, 100003}, {3, 100003}}, w1, 1},
      {"W1, size 1", {{1}, {1}, {1}}, w1, 1},
      {"W1, size 0", {{0, 4}, {0, 4}, {0, 4}}, w1, 0},
      {"every unary op",
       {{257}},
       [](const std::vector<Tensor>& x) {
         const Tensor p = abs(x[0]) + 0.5;
         return exp(x[0] * 0.1) + log(p) + sqrt(p) + sigmoid(x[0]) + sin(x[0]) + cos(x[0]) +
                erf(x[0]) + rsqrt(p) + silu(x[0]) + gelu(x[0]) + gelu(x[0], true);
       },
       2},  // p is read three times: a kernel of its own
      {"binary ops, a number and a user scalar",
       {{130}, {130}},
       [](const std::vector<Tensor>& x) {
         return maximum(x[0], x[1]) - minimum(x[0], x[1]) * 3.0 +
                pow(abs(x[0]) + 1.0, x[1] * 0.25) / (abs(x[1]) + 1.0) + full({130}, 7.5);
       },
       1},
      {"comparisons and where",
       {{200}, {200}},
       [](const std::vector<Tensor>& x) {
         return where(gt(x[0], x[1]), neg(x[1]), x[0] * 2.0) + where(le(x[0], 0.25), x[1], x[0]);
       },
       1},
      {"an element broadcast along every dim (read once per block)",
       {{64, 9}, {1, 1}},
       [](const std::vector<Tensor>& x) { return tanh(x[0] + x[1]) * x[1]; },
       1},
      {"a row broadcast (made contiguous first)",
       {{64, 9}, {1, 9}},
       [](const std::vector<Tensor>& x) { return tanh(x[0] + x[1]) * 2.0; },
       2},
      {"a transposed operand (made contiguous first)",
       {{9, 64}, {64, 9}},
       [](const std::vector<Tensor>& x) { return exp(transpose(x[0], 0, 1) * 0.1) - x[1]; },
       2},
      {"a value read twice is computed once",
       {{300}},
       [](const std::vector<Tensor>& x) {
         const Tensor y = x[0] * x[0];
         return y + tanh(y);
       },
       2},
      {"more inputs than the interpreter takes: cut into two regions",
       {{50}, {50}, {50}, {50}, {50}, {50}, {50}, {50}, {50}, {50}},
       [](const std::vector<Tensor>& x) {
         Tensor s = x[0];
         for (size_t k = 1; k < x.size(); ++k) s = s + x[k];
         return s;
       },
       2},
      {"40 user scalars: cut into regions of at most 8",
       {{50}},
       [](const std::vector<Tensor>& x) {
         Tensor s = x[0];
         for (int k = 0; k < 40; ++k) s = tanh(s) * 1.5;
         return s;
       },
       5},
      {"more instructions than the interpreter takes: cut",
       {{50}},
       [](const std::vector<Tensor>& x) {
         Tensor s = x[0];
         for (int k = 0; k < 100; ++k) s = tanh(s);
         return s;
       },
       2},
  };
  for (const Region& r : regions) {
    std::vector<Tensor> host, dev;
    for (const auto& shape : r.shapes) {
      host.push_back(random(shape));
      dev.push_back(host.back().to(cl));
    }
    sync(dev);
    const Tensor want = r.fn(host);
    const int64_t launches = C("KernelLaunches");
    const Tensor got = r.fn(dev);
    sync({got});
    EXPECT_EQ(C("KernelLaunches") - launches, r.launches) << r.name;
    ExpectClose(got, want, 2e-5, r.name);
  }
  // A user scalar is an argument of the interpreter: new values compile and build nothing.
  const Tensor xh = random({77});
  const Tensor x = xh.to(cl);
  const int64_t builds = C("ProgramBuilds");
  for (double lr : {0.1, 0.01, 3.5}) {
    const int64_t launches = C("KernelLaunches");
    const Tensor got = tanh(x * lr) + lr;
    sync({got});
    EXPECT_EQ(C("KernelLaunches") - launches, 1);
    ExpectClose(got, tanh(xh * lr) + lr, 1e-6, "tanh(x * lr) + lr");
  }
  EXPECT_EQ(C("ProgramBuilds"), builds);
}

TEST_F(TieringTest, WhatTheGenericKernelsDoNotCoverRunsFused) {
  const Device cl = test::DefaultCl();
  runtime::SetCompileMode(base::CompileMode::kGeneric);
  const int64_t uncovered = C("GenericTierUncovered");
  const int64_t generic = C("GenericTierRuns");
  // Rank 7: above the generic kernels' 6 dims.
  const std::vector<int64_t> shape = {1, 2, 1, 2, 1, 2, 3};
  Tensor x = Input(shape, 2.1f, cl);
  const std::vector<float> got = (exp(x) + 1.0).to_vector<float>();
  EXPECT_GT(C("GenericTierUncovered"), uncovered);
  EXPECT_EQ(C("GenericTierRuns"), generic);
  const std::vector<float> want = (exp(x.to(Device::host())) + 1.0).to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i])));
}

TEST_F(TieringTest, AnInPlaceUpdateOnTheGenericKernels) {
  const Device cl = test::DefaultCl();
  runtime::SetCompileMode(base::CompileMode::kGeneric);
  Tensor x = Input({8, 3}, 2.2f, cl);
  const Tensor host = x.to(Device::host());
  const int64_t generic = C("GenericTierRuns");
  x.copy_(x * 2.0 + sum(x, {0}, true));
  EXPECT_GT(C("GenericTierRuns"), generic);
  ExpectClose(x, host * 2.0 + sum(host, {0}, true), 1e-5, "x.copy_(2x + column sums)");
}

TEST_F(TieringTest, ANeverSeenGraphRunsGenericThenFused) {
  const Device cl = test::DefaultCl();
  runtime::SetCompileMode(base::CompileMode::kTiered);
  backend::Device& device = runtime::OpenClDevice(cl.index());
  if (device.CompilesAtFirstLaunch()) {
    // PoCL compiles each kernel at its first launch: until lazycl-bench warmup has had it do so
    // for the generic kernels, a new graph waits for its own program rather than for theirs.
    const int64_t generic = C("GenericTierRuns");
    Tensor y = exp(Input({3, 3}, 2.3f, cl)) * 0.25;
    EXPECT_NEAR(y.to_vector<float>()[4], std::exp(Values(9, 2.0f, 2.3f)[4]) * 0.25f, 1e-5);
    EXPECT_EQ(C("GenericTierRuns"), generic);
  }
  absl::StatusOr<runtime::WarmupReport> warm = runtime::WarmGenericKernels(cl.index());
  ASSERT_TRUE(warm.ok()) << warm.status();
  EXPECT_GT(warm->kernels, 100);

  auto graph = [](const Tensor& x, const Tensor& y) {
    return sigmoid(matmul(x, transpose(y, 0, 1))) - mean(x * y, {1}, true);
  };
  const Tensor xh = Input({16, 8}, 2.4f, Device::host());
  const Tensor yh = Input({16, 8}, 2.5f, Device::host());
  const Tensor want = graph(xh, yh);
  const int64_t generic = C("GenericTierRuns");
  const int64_t builds = C("ProgramBuilds");
  Tensor first = graph(xh.to(cl), yh.to(cl));
  ExpectClose(first, want, 1e-5, "first run");
  EXPECT_EQ(C("GenericTierRuns"), generic + 1) << "the first run waited for the compiler";
  // Within the bounded number of runs that the build takes, the fused program takes over.
  runtime::WaitForBackgroundBuilds();
  EXPECT_GT(C("ProgramBuilds"), builds) << "no fused program was built in the background";
  const int64_t after_build = C("GenericTierRuns");
  Tensor again = graph(xh.to(cl), yh.to(cl));
  ExpectClose(again, want, 1e-5, "run after the build");
  EXPECT_EQ(C("GenericTierRuns"), after_build) << "the fused program did not replace the generic";
  ExpectClose(again, first, 1e-5, "fused vs generic");
}

// A fused program that fails to build in the background: the generic run's result stands, and
// the next run builds at once (as LAZYCL_COMPILE=sync would), so a failure that persists is the
// user's error then, not a silent stay on the generic kernels.
TEST_F(TieringTest, AFailedBackgroundBuildIsBuiltAgainAtTheNextRun) {
  const Device cl = test::DefaultCl();
  runtime::SetCompileMode(base::CompileMode::kTiered);
  absl::StatusOr<runtime::WarmupReport> warm = runtime::WarmGenericKernels(cl.index());
  ASSERT_TRUE(warm.ok()) << warm.status();
  auto graph = [](const Tensor& x) { return relu(x * 3.0 - 1.0) + cos(x); };
  const Tensor xh = Input({9, 7}, 2.8f, Device::host());
  const Tensor want = graph(xh);
  const int64_t generic = C("GenericTierRuns");
  base::fault::FailNth(base::fault::Site::kBuild, 1);  // the background build of this graph
  ExpectClose(graph(xh.to(cl)), want, 1e-5, "run on the generic kernels");
  runtime::WaitForBackgroundBuilds();
  EXPECT_EQ(base::fault::Count(base::fault::Site::kBuild), 1) << "the build was not attempted";
  base::fault::Reset();
  EXPECT_EQ(C("GenericTierRuns"), generic + 1);
  const int64_t builds = C("ProgramBuilds");
  ExpectClose(graph(xh.to(cl)), want, 1e-5, "run after the failed build");
  EXPECT_EQ(C("GenericTierRuns"), generic + 1) << "stayed on the generic kernels";
  EXPECT_GT(C("ProgramBuilds"), builds);
}

TEST(CompileModeSetting, ParsesItsValuesAndRejectsOthers) {
  auto parse = [](const char* value) {
    return base::ParseSettings([value](std::string_view name) -> std::optional<std::string> {
      if (name == "LAZYCL_COMPILE") return std::string(value);
      return std::nullopt;
    });
  };
  EXPECT_EQ(parse("sync")->compile, base::CompileMode::kSync);
  EXPECT_EQ(parse("generic")->compile, base::CompileMode::kGeneric);
  EXPECT_EQ(parse("tiered")->compile, base::CompileMode::kTiered);
  const absl::StatusOr<base::Settings> bad = parse("eager");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("LAZYCL_COMPILE"), std::string::npos);
  EXPECT_NE(std::string(bad.status().message()).find("eager"), std::string::npos);
}

}  // namespace
}  // namespace lazycl
