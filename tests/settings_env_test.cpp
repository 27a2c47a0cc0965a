// LAZYCL_* variables are checked at the first use of the library, whatever the device: CTest
// runs this binary with LAZYCL_DEBUG=banana (tests/CMakeLists.txt). Regression: a program that
// only made host tensors never read the variables, so a malformed one was silently ignored
// although the README says no value is ever ignored.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

TEST(SettingsEnvTest, MalformedVariableFailsTheFirstHostTensor) {
  for (int attempt = 0; attempt < 2; ++attempt) {  // every use fails, not only the first
    try {
      Tensor x = tensor(std::vector<float>{1, 2}, {2}, Device::host());
      ADD_FAILURE() << "a host tensor was made with LAZYCL_DEBUG=banana";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("LAZYCL_DEBUG"), std::string::npos) << what;
      EXPECT_NE(what.find("banana"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace lazycl
