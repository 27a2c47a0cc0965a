#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace lazycl::base {

enum class DeviceType { kGpu, kCpu, kAccelerator, kOther };
// LAZYCL_DEVICE_TYPE: kDefault prefers a GPU and otherwise takes anything.
enum class DeviceTypeFilter { kDefault, kGpu, kCpu, kAccelerator, kAll };
enum class TransferGuard { kAllow, kLog, kDisallow };
// LAZYCL_CODEGEN: which kernel strategies to emit; kAuto follows the device type.
enum class CodegenStrategy { kAuto, kCpu, kGpu };
// LAZYCL_KERNEL_CACHE_BINARY: what the disk cache stores of a program (backend/program_cache.h);
// kAuto: compiled objects on PoCL, executables elsewhere.
enum class KernelCacheBinary { kAuto, kObject, kExecutable };
// LAZYCL_COMPILE (runtime/tiering.h): kTiered runs a never-seen graph on the generic kernels
// while its fused program builds in the background; kSync builds the fused program first;
// kGeneric runs every graph the generic kernels cover on them (tests compare the tiers).
enum class CompileMode { kTiered, kSync, kGeneric };

inline constexpr int64_t kDefaultKernelCacheMaxBytes = int64_t{1} << 30;  // 1 GiB
inline constexpr int64_t kDefaultProgramCacheSize = 2048;
inline constexpr int64_t kDefaultGraphCacheSize = 4096;
inline constexpr int64_t kDefaultConstantCacheBytes = int64_t{16} << 20;  // 16 MiB
// The automatic cut's bound (ir::MaxPendingNodes). At 1024 a 4-layer char-LM sampling forward
// built op by op (~600 nodes) is one graph, 45 kernels a token instead of 55 (at 512) and
// 10-15% less host time.
inline constexpr int64_t kDefaultMaxPendingNodes = 1024;
// How long a CPU device's cores are kept awake after the last launch (backend/keep_awake.h): off
// by default. With PoCL's workers pinned (LAZYCL_PIN_THREADS), the spinners slowed the loops
// they were meant to speed up: a [1024, 1024] product in a loop kept its 11.3 ms kernel, but the
// gap from one kernel's end to the next one's start grew from ~0.2 to ~2 ms with them (2-core
// Zen 4 EPYC VM, LAZYCL_PROFILE). Over 10 rotated rounds of `lazycl-bench models` there, turning
// them off won 8-10 of 10 rounds on A^T B and A B^T at 1024 and `swiglu_small`, and lost 8 of 10
// on `scalar_read_ms` (0.024 -> 0.045 ms, median); the other rows moved within the VM's noise.
// Since the spin loop yields (keep_awake.h), the gaps are as short with them as without; over 10
// more rotated rounds, 5000 against 0 won no row clearly (`scalar_read_ms` 0.95x in 4 of 10,
// the traced sampling token 0.83x in 2 of 10, matmul rows 1.00-1.05x), so they stay off.
// 5000 (5 ms) is the value that served latency-bound loops (a `loss.item()` every few kernels).
inline constexpr int64_t kDefaultKeepAwakeUs = 0;
// How long a host thread that reads a result polls for it before it sleeps
// (backend/event_wait.h): longer than a small read takes from its enqueue (~10-20 us on PoCL).
inline constexpr int64_t kDefaultHostSpinUs = 50;

// Every LAZYCL_* environment variable, parsed once into one struct (README has the table).
// Components take the Settings they need by value, so tests can build their own.
struct Settings {
  std::string platform;  // LAZYCL_PLATFORM: index or case-insensitive substring; "" = any
  std::string device;    // LAZYCL_DEVICE: index or case-insensitive substring; "" = first
  DeviceTypeFilter device_type = DeviceTypeFilter::kDefault;  // LAZYCL_DEVICE_TYPE
  std::string kernel_cache_dir;  // LAZYCL_KERNEL_CACHE_DIR, resolved; "" = disk cache off
  // LAZYCL_KERNEL_CACHE_MAX_BYTES (K/M/G suffix): the disk cache's bound; past it, the entries
  // used longest ago are deleted.
  int64_t kernel_cache_max_bytes = kDefaultKernelCacheMaxBytes;
  KernelCacheBinary kernel_cache_binary = KernelCacheBinary::kAuto;  // LAZYCL_KERNEL_CACHE_BINARY
  // LAZYCL_PROGRAM_CACHE_SIZE: OpenCL programs each device keeps built in memory (least recently
  // used past it are released; a kernel still in use stays alive until its last user goes).
  int64_t program_cache_size = kDefaultProgramCacheSize;
  // LAZYCL_GRAPH_CACHE_SIZE: lowered graphs (plans) each device keeps.
  int64_t graph_cache_size = kDefaultGraphCacheSize;
  // LAZYCL_CONSTANT_CACHE_BYTES (K/M/G suffix): folded constants (runtime/constant_fold.h) kept
  // per process; 0 turns constant folding off.
  int64_t constant_cache_bytes = kDefaultConstantCacheBytes;
  // LAZYCL_MAX_PENDING_NODES: a pending graph grown past this many nodes outside a trace is
  // computed at once (the automatic cut), from 16 to 2^20.
  int64_t max_pending_nodes = kDefaultMaxPendingNodes;
  // LAZYCL_KEEP_AWAKE_US: on a CPU device, idle-priority threads keep its cores awake for this
  // long after each launch (backend/keep_awake.h); 0 (the default) turns them off. 0 to 10^6.
  int64_t keep_awake_us = kDefaultKeepAwakeUs;
  // LAZYCL_HOST_SPIN_US: a thread that reads a result from a device polls for it this long
  // before it sleeps (backend/event_wait.h); 0 sleeps at once. 0 to 10^6.
  int64_t host_spin_us = kDefaultHostSpinUs;
  // LAZYCL_PIN_THREADS: on a CPU device whose process may run on every online CPU, PoCL's worker
  // i and keep-awake thread i run on CPU i only (backend/cpu_affinity.h). 0 or 1.
  bool pin_threads = true;
  // LAZYCL_BATCH_WORKERS: on a CPU device, PoCL's workers run under SCHED_BATCH, so that a worker
  // woken by an enqueue does not preempt the host thread on its CPU (backend/thread_policy.h).
  // 0 or 1.
  bool batch_workers = true;
  int debug = 0;         // LAZYCL_DEBUG: 0..3
  bool profile = false;  // LAZYCL_PROFILE: 0 or 1; 1 times every kernel, prints a table at exit
  std::string dump_dir;  // LAZYCL_DUMP_DIR: "" = no dumps
  TransferGuard transfer_guard = TransferGuard::kAllow;  // LAZYCL_TRANSFER_GUARD
  int64_t device_memory_limit = 0;  // LAZYCL_DEVICE_MEMORY_LIMIT in bytes (K/M/G suffix); 0 = none
  // LAZYCL_DEVICE_POOL_LIMIT in bytes (K/M/G suffix): the most free device memory a device keeps
  // pooled for reuse; 0 pools nothing. Unset: kDefaultPoolLimit of the device (backend/device.h).
  std::optional<int64_t> device_pool_limit;
  CodegenStrategy codegen = CodegenStrategy::kAuto;  // LAZYCL_CODEGEN: auto, cpu or gpu
  CompileMode compile = CompileMode::kTiered;        // LAZYCL_COMPILE: tiered, sync or generic
};

// Looks up one environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// Parses the LAZYCL_* variables. A malformed value is InvalidArgument naming the variable, the
// value and what was expected. HOME and XDG_CACHE_HOME are read to resolve the default cache.
absl::StatusOr<Settings> ParseSettings(const EnvLookup& lookup);

// The process's settings, read from the real environment on first use and never again.
const absl::StatusOr<Settings>& ProcessSettings();

// ProcessSettings() for code that reports to the user: a malformed variable throws
// lazycl::Error on every call.
const Settings& CurrentSettings();

std::string_view DeviceTypeName(DeviceType type);

}  // namespace lazycl::base
