#include "base/settings.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace lazycl::backend {
namespace {

absl::StatusOr<base::Settings> Parse(std::map<std::string, std::string> env) {
  return base::ParseSettings([env](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(std::string(name));
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

std::string Message(const absl::Status& status) { return std::string(status.message()); }

TEST(SettingsTest, DefaultsWithEmptyEnvironment) {
  absl::StatusOr<base::Settings> s = Parse({});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->platform, "");
  EXPECT_EQ(s->device, "");
  EXPECT_EQ(s->device_type, base::DeviceTypeFilter::kDefault);
  EXPECT_EQ(s->kernel_cache_dir, "");
  EXPECT_EQ(s->debug, 0);
  EXPECT_EQ(s->dump_dir, "");
  EXPECT_EQ(s->transfer_guard, base::TransferGuard::kAllow);
  EXPECT_EQ(s->device_memory_limit, 0);
  EXPECT_EQ(s->codegen, base::CodegenStrategy::kAuto);
}

TEST(SettingsTest, CacheDirDefaultsToXdgCacheHome) {
  absl::StatusOr<base::Settings> s = Parse({{"XDG_CACHE_HOME", "/x/cache"}, {"HOME", "/home/u"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kernel_cache_dir, "/x/cache/lazycl");
}

TEST(SettingsTest, CacheDirDefaultsToHomeCache) {
  absl::StatusOr<base::Settings> s = Parse({{"HOME", "/home/u"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kernel_cache_dir, "/home/u/.cache/lazycl");
}

TEST(SettingsTest, CacheDirExplicitAndOff) {
  EXPECT_EQ(Parse({{"LAZYCL_KERNEL_CACHE_DIR", "/tmp/k"}, {"HOME", "/h"}})->kernel_cache_dir,
            "/tmp/k");
  EXPECT_EQ(Parse({{"LAZYCL_KERNEL_CACHE_DIR", "off"}, {"HOME", "/h"}})->kernel_cache_dir, "");
  EXPECT_EQ(Parse({{"LAZYCL_KERNEL_CACHE_DIR", "OFF"}, {"HOME", "/h"}})->kernel_cache_dir, "");
}

TEST(SettingsTest, PlatformAndDeviceAreKeptVerbatim) {
  absl::StatusOr<base::Settings> s =
      Parse({{"LAZYCL_PLATFORM", "Portable"}, {"LAZYCL_DEVICE", "1"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->platform, "Portable");
  EXPECT_EQ(s->device, "1");
}

TEST(SettingsTest, DeviceTypeIsCaseInsensitive) {
  EXPECT_EQ(Parse({{"LAZYCL_DEVICE_TYPE", "GPU"}})->device_type, base::DeviceTypeFilter::kGpu);
  EXPECT_EQ(Parse({{"LAZYCL_DEVICE_TYPE", "cpu"}})->device_type, base::DeviceTypeFilter::kCpu);
  EXPECT_EQ(Parse({{"LAZYCL_DEVICE_TYPE", "Accelerator"}})->device_type,
            base::DeviceTypeFilter::kAccelerator);
  EXPECT_EQ(Parse({{"LAZYCL_DEVICE_TYPE", "all"}})->device_type, base::DeviceTypeFilter::kAll);
}

TEST(SettingsTest, MalformedDeviceTypeNamesVariableAndValue) {
  absl::StatusOr<base::Settings> s = Parse({{"LAZYCL_DEVICE_TYPE", "tpu"}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(s.status()).find("LAZYCL_DEVICE_TYPE"), std::string::npos);
  EXPECT_NE(Message(s.status()).find("tpu"), std::string::npos);
  EXPECT_NE(Message(s.status()).find("gpu, cpu, accelerator, all"), std::string::npos);
}

TEST(SettingsTest, DebugLevels) {
  EXPECT_EQ(Parse({{"LAZYCL_DEBUG", "3"}})->debug, 3);
  EXPECT_EQ(Parse({{"LAZYCL_DEBUG", "0"}})->debug, 0);
  for (const char* bad : {"4", "-1", "yes"}) {
    absl::StatusOr<base::Settings> s = Parse({{"LAZYCL_DEBUG", bad}});
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(Message(s.status()).find("LAZYCL_DEBUG"), std::string::npos);
    EXPECT_NE(Message(s.status()).find(bad), std::string::npos);
  }
}

TEST(SettingsTest, DumpDir) {
  EXPECT_EQ(Parse({{"LAZYCL_DUMP_DIR", "/tmp/dump"}})->dump_dir, "/tmp/dump");
}

TEST(SettingsTest, TransferGuard) {
  EXPECT_EQ(Parse({{"LAZYCL_TRANSFER_GUARD", "log"}})->transfer_guard, base::TransferGuard::kLog);
  EXPECT_EQ(Parse({{"LAZYCL_TRANSFER_GUARD", "Disallow"}})->transfer_guard,
            base::TransferGuard::kDisallow);
  absl::StatusOr<base::Settings> s = Parse({{"LAZYCL_TRANSFER_GUARD", "never"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(Message(s.status()).find("LAZYCL_TRANSFER_GUARD"), std::string::npos);
}

TEST(SettingsTest, MemoryLimitSuffixes) {
  EXPECT_EQ(Parse({{"LAZYCL_DEVICE_MEMORY_LIMIT", "1000"}})->device_memory_limit, 1000);
  EXPECT_EQ(Parse({{"LAZYCL_DEVICE_MEMORY_LIMIT", "4K"}})->device_memory_limit, 4096);
  EXPECT_EQ(Parse({{"LAZYCL_DEVICE_MEMORY_LIMIT", "4KiB"}})->device_memory_limit, 4096);
  EXPECT_EQ(Parse({{"LAZYCL_DEVICE_MEMORY_LIMIT", "3M"}})->device_memory_limit, 3 << 20);
  EXPECT_EQ(Parse({{"LAZYCL_DEVICE_MEMORY_LIMIT", "512MiB"}})->device_memory_limit, 512 << 20);
  EXPECT_EQ(Parse({{"LAZYCL_DEVICE_MEMORY_LIMIT", "2G"}})->device_memory_limit, int64_t{2} << 30);
  EXPECT_EQ(Parse({{"LAZYCL_DEVICE_MEMORY_LIMIT", "2GiB"}})->device_memory_limit, int64_t{2} << 30);
}

TEST(SettingsTest, MalformedMemoryLimitNamesVariable) {
  for (const char* bad : {"lots", "12Q", "-5", "1.5G", "99999999999999999999G"}) {
    absl::StatusOr<base::Settings> s = Parse({{"LAZYCL_DEVICE_MEMORY_LIMIT", bad}});
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(Message(s.status()).find("LAZYCL_DEVICE_MEMORY_LIMIT"), std::string::npos);
    EXPECT_NE(Message(s.status()).find(bad), std::string::npos);
  }
}

// Regression: LAZYCL_DEVICE_MEMORY_LIMIT=0 silently meant "no limit".
TEST(SettingsTest, ZeroMemoryLimitIsAnError) {
  for (const char* zero : {"0", "0K", "0GiB"}) {
    absl::StatusOr<base::Settings> s = Parse({{"LAZYCL_DEVICE_MEMORY_LIMIT", zero}});
    ASSERT_FALSE(s.ok()) << zero;
    EXPECT_NE(Message(s.status()).find("positive"), std::string::npos) << Message(s.status());
    EXPECT_NE(Message(s.status()).find(zero), std::string::npos);
  }
}

TEST(SettingsTest, PoolLimitIsBytesAndZeroMeansNoPool) {
  EXPECT_FALSE(Parse({})->device_pool_limit.has_value());
  EXPECT_EQ(Parse({{"LAZYCL_DEVICE_POOL_LIMIT", "64M"}})->device_pool_limit, int64_t{64} << 20);
  EXPECT_EQ(Parse({{"LAZYCL_DEVICE_POOL_LIMIT", "1GiB"}})->device_pool_limit, int64_t{1} << 30);
  EXPECT_EQ(Parse({{"LAZYCL_DEVICE_POOL_LIMIT", "0"}})->device_pool_limit, 0);
  for (const char* bad : {"some", "8X", "-1", "0.5G"}) {
    absl::StatusOr<base::Settings> s = Parse({{"LAZYCL_DEVICE_POOL_LIMIT", bad}});
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(Message(s.status()).find("LAZYCL_DEVICE_POOL_LIMIT"), std::string::npos);
    EXPECT_NE(Message(s.status()).find(bad), std::string::npos);
  }
}

TEST(SettingsTest, CacheBounds) {
  const base::Settings defaults = *Parse({});
  EXPECT_EQ(defaults.kernel_cache_max_bytes, base::kDefaultKernelCacheMaxBytes);
  EXPECT_EQ(defaults.program_cache_size, base::kDefaultProgramCacheSize);
  EXPECT_EQ(defaults.graph_cache_size, base::kDefaultGraphCacheSize);
  EXPECT_EQ(Parse({{"LAZYCL_KERNEL_CACHE_MAX_BYTES", "256M"}})->kernel_cache_max_bytes,
            int64_t{256} << 20);
  EXPECT_EQ(Parse({{"LAZYCL_PROGRAM_CACHE_SIZE", "10"}})->program_cache_size, 10);
  EXPECT_EQ(Parse({{"LAZYCL_GRAPH_CACHE_SIZE", "1"}})->graph_cache_size, 1);
  EXPECT_EQ(defaults.constant_cache_bytes, base::kDefaultConstantCacheBytes);
  EXPECT_EQ(Parse({{"LAZYCL_CONSTANT_CACHE_BYTES", "2M"}})->constant_cache_bytes, int64_t{2} << 20);
  EXPECT_EQ(Parse({{"LAZYCL_CONSTANT_CACHE_BYTES", "0"}})->constant_cache_bytes, 0);
  EXPECT_EQ(defaults.max_pending_nodes, base::kDefaultMaxPendingNodes);
  EXPECT_EQ(Parse({{"LAZYCL_MAX_PENDING_NODES", "512"}})->max_pending_nodes, 512);
  EXPECT_EQ(defaults.keep_awake_us, base::kDefaultKeepAwakeUs);
  EXPECT_EQ(Parse({{"LAZYCL_KEEP_AWAKE_US", "0"}})->keep_awake_us, 0);
  EXPECT_EQ(Parse({{"LAZYCL_KEEP_AWAKE_US", "200000"}})->keep_awake_us, 200000);
  EXPECT_EQ(defaults.host_spin_us, base::kDefaultHostSpinUs);
  EXPECT_EQ(Parse({{"LAZYCL_HOST_SPIN_US", "0"}})->host_spin_us, 0);
  EXPECT_EQ(Parse({{"LAZYCL_HOST_SPIN_US", "1000000"}})->host_spin_us, 1000000);
  EXPECT_TRUE(defaults.pin_threads);
  EXPECT_FALSE(Parse({{"LAZYCL_PIN_THREADS", "0"}})->pin_threads);
  EXPECT_TRUE(Parse({{"LAZYCL_PIN_THREADS", "1"}})->pin_threads);
  EXPECT_TRUE(defaults.batch_workers);
  EXPECT_FALSE(Parse({{"LAZYCL_BATCH_WORKERS", "0"}})->batch_workers);
  EXPECT_TRUE(Parse({{"LAZYCL_BATCH_WORKERS", "1"}})->batch_workers);
  for (auto [name, bad] :
       {std::pair{"LAZYCL_KERNEL_CACHE_MAX_BYTES", "0"},
        std::pair{"LAZYCL_KERNEL_CACHE_MAX_BYTES", "lots"},
        std::pair{"LAZYCL_PROGRAM_CACHE_SIZE", "0"}, std::pair{"LAZYCL_PROGRAM_CACHE_SIZE", "-3"},
        std::pair{"LAZYCL_GRAPH_CACHE_SIZE", "many"},
        std::pair{"LAZYCL_CONSTANT_CACHE_BYTES", "-1"},
        std::pair{"LAZYCL_CONSTANT_CACHE_BYTES", "plenty"},
        std::pair{"LAZYCL_MAX_PENDING_NODES", "15"},
        std::pair{"LAZYCL_MAX_PENDING_NODES", "2000000"},
        std::pair{"LAZYCL_MAX_PENDING_NODES", "many"}, std::pair{"LAZYCL_KEEP_AWAKE_US", "-1"},
        std::pair{"LAZYCL_KEEP_AWAKE_US", "1000001"}, std::pair{"LAZYCL_KEEP_AWAKE_US", "5ms"},
        std::pair{"LAZYCL_HOST_SPIN_US", "-5"}, std::pair{"LAZYCL_HOST_SPIN_US", "2000000"},
        std::pair{"LAZYCL_HOST_SPIN_US", "50us"}, std::pair{"LAZYCL_PIN_THREADS", "yes"},
        std::pair{"LAZYCL_PIN_THREADS", "2"}, std::pair{"LAZYCL_BATCH_WORKERS", "yes"}}) {
    absl::StatusOr<base::Settings> s = Parse({{name, bad}});
    ASSERT_FALSE(s.ok()) << name << "=" << bad;
    EXPECT_NE(Message(s.status()).find(name), std::string::npos) << Message(s.status());
    EXPECT_NE(Message(s.status()).find(bad), std::string::npos) << Message(s.status());
  }
}

TEST(SettingsTest, KernelCacheBinary) {
  EXPECT_EQ(Parse({})->kernel_cache_binary, base::KernelCacheBinary::kAuto);
  EXPECT_EQ(Parse({{"LAZYCL_KERNEL_CACHE_BINARY", "object"}})->kernel_cache_binary,
            base::KernelCacheBinary::kObject);
  EXPECT_EQ(Parse({{"LAZYCL_KERNEL_CACHE_BINARY", "Executable"}})->kernel_cache_binary,
            base::KernelCacheBinary::kExecutable);
  absl::StatusOr<base::Settings> s = Parse({{"LAZYCL_KERNEL_CACHE_BINARY", "bitcode"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(Message(s.status()).find("LAZYCL_KERNEL_CACHE_BINARY"), std::string::npos);
  EXPECT_NE(Message(s.status()).find("bitcode"), std::string::npos);
}

TEST(SettingsTest, Codegen) {
  EXPECT_EQ(Parse({{"LAZYCL_CODEGEN", "gpu"}})->codegen, base::CodegenStrategy::kGpu);
  EXPECT_EQ(Parse({{"LAZYCL_CODEGEN", "CPU"}})->codegen, base::CodegenStrategy::kCpu);
  absl::StatusOr<base::Settings> s = Parse({{"LAZYCL_CODEGEN", "fast"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(Message(s.status()).find("LAZYCL_CODEGEN"), std::string::npos);
}

TEST(SettingsTest, EmptyValueMeansDefault) {
  absl::StatusOr<base::Settings> s = Parse({{"LAZYCL_DEBUG", ""}, {"LAZYCL_DEVICE_TYPE", ""}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->debug, 0);
  EXPECT_EQ(s->device_type, base::DeviceTypeFilter::kDefault);
}

}  // namespace
}  // namespace lazycl::backend
