// BufferManager's lazily loaded buffers (Declare with a HostSource, Load, PrepareRead): data but
// no memory until the first read, one read, counted, in chunks, and a failed read that keeps
// the source and no storage. Over host memory and an OpenCL device, as buffer_manager_test.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/buffer_manager.h"
#include "backend/device.h"
#include "backend/host_memory.h"
#include "backend/pool_bins.h"
#include "backend_test_util.h"
#include "base/file.h"
#include "gtest/gtest.h"
#include "lazycl/metrics.h"

namespace lazycl::backend {
namespace {

int64_t C(std::string_view name) { return lazycl::metrics::counter(name); }

bool Has(const absl::Status& s, std::string_view text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

enum class Kind { kHost, kOpenCl };

class BufferSourceTest : public ::testing::TestWithParam<Kind> {
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
    path_ = ::testing::TempDir() + "/lazycl_source_" + std::to_string(::getpid());
    lazycl::metrics::reset();
  }
  void TearDown() override { ::unlink(path_.c_str()); }
  bool device() const { return GetParam() == Kind::kOpenCl; }
  int64_t Counted(int64_t bytes) const { return device() ? bytes : 0; }

  // Writes `bytes` to the file and opens it.
  std::shared_ptr<const base::ReadOnlyFile> File(const std::vector<uint8_t>& bytes) {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    ::close(fd);
    absl::StatusOr<std::shared_ptr<const base::ReadOnlyFile>> file =
        base::ReadOnlyFile::Open(path_);
    EXPECT_TRUE(file.ok()) << file.status();
    return *file;
  }

  std::unique_ptr<Device> device_;
  std::unique_ptr<BufferManager> host_;
  BufferManager* buffers_ = nullptr;
  std::string path_;
};

INSTANTIATE_TEST_SUITE_P(Memories, BufferSourceTest, ::testing::Values(Kind::kHost, Kind::kOpenCl),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           return info.param == Kind::kHost ? "Host" : "OpenCl";
                         });

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed + (i >> 16));
  return v;
}

TEST_P(BufferSourceTest, HoldsDataButNoMemoryUntilReadThenReadsOnce) {
  const std::vector<uint8_t> bytes = Pattern(1000, 3);
  BufferId id = buffers_->Declare(600, "lazy", HostSource{File(bytes), 300});
  EXPECT_TRUE(buffers_->IsWritten(id));
  EXPECT_FALSE(buffers_->IsAllocated(id));
  EXPECT_TRUE(buffers_->CheckReadable(id).ok());
  EXPECT_TRUE(buffers_->PendingSource(id).has_value());
  EXPECT_EQ(buffers_->live_bytes(), 0);
  EXPECT_EQ(C("CheckpointReadBytes"), 0);
  std::vector<uint8_t> out(100);
  ASSERT_TRUE(buffers_->Download(id, out.data(), 50, 100).ok());
  EXPECT_EQ(out, std::vector<uint8_t>(bytes.begin() + 350, bytes.begin() + 450));
  EXPECT_EQ(C("CheckpointReadBytes"), 600);
  EXPECT_EQ(C("TransferToDeviceBytes"), Counted(600));
  EXPECT_TRUE(buffers_->IsAllocated(id));
  EXPECT_FALSE(buffers_->PendingSource(id).has_value());
  ASSERT_TRUE(buffers_->PrepareRead(id).ok());
  ASSERT_TRUE(buffers_->Load(id).ok());
  EXPECT_EQ(C("CheckpointReadBytes"), 600);
  buffers_->Release(id);
}

TEST_P(BufferSourceTest, LargeBuffersAreReadInChunks) {
  const size_t n = (size_t{16} << 20) * 2 + 12345;  // two full chunks and a remainder
  const std::vector<uint8_t> bytes = Pattern(n + 7, 9);
  BufferId id = buffers_->Declare(n, "big", HostSource{File(bytes), 7});
  ASSERT_TRUE(buffers_->Load(id).ok());
  std::vector<uint8_t> out(n);
  ASSERT_TRUE(buffers_->Download(id, out.data(), 0, n).ok());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), bytes.begin() + 7));
  EXPECT_EQ(C("CheckpointReadBytes"), static_cast<int64_t>(n));
  EXPECT_EQ(C("TransferToDeviceBytes"), Counted(static_cast<int64_t>(n)));
  EXPECT_EQ(C("TransferToDeviceCount"), Counted(3));
  buffers_->Release(id);
}

TEST_P(BufferSourceTest, AFailedReadKeepsTheSourceAndNoStorage) {
  std::vector<uint8_t> bytes = Pattern(4096, 1);
  std::shared_ptr<const base::ReadOnlyFile> file = File(bytes);
  BufferId id = buffers_->Declare(2048, "tensor 'w'", HostSource{file, 2048});
  ASSERT_EQ(::truncate(path_.c_str(), 3000), 0);
  absl::Status s = buffers_->PrepareRead(id);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(Has(s, "tensor 'w'") && Has(s, path_) && Has(s, "truncated")) << s;
  EXPECT_FALSE(buffers_->IsAllocated(id));
  EXPECT_EQ(buffers_->live_bytes(), 0);
  EXPECT_TRUE(buffers_->PendingSource(id).has_value());
  EXPECT_EQ(C("CheckpointReadBytes"), 0);
  // The same open file, whole again: the next read succeeds.
  const int fd = ::open(path_.c_str(), O_WRONLY);
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
  std::vector<uint8_t> out(2048);
  ASSERT_TRUE(buffers_->Download(id, out.data(), 0, out.size()).ok());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), bytes.begin() + 2048));
  buffers_->Release(id);
}

TEST_P(BufferSourceTest, WritesKeepTheRestOfTheFile) {
  const std::vector<uint8_t> bytes = Pattern(64, 5);
  BufferId a = buffers_->Declare(64, "a", HostSource{File(bytes), 0});
  const uint8_t patch[4] = {0xde, 0xad, 0xbe, 0xef};
  ASSERT_TRUE(buffers_->Upload(a, patch, 10, 4).ok());
  std::vector<uint8_t> out(64), want = bytes;
  std::copy(patch, patch + 4, want.begin() + 10);
  ASSERT_TRUE(buffers_->Download(a, out.data(), 0, 64).ok());
  EXPECT_EQ(out, want);
  BufferId b = buffers_->Declare(64, "b", HostSource{File(bytes), 0});
  ASSERT_TRUE(buffers_->PrepareWrite(b).ok());  // a kernel may write only part of it
  ASSERT_TRUE(buffers_->Download(b, out.data(), 0, 64).ok());
  EXPECT_EQ(out, bytes);
  BufferId empty = buffers_->Declare(0, "empty", HostSource{File(bytes), 64});
  ASSERT_TRUE(buffers_->PrepareRead(empty).ok());
  EXPECT_TRUE(buffers_->IsAllocated(empty));  // a handle to bind, and no bytes
  for (BufferId id : {a, b, empty}) buffers_->Release(id);
}

TEST(ReadOnlyFileTest, OpenErrorsNameThePath) {
  absl::StatusOr<std::shared_ptr<const base::ReadOnlyFile>> missing =
      base::ReadOnlyFile::Open("/nonexistent-lazycl/file");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Has(missing.status(), "/nonexistent-lazycl/file")) << missing.status();
  absl::StatusOr<std::shared_ptr<const base::ReadOnlyFile>> dir = base::ReadOnlyFile::Open("/");
  EXPECT_TRUE(Has(dir.status(), "not a regular file")) << dir.status();
}

}  // namespace
}  // namespace lazycl::backend
