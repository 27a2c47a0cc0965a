#include "backend/host_buffers.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/metrics.h"

namespace lazycl::backend {
namespace {

TEST(HostBuffersTest, DeclareAllocatesNothing) {
  HostBuffers host;
  BufferId id = host.Declare(1024, "x");
  EXPECT_FALSE(host.IsAllocated(id));
  EXPECT_FALSE(host.IsWritten(id));
  EXPECT_EQ(host.Data(id), nullptr);
  EXPECT_EQ(host.Bytes(id), 1024u);
  EXPECT_EQ(host.Label(id), "x");
}

TEST(HostBuffersTest, RoundTripIsAlignedAndCountsNoTransfers) {
  lazycl::metrics::reset();
  HostBuffers host;
  std::vector<float> in = {1, 2, 3, 4, 5};
  BufferId id = host.Declare(in.size() * sizeof(float), "data");
  ASSERT_TRUE(host.Upload(id, in.data(), 0, in.size() * sizeof(float)).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(host.Data(id)) % 64, 0u);
  std::vector<float> out(in.size());
  ASSERT_TRUE(host.Download(id, out.data(), 0, out.size() * sizeof(float)).ok());
  EXPECT_EQ(in, out);
  EXPECT_EQ(lazycl::metrics::counter("TransferToDeviceBytes"), 0);
  EXPECT_EQ(lazycl::metrics::counter("TransferFromDeviceBytes"), 0);
  EXPECT_EQ(lazycl::metrics::counter("DeviceAllocBytes"), 0);
}

TEST(HostBuffersTest, ReadingUnwrittenBufferNamesIt) {
  HostBuffers host;
  BufferId id = host.Declare(16, "weights_placeholder");
  absl::Status s = host.CheckReadable(id);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(s.message()).find("weights_placeholder"), std::string::npos);
  float out[4];
  EXPECT_EQ(host.Download(id, out, 0, sizeof(out)).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(HostBuffersTest, PrepareWriteMarksWritten) {
  HostBuffers host;
  BufferId id = host.Declare(8, "out");
  ASSERT_TRUE(host.PrepareWrite(id).ok());
  EXPECT_TRUE(host.IsAllocated(id));
  EXPECT_TRUE(host.IsWritten(id));
  EXPECT_TRUE(host.CheckReadable(id).ok());
}

TEST(HostBuffersTest, OutOfBoundsIsInvalidArgument) {
  HostBuffers host;
  BufferId id = host.Declare(8, "small");
  char data[16] = {};
  EXPECT_EQ(host.Upload(id, data, 4, 8).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(host.Upload(id, data, 9, 0).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(host.Upload(id, data, 0, 8).ok());
  EXPECT_EQ(host.Download(id, data, 1, 8).code(), absl::StatusCode::kInvalidArgument);
}

TEST(HostBuffersTest, ZeroByteBuffer) {
  HostBuffers host;
  BufferId id = host.Declare(0, "empty");
  ASSERT_TRUE(host.Upload(id, nullptr, 0, 0).ok());
  EXPECT_TRUE(host.IsWritten(id));
  EXPECT_TRUE(host.Download(id, nullptr, 0, 0).ok());
}

TEST(HostBuffersTest, IdsAreUniqueAcrossManagers) {
  HostBuffers a;
  BufferId x = a.Declare(4, "x");
  a.Release(x);
  BufferId y = a.Declare(4, "y");
  BufferId z = HostMemory().Declare(4, "z");
  EXPECT_NE(x, y);
  EXPECT_NE(y, z);
  EXPECT_NE(x, z);
  HostMemory().Release(z);
}

TEST(HostBuffersTest, ReleaseOfUnknownIdAborts) {
  HostBuffers host;
  EXPECT_DEATH(host.Release(123456789), "unknown buffer id");
}

}  // namespace
}  // namespace lazycl::backend
