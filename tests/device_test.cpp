#include "backend/device.h"

#include <stdlib.h>

#include <array>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "backend_test_util.h"
#include "base/settings.h"
#include "gtest/gtest.h"
#include "lazycl/metrics.h"

namespace lazycl::backend {
namespace {

int64_t C(std::string_view name) { return lazycl::metrics::counter(name); }

constexpr char kSaxpy[] = R"(
__kernel void saxpy(int n, float a, __global const float* x, __global float* y) {
  int i = get_global_id(0);
  if (i < n) y[i] = a * x[i] + y[i];
}
__kernel void fill(long n, __global float* out, float v) {
  long i = get_global_id(0);
  if (i < n) out[i] = v;
}
)";

class DeviceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char dir[] = "/tmp/lazycl-device-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = new std::string(dir);
    absl::StatusOr<base::Settings> settings =
        test::SettingsFrom({{"LAZYCL_KERNEL_CACHE_DIR", *dir_}});
    ASSERT_TRUE(settings.ok()) << settings.status();
    absl::StatusOr<std::unique_ptr<Device>> device = Device::Open(*settings);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = device->release();
  }
  static void TearDownTestSuite() {
    delete device_;
    device_ = nullptr;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
    ASSERT_NE(device_, nullptr);
    lazycl::metrics::reset();
  }

  static Device* device_;
  static std::string* dir_;
};

Device* DeviceTest::device_ = nullptr;
std::string* DeviceTest::dir_ = nullptr;

TEST_F(DeviceTest, InfoDescribesDevice) {
  const DeviceInfo& info = device_->info();
  EXPECT_FALSE(info.device_name.empty());
  EXPECT_FALSE(info.platform_name.empty());
  EXPECT_GT(info.compute_units, 0);
  EXPECT_GT(info.global_mem_bytes, 0);
  EXPECT_GE(info.max_param_bytes, 256);
}

TEST_F(DeviceTest, SaxpyProducesCorrectResults) {
  const int n = 1000;  // not a multiple of any local size: the kernel guards with n
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = static_cast<float>(2 * i + 1);
  }
  BufferManager& buffers = device_->buffers();
  BufferId bx = buffers.Declare(n * sizeof(float), "x");
  BufferId by = buffers.Declare(n * sizeof(float), "y");
  ASSERT_TRUE(buffers.Upload(bx, x.data(), 0, n * sizeof(float)).ok());
  ASSERT_TRUE(buffers.Upload(by, y.data(), 0, n * sizeof(float)).ok());

  auto kernel = device_->GetKernel(kSaxpy, "", "saxpy");
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const KernelArg args[] = {KernelArg::Int32(n), KernelArg::Float32(3.0f), KernelArg::Read(bx),
                            KernelArg::Write(by)};
  const size_t global[] = {1024};
  const size_t local[] = {64};
  ASSERT_TRUE(device_->Launch(*kernel, args, global, local).ok());
  ASSERT_TRUE(device_->Launch(*kernel, args, global).ok());
  ASSERT_TRUE(device_->Finish().ok());
  EXPECT_EQ(C("KernelLaunches"), 2);

  std::vector<float> out(n);
  ASSERT_TRUE(buffers.Download(by, out.data(), 0, n * sizeof(float)).ok());
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], 6.0f * i + 2 * i + 1) << i;
  buffers.Release(bx);
  buffers.Release(by);
}

// A kernel's first launch at each work-group size (PoCL compiles it for that size then) is timed
// into FirstRunTime, counted by FirstRuns once it has run; later launches at a size already seen
// are not.
TEST_F(DeviceTest, FirstRunsAtEachWorkGroupSizeAreTimed) {
  BufferManager& buffers = device_->buffers();
  BufferId out = buffers.Declare(64 * sizeof(float), "out");
  auto kernel = device_->GetKernel(
      "__kernel void first_runs(__global float* x) { x[get_global_id(0)] = 2.0f; }\n", "",
      "first_runs");
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const KernelArg args[] = {KernelArg::Write(out)};
  const size_t global[] = {64};
  const size_t local8[] = {8};
  const size_t local16[] = {16};
  const int64_t before = C("FirstRuns");
  ASSERT_TRUE(device_->Launch(*kernel, args, global, local8).ok());
  ASSERT_TRUE(device_->Finish().ok());
  EXPECT_EQ(C("FirstRuns"), before + 1);
  EXPECT_NE(lazycl::metrics::report().find("FirstRunTime"), std::string::npos);
  ASSERT_TRUE(device_->Launch(*kernel, args, global, local8).ok());
  ASSERT_TRUE(device_->Finish().ok());
  EXPECT_EQ(C("FirstRuns"), before + 1);
  ASSERT_TRUE(device_->Launch(*kernel, args, global, local16).ok());
  ASSERT_TRUE(device_->Finish().ok());
  EXPECT_EQ(C("FirstRuns"), before + 2);
  std::vector<float> host(64);
  ASSERT_TRUE(buffers.Download(out, host.data(), 0, 64 * sizeof(float)).ok());
  for (float v : host) ASSERT_EQ(v, 2.0f);
  buffers.Release(out);
}

TEST_F(DeviceTest, WrittenBufferGetsStorageAndInt64Args) {
  BufferManager& buffers = device_->buffers();
  BufferId out = buffers.Declare(100 * sizeof(float), "out");
  auto kernel = device_->GetKernel(kSaxpy, "", "fill");
  ASSERT_TRUE(kernel.ok());
  const KernelArg args[] = {KernelArg::Int64(100), KernelArg::Write(out), KernelArg::Float32(1.5f)};
  const size_t global[] = {128};
  ASSERT_TRUE(device_->Launch(*kernel, args, global).ok());
  EXPECT_TRUE(buffers.IsWritten(out));
  std::vector<float> host(100);
  ASSERT_TRUE(buffers.Download(out, host.data(), 0, 100 * sizeof(float)).ok());
  for (float v : host) ASSERT_EQ(v, 1.5f);
  buffers.Release(out);
}

// A struct passed by value (KernelArg::Bytes), as the CPU matmul takes its integers: every
// field arrives, and a launch with other bytes is not mistaken for the last (Kernel::SetArg skips
// clSetKernelArg only for the same bytes).
TEST_F(DeviceTest, StructArgumentsArriveAndChangeBetweenLaunches) {
  constexpr char kSource[] = R"(
typedef struct { long n, first, step; } fill_args;
__kernel void fill_range(__global float* out, const fill_args p) {
  long i = get_global_id(0);
  if (i < p.n) out[i] = (float)(p.first + i * p.step);
}
)";
  BufferManager& buffers = device_->buffers();
  BufferId out = buffers.Declare(40 * sizeof(float), "out");
  auto kernel = device_->GetKernel(kSource, "", "fill_range");
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const size_t global[] = {40};
  for (const std::array<int64_t, 3>& p :
       {std::array<int64_t, 3>{40, 7, 3}, std::array<int64_t, 3>{40, 7, 3},
        std::array<int64_t, 3>{40, -5, 2}, std::array<int64_t, 3>{20, 100, 0}}) {
    const KernelArg args[] = {KernelArg::Write(out), KernelArg::Bytes(p.data(), sizeof(p))};
    ASSERT_TRUE(device_->Launch(*kernel, args, global).ok());
    std::vector<float> host(40);
    ASSERT_TRUE(buffers.Download(out, host.data(), 0, 40 * sizeof(float)).ok());
    for (int64_t i = 0; i < p[0]; ++i) {
      ASSERT_EQ(host[i], static_cast<float>(p[1] + i * p[2]))
          << "element " << i << " of n=" << p[0];
    }
  }
  buffers.Release(out);
}

TEST_F(DeviceTest, ZeroByteBufferIsBindable) {
  BufferManager& buffers = device_->buffers();
  BufferId out = buffers.Declare(0, "empty_out");
  auto kernel = device_->GetKernel(kSaxpy, "", "fill");
  ASSERT_TRUE(kernel.ok());
  const KernelArg args[] = {KernelArg::Int64(0), KernelArg::Write(out), KernelArg::Float32(1)};
  const size_t global[] = {1};
  ASSERT_TRUE(device_->Launch(*kernel, args, global).ok());
  ASSERT_TRUE(device_->Finish().ok());
  EXPECT_EQ(C("DeviceAllocBytes"), 0);
  buffers.Release(out);
}

TEST_F(DeviceTest, LaunchReadingUnwrittenBufferFails) {
  BufferManager& buffers = device_->buffers();
  BufferId x = buffers.Declare(64 * sizeof(float), "x_placeholder");
  BufferId y = buffers.Declare(64 * sizeof(float), "y_out");
  auto kernel = device_->GetKernel(kSaxpy, "", "saxpy");
  ASSERT_TRUE(kernel.ok());
  const KernelArg args[] = {KernelArg::Int32(64), KernelArg::Float32(1), KernelArg::Read(x),
                            KernelArg::Write(y)};
  const size_t global[] = {64};
  absl::Status s = device_->Launch(*kernel, args, global);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(s.message()).find("x_placeholder"), std::string::npos) << s;
  EXPECT_EQ(C("KernelLaunches"), 0);
  EXPECT_FALSE(buffers.IsAllocated(y));  // nothing half-done
  buffers.Release(x);
  buffers.Release(y);
}

TEST_F(DeviceTest, BadLaunchShapesAreInvalidArgument) {
  auto kernel = device_->GetKernel(kSaxpy, "", "fill");
  ASSERT_TRUE(kernel.ok());
  BufferId out = device_->buffers().Declare(16, "out");
  const KernelArg args[] = {KernelArg::Int64(4), KernelArg::Write(out), KernelArg::Float32(1)};
  const size_t global[] = {100};
  const size_t local[] = {64};
  EXPECT_EQ(device_->Launch(*kernel, args, global, local).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device_->Launch(*kernel, args, {}).code(), absl::StatusCode::kInvalidArgument);
  device_->buffers().Release(out);
}

TEST_F(DeviceTest, BadKernelNameIsClearError) {
  auto kernel = device_->GetKernel(kSaxpy, "", "sazpy");
  ASSERT_FALSE(kernel.ok());
  const std::string message(kernel.status().message());
  EXPECT_NE(message.find("sazpy"), std::string::npos) << message;
  EXPECT_NE(message.find("saxpy"), std::string::npos) << message;  // lists what exists
}

TEST_F(DeviceTest, ReportContainsCounterNames) {
  BufferManager& buffers = device_->buffers();
  std::vector<float> data(256, 1);
  BufferId id = buffers.Declare(data.size() * sizeof(float), "d");
  ASSERT_TRUE(buffers.Upload(id, data.data(), 0, data.size() * sizeof(float)).ok());
  auto kernel = device_->GetKernel(kSaxpy, "", "fill");
  ASSERT_TRUE(kernel.ok());
  const KernelArg args[] = {KernelArg::Int64(256), KernelArg::Write(id), KernelArg::Float32(2)};
  const size_t global[] = {256};
  ASSERT_TRUE(device_->Launch(*kernel, args, global).ok());
  ASSERT_TRUE(buffers.Download(id, data.data(), 0, data.size() * sizeof(float)).ok());
  EXPECT_EQ(data[255], 2.0f);
  const std::string report = lazycl::metrics::report();
  for (const char* name : {"KernelLaunches", "TransferToDeviceBytes", "TransferToDeviceCount",
                           "TransferFromDeviceBytes", "TransferFromDeviceCount", "DeviceLiveBytes",
                           "DevicePeakBytes", "TransferToDeviceTime"}) {
    EXPECT_NE(report.find(name), std::string::npos) << name << "\n" << report;
  }
  buffers.Release(id);
}

TEST(DeviceEnumerateTest, ListsPoclAndBadFilterListsDevices) {
  auto platforms = Device::Enumerate();
  ASSERT_TRUE(platforms.ok()) << platforms.status();
  ASSERT_FALSE(platforms->empty());
  base::Settings settings;
  settings.device = "no-such-device-anywhere";
  auto device = Device::Open(settings);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(device.status().message()).find((*platforms)[0].devices[0].name),
            std::string::npos);
}

}  // namespace
}  // namespace lazycl::backend
