// LAZYCL_TRANSFER_GUARD=disallow (set by CTest, tests/CMakeLists.txt): implicit host<->device
// moves are errors that name the operand; explicit to() still works.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

const Device kCl = Device::opencl(0);

TEST(TransferGuardTest, RunsWithTheGuardSetToDisallow) {
  const char* guard = std::getenv("LAZYCL_TRANSFER_GUARD");
  ASSERT_NE(guard, nullptr) << "run this test through ctest, which sets LAZYCL_TRANSFER_GUARD";
  EXPECT_EQ(std::string(guard), "disallow");
}

TEST(TransferGuardTest, MixingHostAndDeviceIsAnErrorNamingTheOperand) {
  Tensor dev = zeros({2, 3}, DType::f32, kCl);
  Tensor host = tensor(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3}, Device::host());
  dev.to_vector<float>();  // settle the device tensor, so that only the mix could move bytes
  const int64_t to_device = metrics::counter("TransferToDeviceBytes");
  const int64_t from_device = metrics::counter("TransferFromDeviceBytes");
  const int64_t launches = metrics::counter("KernelLaunches");
  for (bool host_first : {true, false}) {
    try {
      Tensor y = host_first ? host + dev : dev + host;
      ADD_FAILURE() << "an implicit transfer was allowed: " << y.str();
    } catch (const Error& e) {
      const std::string message = e.what();
      for (const std::string& part :
           {std::string("add"), std::string(host_first ? "operand 0" : "operand 1"),
            std::string("i32[2,3]"), std::string("host"), std::string("cl:0"),
            std::string("LAZYCL_TRANSFER_GUARD"), std::string("to()")}) {
        EXPECT_NE(message.find(part), std::string::npos)
            << "missing \"" << part << "\" in: " << message;
      }
    }
  }
  EXPECT_THROW(where(gt(dev, dev), host, dev), Error);
  EXPECT_THROW(matmul(dev, reshape(host, {3, 2})), Error);
  EXPECT_EQ(metrics::counter("TransferToDeviceBytes"), to_device);
  EXPECT_EQ(metrics::counter("TransferFromDeviceBytes"), from_device);
  EXPECT_EQ(metrics::counter("KernelLaunches"), launches);
}

TEST(TransferGuardTest, ExplicitToStillWorksAndIsCounted) {
  Tensor dev = ones({2, 3}, DType::f32, kCl);
  Tensor host = tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, Device::host());
  const int64_t bytes = metrics::counter("TransferToDeviceBytes");
  Tensor moved = host.to(kCl);
  EXPECT_EQ(metrics::counter("TransferToDeviceBytes"), bytes + 24);
  Tensor y = moved + dev;
  EXPECT_EQ(y.device(), kCl);
  EXPECT_EQ(y.to_vector<float>(),
            (std::vector<float>{2, 3, 4, 5, 6, 7}));  // reading back is explicit
  Tensor back = y.to(Device::host());
  EXPECT_EQ((back * host).to_vector<float>(), (std::vector<float>{2, 6, 12, 20, 30, 42}));
}

TEST(TransferGuardTest, SameDeviceOpsAreUnaffected) {
  Tensor a = arange(4, DType::f32, kCl);
  EXPECT_EQ((a * 2 + 1).to_vector<float>(),
            (std::vector<float>{1, 3, 5, 7}));  // scalars are not transfers
  Tensor h = arange(4, DType::f32, Device::host());
  EXPECT_EQ((h * 2 + 1).to_vector<float>(), (std::vector<float>{1, 3, 5, 7}));
}

}  // namespace
}  // namespace lazycl
