// LAZYCL_TRANSFER_GUARD=log (set by CTest, tests/CMakeLists.txt): implicit moves happen and
// each prints one line to stderr.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

const Device kCl = Device::opencl(0);

TEST(TransferGuardLogTest, RunsWithTheGuardSetToLog) {
  const char* guard = std::getenv("LAZYCL_TRANSFER_GUARD");
  ASSERT_NE(guard, nullptr) << "run this test through ctest, which sets LAZYCL_TRANSFER_GUARD";
  EXPECT_EQ(std::string(guard), "log");
}

TEST(TransferGuardLogTest, MixingWorksAndLogsOneLinePerMove) {
  Tensor dev = ones({4}, DType::f32, kCl);
  Tensor host = tensor(std::vector<float>{1, 2, 3, 4}, {4}, Device::host());
  const int64_t bytes = metrics::counter("TransferToDeviceBytes");
  testing::internal::CaptureStderr();
  Tensor y = dev + host;
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(metrics::counter("TransferToDeviceBytes"), bytes + 16);
  EXPECT_EQ(y.device(), kCl);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_NE(log.find("lazycl: add: operand 1"), std::string::npos) << log;
  EXPECT_NE(log.find("f32[4] on host"), std::string::npos) << log;
  EXPECT_NE(log.find("moved to cl:0"), std::string::npos) << log;
  int lines = 0;
  for (char c : log) lines += c == '\n';
  EXPECT_EQ(lines, 1) << log;
}

TEST(TransferGuardLogTest, SameDeviceOpsLogNothing) {
  Tensor dev = ones({4}, DType::f32, kCl);
  testing::internal::CaptureStderr();
  Tensor y = exp(dev) + dev * 2;
  y.to_vector<float>();
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(log.find("moved"), std::string::npos) << log;
}

}  // namespace
}  // namespace lazycl
