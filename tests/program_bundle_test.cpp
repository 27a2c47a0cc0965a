#include "backend/program_bundle.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "backend/device.h"
#include "backend_test_util.h"
#include "gtest/gtest.h"
#include "lazycl/metrics.h"

namespace lazycl::backend {
namespace {

namespace fs = std::filesystem;
using Values = std::vector<float>;

int64_t C(std::string_view name) { return lazycl::metrics::counter(name); }

TEST(ProgramBundleTextTest, DefinedNamesFindsFunctionsTypedefsAndConstants) {
  const std::string source =
      "typedef long idx_t;\n"
      "// void commented_out(int x);\n"
      "/* a block comment\n"
      "void inside_comment(int x);\n"
      "*/\n"
      "#define LC_MACRO(x) \\\n"
      "  call_in_macro(x)\n"
      "__constant float table[4] = {1, 2, 3, 4};\n"
      "static inline float helper(float x) { return x; }\n"
      "__kernel __attribute__((reqd_work_group_size(16, 16, 1)))\n"
      "void with_attribute(__global float* x) {\n"
      "  x[0] = helper(1.0f);\n"
      "return_is_not(x);\n"
      "}\n"
      "__kernel void plain(__global float* x, long n) {\n"
      "x[0] = call(1);\n"
      "}\n"
      "static inline float helper(float x);\n";
  std::vector<std::string> names = DefinedNames(source);
  EXPECT_EQ(names,
            (std::vector<std::string>{"idx_t", "table", "helper", "with_attribute", "plain"}));
}

TEST(ProgramBundleTextTest, SharedOptionsDropsDefinitions) {
  EXPECT_EQ(SharedOptions("-DA=1 -cl-fast-relaxed-math -D B=2 -DC"), "-cl-fast-relaxed-math");
  EXPECT_EQ(SharedOptions("-DLC_VW=16 -DMR=8"), "");
}

TEST(ProgramBundleTextTest, ChunkDefinesRenamesAndUndefinesEverything) {
  const std::string chunk =
      BundleChunk({"#define LOCAL 3\n__kernel void k(__global float* x) { x[0] = LOCAL * SCALE; }",
                   "-DSCALE=2 -DFLAG"},
                  "_b1");
  EXPECT_NE(chunk.find("#define SCALE 2\n#define FLAG 1\n#define k k_b1\n"), std::string::npos)
      << chunk;
  for (const char* name : {"SCALE", "FLAG", "k", "LOCAL"}) {
    EXPECT_NE(chunk.find(std::string("#undef ") + name + "\n"), std::string::npos) << name << "\n"
                                                                                   << chunk;
  }
}

// Three programs that could not share one text naively: the same kernel and helper names, the
// same typedef of different types, a -D option of different values, and a macro one defines
// and another tests.
const char* const kMemberA =
    "typedef int idx_t;\n"
    "#define MARK 1\n"
    "static inline float helper(float x) { return x + 1.0f; }\n"
    "__kernel void k(__global float* out) {\n"
    "  idx_t i = get_global_id(0);\n"
    "  out[i] = helper((float)i) * SCALE;\n"
    "}\n";
const char* const kMemberB =
    "typedef long idx_t;\n"
    "static inline float helper(float x) { return x * 10.0f; }\n"
    "__kernel void k(__global float* out) {\n"
    "  idx_t i = get_global_id(0);\n"
    "#ifdef MARK\n"
    "  out[i] = -1.0f;\n"
    "#else\n"
    "  out[i] = helper((float)i) * SCALE;\n"
    "#endif\n"
    "}\n";
const char* const kMemberC =
    "__kernel void other(__global float* out) { out[get_global_id(0)] = (float)(OFFSET + 7); "
    "}\n";

class ProgramBundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/lazycl-program-bundle-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<Device> Open() {
    return test::OpenDeviceWith({{"LAZYCL_KERNEL_CACHE_DIR", dir_}});
  }

  std::vector<ProgramSource> Members() const {
    // Each test run gets its own texts, so PoCL's own cache never answers for a build.
    return {{a_, "-DSCALE=2"}, {b_, "-DSCALE=3"}, {c_, "-DOFFSET=5"}};
  }

  // The four values kernel `name` of `source` writes.
  std::vector<float> Run(Device& device, const ProgramSource& source, const char* name) {
    auto kernel = device.GetKernel(source.source, source.options, name);
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    if (!kernel.ok()) return {};
    BufferManager& buffers = device.buffers();
    BufferId out = buffers.Declare(4 * sizeof(float), "out");
    const KernelArg args[] = {KernelArg::Write(out)};
    const size_t global[] = {4};
    EXPECT_TRUE(device.Launch(*kernel, args, global).ok());
    std::vector<float> host(4);
    EXPECT_TRUE(buffers.Download(out, host.data(), 0, sizeof(float) * 4).ok());
    buffers.Release(out);
    return host;
  }

  void ExpectValues(Device& device) {
    const std::vector<ProgramSource> m = Members();
    EXPECT_EQ(Run(device, m[0], "k"), (Values{2, 4, 6, 8}));
    EXPECT_EQ(Run(device, m[1], "k"), (Values{0, 30, 60, 90}));
    EXPECT_EQ(Run(device, m[2], "other"), (Values{12, 12, 12, 12}));
  }

  // The files the cache wrote, but for build.lock (the cross-process build locks; no data).
  size_t Files() const {
    size_t n = 0;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      n += entry.is_regular_file() && entry.path().filename() != "build.lock";
    }
    return n;
  }

  std::string dir_;
  const std::string tag_ = std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                           std::to_string(reinterpret_cast<uintptr_t>(this));
  const std::string a_ = kMemberA + std::string("// ") + tag_ + "\n";
  const std::string b_ = kMemberB + std::string("// ") + tag_ + "\n";
  const std::string c_ = kMemberC + std::string("// ") + tag_ + "\n";
};

TEST_F(ProgramBundleTest, MembersBuildAsOneProgramAndStayApart) {
  std::unique_ptr<Device> device = Open();
  ASSERT_NE(device, nullptr);
  lazycl::metrics::reset();
  const std::vector<ProgramSource> members = Members();
  ASSERT_TRUE(device->PreparePrograms(members).ok());
  EXPECT_EQ(C("ProgramBuilds"), 1);
  ExpectValues(*device);
  EXPECT_EQ(C("ProgramBuilds"), 1);
  // The bundle once, and an alias under each member's own key.
  EXPECT_EQ(Files(), 4u);
  // Asking again builds nothing.
  ASSERT_TRUE(device->PreparePrograms(members).ok());
  EXPECT_EQ(C("ProgramBuilds"), 1);
}

TEST_F(ProgramBundleTest, ALaterDeviceLoadsTheBundleOnceThroughAnyMember) {
  {
    std::unique_ptr<Device> device = Open();
    ASSERT_NE(device, nullptr);
    ASSERT_TRUE(device->PreparePrograms(Members()).ok());
  }
  std::unique_ptr<Device> device = Open();
  ASSERT_NE(device, nullptr);
  lazycl::metrics::reset();
  ExpectValues(*device);  // through GetKernel, one member at a time
  EXPECT_EQ(C("ProgramBuilds"), 0);
  EXPECT_EQ(C("ProgramDiskCacheHits"), 1);
}

TEST_F(ProgramBundleTest, ACorruptBundleIsRebuilt) {
  {
    std::unique_ptr<Device> device = Open();
    ASSERT_NE(device, nullptr);
    ASSERT_TRUE(device->PreparePrograms(Members()).ok());
  }
  // The largest file is the bundle: overwrite its payload's end.
  fs::path bundle;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (bundle.empty() || fs::file_size(entry.path()) > fs::file_size(bundle))
      bundle = entry.path();
  }
  const auto size = fs::file_size(bundle);
  {
    std::fstream f(bundle, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size) - 16);
    f.write("corrupt corrupt!", 16);
  }
  std::unique_ptr<Device> device = Open();
  ASSERT_NE(device, nullptr);
  lazycl::metrics::reset();
  ASSERT_TRUE(device->PreparePrograms(Members()).ok());
  EXPECT_EQ(C("ProgramDiskCacheHits"), 0);
  EXPECT_EQ(C("ProgramBuilds"), 1);
  ExpectValues(*device);
}

TEST_F(ProgramBundleTest, AFailedBundleNamesItsError) {
  std::unique_ptr<Device> device = Open();
  ASSERT_NE(device, nullptr);
  std::vector<ProgramSource> members = Members();
  const std::string broken = "__kernel void broken(__global float* x) { x[0] = missing_name; }\n";
  members.push_back({broken, ""});
  absl::Status s = device->PreparePrograms(members);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("missing_name"), std::string::npos) << s;
  // The device stays usable.
  ExpectValues(*device);
}

}  // namespace
}  // namespace lazycl::backend
