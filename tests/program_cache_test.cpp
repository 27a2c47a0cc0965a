#include "backend/program_cache.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "backend/device.h"
#include "backend_test_util.h"
#include "base/settings.h"
#include "gtest/gtest.h"
#include "lazycl/metrics.h"

namespace lazycl::backend {
namespace {

namespace fs = std::filesystem;

int64_t C(std::string_view name) { return lazycl::metrics::counter(name); }

// Each test gets its own source text, so PoCL's own cache and ours never carry over a program
// from another test.
std::string Source(std::string_view tag) {
  return "__kernel void scale_" + std::string(tag) +
         "(__global float* x, float a) { x[get_global_id(0)] *= a; }\n";
}

class ProgramCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/lazycl-program-cache-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    cache_dir_ = dir_ + "/nested/cache";  // created on first save
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<Device> Open(std::string cache_dir) {
    return test::OpenDeviceWith({{"LAZYCL_KERNEL_CACHE_DIR", cache_dir}});
  }

  // The files the cache wrote, but for build.lock (the cross-process build locks), which any
  // build creates and which holds no data.
  std::vector<fs::path> CacheFiles() const {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& entry : fs::recursive_directory_iterator(dir_, ec)) {
      if (entry.is_regular_file() && entry.path().filename() != "build.lock") {
        files.push_back(entry.path());
      }
    }
    return files;
  }

  std::string dir_;
  std::string cache_dir_;
};

TEST_F(ProgramCacheTest, SecondGetKernelIsMemoryHit) {
  std::unique_ptr<Device> device = Open(cache_dir_);
  ASSERT_NE(device, nullptr);
  lazycl::metrics::reset();
  auto first = device->GetKernel(Source("memory"), "", "scale_memory");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(C("ProgramBuilds"), 1);
  auto second = device->GetKernel(Source("memory"), "", "scale_memory");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);
  EXPECT_EQ(C("ProgramBuilds"), 1);
  EXPECT_EQ(C("ProgramDiskCacheHits"), 0);
  // Other options are another program.
  ASSERT_TRUE(device->GetKernel(Source("memory"), "-cl-fast-relaxed-math", "scale_memory").ok());
  EXPECT_EQ(C("ProgramBuilds"), 2);
}

TEST_F(ProgramCacheTest, SecondDeviceLoadsFromDisk) {
  {
    std::unique_ptr<Device> device = Open(cache_dir_);
    ASSERT_NE(device, nullptr);
    ASSERT_TRUE(device->GetKernel(Source("disk"), "", "scale_disk").ok());
  }
  ASSERT_EQ(CacheFiles().size(), 1u);
  std::unique_ptr<Device> device = Open(cache_dir_);
  ASSERT_NE(device, nullptr);
  lazycl::metrics::reset();
  auto kernel = device->GetKernel(Source("disk"), "", "scale_disk");
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(C("ProgramDiskCacheHits"), 1);
  EXPECT_EQ(C("ProgramBuilds"), 0);
}

TEST_F(ProgramCacheTest, TruncatedEntryIsRebuiltAndRewritten) {
  {
    std::unique_ptr<Device> device = Open(cache_dir_);
    ASSERT_TRUE(device->GetKernel(Source("truncated"), "", "scale_truncated").ok());
  }
  ASSERT_EQ(CacheFiles().size(), 1u);
  const fs::path file = CacheFiles()[0];
  const auto full_size = fs::file_size(file);
  fs::resize_file(file, full_size / 2);

  std::unique_ptr<Device> device = Open(cache_dir_);
  lazycl::metrics::reset();
  ASSERT_TRUE(device->GetKernel(Source("truncated"), "", "scale_truncated").ok());
  EXPECT_EQ(C("ProgramBuilds"), 1);
  EXPECT_EQ(C("ProgramDiskCacheHits"), 0);
  ASSERT_EQ(CacheFiles().size(), 1u);
  EXPECT_EQ(fs::file_size(file), full_size);
}

TEST_F(ProgramCacheTest, CorruptEntryIsRebuilt) {
  {
    std::unique_ptr<Device> device = Open(cache_dir_);
    ASSERT_TRUE(device->GetKernel(Source("corrupt"), "", "scale_corrupt").ok());
  }
  ASSERT_EQ(CacheFiles().size(), 1u);
  const fs::path file = CacheFiles()[0];
  const auto size = fs::file_size(file);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size - 16));
    const char junk[8] = {'g', 'a', 'r', 'b', 'a', 'g', 'e', '!'};
    f.write(junk, sizeof(junk));
  }
  std::unique_ptr<Device> device = Open(cache_dir_);
  lazycl::metrics::reset();
  ASSERT_TRUE(device->GetKernel(Source("corrupt"), "", "scale_corrupt").ok());
  EXPECT_EQ(C("ProgramBuilds"), 1);
  EXPECT_EQ(C("ProgramDiskCacheHits"), 0);

  // The rewritten entry loads again.
  std::unique_ptr<Device> third = Open(cache_dir_);
  lazycl::metrics::reset();
  ASSERT_TRUE(third->GetKernel(Source("corrupt"), "", "scale_corrupt").ok());
  EXPECT_EQ(C("ProgramDiskCacheHits"), 1);
  EXPECT_EQ(C("ProgramBuilds"), 0);
}

// Disk-cache entries that are not what they seem (regression: a directory threw
// std::ios_base::failure out of the caller, a symlink to /dev/zero was read until bad_alloc, a
// FIFO hung the process). Each is a miss: the program is built and a regular entry replaces it.
class ProgramCacheEntryTest : public ProgramCacheTest {
 protected:
  // Builds `tag`'s program once so that its entry exists, replaces that entry with what
  // `make_entry` puts at its path (given the entry's bytes), then checks that a fresh device
  // builds the program, that a regular entry took the odd one's place, and that it loads.
  using MakeEntry = std::function<void(const fs::path&, const std::string& bytes)>;
  void ExpectMissAndReplaced(std::string_view tag, const MakeEntry& make_entry) {
    const std::string name = "scale_" + std::string(tag);
    {
      std::unique_ptr<Device> device = Open(cache_dir_);
      ASSERT_NE(device, nullptr);
      ASSERT_TRUE(device->GetKernel(Source(tag), "", name).ok());
    }
    ASSERT_EQ(CacheFiles().size(), 1u);
    const fs::path path = CacheFiles()[0];
    std::string bytes;
    {
      std::ifstream in(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    fs::remove(path);
    make_entry(path, bytes);

    std::unique_ptr<Device> device = Open(cache_dir_);
    lazycl::metrics::reset();
    auto kernel = device->GetKernel(Source(tag), "", name);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_EQ(C("ProgramBuilds"), 1);
    EXPECT_EQ(C("ProgramDiskCacheHits"), 0);
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(path))) << path;
    std::unique_ptr<Device> next = Open(cache_dir_);
    lazycl::metrics::reset();
    ASSERT_TRUE(next->GetKernel(Source(tag), "", name).ok());
    EXPECT_EQ(C("ProgramDiskCacheHits"), 1);
  }
};

TEST_F(ProgramCacheEntryTest, DirectoryEntryIsAMiss) {
  ExpectMissAndReplaced("dir_entry", [](const fs::path& p, const std::string&) {
    fs::create_directories(p / "inside");
  });
}

TEST_F(ProgramCacheEntryTest, SymlinkToDevZeroIsAMissAndNotFollowed) {
  ExpectMissAndReplaced("devzero_entry", [](const fs::path& p, const std::string&) {
    fs::create_symlink("/dev/zero", p);
  });
  EXPECT_TRUE(fs::is_character_file("/dev/zero"));
}

TEST_F(ProgramCacheEntryTest, FifoEntryIsAMissAndDoesNotBlock) {
  ExpectMissAndReplaced("fifo_entry", [](const fs::path& p, const std::string&) {
    ASSERT_EQ(mkfifo(p.c_str(), 0644), 0);
  });
}

// FNV-1a as the cache's checksum, so the test can forge an entry whose checksum is right.
uint64_t Fnv1a(std::string_view data) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

TEST_F(ProgramCacheEntryTest, PayloadTheDriverRejectsIsRebuilt) {
  ExpectMissAndReplaced("bad_payload", [](const fs::path& p, const std::string& bytes) {
    // Header: magic[8], version u32, reserved u32, key_bytes u64, payload_bytes u64, checksum u64.
    std::string data = bytes;
    ASSERT_GT(data.size(), 40u);
    uint64_t key_bytes = 0;
    std::memcpy(&key_bytes, data.data() + 16, 8);
    const size_t payload_at = 40 + key_bytes;
    ASSERT_LT(payload_at, data.size());
    for (size_t i = payload_at; i < data.size(); ++i) data[i] = static_cast<char>('x' + i % 7);
    const uint64_t checksum = Fnv1a(std::string_view(data).substr(payload_at));
    std::memcpy(data.data() + 32, &checksum, 8);
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
  });
}

// A process that died while the driver loaded an entry left `<entry>.loading` with its pid: the
// next process rebuilds instead of loading (and possibly dying) the same way.
TEST_F(ProgramCacheEntryTest, MarkerOfADeadLoaderMakesTheNextProcessRebuild) {
  const std::string tag = "dead_loader";
  fs::path path;
  {
    std::unique_ptr<Device> device = Open(cache_dir_);
    ASSERT_TRUE(device->GetKernel(Source(tag), "", "scale_dead_loader").ok());
  }
  ASSERT_EQ(CacheFiles().size(), 1u);
  path = CacheFiles()[0];
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // reaped: its pid names no process now
  const fs::path marker = path.string() + ".loading";
  { std::ofstream(marker) << child; }

  std::unique_ptr<Device> device = Open(cache_dir_);
  lazycl::metrics::reset();
  ASSERT_TRUE(device->GetKernel(Source(tag), "", "scale_dead_loader").ok());
  EXPECT_EQ(C("ProgramBuilds"), 1);
  EXPECT_EQ(C("ProgramDiskCacheHits"), 0);
  EXPECT_FALSE(fs::exists(marker));
  EXPECT_TRUE(fs::is_regular_file(path));
}

TEST_F(ProgramCacheEntryTest, MarkerOfALiveLoaderStillLoads) {
  const std::string tag = "live_loader";
  fs::path path;
  {
    std::unique_ptr<Device> device = Open(cache_dir_);
    ASSERT_TRUE(device->GetKernel(Source(tag), "", "scale_live_loader").ok());
  }
  ASSERT_EQ(CacheFiles().size(), 1u);
  path = CacheFiles()[0];
  const fs::path marker = path.string() + ".loading";
  { std::ofstream(marker) << getpid(); }  // a concurrent load by a live process
  std::unique_ptr<Device> device = Open(cache_dir_);
  lazycl::metrics::reset();
  ASSERT_TRUE(device->GetKernel(Source(tag), "", "scale_live_loader").ok());
  EXPECT_EQ(C("ProgramDiskCacheHits"), 1);
  EXPECT_EQ(C("ProgramBuilds"), 0);
  EXPECT_TRUE(fs::exists(marker));  // not ours to remove
}

// One of the two processes of TwoProcessesBuildEachProgramOnce (a fresh process of this binary,
// not a fork: PoCL's threads do not survive a fork). Skipped when run directly.
TEST(ProgramCacheChild, BuildSharedPrograms) {
  const char* dir = std::getenv("LAZYCL_SHARED_BUILD_DIR");
  const char* id = std::getenv("LAZYCL_SHARED_BUILD_ID");
  const char* token = std::getenv("LAZYCL_SHARED_BUILD_TOKEN");
  if (dir == nullptr || id == nullptr || token == nullptr)
    GTEST_SKIP() << "a child of another test";
  const std::string base(dir);
  std::unique_ptr<Device> device =
      test::OpenDeviceWith({{"LAZYCL_KERNEL_CACHE_DIR", base + "/cache"}});
  ASSERT_NE(device, nullptr);
  { std::ofstream(base + "/ready." + id) << "ready"; }
  // Both processes start building at once: the parent says go when both are ready.
  for (int i = 0; i < 60000 && !fs::exists(base + "/go"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(fs::exists(base + "/go"));
  lazycl::metrics::reset();
  for (int i = 0; i < 6; ++i) {
    const std::string tag = absl::StrCat("shared_", token, "_", i);
    auto kernel = device->GetKernel(Source(tag), "", "scale_" + tag);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
  }
  std::ofstream(base + "/counts." + id) << C("ProgramBuilds") << " " << C("ProgramDiskCacheHits");
}

// Two processes that share a disk cache and need the same programs at the same moment build
// each of them once between them: the one that waited for the build lock loads what the other
// saved. (Before the lock, both compiled every program, and PoCL 3.1, whose cache they also
// share, could crash one of them while the other rewrote the program's files: lazycl_fuzz_cpu
// died of SIGSEGV in readdir under ctest -j2.)
TEST_F(ProgramCacheTest, TwoProcessesBuildEachProgramOnce) {
  const std::string token =
      absl::StrCat(getpid(), "_", std::chrono::steady_clock::now().time_since_epoch().count());
  std::vector<pid_t> children;
  for (const char* id : {"0", "1"}) {
    const pid_t pid = test::SpawnSelf(
        "ProgramCacheChild.BuildSharedPrograms",
        {"LAZYCL_SHARED_BUILD_DIR=" + dir_, std::string("LAZYCL_SHARED_BUILD_ID=") + id,
         "LAZYCL_SHARED_BUILD_TOKEN=" + token});
    ASSERT_GT(pid, 0);
    children.push_back(pid);
  }
  for (int i = 0; i < 60000 && !(fs::exists(dir_ + "/ready.0") && fs::exists(dir_ + "/ready.1"));
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  { std::ofstream(dir_ + "/go") << "go"; }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid;
  }
  int64_t builds = 0;
  int64_t hits = 0;
  for (const char* id : {"0", "1"}) {
    std::ifstream in(dir_ + "/counts." + id);
    int64_t b = -1;
    int64_t h = -1;
    ASSERT_TRUE(in >> b >> h) << "child " << id << " reported no counts";
    builds += b;
    hits += h;
  }
  EXPECT_EQ(builds, 6) << "programs built by the two processes together";
  EXPECT_EQ(hits, 6) << "programs loaded from the disk cache by the two processes together";
}

TEST_F(ProgramCacheTest, BuildErrorCarriesLogAndSource) {
  std::unique_ptr<Device> device = Open(cache_dir_);
  const std::string source =
      "__kernel void broken(__global float* x) {\n  x[0] = undefined_thing + 1;\n}\n";
  auto kernel = device->GetKernel(source, "", "broken");
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(kernel.status().message());
  EXPECT_NE(message.find("error:"), std::string::npos) << message;
  EXPECT_NE(message.find("undefined_thing"), std::string::npos) << message;
  EXPECT_NE(message.find("   2 |   x[0] = undefined_thing + 1;"), std::string::npos) << message;
  // clBuildProgram's code, or clCompileProgram's where the cache stores compiled objects.
  EXPECT_TRUE(message.find("CL_BUILD_PROGRAM_FAILURE") != std::string::npos ||
              message.find("CL_COMPILE_PROGRAM_FAILURE") != std::string::npos)
      << message;
  EXPECT_TRUE(CacheFiles().empty());
}

TEST_F(ProgramCacheTest, CacheOffWritesNoFiles) {
  std::unique_ptr<Device> device = Open("off");
  ASSERT_NE(device, nullptr);
  lazycl::metrics::reset();
  ASSERT_TRUE(device->GetKernel(Source("off"), "", "scale_off").ok());
  EXPECT_EQ(C("ProgramBuilds"), 1);
  EXPECT_TRUE(CacheFiles().empty());
  EXPECT_FALSE(fs::exists(cache_dir_));
}

TEST_F(ProgramCacheTest, UnwritableCacheDirIsNotAnError) {
  // A regular file where the directory should be: nothing can be created under it.
  std::ofstream(dir_ + "/blocker") << "x";
  std::unique_ptr<Device> device = Open(dir_ + "/blocker/cache");
  ASSERT_NE(device, nullptr);
  ASSERT_TRUE(device->GetKernel(Source("unwritable"), "", "scale_unwritable").ok());
}

TEST_F(ProgramCacheTest, UnknownKernelNameIsNotFound) {
  std::unique_ptr<Device> device = Open(cache_dir_);
  auto kernel = device->GetKernel(Source("names"), "", "no_such_kernel");
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(kernel.status().message()).find("no_such_kernel"), std::string::npos);
  EXPECT_NE(std::string(kernel.status().message()).find("scale_names"), std::string::npos);
}

}  // namespace
}  // namespace lazycl::backend

namespace lazycl::backend {
namespace {

// A kernel the OpenCL C compiler warns about (incompatible pointer types), with a name of its
// own per process so that no compiler cache has it.
std::string WarningSource() {
  const std::string name =
      "warns_" + std::to_string(getpid()) + "_" +
      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  return "__kernel void " + name +
         "(__global float* x) { __global int* p = x; p[get_global_id(0)] = 1; }\n";
}

std::string KernelName(const std::string& source) {
  const size_t at = source.find("warns_");
  return source.substr(at, source.find('(') - at);
}

// Issue 14: PoCL printed "N warnings generated." on the user's stderr at every cold build.
TEST(ProgramCacheWarningsTest, BuildsAreQuietAndLazyclDebugShowsTheWarnings) {
  const std::string quiet_source = WarningSource();
  {
    std::unique_ptr<Device> device = test::OpenDeviceWith({{"LAZYCL_KERNEL_CACHE_DIR", ""}});
    ASSERT_NE(device, nullptr);
    testing::internal::CaptureStderr();
    auto kernel = device->GetKernel(quiet_source, "", KernelName(quiet_source));
    const std::string err = testing::internal::GetCapturedStderr();
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_EQ(err, "");
  }
  // The same kind of kernel at LAZYCL_DEBUG=1: the warnings are there, in the build log.
  const std::string loud_source = WarningSource();
  std::unique_ptr<Device> device =
      test::OpenDeviceWith({{"LAZYCL_KERNEL_CACHE_DIR", ""}, {"LAZYCL_DEBUG", "1"}});
  ASSERT_NE(device, nullptr);
  testing::internal::CaptureStderr();
  auto kernel = device->GetKernel(loud_source, "", KernelName(loud_source));
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  // PoCL says "warning:", NVIDIA "Warning:" (on an H200, for a kernel with the noinline attribute).
  EXPECT_NE(absl::AsciiStrToLower(err).find("warning"), std::string::npos) << err;
}

// PoCL's CL_PROGRAM_BINARIES of an executable compiles every kernel once more, so by default its
// programs are cached as compiled objects; other platforms keep executables.
TEST(CachedBinaryTest, CompiledObjectsOnPoclWithALinkerUnlessAsked) {
  using lazycl::backend::CachedBinary;
  using lazycl::backend::CachedBinaryFor;
  using lazycl::base::KernelCacheBinary;
  const std::string pocl = "Portable Computing Language";
  EXPECT_EQ(*CachedBinaryFor(KernelCacheBinary::kAuto, pocl, "cpu", true),
            CachedBinary::kCompiledObject);
  EXPECT_EQ(*CachedBinaryFor(KernelCacheBinary::kAuto, pocl, "cpu", false),
            CachedBinary::kExecutable);
  EXPECT_EQ(*CachedBinaryFor(KernelCacheBinary::kAuto, "NVIDIA CUDA", "gpu", true),
            CachedBinary::kExecutable);
  EXPECT_EQ(*CachedBinaryFor(KernelCacheBinary::kExecutable, pocl, "cpu", true),
            CachedBinary::kExecutable);
  EXPECT_EQ(*CachedBinaryFor(KernelCacheBinary::kObject, "NVIDIA CUDA", "gpu", true),
            CachedBinary::kCompiledObject);
  absl::StatusOr<CachedBinary> none =
      CachedBinaryFor(KernelCacheBinary::kObject, pocl, "dev", false);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("'dev' has no linker"), std::string::npos)
      << none.status();
}

// Both kinds of entry load in a later process and run.
TEST_F(ProgramCacheTest, ExecutableAndObjectEntriesBothReload) {
  for (const char* kind : {"executable", "object"}) {
    SCOPED_TRACE(kind);
    const std::string dir = cache_dir_ + "/" + kind;
    const std::string source = Source(std::string("reload_") + kind);
    const std::string name = std::string("scale_reload_") + kind;
    auto open = [&] {
      return test::OpenDeviceWith(
          {{"LAZYCL_KERNEL_CACHE_DIR", dir}, {"LAZYCL_KERNEL_CACHE_BINARY", kind}});
    };
    {
      std::unique_ptr<Device> device = open();
      ASSERT_NE(device, nullptr);
      ASSERT_TRUE(device->GetKernel(source, "", name).ok());
    }
    std::unique_ptr<Device> device = open();
    ASSERT_NE(device, nullptr);
    lazycl::metrics::reset();
    auto kernel = device->GetKernel(source, "", name);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_EQ(C("ProgramDiskCacheHits"), 1);
    EXPECT_EQ(C("ProgramBuilds"), 0);
    BufferManager& buffers = device->buffers();
    std::vector<float> x = {1, 2, 3, 4};
    BufferId bx = buffers.Declare(4 * sizeof(float), "x");
    ASSERT_TRUE(buffers.Upload(bx, x.data(), 0, 4 * sizeof(float)).ok());
    const KernelArg args[] = {KernelArg::Write(bx), KernelArg::Float32(2.0f)};
    const size_t global[] = {4};
    ASSERT_TRUE(device->Launch(*kernel, args, global).ok());
    ASSERT_TRUE(buffers.Download(bx, x.data(), 0, 4 * sizeof(float)).ok());
    EXPECT_EQ(x, (std::vector<float>{2, 4, 6, 8}));
    buffers.Release(bx);
  }
}

}  // namespace
}  // namespace lazycl::backend
