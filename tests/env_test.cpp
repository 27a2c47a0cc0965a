// The environment that decides where new tensors live (SPEC, "Environment"; MISSION.md seed 001).
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

const Device kCl = Device::opencl(0);

// Restores default_env()'s config and device whatever a test does to them.
class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_config_ = default_env().config();
    saved_device_ = default_env().device();
  }
  void TearDown() override {
    default_env().config() = saved_config_;
    default_env().set_device(saved_device_);
    EXPECT_EQ(current_env(), nullptr) << "a guard leaked out of the test";
  }

 private:
  Config saved_config_;
  Device saved_device_ = Device::host();
};

TEST_F(EnvTest, OutsideAnyGuardFactoriesMakeHostTensors) {
  ASSERT_EQ(current_env(), nullptr);
  EXPECT_EQ(zeros({2}).device(), Device::host());
  EXPECT_EQ(randn({1}, 7).device(), Device::host());
  EXPECT_EQ(tensor(std::vector<float>{1, 2}, {2}).device(), Device::host());
  // Even with the default config set to device tensors, no guard means host.
  default_env().config().use_host_for_cpu_tensors = false;
  EXPECT_EQ(ones({3}).device(), Device::host());
}

TEST_F(EnvTest, InsideGuardWithHostForCpuTensorsFactoriesMakeHostTensors) {
  default_env().config().use_host_for_cpu_tensors = true;
  EnvGuard g(default_env());
  EXPECT_EQ(current_env(), &default_env());
  EXPECT_EQ(randn({1}, 7).device(), Device::host());
  EXPECT_EQ(arange(4).device(), Device::host());
  EXPECT_EQ(full({2, 2}, 3.0).device(), Device::host());
}

TEST_F(EnvTest, InsideGuardWithoutHostForCpuTensorsFactoriesMakeEnvDeviceTensors) {
  default_env().config().use_host_for_cpu_tensors = false;
  EnvGuard g(default_env());
  EXPECT_EQ(default_env().device(), kCl);
  Tensor r = randn({1}, 7);
  EXPECT_EQ(r.device(), kCl);
  EXPECT_EQ(zeros({2}, DType::i32).device(), kCl);
  EXPECT_EQ(tensor(std::vector<int64_t>{5}, {1}).device(), kCl);
  // Ops on them stay on the device, lazily.
  Tensor y = r * 2 + 1;
  EXPECT_EQ(y.device(), kCl);
  EXPECT_NEAR(y.item<float>(), r.item<float>() * 2 + 1, 1e-6);
}

TEST_F(EnvTest, ExplicitDeviceWinsInBothDirections) {
  {
    default_env().config().use_host_for_cpu_tensors = true;
    EnvGuard g(default_env());
    EXPECT_EQ(randn({1}, 7, DType::f32, kCl).device(), kCl);
    EXPECT_EQ(zeros({1}, DType::f32, kCl).device(), kCl);
  }
  {
    default_env().config().use_host_for_cpu_tensors = false;
    EnvGuard g(default_env());
    EXPECT_EQ(randn({1}, 7, DType::f32, Device::host()).device(), Device::host());
    EXPECT_EQ(zeros({1}, DType::f32, Device::host()).device(), Device::host());
  }
  EXPECT_EQ(zeros({1}, DType::f32, kCl).device(), kCl);  // and outside any guard
}

TEST_F(EnvTest, GuardsNestAndTheInnermostIsCurrent) {
  Env host_env(kCl);
  host_env.config().use_host_for_cpu_tensors = true;
  Env device_env(kCl);
  device_env.config().use_host_for_cpu_tensors = false;
  {
    EnvGuard outer(device_env);
    EXPECT_EQ(zeros({1}).device(), kCl);
    {
      EnvGuard inner(host_env);
      EXPECT_EQ(current_env(), &host_env);
      EXPECT_EQ(zeros({1}).device(), Device::host());
    }
    EXPECT_EQ(current_env(), &device_env);
    EXPECT_EQ(zeros({1}).device(), kCl);
  }
  EXPECT_EQ(current_env(), nullptr);
  EXPECT_EQ(zeros({1}).device(), Device::host());
}

TEST_F(EnvTest, ConfigChangesInsideAGuardApplyToTheNextFactory) {
  EnvGuard g(default_env());
  default_env().config().use_host_for_cpu_tensors = true;
  EXPECT_EQ(zeros({1}).device(), Device::host());
  default_env().config().use_host_for_cpu_tensors = false;
  EXPECT_EQ(zeros({1}).device(), kCl);
}

TEST_F(EnvTest, MixingHostAndDeviceMovesTheHostOperandToTheDevice) {
  Tensor host = tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, Device::host());
  Tensor dev = tensor(std::vector<float>{10, 20, 30, 40, 50, 60}, {2, 3}, kCl);
  for (bool host_first : {true, false}) {
    const int64_t bytes = metrics::counter("TransferToDeviceBytes");
    const int64_t count = metrics::counter("TransferToDeviceCount");
    Tensor y = host_first ? host + dev : dev + host;
    EXPECT_EQ(y.device(), kCl);
    EXPECT_EQ(metrics::counter("TransferToDeviceBytes"), bytes + 6 * 4);
    EXPECT_EQ(metrics::counter("TransferToDeviceCount"), count + 1);
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{11, 22, 33, 44, 55, 66}));
  }
  // A broadcast host operand moves its own bytes, not the broadcast result's.
  Tensor row = tensor(std::vector<int32_t>{1, 2, 3}, {3}, Device::host());
  const int64_t bytes = metrics::counter("TransferToDeviceBytes");
  Tensor z = dev * row;
  EXPECT_EQ(metrics::counter("TransferToDeviceBytes"), bytes + 3 * 4);
  EXPECT_EQ(z.device(), kCl);
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{10, 40, 90, 40, 100, 180}));
}

TEST_F(EnvTest, DeviceTensorsFromAGuardMixWithHostTensorsFromOutside) {
  Tensor outside = ones({4});
  ASSERT_EQ(outside.device(), Device::host());
  default_env().config().use_host_for_cpu_tensors = false;
  EnvGuard g(default_env());
  Tensor inside = arange(4);
  ASSERT_EQ(inside.device(), kCl);
  Tensor y = inside + outside;
  EXPECT_EQ(y.device(), kCl);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace lazycl
