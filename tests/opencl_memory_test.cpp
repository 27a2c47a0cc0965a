#include "backend/opencl_memory.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/buffer_manager.h"
#include "backend/device.h"
#include "backend/pool_bins.h"
#include "backend_test_util.h"
#include "gtest/gtest.h"
#include "lazycl/metrics.h"

// The BufferManager over an OpenClMemory: what only device memory does (pooling, timing, huge
// pages, the memory limit). What host and device memory share is in buffer_manager_test.
namespace lazycl::backend {
namespace {

int64_t C(std::string_view name) { return lazycl::metrics::counter(name); }

class OpenClMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = test::OpenDeviceWithTempCache();
    ASSERT_NE(device_, nullptr);
    lazycl::metrics::reset();
  }
  BufferManager& buffers() { return device_->buffers(); }
  std::unique_ptr<Device> device_;
};

TEST_F(OpenClMemoryTest, TransfersAreTimed) {
  std::vector<char> data(4096, 7);
  BufferId id = buffers().Declare(data.size(), "timed");
  ASSERT_TRUE(buffers().Upload(id, data.data(), 0, data.size()).ok());
  ASSERT_TRUE(buffers().Download(id, data.data(), 0, data.size()).ok());
  const std::string report = lazycl::metrics::report();
  EXPECT_NE(report.find("TransferToDeviceTime"), std::string::npos) << report;
  EXPECT_NE(report.find("TransferFromDeviceTime"), std::string::npos) << report;
  buffers().Release(id);
}

// Keeps the device busy for a while (a kernel of one work-item looping `n` times), so that what
// is enqueued next stays queued when its call returns.
void Occupy(Device& device, BufferManager& buffers, BufferId scratch, int n) {
  auto kernel = device.GetKernel(
      "__kernel void occupy(__global float* x, int n) {\n"
      "  float v = x[0];\n"
      "  for (int i = 0; i < n; ++i) v = v * 0.999f + 1.0f;\n"
      "  x[0] = v;\n"
      "}\n",
      "", "occupy");
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  ASSERT_TRUE(buffers.PrepareWrite(scratch).ok());
  const KernelArg args[] = {KernelArg::Write(scratch), KernelArg::Int32(n)};
  const size_t global[] = {1};
  ASSERT_TRUE(device.Launch(*kernel, args, global).ok());
}

// A small upload returns with its write still queued (behind the kernel here): the source is
// the caller's again at once, so one host buffer rewritten between uploads fills every chunk
// with its own value.
TEST_F(OpenClMemoryTest, AnUploadsSourceIsTheCallersAgainOnReturn) {
  constexpr size_t kChunk = 1024, kChunks = 64;
  BufferId scratch = buffers().Declare(sizeof(float), "scratch");
  BufferId id = buffers().Declare(kChunk * kChunks, "chunks");
  ASSERT_TRUE(buffers().PrepareWrite(id).ok());
  ASSERT_TRUE(device_->Finish().ok());
  Occupy(*device_, buffers(), scratch, 20'000'000);
  std::vector<char> source(kChunk);
  for (size_t c = 0; c < kChunks; ++c) {
    std::fill(source.begin(), source.end(), static_cast<char>(c + 1));
    ASSERT_TRUE(buffers().Upload(id, source.data(), c * kChunk, kChunk).ok());
  }
  std::fill(source.begin(), source.end(), 0);
  std::vector<char> back(kChunk * kChunks);
  ASSERT_TRUE(buffers().Download(id, back.data(), 0, back.size()).ok());
  for (size_t c = 0; c < kChunks; ++c) {
    ASSERT_EQ(back[c * kChunk], static_cast<char>(c + 1)) << "chunk " << c;
    ASSERT_EQ(back[c * kChunk + kChunk - 1], static_cast<char>(c + 1)) << "chunk " << c;
  }
  EXPECT_EQ(C("TransferToDeviceCount"), static_cast<int64_t>(kChunks));
  EXPECT_NE(lazycl::metrics::report().find("TransferToDeviceTime"), std::string::npos);
  buffers().Release(id);
  buffers().Release(scratch);
}

// A device closed with staged writes still queued waits for them before their copies go.
TEST_F(OpenClMemoryTest, ClosingWaitsForQueuedUploads) {
  BufferId scratch = buffers().Declare(sizeof(float), "scratch");
  BufferId id = buffers().Declare(4096, "queued");
  ASSERT_TRUE(buffers().PrepareWrite(id).ok());
  Occupy(*device_, buffers(), scratch, 5'000'000);
  std::vector<char> source(4096, 3);
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(buffers().Upload(id, source.data(), 0, 4096).ok());
  buffers().Release(id);
  buffers().Release(scratch);
  device_.reset();  // AddressSanitizer: no staged copy is read after it is freed, none leaks
}

// A context and a profiling queue on the first device of the first platform, for the tests
// of OpenClMemory alone.
void FirstDeviceQueue(cl::Context& context, cl::CommandQueue& queue) {
  std::vector<cl::Platform> platforms;
  cl::Platform::get(&platforms);
  ASSERT_FALSE(platforms.empty());
  std::vector<cl::Device> devices;
  platforms[0].getDevices(CL_DEVICE_TYPE_ALL, &devices);
  ASSERT_FALSE(devices.empty());
  context = cl::Context(devices[0]);
  queue = cl::CommandQueue(context, devices[0], CL_QUEUE_PROFILING_ENABLE);
}

// The staged copies of writes that have run are freed by ReapStaged (Device::Finish calls it),
// not only at the next copy.
TEST(OpenClMemoryStagingTest, ReapStagedFreesTheCopiesOfWritesThatRan) {
  cl::Context context;
  cl::CommandQueue queue;
  ASSERT_NO_FATAL_FAILURE(FirstDeviceQueue(context, queue));
  OpenClMemory memory(context, queue, /*host_pages=*/false, /*read_spin_ns=*/0);
  absl::StatusOr<MemoryHandle> handle = memory.Allocate(4096);
  ASSERT_TRUE(handle.ok()) << handle.status();
  std::vector<char> source(4096, 5);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(memory.CopyIn(*handle, 0, source.data(), 4096).ok());
  ASSERT_EQ(queue.finish(), CL_SUCCESS);
  EXPECT_GE(memory.staged_bytes(), 4096u);  // the last write's copy at least is still held
  memory.ReapStaged();
  EXPECT_EQ(memory.staged_bytes(), 0u);
  std::vector<char> back(4096);
  ASSERT_TRUE(memory.CopyOut(back.data(), *handle, 0, 4096).ok());
  EXPECT_EQ(back, source);
  memory.Free(*handle);
}

// A read returns what the writes queued ahead of it left, whether its host thread sleeps at once,
// polls a little first (the default) or polls until the end (backend/event_wait.h).
TEST(OpenClMemoryStagingTest, AReadGetsTheQueuedWritesWithOrWithoutPolling) {
  cl::Context context;
  cl::CommandQueue queue;
  ASSERT_NO_FATAL_FAILURE(FirstDeviceQueue(context, queue));
  for (int64_t spin_ns : {int64_t{0}, int64_t{50'000}, int64_t{60'000'000'000}}) {
    OpenClMemory memory(context, queue, /*host_pages=*/false, spin_ns);
    absl::StatusOr<MemoryHandle> handle = memory.Allocate(64 << 10);
    ASSERT_TRUE(handle.ok()) << handle.status();
    std::vector<char> source(64 << 10);
    for (int i = 0; i < 32; ++i) {  // staged: none has run when the read is queued
      std::fill(source.begin(), source.end(), static_cast<char>(i));
      source[static_cast<size_t>(i) * 7] = static_cast<char>(100 + i);
      ASSERT_TRUE(memory.CopyIn(*handle, 0, source.data(), source.size()).ok());
    }
    std::vector<char> back(source.size() - 10);
    absl::StatusOr<int64_t> read = memory.CopyOut(back.data(), *handle, 10, back.size());
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_TRUE(std::equal(back.begin(), back.end(), source.begin() + 10)) << spin_ns;
    memory.Free(*handle);
  }
}

TEST_F(OpenClMemoryTest, PoolReuseAllocatesNothing) {
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
TEST_F(OpenClMemoryTest, LargeBuffersRoundTripThroughThePool) {
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

// Every 0-byte buffer binds the same 1-element cl_mem, which is not counted.
TEST_F(OpenClMemoryTest, ZeroByteBuffersShareOneMemObject) {
  BufferId a = buffers().Declare(0, "a");
  BufferId b = buffers().Declare(0, "b");
  ASSERT_TRUE(buffers().PrepareWrite(a).ok());
  ASSERT_TRUE(buffers().PrepareWrite(b).ok());
  EXPECT_EQ(OpenClMemory::Mem(buffers().Handle(a)), OpenClMemory::Mem(buffers().Handle(b)));
  EXPECT_EQ(C("DeviceAllocCount"), 0);
  buffers().Release(a);
  buffers().Release(b);
}

TEST(OpenClMemoryLimitTest, TrimsPoolThenFailsCleanly) {
  std::unique_ptr<Device> device =
      test::OpenDeviceWithTempCache({{"LAZYCL_DEVICE_MEMORY_LIMIT", "1MiB"}});
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

// One buffer at a time from 256 KiB to 64 MiB in 256 KiB steps, each released before the next:
// the pool's peak and what it keeps after. Storage is obtained but never touched.
int64_t SweepPoolPeak(BufferManager& buffers) {
  int64_t peak = 0;
  for (size_t bytes = 256 << 10; bytes <= (64 << 20); bytes += 256 << 10) {
    BufferId id = buffers.Declare(bytes, "sweep");
    EXPECT_TRUE(buffers.PrepareWrite(id).ok());
    buffers.Release(id);
    peak = std::max(peak, buffers.pool_bytes());
  }
  return peak;
}

// Regression: the sweep left 822 MB pooled (one buffer in each of the 48 bins it passed) with
// nothing live, whatever the device's size.
TEST(OpenClMemoryPoolTest, SweepStaysUnderDefaultBoundAndTrimsToZero) {
  std::unique_ptr<Device> device = test::OpenDeviceWithTempCache();
  ASSERT_NE(device, nullptr);
  const int64_t bound = DefaultPoolLimit(device->info().global_mem_bytes);
  EXPECT_LE(bound, int64_t{512} << 20);
  EXPECT_LE(bound, device->info().global_mem_bytes / 8);
  const int64_t pool = C("DevicePoolBytes");
  EXPECT_LE(SweepPoolPeak(device->buffers()), bound);
  EXPECT_EQ(device->buffers().live_bytes(), 0);
  EXPECT_EQ(C("DevicePoolBytes"), pool + device->buffers().pool_bytes());
  device->buffers().TrimPool();
  EXPECT_EQ(device->buffers().pool_bytes(), 0);
  EXPECT_EQ(C("DevicePoolBytes"), pool);
}

TEST(OpenClMemoryPoolTest, SweepStaysUnderPoolLimitVariable) {
  std::unique_ptr<Device> device =
      test::OpenDeviceWithTempCache({{"LAZYCL_DEVICE_POOL_LIMIT", "8MiB"}});
  ASSERT_NE(device, nullptr);
  EXPECT_LE(SweepPoolPeak(device->buffers()), int64_t{8} << 20);
  EXPECT_GT(device->buffers().pool_bytes(), 0);  // what fits is still pooled
  device->buffers().TrimPool();
}

// Regression: live buffers were checked against LAZYCL_DEVICE_MEMORY_LIMIT only, never against
// the device's CL_DEVICE_GLOBAL_MEM_SIZE. Storage is obtained but never touched, so no RAM is
// committed for it.
TEST(OpenClMemoryPoolTest, LiveBytesPastGlobalMemoryAreResourceExhausted) {
  std::unique_ptr<Device> device = test::OpenDeviceWithTempCache();
  ASSERT_NE(device, nullptr);
  BufferManager& buffers = device->buffers();
  const int64_t global = device->info().global_mem_bytes;
  // A power of two is its own pool bin, so each buffer obtains exactly `each` bytes.
  const size_t each =
      std::bit_floor(static_cast<size_t>(std::min(device->info().max_alloc_bytes, global / 2)));
  std::vector<BufferId> ids;
  absl::Status s;
  while (s.ok() && ids.size() < 16) {
    ids.push_back(buffers.Declare(each, "big"));
    s = buffers.PrepareWrite(ids.back());
  }
  ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  const std::string message(s.message());
  EXPECT_NE(message.find(absl::StrCat("requested ", each, " bytes")), std::string::npos) << s;
  EXPECT_NE(message.find(absl::StrCat("live ", buffers.live_bytes(), " bytes")), std::string::npos)
      << s;
  EXPECT_NE(message.find(absl::StrCat("global memory of ", global, " bytes")), std::string::npos)
      << s;
  EXPECT_LE(buffers.live_bytes(), global);
  EXPECT_GT(buffers.live_bytes() + static_cast<int64_t>(each), global);
  for (BufferId id : ids) buffers.Release(id);
  buffers.TrimPool();
  EXPECT_EQ(buffers.live_bytes(), 0);
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
