#include "backend/buffer_manager.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "backend/device.h"
#include "backend/host_memory.h"
#include "backend/pool_bins.h"
#include "backend_test_util.h"
#include "gtest/gtest.h"
#include "lazycl/metrics.h"

namespace lazycl::backend {
namespace {

int64_t C(std::string_view name) { return lazycl::metrics::counter(name); }

bool Has(const absl::Status& s, std::string_view text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

// The behaviour both memories share, run over each: a fresh host manager, or the manager of a
// freshly opened OpenCL device. Device memory is pooled and counted; host memory is neither.
enum class Kind { kHost, kOpenCl };

class BufferManagerTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    if (GetParam() == Kind::kOpenCl) {
      device_ = test::OpenDeviceWithTempCache();
      ASSERT_NE(device_, nullptr);
      buffers_ = &device_->buffers();
    } else {
      host_ = std::make_unique<BufferManager>(std::make_unique<HostHeap>());
      buffers_ = host_.get();
    }
    lazycl::metrics::reset();
  }
  bool device() const { return GetParam() == Kind::kOpenCl; }
  // Storage the manager obtains for a buffer of `bytes`.
  int64_t Storage(size_t bytes) const {
    return static_cast<int64_t>(device() ? PoolBinBytes(bytes) : bytes);
  }
  // What a device counter shows for `bytes` of this memory: nothing for host memory.
  int64_t Counted(int64_t bytes) const { return device() ? bytes : 0; }
  BufferManager& buffers() { return *buffers_; }

  std::unique_ptr<Device> device_;
  std::unique_ptr<BufferManager> host_;
  BufferManager* buffers_ = nullptr;
};

INSTANTIATE_TEST_SUITE_P(Memories, BufferManagerTest, ::testing::Values(Kind::kHost, Kind::kOpenCl),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           return info.param == Kind::kHost ? "Host" : "OpenCl";
                         });

TEST_P(BufferManagerTest, DeclareAllocatesNothing) {
  const int64_t live = C("DeviceLiveBytes");
  BufferId id = buffers().Declare(1 << 20, "declared");
  EXPECT_FALSE(buffers().IsAllocated(id));
  EXPECT_FALSE(buffers().IsWritten(id));
  EXPECT_EQ(buffers().Bytes(id), size_t{1} << 20);
  EXPECT_EQ(buffers().Label(id), "declared");
  EXPECT_EQ(buffers().live_bytes(), 0);
  EXPECT_EQ(C("DeviceAllocBytes"), 0);
  EXPECT_EQ(C("DeviceAllocCount"), 0);
  EXPECT_EQ(C("DeviceLiveBytes"), live);
  buffers().Release(id);
  EXPECT_EQ(C("DevicePoolBytes"), 0);
}

TEST_P(BufferManagerTest, UploadAndDownloadCountExactDeviceBytes) {
  const size_t n = 1000;
  const int64_t bytes = n * sizeof(float);
  std::vector<float> in(n);
  std::iota(in.begin(), in.end(), 0.5f);
  BufferId id = buffers().Declare(bytes, "data");
  ASSERT_TRUE(buffers().Upload(id, in.data(), 0, bytes).ok());
  EXPECT_EQ(C("TransferToDeviceBytes"), Counted(bytes));
  EXPECT_EQ(C("TransferToDeviceCount"), Counted(1));
  EXPECT_EQ(C("DeviceAllocBytes"), Counted(Storage(bytes)));
  EXPECT_EQ(C("DeviceAllocCount"), Counted(1));

  std::vector<float> out(n);
  ASSERT_TRUE(buffers().Download(id, out.data(), 0, bytes).ok());
  EXPECT_EQ(C("TransferFromDeviceBytes"), Counted(bytes));
  EXPECT_EQ(C("TransferFromDeviceCount"), Counted(1));
  EXPECT_EQ(in, out);

  // A partial read counts only the bytes it copies.
  float middle[3];
  ASSERT_TRUE(buffers().Download(id, middle, 10 * sizeof(float), sizeof(middle)).ok());
  EXPECT_EQ(middle[0], in[10]);
  EXPECT_EQ(middle[2], in[12]);
  EXPECT_EQ(C("TransferFromDeviceBytes"), Counted(bytes + 12));
  EXPECT_EQ(C("TransferFromDeviceCount"), Counted(2));
  buffers().Release(id);
}

TEST_P(BufferManagerTest, ReadingUnwrittenBufferNamesItsLabel) {
  BufferId id = buffers().Declare(64, "x_placeholder");
  float out[16];
  absl::Status download = buffers().Download(id, out, 0, sizeof(out));
  EXPECT_EQ(download.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Has(download, "x_placeholder")) << download;
  EXPECT_TRUE(Has(download, "holds no data")) << download;
  absl::Status check = buffers().CheckReadable(id);
  EXPECT_EQ(check.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Has(check, "x_placeholder")) << check;
  EXPECT_FALSE(buffers().IsAllocated(id));
  EXPECT_EQ(C("TransferFromDeviceCount"), 0);
  EXPECT_EQ(C("DeviceAllocBytes"), 0);
  buffers().Release(id);
}

TEST_P(BufferManagerTest, PrepareWriteMarksWritten) {
  BufferId id = buffers().Declare(8, "out");
  ASSERT_TRUE(buffers().PrepareWrite(id).ok());
  EXPECT_TRUE(buffers().IsAllocated(id));
  EXPECT_TRUE(buffers().IsWritten(id));
  EXPECT_TRUE(buffers().CheckReadable(id).ok());
  EXPECT_NE(buffers().Handle(id), nullptr);
  EXPECT_EQ(C("TransferToDeviceCount"), 0);
  buffers().Release(id);
}

TEST_P(BufferManagerTest, OutOfBoundsIsInvalidArgument) {
  char data[64] = {};
  BufferId id = buffers().Declare(32, "small");
  EXPECT_EQ(buffers().Upload(id, data, 16, 32).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(buffers().Upload(id, data, 33, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(buffers().IsAllocated(id));
  ASSERT_TRUE(buffers().Upload(id, data, 0, 32).ok());
  EXPECT_EQ(buffers().Download(id, data, 1, 32).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(buffers().Download(id, data, SIZE_MAX, 2).code(), absl::StatusCode::kInvalidArgument);
  buffers().Release(id);
}

// OpenCL has no 0-byte buffers, yet a kernel must have something to bind; host memory gives a
// distinct address. Neither is counted.
TEST_P(BufferManagerTest, ZeroByteBuffers) {
  BufferId id = buffers().Declare(0, "empty");
  ASSERT_TRUE(buffers().Upload(id, nullptr, 0, 0).ok());
  EXPECT_TRUE(buffers().IsWritten(id));
  EXPECT_TRUE(buffers().Download(id, nullptr, 0, 0).ok());
  EXPECT_NE(buffers().Handle(id), nullptr);
  EXPECT_EQ(buffers().live_bytes(), 0);
  EXPECT_EQ(C("DeviceAllocBytes"), 0);
  EXPECT_EQ(C("TransferToDeviceCount"), 0);
  buffers().Release(id);
  EXPECT_EQ(buffers().pool_bytes(), 0);
  EXPECT_EQ(C("DevicePoolBytes"), 0);
}

TEST_P(BufferManagerTest, OnlyDeviceMemoryIsPooled) {
  BufferId a = buffers().Declare(5000, "a");
  ASSERT_TRUE(buffers().PrepareWrite(a).ok());
  buffers().Release(a);
  EXPECT_EQ(buffers().pool_bytes(), Counted(Storage(5000)));
  EXPECT_EQ(C("DevicePoolBytes"), Counted(Storage(5000)));
  buffers().TrimPool();
  EXPECT_EQ(buffers().pool_bytes(), 0);
  EXPECT_EQ(C("DevicePoolBytes"), 0);
}

TEST_P(BufferManagerTest, LiveAndPeakFollowScriptedSequence) {
  const int64_t base = C("DeviceLiveBytes");
  std::vector<char> data(100000, 3);
  const int64_t s1 = Storage(100000), s2 = Storage(30000), s3 = Storage(70000);
  BufferId a = buffers().Declare(100000, "a");
  BufferId b = buffers().Declare(30000, "b");
  BufferId c = buffers().Declare(70000, "c");
  ASSERT_TRUE(buffers().Upload(a, data.data(), 0, 100000).ok());  // live s1
  ASSERT_TRUE(buffers().PrepareWrite(b).ok());                    // live s1+s2
  EXPECT_EQ(buffers().live_bytes(), s1 + s2);
  EXPECT_EQ(C("DeviceLiveBytes"), base + Counted(s1 + s2));
  buffers().Release(a);                                          // live s2
  ASSERT_TRUE(buffers().Upload(c, data.data(), 0, 70000).ok());  // live s2+s3
  EXPECT_EQ(buffers().live_bytes(), s2 + s3);
  EXPECT_EQ(C("DeviceLiveBytes"), base + Counted(s2 + s3));
  const int64_t peak = std::max(s1 + s2, s2 + s3);
  EXPECT_EQ(C("DevicePeakBytes"), base + Counted(peak));
  buffers().Release(b);
  buffers().Release(c);
  EXPECT_EQ(buffers().live_bytes(), 0);
  EXPECT_EQ(buffers().peak_bytes(), peak);
  EXPECT_EQ(C("DeviceLiveBytes"), base);
  EXPECT_EQ(C("DevicePeakBytes"), base + Counted(peak));
  EXPECT_EQ(C("DeviceAllocBytes"), Counted(s1 + s2 + s3));
}

TEST_P(BufferManagerTest, ReleaseOfUnknownIdAborts) {
  // The child leaves no core: scripts/test.sh keeps cores for the stacks of crashed tests, and
  // under core_pattern "core" this one would replace theirs in the tests' directory.
  auto release_unknown = [&] {
    const rlimit no_core = {};
    setrlimit(RLIMIT_CORE, &no_core);
    buffers().Release(987654321);
  };
  EXPECT_DEATH(release_unknown(), "unknown buffer id");
}

TEST_P(BufferManagerTest, IdsAreUniqueAcrossManagers) {
  BufferId x = buffers().Declare(4, "x");
  buffers().Release(x);
  BufferId y = buffers().Declare(4, "y");
  BufferId z = HostMemory().Declare(4, "z");
  EXPECT_NE(x, y);
  EXPECT_NE(y, z);
  EXPECT_NE(x, z);
  HostMemory().Release(z);
  buffers().Release(y);
}

TEST(BufferManagerHostTest, DataIsAlignedAndNullUntilAllocated) {
  BufferManager host(std::make_unique<HostHeap>());
  std::vector<float> in = {1, 2, 3, 4, 5};
  BufferId id = host.Declare(in.size() * sizeof(float), "data");
  EXPECT_EQ(host.Data(id), nullptr);
  ASSERT_TRUE(host.Upload(id, in.data(), 0, in.size() * sizeof(float)).ok());
  ASSERT_NE(host.Data(id), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(host.Data(id)) % 64, 0u);
  EXPECT_EQ(static_cast<const float*>(host.Data(id))[4], 5.0f);
  host.Release(id);
}

// Device memory on the host heap that runs out of room when told to, so the manager's
// empty-the-pool-and-retry paths run without exhausting a real device.
class TightMemory final : public Memory {
 public:
  int allocate_failures = 0;  // how many of the next Allocate calls find no room
  int copy_in_failures = 0;   // how many of the next CopyIn calls find no room
  int frees = 0;

  absl::StatusOr<MemoryHandle> Allocate(size_t bytes) override {
    if (allocate_failures > 0) {
      --allocate_failures;
      return absl::ResourceExhaustedError("no room in TightMemory");
    }
    return heap_.Allocate(bytes);
  }
  void Free(MemoryHandle handle) override {
    ++frees;
    heap_.Free(handle);
  }
  absl::StatusOr<int64_t> CopyIn(MemoryHandle dst, size_t offset, const void* src,
                                 size_t bytes) override {
    if (copy_in_failures > 0) {
      --copy_in_failures;
      return absl::ResourceExhaustedError("no room in TightMemory for the copy");
    }
    return heap_.CopyIn(dst, offset, src, bytes);
  }
  absl::StatusOr<int64_t> CopyOut(void* dst, MemoryHandle src, size_t offset,
                                  size_t bytes) override {
    return heap_.CopyOut(dst, src, offset, bytes);
  }
  bool is_device() const override { return true; }

 private:
  HostHeap heap_;
};

TEST(BufferManagerRetryTest, OutOfRoomEmptiesThePoolAndRetriesOnce) {
  auto owned = std::make_unique<TightMemory>();
  TightMemory& memory = *owned;
  BufferManager buffers(std::move(owned));
  BufferId a = buffers.Declare(1000, "a");
  ASSERT_TRUE(buffers.PrepareWrite(a).ok());
  buffers.Release(a);
  EXPECT_EQ(buffers.pool_bytes(), static_cast<int64_t>(PoolBinBytes(1000)));

  memory.allocate_failures = 1;
  BufferId b = buffers.Declare(5000, "b");
  ASSERT_TRUE(buffers.PrepareWrite(b).ok());
  EXPECT_EQ(buffers.pool_bytes(), 0);
  EXPECT_EQ(memory.frees, 1);

  memory.allocate_failures = 2;
  BufferId c = buffers.Declare(5000, "c");
  absl::Status s = buffers.PrepareWrite(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(Has(s, "no room in TightMemory")) << s;
  EXPECT_TRUE(Has(s, "requested 5120 bytes")) << s;
  EXPECT_FALSE(buffers.IsAllocated(c));
  EXPECT_FALSE(buffers.IsWritten(c));
  EXPECT_EQ(buffers.live_bytes(), static_cast<int64_t>(PoolBinBytes(5000)));
  buffers.Release(b);
  buffers.Release(c);
}

// Some drivers commit memory only on the first copy into a buffer.
TEST(BufferManagerRetryTest, CopyOutOfRoomRetriesOnFreshStorageOnly) {
  auto owned = std::make_unique<TightMemory>();
  TightMemory& memory = *owned;
  BufferManager buffers(std::move(owned));
  const std::vector<char> data(300, 9);

  memory.copy_in_failures = 1;
  BufferId a = buffers.Declare(data.size(), "a");
  ASSERT_TRUE(buffers.Upload(a, data.data(), 0, data.size()).ok());
  EXPECT_EQ(memory.frees, 1);  // the first storage went back to the memory, not the pool
  EXPECT_EQ(buffers.pool_bytes(), 0);
  std::vector<char> out(data.size());
  ASSERT_TRUE(buffers.Download(a, out.data(), 0, out.size()).ok());
  EXPECT_EQ(out, data);

  // Storage that already holds data is not swapped: the error is returned as it is.
  memory.copy_in_failures = 1;
  absl::Status again = buffers.Upload(a, data.data(), 0, data.size());
  EXPECT_EQ(again.code(), absl::StatusCode::kResourceExhausted) << again;
  EXPECT_TRUE(buffers.IsWritten(a));

  memory.copy_in_failures = 2;
  BufferId b = buffers.Declare(data.size(), "b");
  absl::Status s = buffers.Upload(b, data.data(), 0, data.size());
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(Has(s, "for the copy")) << s;
  EXPECT_FALSE(buffers.IsAllocated(b));
  EXPECT_FALSE(buffers.IsWritten(b));
  EXPECT_EQ(buffers.live_bytes(), static_cast<int64_t>(PoolBinBytes(data.size())));
  buffers.Release(a);
  buffers.Release(b);
}

// Regression: the pool kept every released buffer, so a sweep through growing sizes left one
// buffer in each bin it passed (~12x the largest buffer, all unused).
TEST(BufferManagerPoolTest, BoundFreesOldestPooledFirst) {
  auto owned = std::make_unique<TightMemory>();
  TightMemory& memory = *owned;
  BufferManager buffers(std::move(owned), BufferLimits{.pool_limit = 3 * 1024});
  std::vector<BufferId> ids;
  for (size_t bytes : {1024, 1024, 768, 1024}) {
    ids.push_back(buffers.Declare(bytes, "b"));
    ASSERT_TRUE(buffers.PrepareWrite(ids.back()).ok());
  }
  const MemoryHandle first = buffers.Handle(ids[0]);
  const MemoryHandle third = buffers.Handle(ids[2]);
  for (BufferId id : ids) buffers.Release(id);
  // 1024 + 1024 + 768 fit; the fourth release frees the first (the oldest), not the third.
  EXPECT_EQ(memory.frees, 1);
  EXPECT_EQ(buffers.pool_bytes(), 1024 + 768 + 1024);
  BufferId again = buffers.Declare(768, "again");
  ASSERT_TRUE(buffers.PrepareWrite(again).ok());
  EXPECT_EQ(buffers.Handle(again), third);
  EXPECT_NE(buffers.Handle(again), first);
  buffers.Release(again);

  // A buffer bigger than the whole bound is freed at once and leaves the pool as it was.
  BufferId big = buffers.Declare(4096, "big");
  ASSERT_TRUE(buffers.PrepareWrite(big).ok());
  const int64_t pooled = buffers.pool_bytes();
  const int frees = memory.frees;
  buffers.Release(big);
  EXPECT_EQ(memory.frees, frees + 1);
  EXPECT_EQ(buffers.pool_bytes(), pooled);
  buffers.TrimPool();
  EXPECT_EQ(buffers.pool_bytes(), 0);
}

// Reuse empties bins and keeps their list nodes aside (backend/buffer_manager.h: pooling and
// reuse allocate nothing); storage pooled again on those nodes is still freed oldest first, and
// a bin emptied before serves its newest again.
TEST(BufferManagerPoolTest, PoolingAgainAfterReuseKeepsTheOrder) {
  auto owned = std::make_unique<TightMemory>();
  TightMemory& memory = *owned;
  BufferManager buffers(std::move(owned), BufferLimits{.pool_limit = 3 * 1024});
  auto make = [&](size_t bytes) {
    const BufferId id = buffers.Declare(bytes, "b");
    EXPECT_TRUE(buffers.PrepareWrite(id).ok());
    return id;
  };
  const BufferId a = make(1024), b = make(768);
  const MemoryHandle ha = buffers.Handle(a), hb = buffers.Handle(b);
  buffers.Release(a);
  buffers.Release(b);
  const BufferId a2 = make(1024), b2 = make(768);  // both bins emptied by reuse
  EXPECT_EQ(buffers.Handle(a2), ha);
  EXPECT_EQ(buffers.Handle(b2), hb);
  EXPECT_EQ(buffers.pool_bytes(), 0);
  const BufferId c = make(1024), d = make(1024);
  const MemoryHandle hd = buffers.Handle(d);
  // Pooled again the other way round: 768 is now the oldest, then 1024, 1024 and 1024.
  buffers.Release(b2);
  buffers.Release(a2);
  buffers.Release(c);
  EXPECT_EQ(memory.frees, 0);
  EXPECT_EQ(buffers.pool_bytes(), 768 + 1024 + 1024);
  buffers.Release(d);  // over the bound: the 768 goes, the oldest
  EXPECT_EQ(memory.frees, 1);
  EXPECT_EQ(buffers.pool_bytes(), 3 * 1024);
  const BufferId e = make(768);  // its bin is empty: new storage, the pool as it was
  EXPECT_EQ(buffers.pool_bytes(), 3 * 1024);
  const BufferId f = make(1024);
  EXPECT_EQ(buffers.Handle(f), hd);  // its bin's newest
  EXPECT_EQ(buffers.pool_bytes(), 2 * 1024);
  for (BufferId id : {e, f}) buffers.Release(id);
  buffers.TrimPool();
  EXPECT_EQ(buffers.pool_bytes(), 0);
}

TEST(BufferManagerPoolTest, ZeroBoundPoolsNothing) {
  auto owned = std::make_unique<TightMemory>();
  TightMemory& memory = *owned;
  BufferManager buffers(std::move(owned), BufferLimits{.pool_limit = 0});
  BufferId a = buffers.Declare(1000, "a");
  ASSERT_TRUE(buffers.PrepareWrite(a).ok());
  buffers.Release(a);
  EXPECT_EQ(memory.frees, 1);
  EXPECT_EQ(buffers.pool_bytes(), 0);
}

// Regression: 6 GiB of live buffers were accepted on a device reporting 4.6 GiB.
TEST(BufferManagerPoolTest, LiveBytesAreCappedByGlobalMemory) {
  BufferManager buffers(std::make_unique<TightMemory>(), BufferLimits{.global_mem_bytes = 1 << 20});
  BufferId a = buffers.Declare(512 << 10, "a");
  ASSERT_TRUE(buffers.PrepareWrite(a).ok());
  buffers.Release(a);  // pooled: held on the device, so it counts until trimmed
  BufferId b = buffers.Declare(768 << 10, "b");
  ASSERT_TRUE(buffers.PrepareWrite(b).ok());
  EXPECT_EQ(buffers.pool_bytes(), 0);

  BufferId c = buffers.Declare(512 << 10, "c");
  absl::Status s = buffers.PrepareWrite(c);
  ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(Has(s, "requested 524288 bytes")) << s;
  EXPECT_TRUE(Has(s, "live 786432 bytes")) << s;
  EXPECT_TRUE(Has(s, "global memory of 1048576 bytes")) << s;
  EXPECT_FALSE(buffers.IsAllocated(c));
  buffers.Release(b);
  ASSERT_TRUE(buffers.PrepareWrite(c).ok());
  buffers.Release(c);
}

TEST(BufferManagerPoolTest, CheckRoomSumsRequestsAndAllocatesNothing) {
  auto owned = std::make_unique<TightMemory>();
  TightMemory& memory = *owned;
  BufferManager buffers(std::move(owned),
                        BufferLimits{.max_alloc_bytes = 512 << 10, .global_mem_bytes = 1 << 20});
  const std::vector<size_t> fits = {256 << 10, 512 << 10};
  EXPECT_TRUE(buffers.CheckRoom(fits).ok());
  const std::vector<size_t> too_many = {512 << 10, 512 << 10, 100};
  absl::Status s = buffers.CheckRoom(too_many);
  ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(Has(s, "requested 1048832 bytes")) << s;
  EXPECT_TRUE(Has(s, "global memory of 1048576 bytes")) << s;
  const std::vector<size_t> too_big = {(512 << 10) + 1};
  absl::Status big = buffers.CheckRoom(too_big);
  ASSERT_EQ(big.code(), absl::StatusCode::kResourceExhausted) << big;
  EXPECT_TRUE(Has(big, "CL_DEVICE_MAX_MEM_ALLOC_SIZE")) << big;
  EXPECT_EQ(buffers.live_bytes(), 0);
  EXPECT_EQ(memory.frees, 0);
}

}  // namespace
}  // namespace lazycl::backend
