#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "backend/cl.h"
#include "backend/device.h"

// Building OpenCL C into kernels for one device, with a memory cache and an on-disk binary cache
// (internal to backend/).
namespace lazycl::backend {

// A kernel object owned by its ProgramCache entry. Setting arguments mutates the cl::Kernel, so
// it is mutable; Device::Launch sets them and enqueues under the device's launch mutex.
class Kernel {
 public:
  Kernel(cl::Kernel kernel, std::string name)
      : kernel_(std::move(kernel)), name_(std::move(name)) {}
  cl::Kernel& handle() const { return kernel_; }
  const std::string& name() const { return name_; }

 private:
  mutable cl::Kernel kernel_;
  std::string name_;
};

// The strings that make a device binary reusable; all of them go into the disk-cache key.
struct ProgramCacheIdentity {
  std::string platform_name;
  std::string device_name;
  std::string driver_version;
};

// A kernel stays valid while a reference lives, even after its program leaves the cache.
using KernelRef = std::shared_ptr<const Kernel>;

// The bounds of a ProgramCache (LAZYCL_PROGRAM_CACHE_SIZE, LAZYCL_KERNEL_CACHE_MAX_BYTES).
struct ProgramCacheLimits {
  int64_t programs = 2048;                // built programs kept in memory
  int64_t disk_bytes = int64_t{1} << 30;  // the disk cache directory's entries
};

// Thread-safe: GetKernel holds the cache's mutex (taken under a Device's launch mutex, never the
// other way round), building or loading at most once per program while it stays cached. Past
// `limits.programs`, the program used longest ago is released (ProgramCacheEvictions); past
// `limits.disk_bytes`, a save trims the disk cache (disk_cache_trim.h).
class ProgramCache {
 public:
  // `cache_dir` empty disables the disk cache. `debug` is LAZYCL_DEBUG.
  ProgramCache(cl::Context context, cl::Device device, ProgramCacheIdentity identity,
               std::string cache_dir, int debug, ProgramCacheLimits limits = {});

  // The kernel `name` of `source` built with `options`; built at most once per process while
  // cached and, with a disk cache, loaded from it in later processes.
  absl::StatusOr<KernelRef> GetKernel(std::string_view source, std::string_view options,
                                      std::string_view name);

  // Programs held in memory now.
  size_t size();

  // The disk-cache file that holds (source, options) on this device; "" without a disk cache.
  std::string CachePath(std::string_view source, std::string_view options) const;

 private:
  struct Program {
    cl::Program program;
    std::string hash;  // hex, names the program in messages and the cache file
    absl::flat_hash_map<std::string, KernelRef> kernels;
    uint64_t last_use = 0;  // use_clock_ at the latest GetKernel
  };
  // Releases the programs used longest ago until at most limits_.programs remain.
  void EvictLocked();

  std::string KeyText(std::string_view source, std::string_view options) const;
  absl::StatusOr<cl::Program> BuildFromSource(std::string_view source, std::string_view options,
                                              const std::string& hash);
  // False (not an error) when the entry is missing or unusable; an unusable entry is deleted so
  // the rebuilt program replaces it.
  bool LoadFromDisk(const std::string& path, const std::string& key, std::string_view options,
                    const std::string& hash, cl::Program* program);
  void SaveToDisk(const std::string& path, const std::string& key, const cl::Program& program);

  cl::Context context_;
  cl::Device device_;
  ProgramCacheIdentity identity_;
  std::string cache_dir_;
  int debug_;
  ProgramCacheLimits limits_;
  std::mutex mu_;  // guards programs_, use_clock_ and each Program's kernels
  uint64_t use_clock_ = 0;
  // Keyed by options + '\0' + source.
  absl::flat_hash_map<std::string, std::unique_ptr<Program>> programs_;
};

}  // namespace lazycl::backend
