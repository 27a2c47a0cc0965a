#include "backend/program_cache.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

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

  std::vector<fs::path> CacheFiles() const {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& entry : fs::recursive_directory_iterator(dir_, ec)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
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
  EXPECT_NE(message.find("CL_BUILD_PROGRAM_FAILURE"), std::string::npos) << message;
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
