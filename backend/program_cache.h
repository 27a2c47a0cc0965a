#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "backend/cl.h"
#include "backend/device.h"
#include "backend/program_bundle.h"
#include "base/settings.h"

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

  // Whether this is the kernel's first launch with local size `local` (empty: the driver's
  // choice), noting it. PoCL compiles a kernel for each work-group size at its first launch with
  // it. Called under the launching Device's launch mutex.
  bool FirstLaunchWith(std::span<const size_t> local) const {
    if (LaunchedWith(local)) return false;
    launched_locals_.emplace_back(local.begin(), local.end());
    return true;
  }
  // Whether this is the kernel's first launch over this grid (global and local size), noting it.
  // PoCL may specialise a kernel's work-group function for a grid, compiling at the launch's
  // run; after kMaxGrids grids every new one counts as first without being noted. Under the
  // launch mutex.
  bool FirstLaunchAt(std::span<const size_t> global, std::span<const size_t> local) const {
    // A grid is kept as global's sizes, then local's; global's count tells them apart. Compared
    // in place: no allocation on the launch path once a grid is known.
    for (const std::vector<size_t>& seen : launched_grids_) {
      if (seen.size() == global.size() + local.size() + 1 && seen[0] == global.size() &&
          std::equal(global.begin(), global.end(), seen.begin() + 1) &&
          std::equal(local.begin(), local.end(), seen.begin() + 1 + global.size())) {
        return false;
      }
    }
    if (launched_grids_.size() < kMaxGrids) {
      std::vector<size_t> grid = {global.size()};
      grid.insert(grid.end(), global.begin(), global.end());
      grid.insert(grid.end(), local.begin(), local.end());
      launched_grids_.push_back(std::move(grid));
    }
    return true;
  }
  // Sets argument `index` to the `size` bytes at `value` (a handle, a scalar or a struct)
  // unless the last call set it to the same bytes: OpenCL keeps a kernel's arguments between
  // launches, and a cached graph run again passes mostly the same weights and scalars, where
  // clSetKernelArg costs PoCL ~160 instructions each. Under the launch mutex.
  cl_int SetArg(cl_uint index, size_t size, const void* value) const {
    if (index >= set_args_.size()) set_args_.resize(index + 1);
    std::string& last = set_args_[index];
    if (value != nullptr && last.size() == size && size > 0 &&
        std::memcmp(last.data(), value, size) == 0) {
      return CL_SUCCESS;
    }
    last.clear();  // unknown until the call succeeds
    const cl_int err = kernel_.setArg(index, size, value);
    if (err == CL_SUCCESS && value != nullptr) last.assign(static_cast<const char*>(value), size);
    return err;
  }
  // Whether it has been launched with local size `local`; under the launch mutex too.
  bool LaunchedWith(std::span<const size_t> local) const {
    for (const std::vector<size_t>& seen : launched_locals_) {
      if (std::equal(seen.begin(), seen.end(), local.begin(), local.end())) return true;
    }
    return false;
  }

 private:
  mutable cl::Kernel kernel_;
  std::string name_;
  mutable std::vector<std::vector<size_t>> launched_locals_;  // guarded by the launch mutex
  static constexpr size_t kMaxGrids = 64;
  mutable std::vector<std::vector<size_t>> launched_grids_;  // guarded by the launch mutex
  // The bytes each argument was last set to, by index (empty: not known); guarded by the launch
  // mutex.
  mutable std::vector<std::string> set_args_;
};

// What the disk cache stores for a program: the executable (clBuildProgram, then
// CL_PROGRAM_BINARIES), or the compiled object (clCompileProgram, its binary, clLinkProgram),
// which a later process links. PoCL answers CL_PROGRAM_BINARIES of an executable by compiling a
// generic work-group function for every kernel of the program (~60 ms each, more for a matmul)
// that no launch uses (a launch compiles one specialised for its local size): the char-LM
// example's first step from empty caches took 23.5 s with executables, 11.2 s with objects. A
// process that links objects pays once for PoCL loading its builtin library (~330 ms) and ~2-10
// ms per program, where loading an executable costs ~1 ms and nothing once.
enum class CachedBinary { kExecutable, kCompiledObject };

// The strings that make a device binary reusable; all of them go into the disk-cache key.
struct ProgramCacheIdentity {
  std::string platform_name;
  std::string device_name;
  std::string driver_version;
  CachedBinary binary = CachedBinary::kExecutable;
  // Build options every program of the device gets, before its own (part of the cache key):
  // "-cl-fp32-correctly-rounded-divide-sqrt" where the device offers it, so that f32 division
  // and sqrt round as the host's do (NVIDIA's default division is not correctly rounded).
  std::string device_options;
};

// What LAZYCL_KERNEL_CACHE_BINARY asks for on this device: kAuto is kCompiledObject on PoCL
// platforms whose device has a linker, else kExecutable. kObject on a device without a linker is
// InvalidArgument naming the device.
absl::StatusOr<CachedBinary> CachedBinaryFor(base::KernelCacheBinary setting,
                                             std::string_view platform_name,
                                             std::string_view device_name, bool linker_available);

// A kernel stays valid while a reference lives, even after its program leaves the cache.
using KernelRef = std::shared_ptr<const Kernel>;

// The bounds of a ProgramCache (LAZYCL_PROGRAM_CACHE_SIZE, LAZYCL_KERNEL_CACHE_MAX_BYTES).
struct ProgramCacheLimits {
  int64_t programs = 2048;                // built programs kept in memory
  int64_t disk_bytes = int64_t{1} << 30;  // the disk cache directory's entries
};

// Thread-safe: GetKernel holds the cache's mutex (taken under a Device's launch mutex, never the
// other way round), building or loading at most once per program while it stays cached; a build
// runs with the mutex released (another thread asking for the same program waits for it). Past
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

  // Makes the programs of `sources` ready for GetKernel: those in memory stay, those in the disk
  // cache are loaded, and the rest are built together, one program per set of non -D options
  // (program_bundle.h: one compiler run instead of one per program). The disk cache then holds
  // the bundle once and, under each member's own key, an alias naming it.
  absl::Status Prepare(std::span<const ProgramSource> sources);

  // Whether every program of `sources` is in memory or has an entry in the disk cache (not yet
  // checked: a corrupt entry is found out, and rebuilt, by Prepare).
  bool Cached(std::span<const ProgramSource> sources);

  // Whether every program of `sources` is Cached and marked warm (MarkWarm) in the disk cache.
  bool Warm(std::span<const ProgramSource> sources);
  // Notes in the disk cache that the kernels of `sources` were launched once at every
  // work-group size their users take, so that a driver that compiles kernels at their first
  // launch (PoCL) holds them compiled in its own cache. Nothing without a disk cache.
  void MarkWarm(std::span<const ProgramSource> sources);

  // Programs held in memory now.
  size_t size();

  // The disk-cache file that holds (source, options) on this device; "" without a disk cache.
  std::string CachePath(std::string_view source, std::string_view options) const;
  // The disk-cache file of the program whose key hashes to `hash`; "" without a disk cache.
  std::string EntryPath(std::string_view hash) const;

 private:
  struct Program {
    cl::Program program;
    std::string hash;  // hex, names the program in messages and the cache file
    absl::flat_hash_map<std::string, KernelRef> kernels;  // by entry point (with suffix)
    uint64_t last_use = 0;                                // use_clock_ at the latest GetKernel
    std::vector<std::string> members;                     // keys in members_ that name this program
  };
  // Where the program of one (source, options) lives: its entry points are its names plus
  // `suffix` ("" for a program built alone).
  struct Member {
    Program* program = nullptr;
    std::string suffix;
  };
  // A disk-cache entry whose format, length and checksum were checked.
  struct Entry {
    bool alias = false;
    std::string path;
    std::string key;
    std::string payload;  // a binary, or an alias's bundle hash
  };

  static std::string MemberKey(std::string_view source, std::string_view options);
  static std::string MemberSuffix(const std::string& member_key);
  std::string KeyText(std::string_view source, std::string_view options) const;
  // identity_.device_options, then `options`.
  std::string WithDeviceOptions(std::string_view options) const;

  // With `lock` held on mu_; a build releases it while the compiler runs.
  absl::Status EnsureLocked(std::unique_lock<std::mutex>& lock,
                            std::span<const ProgramSource> sources);
  // Builds `group` (sharing their non -D options) as one program, or alone when it is one.
  absl::Status BuildLocked(std::unique_lock<std::mutex>& lock, std::span<const ProgramSource> group,
                           std::span<const std::string> member_keys);
  // Registers the member from the disk cache; false (not an error) when it is not there or
  // unusable (an unusable entry is deleted so the rebuilt program replaces it).
  bool LoadMemberLocked(const ProgramSource& member, const std::string& member_key);
  void AddMemberLocked(const std::string& member_key, Program* program, std::string suffix);
  // Releases the programs used longest ago until at most limits_.programs remain.
  void EvictLocked();

  // The executable program of `source`, and (kCompiledObject) the compiled object it was linked
  // from, whose binary the disk cache stores.
  struct Built {
    cl::Program executable;
    cl::Program object;
  };
  absl::StatusOr<Built> BuildFromSource(std::string_view source, std::string_view options,
                                        const std::string& hash);
  // Without mu_ held: the executable program of `source` (a bundle of `group` when it has more
  // than one member), built and saved to the disk cache under the cross-process build lock of
  // its hash, or loaded from the disk cache when another process saved it while this one waited
  // for that lock.
  absl::StatusOr<cl::Program> BuildOrLoadUnlocked(std::string_view source, std::string_view options,
                                                  const std::string& key, const std::string& hash,
                                                  std::span<const ProgramSource> group);
  // Links the compiled object `object` into an executable for device_.
  absl::StatusOr<cl::Program> Link(const cl::Program& object, const std::string& hash);

  std::optional<Entry> ReadCacheEntry(const std::string& path);
  void Reject(const std::string& path, std::string_view why);
  // The executable program of a read entry; nullopt when it does not load (the entry is then
  // deleted). Touches no member of the cache but the disk, so mu_ need not be held.
  std::optional<cl::Program> LoadBinary(const std::string& path, const Entry& entry,
                                        std::string_view options, const std::string& hash);
  // The program of a read entry, added to programs_ under `hash`; nullptr when it does not load.
  Program* LoadProgram(const std::string& path, const Entry& entry, std::string_view options,
                       const std::string& hash);
  bool WriteEntry(const std::string& path, const char (&magic)[8], std::string_view key,
                  std::string_view payload);
  bool SaveToDisk(const std::string& path, const std::string& key, const cl::Program& program);
  void TrimDisk();

  cl::Context context_;
  cl::Device device_;
  ProgramCacheIdentity identity_;
  std::string cache_dir_;
  int debug_;
  ProgramCacheLimits limits_;
  std::mutex mu_;  // guards programs_, members_, use_clock_, building_ and each Program's kernels
  // Programs (by hash) some thread is building with mu_ released; built_cv_ says when one ends.
  absl::flat_hash_set<std::string> building_;
  std::condition_variable built_cv_;
  uint64_t use_clock_ = 0;
  absl::flat_hash_map<std::string, std::unique_ptr<Program>> programs_;  // by Program::hash
  absl::flat_hash_map<std::string, Member> members_;                     // by MemberKey
};

}  // namespace lazycl::backend
