// Several OpenCL devices in one process (issue 16, part 1). CTest runs this with
// POCL_DEVICES="pthread pthread", which makes PoCL expose two CPU devices (cl:0 and cl:1), each
// with its own context, queue, buffers and program cache.
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "test_util.h"

namespace lazycl {
namespace {

using test::C;

std::vector<float> Iota(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i) * 0.5f;
  return v;
}

TEST(MultiDeviceTest, TwoDevicesHoldAndComputeTensorsAtOnce) {
  const Device a = Device::opencl(0), b = Device::opencl(1);
  const Tensor x = tensor(Iota(64), {8, 8}, a);
  const Tensor y = tensor(Iota(64), {8, 8}, b);
  const Tensor ra = matmul(x, x) + 1.0, rb = matmul(y, y) + 1.0;
  sync({ra, rb});
  EXPECT_EQ(ra.device(), a);
  EXPECT_EQ(rb.device(), b);
  EXPECT_EQ(ra.to_vector<float>(), rb.to_vector<float>());
}

TEST(MultiDeviceTest, MovingBetweenDevicesIsTwoCountedTransfers) {
  const Device a = Device::opencl(0), b = Device::opencl(1);
  const Tensor x = tensor(Iota(1000), {1000}, a);
  sync({x});
  const int64_t up = C("TransferToDeviceBytes"), down = C("TransferFromDeviceBytes");
  const Tensor moved = (x * 2.0).to(b);
  EXPECT_EQ(moved.device(), b);
  EXPECT_EQ(C("TransferFromDeviceBytes") - down, 4000);
  EXPECT_EQ(C("TransferToDeviceBytes") - up, 4000);
  const std::vector<float> v = moved.to_vector<float>();
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(v[static_cast<size_t>(i)], static_cast<float>(i));
  // Mixing the two in one op is an Error naming both, not a silent copy.
  EXPECT_TRUE(test::Has(test::ErrorOf([&] { (void)(x + moved); }), "cl:1"));
}

TEST(MultiDeviceTest, GraphsOnTheTwoDevicesRunConcurrently) {
  std::vector<std::vector<float>> results(2);
  std::vector<std::thread> threads;
  for (int d = 0; d < 2; ++d) {
    threads.emplace_back([d, &results] {
      const Device dev = Device::opencl(d);
      Tensor w = tensor(Iota(256 * 256), {256, 256}, dev) * 0.001;
      Tensor h = ones({32, 256}, DType::f32, dev);
      for (int l = 0; l < 20; ++l) h = tanh(matmul(h, w));
      results[static_cast<size_t>(d)] = h.to_vector<float>();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(results[0], results[1]);
}

}  // namespace
}  // namespace lazycl
