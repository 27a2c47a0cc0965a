// LAZYCL_DUMP_DIR and LAZYCL_DEBUG=3 (set by CTest, tests/CMakeLists.txt): a compiled graph
// leaves its IR, its Graphviz DOT and its OpenCL C in the dump directory, and a line on stderr.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(DebugDumpTest, OneComputationDumpsItsGraphAndLogsIt) {
  const char* dir_env = std::getenv("LAZYCL_DUMP_DIR");
  ASSERT_NE(dir_env, nullptr) << "run this test through ctest, which sets LAZYCL_DUMP_DIR";
  const char* debug = std::getenv("LAZYCL_DEBUG");
  ASSERT_NE(debug, nullptr);
  ASSERT_EQ(std::string(debug), "3");
  const fs::path dir = dir_env;
  fs::remove_all(dir);  // the library has not written anything yet: nothing ran in this process

  Tensor a = tensor(std::vector<float>{1, 2, 3, 4}, {2, 2}, Device::opencl(0));
  testing::internal::CaptureStderr();
  Tensor y = sum(tanh(a) * 2, {1});
  const std::vector<float> got = y.to_vector<float>();
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NEAR(got[0], 2 * (std::tanh(1.0f) + std::tanh(2.0f)), 1e-5);

  EXPECT_NE(log.find("lazycl: graph"), std::string::npos) << log;
  EXPECT_NE(log.find("IR:"), std::string::npos) << log;        // level 2
  EXPECT_NE(log.find("OpenCL C:"), std::string::npos) << log;  // level 3
  EXPECT_NE(log.find("__kernel"), std::string::npos) << log;
  EXPECT_NE(log.find("nodes,"), std::string::npos) << log;  // level 1: the summary line

  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::vector<std::string> txt, dot, cl;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("graph_", 0) != 0) continue;
    if (e.path().extension() == ".txt") txt.push_back(Read(e.path()));
    if (e.path().extension() == ".dot") dot.push_back(Read(e.path()));
    if (e.path().extension() == ".cl") cl.push_back(Read(e.path()));
  }
  ASSERT_EQ(txt.size(), 1u);
  ASSERT_EQ(dot.size(), 1u);
  ASSERT_EQ(cl.size(), 1u);
  EXPECT_NE(txt[0].find("Tanh"), std::string::npos) << txt[0];
  EXPECT_NE(dot[0].find("digraph"), std::string::npos) << dot[0];
  EXPECT_NE(cl[0].find("__kernel"), std::string::npos) << cl[0];
  EXPECT_NE(cl[0].find("tanh("), std::string::npos) << cl[0];

  // A cached graph is not dumped again.
  Tensor b = tensor(std::vector<float>{5, 6, 7, 8}, {2, 2}, Device::opencl(0));
  sum(tanh(b) * 2, {1}).to_vector<float>();
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 3);
}

}  // namespace
}  // namespace lazycl
