// lazycl::dist's collectives, at whatever world size the test runs under (CTest runs it alone and
// under mpirun -np 2): every rank contributes rank-dependent values and checks the reduction;
// with one process every collective is the identity and moves nothing.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/dist.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

int64_t C(const char* name) { return metrics::counter(name); }

bool Has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

template <class F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

class DistTest : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override { dist::init(); }
};

TEST_P(DistTest, AllReduceSumMeanMaxOverDtypesAndBuckets) {
  const Device d = GetParam();
  const int r = dist::rank(), n = dist::world_size();
  const double v = r + 1;  // rank r holds r + 1
  std::vector<Tensor> t = {full({3, 4}, v, DType::f32, d), full({5}, v, DType::i32, d),
                           full({2, 0}, v, DType::f32, d), full({7}, v, DType::bf16, d),
                           full({2}, v, DType::i64, d),
                           // 26 MiB of f32: a bucket of its own past the 25 MiB bound
                           full({26 << 18}, v, DType::f32, d),
                           // f64 travels as double: 1/3 + rank keeps its 53 bits
                           full({3}, v + 1.0 / 3.0, DType::f64, d)};
  const Tensor alias = t[0];  // another handle of the first: sees the result too
  const int64_t calls = C("CollectiveCount"), moved = C("TransferToDeviceBytes");
  dist::all_reduce(t, dist::ReduceOp::sum);
  const double sum = n * (n + 1) / 2.0;
  EXPECT_EQ(alias.to_vector<float>(), std::vector<float>(12, static_cast<float>(sum)));
  EXPECT_EQ(t[1].to_vector<int32_t>(), std::vector<int32_t>(5, static_cast<int32_t>(sum)));
  EXPECT_EQ(t[2].numel(), 0);
  EXPECT_EQ(t[3].to_vector<float>(), std::vector<float>(7, static_cast<float>(sum)));
  EXPECT_EQ(t[3].dtype(), DType::bf16);
  EXPECT_EQ(t[4].to_vector<int64_t>(), std::vector<int64_t>(2, static_cast<int64_t>(sum)));
  EXPECT_EQ(t[5].to_vector<float>()[12345], static_cast<float>(sum));
  double want64 = 0;
  for (int k = 0; k < n; ++k) want64 += (k + 1) + 1.0 / 3.0;
  EXPECT_EQ(t[6].dtype(), DType::f64);
  EXPECT_EQ(t[6].to_vector<double>(), std::vector<double>(3, want64));
  if (n == 1) {
    EXPECT_EQ(C("CollectiveCount"), calls);  // the identity: no call, nothing moved
    EXPECT_EQ(C("TransferToDeviceBytes"), moved);
  } else {
    // f32: two buckets (the 26 MiB tensor alone), f64, i32 and i64: one each.
    EXPECT_EQ(C("CollectiveCount") - calls, 5);
  }
  std::vector<Tensor> m = {full({4}, v, DType::f32, d)};
  dist::all_reduce(m, dist::ReduceOp::mean);
  EXPECT_EQ(m[0].to_vector<float>(), std::vector<float>(4, static_cast<float>(sum / n)));
  std::vector<Tensor> x = {full({4}, v, DType::f32, d), full({1}, -v, DType::i64, d)};
  dist::all_reduce(x, dist::ReduceOp::max);
  EXPECT_EQ(x[0].to_vector<float>(), std::vector<float>(4, static_cast<float>(n)));
  EXPECT_EQ(x[1].to_vector<int64_t>(), std::vector<int64_t>(1, -1));
}

// Random values: each rank's tensor is randn with its own seed, which every rank can compute on
// the host, so the expected mean is known everywhere. Each tensor crosses once each way, between
// its buffer and the pinned staging memory, and is written back in place: no kernel runs.
TEST_P(DistTest, AllReduceMovesEachTensorOnceEachWayAndRunsNoKernel) {
  const Device d = GetParam();
  const int r = dist::rank(), n = dist::world_size();
  const std::vector<int64_t> shapes[] = {{1000}, {3, 4}, {1}};
  std::vector<Tensor> t;
  for (size_t i = 0; i < 3; ++i)
    t.push_back(randn(shapes[i], 100 * static_cast<uint64_t>(r) + i, DType::f32, d));
  sync(t);
  const int64_t launches = C("KernelLaunches"), down = C("TransferFromDeviceBytes"),
                up = C("TransferToDeviceBytes"), allocs = C("DeviceAllocCount");
  dist::all_reduce(t, dist::ReduceOp::mean);
  if (d.is_opencl() && n > 1) {
    EXPECT_EQ(C("TransferFromDeviceBytes") - down, (1000 + 12 + 1) * 4);
    EXPECT_EQ(C("TransferToDeviceBytes") - up, (1000 + 12 + 1) * 4);
    EXPECT_EQ(C("KernelLaunches"), launches);
    EXPECT_EQ(C("DeviceAllocCount"), allocs);
  }
  for (size_t i = 0; i < 3; ++i) {
    std::vector<float> want(static_cast<size_t>(t[i].numel()), 0.0f);
    for (int k = 0; k < n; ++k) {
      const std::vector<float> theirs =
          randn(shapes[i], 100 * static_cast<uint64_t>(k) + i, DType::f32, Device::host())
              .to_vector<float>();
      for (size_t j = 0; j < want.size(); ++j) want[j] += theirs[j];
    }
    for (float& w : want) w = static_cast<float>(w * (1.0 / n));
    const std::vector<float> got = t[i].to_vector<float>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t j = 0; j < want.size(); ++j) {
      // MPI may add in another order than this loop: a few ulps.
      EXPECT_NEAR(got[j], want[j], 1e-6f * (1 + std::abs(want[j]))) << i << " " << j;
    }
  }
}

TEST_P(DistTest, BroadcastGivesEveryRankTheRootsValues) {
  const Device d = GetParam();
  const int n = dist::world_size();
  const int root = n - 1;
  std::vector<Tensor> t = {full({6}, dist::rank() * 10.0, DType::f32, d),
                           full({2, 2}, dist::rank(), DType::i32, d)};
  dist::broadcast(t, root);
  EXPECT_EQ(t[0].to_vector<float>(), std::vector<float>(6, static_cast<float>(root * 10)));
  EXPECT_EQ(t[1].to_vector<int32_t>(), std::vector<int32_t>(4, root));
  EXPECT_TRUE(Has(ErrorOf([&] { dist::broadcast(t, n); }), "not a rank"));
}

TEST_P(DistTest, DifferentTensorsOnTheRanksAreAnErrorBeforeDataMoves) {
  if (dist::world_size() == 1) GTEST_SKIP() << "needs two ranks (CTest runs it under mpirun)";
  const Device d = GetParam();
  std::vector<Tensor> t = {zeros({dist::rank() == 0 ? 3 : 4}, DType::f32, d)};
  const int64_t bytes = C("CollectiveBytes");
  const std::string e = ErrorOf([&] { dist::all_reduce(t); });
  EXPECT_TRUE(Has(e, "different tensors")) << e;
  EXPECT_TRUE(Has(e, "rank 0 all_reduce: f32[3]")) << e;
  EXPECT_TRUE(Has(e, "rank 1 all_reduce: f32[4]")) << e;
  EXPECT_EQ(C("CollectiveBytes"), bytes);
  dist::barrier();  // both ranks are still in step
}

TEST_P(DistTest, BadInputsAreErrors) {
  const Device d = GetParam();
  std::vector<Tensor> undefined = {Tensor()};
  EXPECT_TRUE(Has(ErrorOf([&] { dist::all_reduce(undefined); }), "undefined"));
  std::vector<Tensor> flags = {zeros({2}, DType::boolean, d)};
  EXPECT_TRUE(Has(ErrorOf([&] { dist::all_reduce(flags); }), "bool"));
  std::vector<Tensor> ints = {zeros({2}, DType::i32, d)};
  EXPECT_TRUE(Has(ErrorOf([&] { dist::all_reduce(ints, dist::ReduceOp::mean); }), "mean of"));
  if (d.is_opencl()) {
    std::vector<Tensor> p = {placeholder({2}, DType::f32, d)};
    EXPECT_TRUE(Has(ErrorOf([&] { dist::all_reduce(p); }), "placeholder"));
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, DistTest, ::testing::Values(Device::opencl(0), Device::host()),
                         [](const auto& info) { return info.param.is_host() ? "host" : "cl"; });

}  // namespace
}  // namespace lazycl
