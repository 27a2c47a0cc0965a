#pragma once

// Helpers shared by the backend tests: settings and devices from explicit variables, so the
// tests never depend on the caller's LAZYCL_* environment.
#include <spawn.h>
#include <stdlib.h>
#include <unistd.h>

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

// Starts this test binary again, running only the tests `gtest_filter` names, with `env`
// ("NAME=value" each) added to this process's environment: a fresh process, not a fork (PoCL's
// threads do not survive a fork). The child's pid, or -1 after a test failure.
inline pid_t SpawnSelf(const std::string& gtest_filter, const std::vector<std::string>& env) {
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  for (const std::string& entry : env) envp.push_back(const_cast<char*>(entry.c_str()));
  envp.push_back(nullptr);
  std::string self = "/proc/self/exe";
  std::string filter = "--gtest_filter=" + gtest_filter;
  char* argv[] = {self.data(), filter.data(), nullptr};
  pid_t pid = 0;
  const int error = posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, envp.data());
  EXPECT_EQ(error, 0) << "posix_spawn of " << filter;
  return error == 0 ? pid : -1;
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
