#include "backend/device_buffers.h"

#include <algorithm>

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "backend/device.h"
#include "backend/pool_bins.h"
#include "backend_test_util.h"
#include "base/settings.h"
#include "gtest/gtest.h"
#include "lazycl/metrics.h"

namespace lazycl::backend {
namespace {

int64_t C(std::string_view name) { return lazycl::metrics::counter(name); }

// Temporary cache directories made by OpenDevice, removed when the test program ends.
std::vector<std::string>& TempDirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

class RemoveTempDirs : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const std::string& dir : TempDirs()) std::filesystem::remove_all(dir);
  }
};
[[maybe_unused]] ::testing::Environment* const kRemoveTempDirs =
    ::testing::AddGlobalTestEnvironment(new RemoveTempDirs);

// Opens the default device with a hermetic cache directory and the given extra variables.
std::unique_ptr<Device> OpenDevice(std::map<std::string, std::string> env = {}) {
  char dir[] = "/tmp/lazycl-buffers-test-XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  TempDirs().push_back(dir);
  env["LAZYCL_KERNEL_CACHE_DIR"] = dir;
  return test::OpenDeviceWith(env);
}

class DeviceBuffersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = OpenDevice();
    ASSERT_NE(device_, nullptr);
    lazycl::metrics::reset();
  }
  BufferManager& buffers() { return device_->buffers(); }
  std::unique_ptr<Device> device_;
};

TEST_F(DeviceBuffersTest, DeclareAllocatesNothing) {
  const int64_t live = C("DeviceLiveBytes");
  BufferId id = buffers().Declare(1 << 20, "declared");
  EXPECT_EQ(C("DeviceAllocBytes"), 0);
  EXPECT_EQ(C("DeviceAllocCount"), 0);
  EXPECT_EQ(C("DeviceLiveBytes"), live);
  EXPECT_FALSE(buffers().IsAllocated(id));
  buffers().Release(id);
  EXPECT_EQ(C("DevicePoolBytes"), 0);
}

TEST_F(DeviceBuffersTest, UploadAndDownloadCountExactBytes) {
  const size_t n = 1000;
  std::vector<float> in(n);
  std::iota(in.begin(), in.end(), 0.5f);
  BufferId id = buffers().Declare(n * sizeof(float), "data");
  ASSERT_TRUE(buffers().Upload(id, in.data(), 0, n * sizeof(float)).ok());
  EXPECT_EQ(C("TransferToDeviceBytes"), static_cast<int64_t>(n * sizeof(float)));
  EXPECT_EQ(C("TransferToDeviceCount"), 1);
  EXPECT_EQ(C("DeviceAllocBytes"), static_cast<int64_t>(PoolBinBytes(n * sizeof(float))));
  EXPECT_EQ(C("DeviceAllocCount"), 1);

  std::vector<float> out(n);
  ASSERT_TRUE(buffers().Download(id, out.data(), 0, n * sizeof(float)).ok());
  EXPECT_EQ(C("TransferFromDeviceBytes"), static_cast<int64_t>(n * sizeof(float)));
  EXPECT_EQ(C("TransferFromDeviceCount"), 1);
  EXPECT_EQ(in, out);

  // A partial read counts only the bytes it copies.
  float middle[3];
  ASSERT_TRUE(buffers().Download(id, middle, 10 * sizeof(float), sizeof(middle)).ok());
  EXPECT_EQ(middle[0], in[10]);
  EXPECT_EQ(middle[2], in[12]);
  EXPECT_EQ(C("TransferFromDeviceBytes"), static_cast<int64_t>(n * sizeof(float) + 12));
  EXPECT_EQ(C("TransferFromDeviceCount"), 2);
  buffers().Release(id);
}

TEST_F(DeviceBuffersTest, TransfersAreTimed) {
  std::vector<char> data(4096, 7);
  BufferId id = buffers().Declare(data.size(), "timed");
  ASSERT_TRUE(buffers().Upload(id, data.data(), 0, data.size()).ok());
  ASSERT_TRUE(buffers().Download(id, data.data(), 0, data.size()).ok());
  const std::string report = lazycl::metrics::report();
  EXPECT_NE(report.find("TransferToDeviceTime"), std::string::npos) << report;
  EXPECT_NE(report.find("TransferFromDeviceTime"), std::string::npos) << report;
  buffers().Release(id);
}

TEST_F(DeviceBuffersTest, ReadingUnwrittenBufferNamesItsLabel) {
  BufferId id = buffers().Declare(64, "x_placeholder");
  float out[16];
  absl::Status download = buffers().Download(id, out, 0, sizeof(out));
  EXPECT_EQ(download.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(download.message()).find("x_placeholder"), std::string::npos);
  EXPECT_NE(std::string(download.message()).find("holds no data"), std::string::npos);
  absl::Status check = buffers().CheckReadable(id);
  EXPECT_EQ(check.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(C("TransferFromDeviceCount"), 0);
  EXPECT_EQ(C("DeviceAllocBytes"), 0);
  buffers().Release(id);
}

TEST_F(DeviceBuffersTest, PoolReuseAllocatesNothing) {
  std::vector<char> data(5000, 1);
  BufferId a = buffers().Declare(5000, "a");
  ASSERT_TRUE(buffers().Upload(a, data.data(), 0, data.size()).ok());
  EXPECT_EQ(C("DeviceAllocCount"), 1);
  buffers().Release(a);
  EXPECT_EQ(C("DevicePoolBytes"), static_cast<int64_t>(PoolBinBytes(5000)));
  // A different size in the same bin reuses the pooled buffer.
  ASSERT_EQ(PoolBinBytes(4900), PoolBinBytes(5000));
  BufferId b = buffers().Declare(4900, "b");
  ASSERT_TRUE(buffers().PrepareWrite(b).ok());
  EXPECT_EQ(C("DeviceAllocCount"), 1);
  EXPECT_EQ(C("DeviceAllocBytes"), static_cast<int64_t>(PoolBinBytes(5000)));
  EXPECT_EQ(C("DevicePoolBytes"), 0);
  EXPECT_TRUE(buffers().IsWritten(b));
  buffers().Release(b);
}

// Buffers of 2 MiB and more on a CPU device live in our own huge-page memory
// (CL_MEM_USE_HOST_PTR): data round-trips at an offset, survives going through the pool, and
// the memory is given back when the manager (and so the cl_mem) is gone (LeakSanitizer checks
// that under the sanitizer build).
TEST_F(DeviceBuffersTest, LargeBuffersRoundTripThroughThePool) {
  const size_t bytes = (size_t{3} << 20) + 12;
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  BufferId a = buffers().Declare(bytes, "large");
  ASSERT_TRUE(buffers().Upload(a, data.data(), 0, bytes).ok());
  std::vector<uint8_t> back(bytes - 1000);
  ASSERT_TRUE(buffers().Download(a, back.data(), 1000, back.size()).ok());
  EXPECT_TRUE(std::equal(back.begin(), back.end(), data.begin() + 1000));
  buffers().Release(a);
  BufferId b = buffers().Declare(bytes - 5, "large again");
  ASSERT_TRUE(buffers().Upload(b, data.data() + 5, 0, bytes - 5).ok());
  EXPECT_EQ(C("DeviceAllocCount"), 1);  // the pooled buffer was reused
  std::vector<uint8_t> again(bytes - 5);
  ASSERT_TRUE(buffers().Download(b, again.data(), 0, again.size()).ok());
  EXPECT_TRUE(std::equal(again.begin(), again.end(), data.begin() + 5));
  buffers().Release(b);
}

TEST_F(DeviceBuffersTest, LiveAndPeakFollowScriptedSequence) {
  const int64_t base = C("DeviceLiveBytes");
  std::vector<char> data(100000, 3);
  const int64_t s1 = PoolBinBytes(100000), s2 = PoolBinBytes(30000), s3 = PoolBinBytes(70000);
  BufferId a = buffers().Declare(100000, "a");
  BufferId b = buffers().Declare(30000, "b");
  BufferId c = buffers().Declare(70000, "c");
  ASSERT_TRUE(buffers().Upload(a, data.data(), 0, 100000).ok());  // live s1
  ASSERT_TRUE(buffers().PrepareWrite(b).ok());                    // live s1+s2
  EXPECT_EQ(C("DeviceLiveBytes"), base + s1 + s2);
  buffers().Release(a);                                          // live s2
  ASSERT_TRUE(buffers().Upload(c, data.data(), 0, 70000).ok());  // live s2+s3
  EXPECT_EQ(C("DeviceLiveBytes"), base + s2 + s3);
  EXPECT_EQ(C("DevicePeakBytes"), base + std::max(s1 + s2, s2 + s3));
  buffers().Release(b);
  buffers().Release(c);
  EXPECT_EQ(C("DeviceLiveBytes"), base);
  EXPECT_EQ(C("DevicePeakBytes"), base + std::max(s1 + s2, s2 + s3));
  EXPECT_EQ(C("DeviceAllocBytes"), s1 + s2 + s3);
}

TEST_F(DeviceBuffersTest, ZeroByteBuffers) {
  BufferId id = buffers().Declare(0, "empty");
  ASSERT_TRUE(buffers().Upload(id, nullptr, 0, 0).ok());
  EXPECT_TRUE(buffers().IsWritten(id));
  EXPECT_TRUE(buffers().Download(id, nullptr, 0, 0).ok());
  EXPECT_EQ(C("DeviceAllocBytes"), 0);
  EXPECT_EQ(C("TransferToDeviceCount"), 0);
  auto* device_buffers = static_cast<DeviceBuffers*>(&buffers());
  absl::StatusOr<cl_mem> mem = device_buffers->Mem(id);
  ASSERT_TRUE(mem.ok());
  EXPECT_NE(*mem, nullptr);
  buffers().Release(id);
  EXPECT_EQ(C("DevicePoolBytes"), 0);
}

TEST_F(DeviceBuffersTest, OutOfBoundsIsInvalidArgument) {
  char data[64] = {};
  BufferId id = buffers().Declare(32, "small");
  EXPECT_EQ(buffers().Upload(id, data, 16, 32).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(buffers().IsAllocated(id));
  ASSERT_TRUE(buffers().Upload(id, data, 0, 32).ok());
  EXPECT_EQ(buffers().Download(id, data, 1, 32).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(buffers().Download(id, data, SIZE_MAX, 2).code(), absl::StatusCode::kInvalidArgument);
  buffers().Release(id);
}

TEST(DeviceBuffersLimitTest, TrimsPoolThenFailsCleanly) {
  std::unique_ptr<Device> device = OpenDevice({{"LAZYCL_DEVICE_MEMORY_LIMIT", "1MiB"}});
  ASSERT_NE(device, nullptr);
  BufferManager& buffers = device->buffers();
  lazycl::metrics::reset();
  const int64_t base = C("DeviceLiveBytes");
  std::vector<char> data(768 << 10, 5);

  BufferId a = buffers.Declare(512 << 10, "a");
  ASSERT_TRUE(buffers.Upload(a, data.data(), 0, 512 << 10).ok());
  buffers.Release(a);  // 512 KiB now pooled
  EXPECT_EQ(C("DevicePoolBytes"), 512 << 10);

  // 768 KiB fits only once the pool is trimmed.
  BufferId b = buffers.Declare(768 << 10, "b");
  ASSERT_TRUE(buffers.Upload(b, data.data(), 0, 768 << 10).ok());
  EXPECT_EQ(C("DevicePoolBytes"), 0);
  EXPECT_EQ(C("DeviceAllocCount"), 2);

  // 512 KiB more cannot fit beside the live 768 KiB.
  BufferId c = buffers.Declare(512 << 10, "c");
  absl::Status s = buffers.PrepareWrite(c);
  ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  const std::string message(s.message());
  EXPECT_NE(message.find("requested 524288 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("live 786432 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("peak 786432 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("1048576"), std::string::npos) << message;
  EXPECT_FALSE(buffers.IsAllocated(c));
  EXPECT_FALSE(buffers.IsWritten(c));
  EXPECT_EQ(C("DeviceLiveBytes"), base + (768 << 10));

  // The manager stays usable: data in b is intact, and c fits once b is gone.
  std::vector<char> out(768 << 10);
  ASSERT_TRUE(buffers.Download(b, out.data(), 0, out.size()).ok());
  EXPECT_EQ(out, data);
  buffers.Release(b);
  ASSERT_TRUE(buffers.PrepareWrite(c).ok());
  buffers.Release(c);
}

TEST(DeviceBuffersLimitTest, ReleaseOfUnknownIdAborts) {
  std::unique_ptr<Device> device = OpenDevice();
  ASSERT_NE(device, nullptr);
  EXPECT_DEATH(device->buffers().Release(987654321), "unknown buffer id");
}

TEST(PoolBinsTest, BinsAreEightStepsPerPowerOfTwo) {
  EXPECT_EQ(PoolBinBytes(0), 0u);
  EXPECT_EQ(PoolBinBytes(1), 256u);
  EXPECT_EQ(PoolBinBytes(256), 256u);
  EXPECT_EQ(PoolBinBytes(257), 288u);
  EXPECT_EQ(PoolBinBytes(4096), 4096u);
  EXPECT_EQ(PoolBinBytes(4097), 4608u);
  EXPECT_EQ(PoolBinBytes(768 << 10), size_t{768} << 10);
  for (size_t n = 1; n < 100000; n += 37) {
    EXPECT_GE(PoolBinBytes(n), n);
    EXPECT_LE(PoolBinBytes(n), std::max<size_t>(256, n + n / 8));
  }
}

}  // namespace
}  // namespace lazycl::backend
