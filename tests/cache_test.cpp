// The graph cache: the same structure on new data reuses the compiled graph; the same structure
// on new shapes reuses the OpenCL programs (sizes are kernel arguments, not source).
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
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

TEST(CacheTest, DifferentScalarIsADifferentGraphWithTheRightValue) {
  Tensor a = tensor(std::vector<float>{1, 2, 3}, {3}, kCl);
  EXPECT_EQ((a * 2.0).to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ((a * 3.0).to_vector<float>(), (std::vector<float>{3, 6, 9}));
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

}  // namespace
}  // namespace lazycl
