#pragma once

// Helpers shared by the backend tests: settings and devices from explicit variables, so the
// tests never depend on the caller's LAZYCL_* environment.
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/device.h"
#include "base/settings.h"
#include "gtest/gtest.h"

namespace lazycl::backend::test {

// The base::Settings that `env` (variable -> value) gives, as if it were the process environment.
inline absl::StatusOr<base::Settings> SettingsFrom(const std::map<std::string, std::string>& env) {
  return base::ParseSettings([&env](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(std::string(name));
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

// A device opened with SettingsFrom(env); nullptr, after a test failure, when it cannot be.
inline std::unique_ptr<Device> OpenDeviceWith(const std::map<std::string, std::string>& env) {
  absl::StatusOr<base::Settings> settings = SettingsFrom(env);
  EXPECT_TRUE(settings.ok()) << settings.status();
  if (!settings.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<Device>> device = Device::Open(*settings);
  EXPECT_TRUE(device.ok()) << device.status();
  return device.ok() ? *std::move(device) : nullptr;
}

// Temporary directories made by OpenDeviceWithTempCache, removed when the test program ends.
inline std::vector<std::string>& TempDirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

class RemoveTempDirs : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const std::string& dir : TempDirs()) std::filesystem::remove_all(dir);
  }
};
inline ::testing::Environment* const kRemoveTempDirs =
    ::testing::AddGlobalTestEnvironment(new RemoveTempDirs);

// A device opened with `env` plus a kernel cache in a fresh temporary directory.
inline std::unique_ptr<Device> OpenDeviceWithTempCache(
    std::map<std::string, std::string> env = {}) {
  char dir[] = "/tmp/lazycl-backend-test-XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  TempDirs().push_back(dir);
  env["LAZYCL_KERNEL_CACHE_DIR"] = dir;
  return OpenDeviceWith(env);
}

}  // namespace lazycl::backend::test
