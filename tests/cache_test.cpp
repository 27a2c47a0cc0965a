// The graph cache: the same structure on new data reuses the compiled graph; the same structure
// on new shapes reuses the OpenCL programs (sizes are kernel arguments, not source).
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "runtime/executor.h"

namespace lazycl {
namespace {

const Device kCl = Device::opencl(0);

struct Counts {
  int64_t compiles = metrics::counter("GraphCompiles");
  int64_t hits = metrics::counter("GraphCacheHits");
  // A program found on disk is not built but is not new either; "no new program" means neither.
  int64_t programs = metrics::counter("ProgramBuilds") + metrics::counter("ProgramDiskCacheHits");
};

Tensor Rand(std::vector<int64_t> shape, uint64_t seed) {
  return randn(std::move(shape), seed, DType::f32, kCl);
}

// A computation with an elementwise chain, a broadcast, a transpose and a reduction.
Tensor Compute(const Tensor& a, const Tensor& b) {
  Tensor y = relu(a * b + 0.25) - tanh(b);
  Tensor row = sum(y, {0}, true);
  return transpose(y / (row + 10.0), 0, 1);
}

std::vector<float> ComputeOnHost(const Tensor& a, const Tensor& b) {
  return Compute(a.to(Device::host()), b.to(Device::host())).to_vector<float>();
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5f * (1 + std::fabs(want[i]))) << i;
}

TEST(CacheTest, SameShapesOnNewDataHitTheGraphCache) {
  Tensor a1 = Rand({37, 53}, 1), b1 = Rand({37, 53}, 2);
  Compute(a1, b1).to_vector<float>();  // compiles (or finds) everything once

  Tensor a2 = Rand({37, 53}, 3), b2 = Rand({37, 53}, 4);
  const Counts before;
  const std::vector<float> got = Compute(a2, b2).to_vector<float>();
  const Counts after;
  EXPECT_EQ(after.compiles, before.compiles);
  EXPECT_EQ(after.hits, before.hits + 1);
  EXPECT_EQ(after.programs, before.programs);
  ExpectNear(got, ComputeOnHost(a2, b2));  // the cached plan ran on the new buffers
}

TEST(CacheTest, SameStructureOnNewShapesBuildsNoProgram) {
  // All dims distinct and != 1, so that both shapes give the same kernel sources.
  Tensor a1 = Rand({37, 53}, 5), b1 = Rand({37, 53}, 6);
  Compute(a1, b1).to_vector<float>();

  Tensor a2 = Rand({41, 59}, 7), b2 = Rand({41, 59}, 8);
  const Counts before;
  const std::vector<float> got = Compute(a2, b2).to_vector<float>();
  const Counts after;
  EXPECT_EQ(after.programs, before.programs);
  EXPECT_LE(after.compiles, before.compiles + 1);
  ExpectNear(got, ComputeOnHost(a2, b2));
}

TEST(CacheTest, DifferentStructureCompiles) {
  Tensor a = Rand({37, 53}, 9), b = Rand({37, 53}, 10);
  Compute(a, b).to_vector<float>();
  const Counts before;
  Tensor y = exp(a) * sigmoid(b) - a;  // not seen before in this process
  y.to_vector<float>();
  const Counts after;
  EXPECT_EQ(after.compiles, before.compiles + 1);
  EXPECT_EQ(after.hits, before.hits);
  EXPECT_GT(after.programs, before.programs);
}

// The user's scalars are kernel arguments (ir::MakeScalar), not part of the graph: this case
// used to say the opposite (a different scalar was a different graph and program).
TEST(CacheTest, DifferentScalarIsTheSameGraphWithTheRightValue) {
  Tensor a = tensor(std::vector<float>{1, 2, 3}, {3}, kCl);
  EXPECT_EQ((a * 2.5).to_vector<float>(), (std::vector<float>{2.5, 5, 7.5}));
  const Counts before;
  EXPECT_EQ((a * 3.0).to_vector<float>(), (std::vector<float>{3, 6, 9}));
  const Counts after;
  EXPECT_EQ(after.compiles, before.compiles);
  EXPECT_EQ(after.hits, before.hits + 1);
  EXPECT_EQ(after.programs, before.programs);
}

// Adam's update with a learning-rate schedule and bias corrections 1 / (1 - b^t): every step's
// scalars are new, and after the first step nothing is compiled.
TEST(CacheTest, ALearningRateScheduleCompilesNothingAfterTheFirstStep) {
  const Tensor w0 = Rand({33, 17}, 41), g0 = Rand({33, 17}, 42);
  sync({w0, g0});  // data, not their random recipes (which the first step would compute)
  auto run = [&](Device device, std::vector<Counts>* counts) {
    Tensor w = w0.to(device), m = zeros({33, 17}, DType::f32, device);
    Tensor v = zeros({33, 17}, DType::f32, device);
    const Tensor g = g0.to(device);
    sync({m, v});  // the state is data from the first step on, as it will be at every step
    std::vector<std::vector<float>> ws;
    for (int t = 1; t <= 20; ++t) {
      const double lr = 0.01 / t, b1 = 0.9, b2 = 0.999;
      m = m * b1 + (1 - b1) * g;
      v = v * b2 + (1 - b2) * (g * g);
      const Tensor m_hat = m * (1 / (1 - std::pow(b1, t)));
      const Tensor v_hat = v * (1 / (1 - std::pow(b2, t)));
      w = w - lr * m_hat / (sqrt(v_hat) + 1e-8);
      ws.push_back(w.to_vector<float>());
      sync({w, m, v});  // a training loop keeps its state materialized
      if (counts != nullptr) counts->emplace_back();
    }
    return ws;
  };
  std::vector<Counts> counts;
  const auto got = run(kCl, &counts), want = run(Device::host(), nullptr);
  for (size_t t = 0; t < got.size(); ++t) ExpectNear(got[t], want[t]);
  for (size_t t = 1; t < counts.size(); ++t) {
    EXPECT_EQ(counts[t].compiles, counts[0].compiles) << "step " << t + 1;
    EXPECT_EQ(counts[t].programs, counts[0].programs) << "step " << t + 1;
  }
}

// mean's 1/count is a kernel argument, and sizes are too: one set of programs for every length.
// A mean is two kernels (the sum, then the scale by 1/count), so the first length may build two
// programs; before, each further length built a new scale program.
TEST(CacheTest, MeanOverManyLengthsBuildsNoProgramAfterTheFirst) {
  const Tensor x = Rand({250}, 43);
  const std::vector<float> host = x.to_vector<float>();
  const Counts before;
  int64_t after_first = 0;
  for (int64_t n = 100; n < 200; ++n) {
    double want = 0;
    for (int64_t i = 0; i < n; ++i) want += host[i];
    want /= static_cast<double>(n);
    EXPECT_NEAR(mean(slice(x, 0, 0, n)).item<float>(), want, 1e-5) << n;
    if (n == 100) after_first = Counts().programs;
  }
  const Counts after;
  EXPECT_LE(after_first - before.programs, 2);
  EXPECT_EQ(after.programs, after_first);
}

TEST(CacheTest, FullWithNewValuesCompilesNothing) {
  EXPECT_EQ(full({4}, 1.5, DType::f32, kCl).to_vector<float>(), std::vector<float>(4, 1.5f));
  EXPECT_EQ(full({4}, 7, DType::i32, kCl).to_vector<int32_t>(), std::vector<int32_t>(4, 7));
  EXPECT_EQ(full({4}, 1LL << 40, DType::i64, kCl).to_vector<int64_t>(),
            std::vector<int64_t>(4, int64_t{1} << 40));
  EXPECT_EQ(full({4}, 0, DType::boolean, kCl).to_vector<uint8_t>(), std::vector<uint8_t>(4, 0));
  const Counts before;
  EXPECT_EQ(full({4}, -2.25, DType::f32, kCl).to_vector<float>(), std::vector<float>(4, -2.25f));
  EXPECT_EQ(full({4}, -9, DType::i32, kCl).to_vector<int32_t>(), std::vector<int32_t>(4, -9));
  EXPECT_EQ(full({4}, -(1LL << 41), DType::i64, kCl).to_vector<int64_t>(),
            std::vector<int64_t>(4, -(int64_t{1} << 41)));
  EXPECT_EQ(full({4}, 3, DType::boolean, kCl).to_vector<uint8_t>(), std::vector<uint8_t>(4, 1));
  const Counts after;
  EXPECT_EQ(after.compiles, before.compiles);
  EXPECT_EQ(after.programs, before.programs);
}

// Scalars inside every kind of kernel: a fused reduction operand (one and two stages), a row
// kernel (softmax), a matmul epilogue, a scan body; a second value compiles nothing.
TEST(CacheTest, ScalarsInEveryKindOfKernelAreArguments) {
  const Tensor x = Rand({8, 40}, 44), big = Rand({100000}, 45);
  const Tensor a = Rand({9, 12}, 46), b = Rand({12, 7}, 47), c0 = Rand({40}, 48);
  auto compute = [&](Device d, double s) {
    auto body = [s](const std::vector<Tensor>& c, const std::vector<Tensor>& xs) {
      Tensor next = tanh(c[0] * s + xs[0]);
      return std::make_pair(std::vector<Tensor>{next}, std::vector<Tensor>{next - s});
    };
    const Tensor xd = x.to(d);
    ScanResult r = scan(body, {c0.to(d)}, {xd});
    std::vector<Tensor> outs = {sum(xd * s, {1}),   sum(big.to(d) * s),
                                softmax(xd * s, 1), relu(matmul(a.to(d), b.to(d)) * s) + s,
                                r.carry[0],         r.ys[0]};
    std::vector<std::vector<float>> values;
    for (Tensor& t : outs) values.push_back(t.to_vector<float>());
    return values;
  };
  for (double s : {0.5, 1.75, -3.0}) {
    const auto got = compute(kCl, s), want = compute(Device::host(), s);
    for (size_t i = 0; i < got.size(); ++i) {
      const double tolerance = i == 1 ? 1e-3 : 1e-5;  // a sum of 1e5 elements
      ASSERT_EQ(got[i].size(), want[i].size());
      for (size_t j = 0; j < got[i].size(); ++j)
        EXPECT_NEAR(got[i][j], want[i][j], tolerance * (1 + std::fabs(want[i][j])))
            << i << " " << j;
    }
  }
  const Counts before;
  compute(kCl, 2.5);
  const Counts after;
  EXPECT_EQ(after.compiles, before.compiles);
  EXPECT_EQ(after.programs, before.programs);
}

// Runs one test of this binary in a child process with extra environment variables.
int RunChild(const std::string& test, const std::string& env) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string command = env + " '" + self + "' --gtest_filter=" + test + " >&2";
  return std::system(command.c_str());
}

// Regression: kernel names came from absl::Hash of the IR node, which absl seeds per process,
// so every process generated different sources and the on-disk program cache never hit.
TEST(CacheTest, AFreshProcessLoadsEveryProgramFromTheDiskCache) {
  char dir[] = "/tmp/lazycl-cache-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string env = std::string("LAZYCL_KERNEL_CACHE_DIR=") + dir;
  const std::string child = "CacheTest.ChildComputesOnceWithAColdOrWarmDiskCache";
  EXPECT_EQ(RunChild(child, env + " LAZYCL_CACHE_TEST_CHILD=cold"), 0);
  EXPECT_EQ(RunChild(child, env + " LAZYCL_CACHE_TEST_CHILD=warm"), 0);
  std::filesystem::remove_all(dir);
}

// Sets the graph cache's capacity for one test and restores it after.
class CacheCapacity {
 public:
  explicit CacheCapacity(size_t plans) : previous_(runtime::SetGraphCacheCapacity(plans)) {}
  ~CacheCapacity() { runtime::SetGraphCacheCapacity(previous_); }
  CacheCapacity(const CacheCapacity&) = delete;
  CacheCapacity& operator=(const CacheCapacity&) = delete;

 private:
  size_t previous_;
};

// Graph `k` of a family of different structures: k + 1 steps of an elementwise chain.
Tensor Chain(const Tensor& a, int k) {
  Tensor y = a;
  for (int i = 0; i <= k; ++i) y = y * 0.5 + 1.0;
  return y;
}

TEST(CacheTest, FullCacheEvictsTheLeastRecentlyUsedPlan) {
  const CacheCapacity capacity(3);
  Tensor a = Rand({5, 7}, 21);
  sync({a});
  const Tensor a_host = a.to(Device::host());
  // Runs graph k and returns how many graphs it compiled and found in the cache.
  auto run = [&](int k) {
    const Counts before;
    ExpectNear(Chain(a, k).to_vector<float>(), Chain(a_host, k).to_vector<float>());
    const Counts after;
    return std::make_pair(after.compiles - before.compiles, after.hits - before.hits);
  };
  for (int k = 0; k < 3; ++k) run(k);  // the cache holds 2, 1, 0 (most recently used first)
  EXPECT_EQ(run(0), std::make_pair(int64_t{0}, int64_t{1}));  // now 0, 2, 1
  EXPECT_EQ(run(3), std::make_pair(int64_t{1}, int64_t{0}));  // evicts 1: 3, 0, 2
  EXPECT_EQ(run(3), std::make_pair(int64_t{0}, int64_t{1}));  // the most recently used
  EXPECT_EQ(run(0), std::make_pair(int64_t{0}, int64_t{1}));  // 0, 3, 2
  EXPECT_EQ(run(1), std::make_pair(int64_t{1}, int64_t{0}));  // compiles again; evicts 2
  EXPECT_EQ(run(2), std::make_pair(int64_t{1}, int64_t{0}));  // evicts 3
  EXPECT_EQ(run(0), std::make_pair(int64_t{0}, int64_t{1}));
}

// A scan holds its plan for the whole step loop; with room for one plan, the forward and
// backward scans and the graphs between them evict each other and every result is still right.
TEST(CacheTest, ScansAreRightWithACacheOfOnePlan) {
  const CacheCapacity capacity(1);
  auto body = [](const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
    Tensor next = tanh(c[0] * x[0] + 0.5);
    return std::make_pair(std::vector<Tensor>{next}, std::vector<Tensor>{next * 2.0});
  };
  const Tensor c0 = Rand({4}, 31).to(Device::host()), xs = Rand({6, 4}, 32).to(Device::host());
  auto run_on = [&](Device device) {
    Tensor c = c0.to(device).requires_grad_(), x = xs.to(device).requires_grad_();
    ScanResult r = scan(body, {c}, {x});
    (sum(r.carry[0]) + sum(r.ys[0] * r.ys[0])).backward();
    return std::vector<std::vector<float>>{r.ys[0].to_vector<float>(), c.grad().to_vector<float>(),
                                           x.grad().to_vector<float>()};
  };
  const auto got = run_on(kCl), want = run_on(Device::host());
  for (size_t i = 0; i < got.size(); ++i) ExpectNear(got[i], want[i]);
}

// Only does something when AFreshProcessLoadsEveryProgramFromTheDiskCache runs it.
TEST(CacheTest, ChildComputesOnceWithAColdOrWarmDiskCache) {
  const char* mode = std::getenv("LAZYCL_CACHE_TEST_CHILD");
  if (mode == nullptr)
    GTEST_SKIP() << "run as a child of AFreshProcessLoadsEveryProgramFromTheDiskCache";
  Tensor a = Rand({37, 53}, 11), b = Rand({37, 53}, 12);
  ExpectNear(Compute(a, b).to_vector<float>(), ComputeOnHost(a, b));
  if (std::string(mode) == "cold") {
    EXPECT_GT(metrics::counter("ProgramBuilds"), 0);
    EXPECT_EQ(metrics::counter("ProgramDiskCacheHits"), 0);
  } else {
    EXPECT_EQ(metrics::counter("ProgramBuilds"), 0);
    EXPECT_GT(metrics::counter("ProgramDiskCacheHits"), 0);
  }
}

// A graph's new kernels build as one OpenCL program (one compiler run). The chain of ops is drawn
// at random so that its kernels are new to every run, even with a warm disk cache.
TEST(CacheTest, AGraphsNewKernelsBuildAsOneProgram) {
  std::random_device seed;
  const unsigned drawn = seed();
  SCOPED_TRACE("chain seed " + std::to_string(drawn));  // to replay a failure
  std::mt19937 rng(drawn);
  Tensor a = Rand({33, 16}, 5), b = Rand({16, 20}, 6);
  auto chain = [&](Tensor x, const std::vector<int>& ops) {
    for (int op : ops) {
      switch (op) {
        case 0:
          x = tanh(x);
          break;
        case 1:
          x = relu(x) + 0.5;
          break;
        case 2:
          x = sin(x);
          break;
        case 3:
          x = x * x;
          break;
        case 4:
          x = sigmoid(x);
          break;
        case 5:
          x = cos(x) * 2.0;
          break;
        case 6:
          x = exp(x * 0.1);
          break;
        default:
          x = abs(x) - 1.0;
          break;
      }
    }
    return x;
  };
  std::vector<int> ops(10);
  for (int& op : ops) op = static_cast<int>(rng() % 8);
  auto outputs = [&](const Tensor& x, const Tensor& w) {
    Tensor y = chain(x, ops);
    return std::vector<Tensor>{y, sum(y, {1}), matmul(y, w)};
  };
  const std::vector<Tensor> want = outputs(a.to(Device::host()), b.to(Device::host()));
  const int64_t builds = metrics::counter("ProgramBuilds");
  const int64_t launches = metrics::counter("KernelLaunches");
  std::vector<Tensor> got = outputs(a, b);
  sync(got);
  EXPECT_GE(metrics::counter("KernelLaunches") - launches, 3);
  // The chain's kernels are new (the plain matmul may come from the disk cache, alone).
  EXPECT_EQ(metrics::counter("ProgramBuilds"), builds + 1);
  ExpectNear(got[0].to_vector<float>(), want[0].to_vector<float>());
  // The row sums and the product within 1e-5 of the same sums of |y| (ops_test's tolerance):
  // the random chain can make y's entries large with a small sum, where a bound relative to
  // the result fails by rounding alone (seen: 1.5e-5 on a product of 0.063).
  const Tensor y_abs = abs(chain(a.to(Device::host()), ops));
  const std::vector<Tensor> scales = {sum(y_abs, {1}), matmul(y_abs, abs(b.to(Device::host())))};
  for (size_t k = 1; k < 3; ++k) {
    SCOPED_TRACE(k);
    const std::vector<float> value = got[k].to_vector<float>();
    const std::vector<float> exact = want[k].to_vector<float>();
    const std::vector<float> scale = scales[k - 1].to_vector<float>();
    ASSERT_EQ(value.size(), exact.size());
    for (size_t i = 0; i < value.size(); ++i)
      EXPECT_NEAR(value[i], exact[i], 1e-5f * scale[i] + 1e-6f) << i;
  }
}

// A graph built op by op again with the structure of an earlier one (a model's next step) takes
// that one's plan without building it again (runtime/executor.cpp: Recipe), binding this
// graph's own buffers and scalars: here a slice of a product that is sunk through it, two
// scalars whose values change places, and which inputs share a buffer, each checked against
// the host.
TEST(CacheTest, AGraphOfAnEarlierStructureBindsItsOwnLeaves) {
  auto step = [](const Tensor& x, const Tensor& w, const Tensor& b, double s1, double s2) {
    const Tensor y = relu(matmul(x, w) * s1 + b) - s2;
    return sum(slice(y, 0, 5, 6) * s1, {1});  // the last row's: only it is computed
  };
  int checks = 0;
  auto check = [&](const Tensor& x, const Tensor& w, const Tensor& b, double s1, double s2,
                   bool reused) {
    SCOPED_TRACE(testing::Message() << "check " << ++checks);
    const int64_t before = metrics::counter("GraphBuildsReused");
    const std::vector<float> got = step(x, w, b, s1, s2).to_vector<float>();
    EXPECT_EQ(metrics::counter("GraphBuildsReused"), before + (reused ? 1 : 0));
    const Device h = Device::host();
    ExpectNear(got, step(x.to(h), w.to(h), b.to(h), s1, s2).to_vector<float>());
  };
  const Tensor x1 = Rand({6, 8}, 61), w1 = Rand({8, 8}, 62), b1 = Rand({1, 8}, 63);
  const Tensor x2 = Rand({6, 8}, 64), w2 = Rand({8, 8}, 65), b2 = Rand({1, 8}, 66);
  sync({x1, w1, b1, x2, w2, b2});
  step(x1, w1, b1, 0.5, 2.0).to_vector<float>();  // this structure run (and kept) once
  check(x2, w2, b2, 0.5, 2.0, true);
  check(x1, w2, b1, 2.0, 0.5, true);          // the scalars swapped
  check(x2, w2 + 1.0, b2, -3.0, 1.0, false);  // w computed in the graph: another structure
  check(x1, w1, b1, -1.5, 0.25, true);
  check(x1, w1 + 2.0, b2, 1.5, -1.0, true);
  // x and w one buffer: another structure (one parameter where there were two), then reused.
  const Tensor s1 = Rand({8, 8}, 67), s2 = Rand({8, 8}, 68);
  sync({s1, s2});
  check(slice(s1, 0, 0, 6), s1, b1, 1.0, 0.0, false);
  check(slice(s2, 0, 0, 6), s2, b2, 0.75, -0.5, true);
  check(slice(s1, 0, 0, 6), s2, b2, 0.75, -0.5, false);  // two buffers: another structure
  check(slice(s2, 0, 0, 6), s1, b1, 2.5, 1.0, true);
  check(slice(s2, 0, 0, 6), s2, b1, 2.5, 1.0, true);  // one buffer: the one before
}

// A graph of a structure run before, one of its leaves now a placeholder: the recipe path binds
// leaves without BuildGraph's checks, so it must refuse the placeholder as BuildGraph does, and
// the structure's next run with data is right.
TEST(CacheTest, APlaceholderInAGraphOfAnEarlierStructureIsRefusedAndTheNextRunIsRight) {
  const Device cl = Device::opencl(0);
  auto step = [](const Tensor& x, const Tensor& w) { return relu(matmul(x, w) - 0.25); };
  const Tensor x = Rand({8, 8}, 81), w = Rand({8, 8}, 82), x2 = Rand({8, 8}, 83);
  sync({x, w, x2});
  step(x, w).to_vector<float>();  // this structure run (and kept) once
  const Tensor hole = placeholder({8, 8}, DType::f32, cl);
  const int64_t before = metrics::counter("GraphBuildsReused");
  try {
    step(hole, w).to_vector<float>();
    ADD_FAILURE() << "a placeholder's graph ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("placeholder"), std::string::npos) << e.what();
  }
  EXPECT_EQ(metrics::counter("GraphBuildsReused"), before + 1) << "the recipe's path refused it";
  const int64_t reused = metrics::counter("GraphBuildsReused");
  const std::vector<float> got = step(x2, w).to_vector<float>();
  EXPECT_EQ(metrics::counter("GraphBuildsReused"), reused + 1);
  const Device h = Device::host();
  ExpectNear(got, step(x2.to(h), w.to(h)).to_vector<float>());
}

// Half precision rewrites a graph's Scalar leaves into f32 ones (ir/half_precision.h): the recipe
// binds each by the position of the half leaf it was made from, with each step's two values.
TEST(CacheTest, AHalfPrecisionGraphOfAnEarlierStructureTakesItsNewScalars) {
  for (DType dtype : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = cast(Rand({4, 5}, 71), dtype);
    sync({x});
    int step = 0;
    for (double s : {0.5, 3.0, -2.0}) {
      const int64_t reused = metrics::counter("GraphBuildsReused");
      const std::vector<float> got = cast(exp(x * s) + (2 * s + 1), DType::f32).to_vector<float>();
      EXPECT_EQ(metrics::counter("GraphBuildsReused"), reused + (step++ > 0 ? 1 : 0)) << s;
      const Tensor xh = x.to(Device::host());
      ExpectNear(got, cast(exp(xh * s) + (2 * s + 1), DType::f32).to_vector<float>());
    }
  }
}

}  // namespace
}  // namespace lazycl
