// The training example: scan and the C++ loop over layers give the same losses, and SGD lowers
// the loss.

#include <cmath>
#include <vector>

#include "examples/mlp.h"
#include "gtest/gtest.h"

namespace lazycl::examples {
namespace {

TEST(TrainMlpTest, ScanAndLoopGiveTheSameLosses) {
  MlpConfig config;
  config.steps = 8;
  const Device device = default_env().device();
  const std::vector<float> scanned = TrainMlp(config, device);
  config.use_scan = false;
  const std::vector<float> looped = TrainMlp(config, device);
  ASSERT_EQ(scanned.size(), looped.size());
  for (size_t i = 0; i < scanned.size(); ++i)
    EXPECT_NEAR(scanned[i], looped[i], 1e-4 * std::fabs(looped[i])) << "step " << i;
  EXPECT_LT(scanned.back(), 0.95 * scanned.front());
}

}  // namespace
}  // namespace lazycl::examples
