#include "backend/device_select.h"

#include <string>

#include "gtest/gtest.h"

namespace lazycl::backend {
namespace {

// Two platforms: a GPU vendor with two GPUs and a CPU, and PoCL with one CPU.
std::vector<PlatformDesc> TwoPlatforms() {
  return {
      {"NVIDIA CUDA",
       "NVIDIA Corporation",
       "OpenCL 3.0 CUDA",
       {
           {"NVIDIA H100", base::DeviceType::kGpu, "550.1"},
           {"NVIDIA A10", base::DeviceType::kGpu, "550.1"},
       }},
      {"Portable Computing Language",
       "The pocl project",
       "OpenCL 3.0 PoCL",
       {
           {"pthread-skylake-avx512", base::DeviceType::kCpu, "3.1"},
           {"Fake Accelerator", base::DeviceType::kAccelerator, "0.1"},
       }},
  };
}

std::vector<PlatformDesc> CpuOnly() {
  return {{"Portable Computing Language",
           "The pocl project",
           "OpenCL 3.0 PoCL",
           {
               {"pthread-skylake-avx512", base::DeviceType::kCpu, "3.1"},
           }}};
}

base::Settings With(std::string platform, std::string device, base::DeviceTypeFilter type) {
  base::Settings s;
  s.platform = std::move(platform);
  s.device = std::move(device);
  s.device_type = type;
  return s;
}

void ExpectListsEverything(const absl::Status& status) {
  const std::string message(status.message());
  for (const char* name :
       {"NVIDIA CUDA", "NVIDIA H100", "NVIDIA A10", "Portable Computing Language",
        "pthread-skylake-avx512", "Fake Accelerator"}) {
    EXPECT_NE(message.find(name), std::string::npos) << name << " missing from: " << message;
  }
}

TEST(DeviceSelectTest, DefaultPrefersGpus) {
  auto choices = SelectDevices(TwoPlatforms(), base::Settings{});
  ASSERT_TRUE(choices.ok()) << choices.status();
  ASSERT_EQ(choices->size(), 2u);
  EXPECT_EQ((*choices)[0].platform, 0);
  EXPECT_EQ((*choices)[0].device, 0);
  EXPECT_EQ((*choices)[1].device, 1);
}

TEST(DeviceSelectTest, DefaultTakesAnythingWithoutGpu) {
  auto choices = SelectDevices(CpuOnly(), base::Settings{});
  ASSERT_TRUE(choices.ok());
  ASSERT_EQ(choices->size(), 1u);
  EXPECT_EQ((*choices)[0].platform, 0);
}

TEST(DeviceSelectTest, DefaultPrefersGpuOnlyWithinChosenPlatform) {
  auto choices =
      SelectDevices(TwoPlatforms(), With("portable", "", base::DeviceTypeFilter::kDefault));
  ASSERT_TRUE(choices.ok());
  EXPECT_EQ(choices->size(), 2u);
}

TEST(DeviceSelectTest, PlatformByIndex) {
  auto choices = SelectDevices(TwoPlatforms(), With("1", "", base::DeviceTypeFilter::kAll));
  ASSERT_TRUE(choices.ok());
  ASSERT_EQ(choices->size(), 2u);
  EXPECT_EQ((*choices)[0].platform, 1);
}

TEST(DeviceSelectTest, PlatformBySubstringIgnoresCase) {
  auto choices = SelectDevices(TwoPlatforms(), With("PORTABLE", "", base::DeviceTypeFilter::kCpu));
  ASSERT_TRUE(choices.ok());
  ASSERT_EQ(choices->size(), 1u);
  EXPECT_EQ((*choices)[0].platform, 1);
  EXPECT_EQ((*choices)[0].device, 0);
}

TEST(DeviceSelectTest, TypeFilter) {
  auto cpu = SelectDevices(TwoPlatforms(), With("", "", base::DeviceTypeFilter::kCpu));
  ASSERT_TRUE(cpu.ok());
  ASSERT_EQ(cpu->size(), 1u);
  EXPECT_EQ((*cpu)[0].platform, 1);
  auto accel = SelectDevices(TwoPlatforms(), With("", "", base::DeviceTypeFilter::kAccelerator));
  ASSERT_TRUE(accel.ok());
  EXPECT_EQ((*accel)[0].device, 1);
  auto all = SelectDevices(TwoPlatforms(), With("", "", base::DeviceTypeFilter::kAll));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 4u);
}

TEST(DeviceSelectTest, DeviceIndexCountsAmongCandidates) {
  // With type all, candidates are H100, A10, pthread, Fake: index 2 is the PoCL CPU.
  auto choices = SelectDevices(TwoPlatforms(), With("", "2", base::DeviceTypeFilter::kAll));
  ASSERT_TRUE(choices.ok());
  ASSERT_EQ(choices->size(), 1u);
  EXPECT_EQ((*choices)[0].platform, 1);
  EXPECT_EQ((*choices)[0].device, 0);
  // With the default (GPUs only), index 1 is the A10.
  auto gpu = SelectDevices(TwoPlatforms(), With("", "1", base::DeviceTypeFilter::kDefault));
  ASSERT_TRUE(gpu.ok());
  EXPECT_EQ((*gpu)[0].platform, 0);
  EXPECT_EQ((*gpu)[0].device, 1);
}

TEST(DeviceSelectTest, DeviceBySubstringIgnoresCase) {
  auto choices = SelectDevices(TwoPlatforms(), With("", "a10", base::DeviceTypeFilter::kDefault));
  ASSERT_TRUE(choices.ok());
  ASSERT_EQ(choices->size(), 1u);
  EXPECT_EQ((*choices)[0].device, 1);
}

TEST(DeviceSelectTest, NoMatchingDeviceListsEveryDevice) {
  auto choices = SelectDevices(TwoPlatforms(), With("", "radeon", base::DeviceTypeFilter::kAll));
  ASSERT_FALSE(choices.ok());
  EXPECT_EQ(choices.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(choices.status().message()).find("radeon"), std::string::npos);
  ExpectListsEverything(choices.status());
}

TEST(DeviceSelectTest, NoMatchingPlatformListsEveryDevice) {
  auto choices = SelectDevices(TwoPlatforms(), With("intel", "", base::DeviceTypeFilter::kDefault));
  ASSERT_FALSE(choices.ok());
  EXPECT_EQ(choices.status().code(), absl::StatusCode::kNotFound);
  ExpectListsEverything(choices.status());
}

TEST(DeviceSelectTest, NoDeviceOfRequestedTypeListsEveryDevice) {
  auto choices = SelectDevices(CpuOnly(), With("", "", base::DeviceTypeFilter::kGpu));
  ASSERT_FALSE(choices.ok());
  EXPECT_EQ(choices.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(choices.status().message()).find("pthread-skylake-avx512"),
            std::string::npos);
}

TEST(DeviceSelectTest, OutOfRangeIndexListsEveryDevice) {
  auto device = SelectDevices(TwoPlatforms(), With("", "7", base::DeviceTypeFilter::kAll));
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kOutOfRange);
  ExpectListsEverything(device.status());
  auto platform = SelectDevices(TwoPlatforms(), With("2", "", base::DeviceTypeFilter::kAll));
  ASSERT_FALSE(platform.ok());
  EXPECT_EQ(platform.status().code(), absl::StatusCode::kOutOfRange);
  ExpectListsEverything(platform.status());
}

TEST(DeviceSelectTest, MalformedIndexIsInvalidArgument) {
  auto choices = SelectDevices(TwoPlatforms(), With("", "-1", base::DeviceTypeFilter::kAll));
  ASSERT_FALSE(choices.ok());
  EXPECT_EQ(choices.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(choices.status().message()).find("LAZYCL_DEVICE"), std::string::npos);
  ExpectListsEverything(choices.status());
  auto huge =
      SelectDevices(TwoPlatforms(), With("99999999999999999999", "", base::DeviceTypeFilter::kAll));
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceSelectTest, NoPlatformsIsNotFoundWithHint) {
  auto choices = SelectDevices({}, base::Settings{});
  ASSERT_FALSE(choices.ok());
  EXPECT_EQ(choices.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(choices.status().message()).find("pocl-opencl-icd"), std::string::npos);
}

TEST(DeviceSelectTest, DescribePlatformsNamesTypes) {
  const std::string text = DescribePlatforms(TwoPlatforms());
  EXPECT_NE(text.find("platform 1: Portable Computing Language"), std::string::npos);
  EXPECT_NE(text.find("device 0: pthread-skylake-avx512 [cpu"), std::string::npos);
}

}  // namespace
}  // namespace lazycl::backend
