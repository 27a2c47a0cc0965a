// Device tensors are lazy: ops record IR and nothing runs, moves or allocates until a result is
// needed (SPEC, "Semantics that tests check"). Laziness is checked by counting launches, bytes
// and allocations, as ArrayFire's test/jit.cpp checks deviceMemInfo.
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

const char* const kCounters[] = {"KernelLaunches",          "TransferToDeviceBytes",
                                 "TransferToDeviceCount",   "TransferFromDeviceBytes",
                                 "TransferFromDeviceCount", "DeviceAllocBytes",
                                 "DeviceAllocCount",        "DeviceLiveBytes",
                                 "GraphCompiles",           "GraphCacheHits"};

std::map<std::string, int64_t> Snapshot() {
  std::map<std::string, int64_t> values;
  for (const char* name : kCounters) values[name] = metrics::counter(name);
  return values;
}

// 50 ops: ten times mul, add, tanh, sub, relu. Each step reads x once, so the graph stays far
// below the pending-node limit that would cut it.
Tensor FiftyOps(const Tensor& a, const Tensor& b) {
  Tensor x = a;
  for (int i = 0; i < 10; ++i) x = relu(tanh(x * 0.5 + b) - b);
  return x;
}

// The same expression computed in plain C++, element by element.
std::vector<float> FiftyOpsReference(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    float x = a[i];
    for (int k = 0; k < 10; ++k) x = std::max(std::tanh(x * 0.5f + b[i]) - b[i], 0.0f);
    out[i] = x;
  }
  return out;
}

std::vector<float> Iota(int n, float scale, float offset) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>(i % 97);
  return v;
}

TEST(LazinessTest, FiftyOpGraphOnDeviceRunsNothingUntilSync) {
  const Device cl = Device::opencl(0);
  const int n = 1237;  // a size no other test in this binary allocates, so the pool cannot hide it
  const std::vector<float> av = Iota(n, 0.02f, -1.0f);
  const std::vector<float> bv = Iota(n, -0.01f, 0.3f);
  Tensor a = tensor(av, {n}, cl);
  Tensor b = tensor(bv, {n}, cl);

  const auto before = Snapshot();
  Tensor y = FiftyOps(a, b);
  EXPECT_EQ(Snapshot(), before) << "building the graph did work";
  EXPECT_EQ(y.device(), cl);
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{n}));
  EXPECT_NE(y.str().find("pending"), std::string::npos) << y.str();

  sync({y});
  const auto after = Snapshot();
  EXPECT_GT(after.at("KernelLaunches"), before.at("KernelLaunches"));
  EXPECT_GT(after.at("DeviceAllocBytes"), before.at("DeviceAllocBytes"));
  EXPECT_GE(after.at("DeviceLiveBytes") - before.at("DeviceLiveBytes"), int64_t{n} * 4);
  EXPECT_EQ(after.at("GraphCompiles") + after.at("GraphCacheHits"),
            before.at("GraphCompiles") + before.at("GraphCacheHits") + 1);
  // sync runs without reading back; the inputs were uploaded before the graph was built.
  EXPECT_EQ(after.at("TransferFromDeviceBytes"), before.at("TransferFromDeviceBytes"));
  EXPECT_EQ(after.at("TransferToDeviceBytes"), before.at("TransferToDeviceBytes"));
  EXPECT_NE(y.str().find("data"), std::string::npos) << y.str();

  const std::vector<float> want = FiftyOpsReference(av, bv);
  const std::vector<float> got = y.to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (int i = 0; i < n; ++i) EXPECT_NEAR(got[i], want[i], 1e-5f * (1 + std::fabs(want[i]))) << i;
}

TEST(LazinessTest, SecondReadDoesNotRecompute) {
  const Device cl = Device::opencl(0);
  Tensor a = tensor(Iota(301, 0.1f, 0), {301}, cl);
  Tensor y = exp(a * 0.01) + a;

  const std::vector<float> first = y.to_vector<float>();
  const auto mid = Snapshot();
  const std::vector<float> second = y.to_vector<float>();
  const auto after = Snapshot();
  EXPECT_EQ(first, second);
  EXPECT_EQ(after.at("KernelLaunches"), mid.at("KernelLaunches"));
  EXPECT_EQ(after.at("GraphCompiles"), mid.at("GraphCompiles"));
  EXPECT_EQ(after.at("GraphCacheHits"), mid.at("GraphCacheHits"));
  EXPECT_EQ(after.at("DeviceAllocBytes"), mid.at("DeviceAllocBytes"));
  // Each read is one counted device->host copy of the result, nothing more.
  EXPECT_EQ(after.at("TransferFromDeviceCount"), mid.at("TransferFromDeviceCount") + 1);
  EXPECT_EQ(after.at("TransferFromDeviceBytes"), mid.at("TransferFromDeviceBytes") + 301 * 4);
}

// Regression: sync of one value through two handles (or one handle twice) threw
// std::out_of_range from the executor's rebinding loop, which looked the second handle up by the
// node the first had just replaced.
TEST(LazinessTest, SyncOfOneValueTwiceComputesItOnce) {
  const Device cl = Device::opencl(0);
  Tensor x = tensor(Iota(37, 1.0f, 0), {37}, cl);
  Tensor y = x * 2;
  Tensor y2 = y;  // a second handle of the same value
  Tensor z = x + 1;
  const int64_t launches = metrics::counter("KernelLaunches");
  sync({y, y2, z, z});
  // One kernel stores both values, each once (multi-output fusion: both read x).
  EXPECT_EQ(metrics::counter("KernelLaunches") - launches, 1);
  const std::vector<float> ys = y.to_vector<float>();
  EXPECT_EQ(ys, y2.to_vector<float>());
  EXPECT_FLOAT_EQ(ys[5], 10.0f);
  EXPECT_FLOAT_EQ(z.to_vector<float>()[5], 6.0f);
  sync({y, y});  // already computed: nothing to do
  EXPECT_EQ(metrics::counter("KernelLaunches") - launches, 1);
}
TEST(LazinessTest, ReadingOneResultLeavesOtherPendingTensorsPending) {
  const Device cl = Device::opencl(0);
  Tensor a = tensor(Iota(64, 1, 0), {64}, cl);
  Tensor y = a + 1;
  Tensor z = a * 3;
  const int64_t launches = metrics::counter("KernelLaunches");
  EXPECT_FLOAT_EQ(y.to_vector<float>()[5], 6.0f);
  EXPECT_EQ(metrics::counter("KernelLaunches"), launches + 1);
  EXPECT_NE(z.str().find("pending"), std::string::npos) << z.str();
  EXPECT_FLOAT_EQ(z.to_vector<float>()[5], 15.0f);
}

// A contiguous view of a computed tensor (a row, one element, a reshape of a row) is read in
// place: no copy kernel, and only the view's bytes cross. A view that is not one contiguous run
// (a column) still runs its copy kernel.
TEST(LazinessTest, ReadingAContiguousViewOfAComputedTensorRunsNoKernel) {
  const Device cl = Device::opencl(0);
  std::vector<float> values(4 * 6 * 5);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  Tensor y = tensor(values, {4, 6, 5}, cl) * 2;
  sync({y});
  auto before = Snapshot();
  EXPECT_FLOAT_EQ(reshape(slice(y, 0, 2, 3), {6, 5}).to_vector<float>()[7], 2.0f * (2 * 30 + 7));
  EXPECT_FLOAT_EQ(slice(slice(y, 0, 3, 4), 1, 4, 5).to_vector<float>()[2],
                  2.0f * (3 * 30 + 4 * 5 + 2));
  EXPECT_EQ(reshape(slice(y, 1, 1, 3), {4, 10}).to_vector<float>().size(), 40u);
  auto after = Snapshot();
  // The third view (rows 1..2 of every block) is not contiguous: one kernel.
  EXPECT_EQ(after.at("KernelLaunches"), before.at("KernelLaunches") + 1);
  EXPECT_EQ(after.at("TransferFromDeviceBytes"),
            before.at("TransferFromDeviceBytes") + (30 + 5 + 40) * 4);
  before = after;
  EXPECT_FLOAT_EQ(slice(slice(y, 2, 1, 2), 0, 1, 2).to_vector<float>()[3],
                  2.0f * (1 * 30 + 3 * 5 + 1));  // a column: strided
  EXPECT_EQ(Snapshot().at("KernelLaunches"), before.at("KernelLaunches") + 1);
  // Empty views read nothing.
  EXPECT_TRUE(slice(y, 0, 1, 1).to_vector<float>().empty());
}

TEST(LazinessTest, HostTensorsAreEagerAndNeverTouchTheDevice) {
  Tensor a = tensor(Iota(50, 1, 0), {50}, Device::host());
  const auto before = Snapshot();
  Tensor y = FiftyOps(a, a);
  EXPECT_EQ(y.device(), Device::host());
  EXPECT_NE(y.str().find("data"), std::string::npos) << y.str();  // already computed
  EXPECT_EQ(y.to_vector<float>().size(), 50u);
  EXPECT_EQ(Snapshot(), before);
}

}  // namespace
}  // namespace lazycl
