// The process's memory-mapping budget (backend/mapping_budget.h): PoCL before 4.0 keeps every
// kernel it loads mapped, and a process past vm.max_map_count would die inside PoCL's dlopen;
// lazycl refuses the launch of a kernel not loaded yet with an error instead.
#include "backend/mapping_budget.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "runtime/devices.h"

namespace lazycl::backend {
namespace {

TEST(MappingBudgetTest, PoclBeforeFourKeepsEveryKernel) {
  const std::string pocl = "Portable Computing Language";
  EXPECT_TRUE(PoclKeepsEveryKernel(
      pocl, "OpenCL 3.0 PoCL 3.1+debian  Linux, None+Asserts, RELOC, SPIR, LLVM 15.0.6"));
  EXPECT_TRUE(PoclKeepsEveryKernel(pocl, "OpenCL 1.2 PoCL 1.6"));
  EXPECT_TRUE(PoclKeepsEveryKernel(pocl, "OpenCL 3.0"));  // says no version: assumed
  EXPECT_FALSE(PoclKeepsEveryKernel(pocl, "OpenCL 3.0 PoCL 4.0  Linux, Release"));
  EXPECT_FALSE(PoclKeepsEveryKernel(pocl, "OpenCL 3.0 PoCL 6.0+debian"));
  EXPECT_FALSE(PoclKeepsEveryKernel("NVIDIA CUDA", "OpenCL 3.0 CUDA 12.4.131"));
}

TEST(MappingBudgetTest, RefusesNearTheLimitAndRecountsAsItGoes) {
  int64_t mappings = 1000, reads = 0;
  MappingBudget budget([&] { return ++reads, mappings; }, /*limit=*/10000);
  ASSERT_TRUE(budget.BeforeLoad("k0").ok());
  EXPECT_EQ(reads, 1);
  // Far from the limit it reads the count again only every kRecount loads.
  for (int i = 1; i < MappingBudget::kRecount; ++i) ASSERT_TRUE(budget.BeforeLoad("k").ok());
  EXPECT_EQ(reads, 1);
  mappings = 10000 - MappingBudget::kMargin + 1;  // something else mapped meanwhile
  const absl::Status refused = budget.BeforeLoad("ew_1234");
  EXPECT_EQ(reads, 2);
  ASSERT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  for (const char* part : {"'ew_1234'", "10000", "vm.max_map_count", "PoCL 4.0"}) {
    EXPECT_NE(refused.message().find(part), std::string::npos) << part << " in " << refused;
  }
  // Near the limit every load reads the count; once mappings are freed, loads go on.
  mappings = 10000 - MappingBudget::kMargin - MappingBudget::kPerKernel;
  EXPECT_TRUE(budget.BeforeLoad("k").ok());
  EXPECT_EQ(reads, 3);
  EXPECT_TRUE(budget.BeforeLoad("k").ok());
  EXPECT_EQ(reads, 4);
}

TEST(MappingBudgetTest, UnknownCountOrLimitRefusesNothing) {
  MappingBudget unknown_count([] { return int64_t{-1}; }, 100);
  MappingBudget no_limit([] { return int64_t{1} << 40; }, -1);
  for (int i = 0; i < 40; ++i) {
    EXPECT_TRUE(unknown_count.BeforeLoad("k").ok());
    EXPECT_TRUE(no_limit.BeforeLoad("k").ok());
  }
}

int64_t SystemLimit() {
  std::ifstream file("/proc/sys/vm/max_map_count");
  int64_t limit = -1;
  file >> limit;
  return limit;
}

// The whole path: with the process's mappings near the system's limit, a graph whose kernels
// were never loaded fails with a lazycl::Error (where PoCL 3.1 would abort the process), and
// once the mappings are freed it runs.
TEST(MappingBudgetTest, ANewKernelNearTheLimitIsAnErrorNotAnAbort) {
  const lazycl::Device device = default_env().device();
  if (!device.is_opencl()) GTEST_SKIP() << "needs an OpenCL device";
  const DeviceInfo& info = runtime::OpenClDevice(device.index()).info();
  const std::string platform = info.platform_name, version = info.platform_version;
  if (!PoclKeepsEveryKernel(platform, version)) {
    GTEST_SKIP() << "the platform (" << platform << ", " << version << ") unloads kernels";
  }
  const int64_t limit = SystemLimit();
  if (limit <= 0 || limit > 1'000'000) GTEST_SKIP() << "vm.max_map_count is " << limit;
  Tensor x = tensor(std::vector<float>{1, 2, 3, 4}, {4}, device);
  ASSERT_FLOAT_EQ((x * 2.0f).to_vector<float>()[3], 8);  // the device is up

  // Single pages with alternating protections: each is a mapping of its own (neighbours with
  // equal protections would merge), none is touched.
  const long page = sysconf(_SC_PAGESIZE);
  std::vector<void*> pages;
  std::ifstream maps("/proc/self/maps");
  int64_t now = 0;
  for (std::string line; std::getline(maps, line);) ++now;
  const int64_t wanted = limit - MappingBudget::kMargin / 2 - now;
  ASSERT_GT(wanted, 0);
  char* region = static_cast<char*>(mmap(nullptr, static_cast<size_t>(wanted * page), PROT_READ,
                                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(region, MAP_FAILED);
  for (int64_t i = 0; i < wanted; i += 2) {
    ASSERT_EQ(mprotect(region + i * page, static_cast<size_t>(page), PROT_NONE), 0) << i;
  }
  // Kernels not loaded yet: chains of different lengths from x compile to different programs.
  std::string error = "(no error)";
  for (int i = 1; i <= 2 * MappingBudget::kRecount && error == "(no error)"; ++i) {
    Tensor y = x;
    for (int j = 0; j < i; ++j) y = tanh(y) + 0.25f;
    try {
      y.to_vector<float>();
    } catch (const Error& e) {
      error = e.what();
    }
  }
  ASSERT_EQ(munmap(region, static_cast<size_t>(wanted * page)), 0);
  EXPECT_NE(error.find("vm.max_map_count"), std::string::npos) << error;
  EXPECT_NE(error.find("keeps every kernel it loads mapped"), std::string::npos) << error;
  // The mappings freed, a new kernel loads again.
  Tensor z = exp(x) * 3.0f + 1.0f;
  const std::vector<float> got = z.to_vector<float>();
  EXPECT_NEAR(got[0], std::exp(1.0f) * 3 + 1, 1e-5);
}

}  // namespace
}  // namespace lazycl::backend
