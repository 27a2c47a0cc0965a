// The caches' bounds (issue 14): the disk cache (LAZYCL_KERNEL_CACHE_MAX_BYTES) deletes the
// entries used longest ago, the in-memory program cache (LAZYCL_PROGRAM_CACHE_SIZE) releases
// programs, the graph cache (LAZYCL_GRAPH_CACHE_SIZE) drops plans; evicted entries rebuild and
// give the same results; two processes filling one bounded disk cache at once stay correct.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backend/device.h"
#include "backend/disk_cache_trim.h"
#include "backend_test_util.h"
#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl::backend {
namespace {

namespace fs = std::filesystem;

int64_t C(const char* name) { return lazycl::metrics::counter(name); }

class CacheBoundsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/lazycl-cache-bounds-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { fs::remove_all(dir_); }

  void WriteFile(const std::string& name, size_t bytes, std::chrono::seconds age) {
    const fs::path path = fs::path(dir_) / name;
    std::ofstream(path, std::ios::binary) << std::string(bytes, 'x');
    fs::last_write_time(path, fs::file_time_type::clock::now() - age);
  }
  bool Exists(const std::string& name) const { return fs::exists(fs::path(dir_) / name); }
  static int64_t BinBytesOf(const std::string& dir) {
    int64_t total = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".bin") total += static_cast<int64_t>(e.file_size());
    }
    return total;
  }

  std::string dir_;
};

// A program of its own per tag: x[i] = x[i] * a + tag.
std::string Source(int tag) {
  return "__kernel void k" + std::to_string(tag) +
         "(__global float* x, float a) { x[get_global_id(0)] = x[get_global_id(0)] * a + " +
         std::to_string(tag) + ".0f; }\n";
}

// Runs program `tag` on {1, 2, 3, 4} with a = 2 and checks the result.
void RunAndCheck(Device& device, int tag) {
  absl::StatusOr<KernelRef> kernel = device.GetKernel(Source(tag), "", "k" + std::to_string(tag));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  BufferManager& buffers = device.buffers();
  const BufferId id = buffers.Declare(4 * sizeof(float), "x");
  const float in[4] = {1, 2, 3, 4};
  ASSERT_TRUE(buffers.Upload(id, in, 0, sizeof(in)).ok());
  const KernelArg args[] = {KernelArg::Write(id), KernelArg::Float32(2.0f)};
  const size_t global[] = {4};
  ASSERT_TRUE(device.Launch(kernel->get(), args, global).ok());
  ASSERT_TRUE(device.Finish().ok());
  float out[4] = {};
  ASSERT_TRUE(buffers.Download(id, out, 0, sizeof(out)).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], in[i] * 2 + static_cast<float>(tag)) << tag;
  buffers.Release(id);
}

TEST_F(CacheBoundsTest, TrimDeletesTheEntriesUsedLongestAgoDownToNinetyPercent) {
  WriteFile("a.bin", 400, std::chrono::seconds(400));  // oldest
  WriteFile("b.bin", 400, std::chrono::seconds(300));
  WriteFile("c.bin", 400, std::chrono::seconds(200));
  WriteFile("d.bin", 400, std::chrono::seconds(100));        // newest
  WriteFile("notes.txt", 5000, std::chrono::seconds(1000));  // not an entry: never touched
  EXPECT_EQ(TrimDiskCache(dir_, 2000), 0);                   // 1600 bytes fit
  EXPECT_EQ(TrimDiskCache(dir_, 1200), 2);                   // down to <= 1080: a and b go
  EXPECT_FALSE(Exists("a.bin"));
  EXPECT_FALSE(Exists("b.bin"));
  EXPECT_TRUE(Exists("c.bin"));
  EXPECT_TRUE(Exists("d.bin"));
  EXPECT_TRUE(Exists("notes.txt"));
  // A load touches its entry: c becomes the newest and d the one to go.
  TouchDiskCacheEntry(dir_ + "/c.bin");
  EXPECT_EQ(TrimDiskCache(dir_, 500), 1);
  EXPECT_TRUE(Exists("c.bin"));
  EXPECT_FALSE(Exists("d.bin"));
}

TEST_F(CacheBoundsTest, TrimDeletesOnlyStaleTemporaries) {
  WriteFile("e.bin.tmp.123.0", 10, std::chrono::hours(2));
  WriteFile("f.bin.tmp.456.0", 10, std::chrono::seconds(5));  // a save in progress
  TrimDiskCache(dir_, 1 << 20);
  EXPECT_FALSE(Exists("e.bin.tmp.123.0"));
  EXPECT_TRUE(Exists("f.bin.tmp.456.0"));
  EXPECT_EQ(TrimDiskCache(dir_ + "/missing", 1), 0);  // no directory: nothing, no error
}

TEST_F(CacheBoundsTest, DiskCacheStaysWithinItsBoundAndEvictedProgramsRebuild) {
  const std::string cache = dir_ + "/cache";
  // One entry is a few KiB on PoCL; the bound holds about three.
  std::unique_ptr<Device> probe = test::OpenDeviceWith({{"LAZYCL_KERNEL_CACHE_DIR", cache}});
  ASSERT_NE(probe, nullptr);
  RunAndCheck(*probe, 100);
  const int64_t entry = BinBytesOf(cache);
  ASSERT_GT(entry, 0);
  probe.reset();
  const int64_t bound = entry * 3 + entry / 2;
  const int64_t evictions = C("ProgramDiskCacheEvictions");
  std::unique_ptr<Device> device =
      test::OpenDeviceWith({{"LAZYCL_KERNEL_CACHE_DIR", cache},
                            {"LAZYCL_KERNEL_CACHE_MAX_BYTES", std::to_string(bound)}});
  ASSERT_NE(device, nullptr);
  for (int tag = 101; tag < 108; ++tag) {
    RunAndCheck(*device, tag);
    EXPECT_LE(BinBytesOf(cache), bound + entry) << tag;  // at most one save past the bound
  }
  EXPECT_GT(C("ProgramDiskCacheEvictions"), evictions);
  // A fresh process's device finds the newest entry and rebuilds an evicted one.
  std::unique_ptr<Device> fresh =
      test::OpenDeviceWith({{"LAZYCL_KERNEL_CACHE_DIR", cache},
                            {"LAZYCL_KERNEL_CACHE_MAX_BYTES", std::to_string(bound)}});
  const int64_t hits = C("ProgramDiskCacheHits"), builds = C("ProgramBuilds");
  RunAndCheck(*fresh, 107);
  EXPECT_EQ(C("ProgramDiskCacheHits"), hits + 1);
  RunAndCheck(*fresh, 101);
  EXPECT_EQ(C("ProgramBuilds"), builds + 1);
}

TEST_F(CacheBoundsTest, ProgramCacheReleasesTheLeastRecentlyUsedProgram) {
  std::unique_ptr<Device> device = test::OpenDeviceWith(
      {{"LAZYCL_KERNEL_CACHE_DIR", "off"}, {"LAZYCL_PROGRAM_CACHE_SIZE", "2"}});
  ASSERT_NE(device, nullptr);
  const int64_t evictions = C("ProgramCacheEvictions"), builds = C("ProgramBuilds");
  // A kernel whose program is evicted stays usable while it is held.
  absl::StatusOr<KernelRef> held = device->GetKernel(Source(200), "", "k200");
  ASSERT_TRUE(held.ok());
  RunAndCheck(*device, 201);
  RunAndCheck(*device, 200);  // 200 is now the most recently used; 201 the least
  RunAndCheck(*device, 202);  // evicts 201
  EXPECT_EQ(C("ProgramCacheEvictions"), evictions + 1);
  EXPECT_EQ(C("ProgramBuilds"), builds + 3);
  RunAndCheck(*device, 200);  // still cached
  EXPECT_EQ(C("ProgramBuilds"), builds + 3);
  RunAndCheck(*device, 201);  // rebuilt, evicting 202
  EXPECT_EQ(C("ProgramBuilds"), builds + 4);
  RunAndCheck(*device, 203);  // evicts 200, which `held` still holds
  EXPECT_EQ(C("ProgramCacheEvictions"), evictions + 3);
  BufferManager& buffers = device->buffers();
  const BufferId id = buffers.Declare(sizeof(float), "x");
  const float one = 1;
  ASSERT_TRUE(buffers.Upload(id, &one, 0, sizeof(one)).ok());
  const KernelArg args[] = {KernelArg::Write(id), KernelArg::Float32(3.0f)};
  const size_t global[] = {1};
  ASSERT_TRUE(device->Launch(held->get(), args, global).ok());
  ASSERT_TRUE(device->Finish().ok());
  float out = 0;
  ASSERT_TRUE(buffers.Download(id, &out, 0, sizeof(out)).ok());
  EXPECT_EQ(out, 203.0f);
  buffers.Release(id);
}

// One of the two processes of TwoProcessesFillingOneBoundedCacheStayCorrect (a fresh process
// of this binary, not a fork: PoCL's threads do not survive a fork). Skipped when run directly.
TEST(CacheBoundsChild, FillSharedCache) {
  const char* cache = std::getenv("LAZYCL_CACHE_BOUNDS_DIR");
  const char* first = std::getenv("LAZYCL_CACHE_BOUNDS_FIRST");
  if (cache == nullptr || first == nullptr) GTEST_SKIP() << "a child of another test";
  std::unique_ptr<Device> device = test::OpenDeviceWith(
      {{"LAZYCL_KERNEL_CACHE_DIR", cache}, {"LAZYCL_KERNEL_CACHE_MAX_BYTES", "20000"}});
  ASSERT_NE(device, nullptr);
  for (int round = 0; round < 2; ++round) {
    for (int tag = std::atoi(first); tag < std::atoi(first) + 6; ++tag) {
      RunAndCheck(*device, 300 + tag % 8);  // the two processes share half their programs
    }
  }
}

TEST_F(CacheBoundsTest, TwoProcessesFillingOneBoundedCacheStayCorrect) {
  const std::string cache = dir_ + "/shared";
  std::vector<pid_t> children;
  for (const char* first : {"0", "3"}) {
    const pid_t pid = test::SpawnSelf(
        "CacheBoundsChild.FillSharedCache",
        {"LAZYCL_CACHE_BOUNDS_DIR=" + cache, std::string("LAZYCL_CACHE_BOUNDS_FIRST=") + first});
    ASSERT_GT(pid, 0);
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid;
  }
  // What is left is a consistent cache: every entry loads (or is rebuilt) and computes right.
  std::unique_ptr<Device> device = test::OpenDeviceWith({{"LAZYCL_KERNEL_CACHE_DIR", cache}});
  ASSERT_NE(device, nullptr);
  for (int tag = 300; tag < 308; ++tag) RunAndCheck(*device, tag);
  for (const auto& e : fs::directory_iterator(cache)) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
}

// CTest runs this binary with LAZYCL_GRAPH_CACHE_SIZE=3 (tests/CMakeLists.txt).
TEST(GraphCacheSize, TheVariableBoundsThePlansKept) {
  const char* size = std::getenv("LAZYCL_GRAPH_CACHE_SIZE");
  ASSERT_NE(size, nullptr) << "run through CTest, which sets LAZYCL_GRAPH_CACHE_SIZE=3";
  ASSERT_STREQ(size, "3");
  const lazycl::Device cl = lazycl::Device::opencl(0);
  // Data, not an iota: a subexpression of iota and constants alone would be folded
  // (runtime/constant_fold.h) and its plan never run again.
  const lazycl::Tensor data = lazycl::tensor(std::vector<float>{0, 1, 2, 3, 4}, {5}, cl);
  auto run = [&](int structure) {  // a different graph structure per value
    lazycl::Tensor x = data;
    for (int i = 0; i <= structure; ++i) x = lazycl::exp(x * 0.1);
    return x.to_vector<float>();
  };
  const std::vector<float> first = run(0);
  for (int s = 1; s <= 3; ++s) run(s);  // three more: the first plan is evicted
  const int64_t compiles = C("GraphCompiles");
  EXPECT_EQ(run(0), first);
  EXPECT_EQ(C("GraphCompiles"), compiles + 1);
  const int64_t hits = C("GraphCacheHits");
  run(3);  // still cached
  EXPECT_EQ(C("GraphCacheHits"), hits + 1);
}

}  // namespace
}  // namespace lazycl::backend
