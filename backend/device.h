#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/buffer_manager.h"
#include "backend/device_select.h"
#include "backend/program_bundle.h"
#include "base/settings.h"

// One OpenCL device: its context and in-order queue, its buffers, its program cache and kernel
// launches. This header is free of OpenCL types; the OpenCL C++ bindings stay in backend/*.cpp.
namespace lazycl::backend {

struct DeviceInfo {
  std::string platform_name;
  std::string platform_version;
  std::string device_name;
  std::string vendor;
  std::string driver_version;
  std::string opencl_c_version;
  base::DeviceType type = base::DeviceType::kOther;
  int compute_units = 0;
  int64_t global_mem_bytes = 0;
  int64_t max_alloc_bytes = 0;
  int64_t max_param_bytes = 0;  // CL_DEVICE_MAX_PARAMETER_SIZE (1024 on PoCL)
  int64_t max_work_group_size = 0;
  int64_t local_mem_bytes = 0;
  bool fp64 = false;
  // SIMD width and caches, for kernels that block for them (the matmul tuner): floats per
  // vector (CL_DEVICE_PREFERRED/NATIVE_VECTOR_WIDTH_FLOAT; PoCL reports the host's SIMD width)
  // and CL_DEVICE_GLOBAL_MEM_CACHE_SIZE / CACHELINE_SIZE (0 where not reported).
  int preferred_float_width = 0;
  int native_float_width = 0;
  int64_t global_mem_cache_bytes = 0;
  int64_t cache_line_bytes = 0;
};

// One argument of a kernel launch.
struct KernelArg {
  // kBytes: `size` bytes at `bytes` (a struct passed by value; the caller keeps them alive
  // until Launch returns).
  enum class Kind { kBuffer, kInt32, kInt64, kFloat32, kFloat64, kBytes };
  Kind kind = Kind::kInt32;
  BufferId buffer = 0;
  bool written = false;  // for buffers: the kernel writes it (storage is obtained first)
  int64_t i = 0;
  double f = 0;  // kFloat32 (exactly a float) and kFloat64
  const void* bytes = nullptr;
  size_t size = 0;

  static KernelArg Read(BufferId id) { return {Kind::kBuffer, id, false, 0, 0}; }
  static KernelArg Write(BufferId id) { return {Kind::kBuffer, id, true, 0, 0}; }
  static KernelArg Int32(int32_t v) { return {Kind::kInt32, 0, false, v, 0}; }
  static KernelArg Int64(int64_t v) { return {Kind::kInt64, 0, false, v, 0}; }
  static KernelArg Float32(float v) { return {Kind::kFloat32, 0, false, 0, v}; }
  static KernelArg Float64(double v) { return {Kind::kFloat64, 0, false, 0, v}; }
  static KernelArg Bytes(const void* p, size_t n) { return {Kind::kBytes, 0, false, 0, 0, p, n}; }
};

// The device time of one profiled launch (Device::SetProfiling), from its OpenCL event.
struct LaunchTiming {
  int64_t tag = 0;         // as given to Launch
  uint64_t queued_ns = 0;  // CL_PROFILING_COMMAND_QUEUED
  // CL_PROFILING_COMMAND_SUBMIT: PoCL submits a command once the commands before it have
  // finished, then compiles the kernel for its work-group size if this is the first launch with
  // it, then starts it.
  uint64_t submit_ns = 0;
  uint64_t start_ns = 0;  // CL_PROFILING_COMMAND_START
  uint64_t end_ns = 0;    // CL_PROFILING_COMMAND_END
};

// Host memory that a device copies to and from directly (Device::AllocatePinned): the driver's
// own allocation (CL_MEM_ALLOC_HOST_PTR), mapped for the object's life. On a discrete GPU it is
// page-locked, so reads and writes of device buffers into it need no staging copy inside the
// driver. Must not outlive its Device (devices live until exit: runtime/devices.h).
class PinnedHostMemory {
 public:
  virtual ~PinnedHostMemory() = default;
  virtual void* data() const = 0;
  virtual size_t size() const = 0;
};

// A compiled kernel, owned by its Device's program cache; valid as long as the Device.
class Kernel;
using KernelRef = std::shared_ptr<const Kernel>;  // program_cache.h

class Device {
 public:
  // Lists every OpenCL platform and device. No platform at all is NotFound (with a hint about
  // installing an ICD such as pocl-opencl-icd).
  static absl::StatusOr<std::vector<PlatformDesc>> Enumerate();

  // Opens candidate `index` of SelectDevices(Enumerate(), settings): a context and an in-order
  // queue with profiling enabled, a buffer manager honouring settings.device_memory_limit, the
  // device's global memory and the pool bound (settings.device_pool_limit, else
  // DefaultPoolLimit), and a program cache on settings.kernel_cache_dir.
  static absl::StatusOr<std::unique_ptr<Device>> Open(const base::Settings& settings,
                                                      int index = 0);

  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const;
  BufferManager& buffers();

  // Builds `source` with `options` (or finds it in the memory or disk cache) and returns its
  // kernel `name`. A build failure is InvalidArgument carrying the build log and the source.
  absl::StatusOr<KernelRef> GetKernel(std::string_view source, std::string_view options,
                                      std::string_view name);

  // Builds (or finds) the programs of `sources` together, so that a graph's new kernels cost one
  // compiler run (ProgramCache::Prepare); GetKernel then finds them.
  absl::Status PreparePrograms(std::span<const ProgramSource> sources);
  // Whether PreparePrograms(sources) would find every program built or in the disk cache (so it
  // would not run the compiler, unless an entry turns out corrupt).
  bool ProgramsCached(std::span<const ProgramSource> sources);
  // Whether this device's driver compiles each kernel at its first launch with a work-group size
  // (PoCL; its own disk cache keeps them) rather than when the program is built.
  bool CompilesAtFirstLaunch() const;
  // Whether the kernels of `sources` would run without compiling anything: ProgramsCached and,
  // where the driver compiles at first launch, launched once before (MarkProgramsWarm) on this
  // machine's caches.
  bool ProgramsWarm(std::span<const ProgramSource> sources);
  void MarkProgramsWarm(std::span<const ProgramSource> sources);

  // Enqueues one launch without waiting. `local` empty lets the runtime choose; otherwise each
  // global size must be a multiple of its local size. Written buffers get storage first; read
  // buffers must hold data (FailedPrecondition naming the buffer otherwise); a read buffer whose
  // bytes still wait in a file (BufferManager::Load) is read in first.
  // While profiling is on, a launch with `profile_tag` >= 0 keeps its event for TakeTimings.
  absl::Status Launch(const Kernel* kernel, std::span<const KernelArg> args,
                      std::span<const size_t> global, std::span<const size_t> local = {},
                      int64_t profile_tag = -1);
  absl::Status Launch(const KernelRef& kernel, std::span<const KernelArg> args,
                      std::span<const size_t> global, std::span<const size_t> local = {}) {
    return Launch(kernel.get(), args, global, local);
  }

  // Turns keeping the events of tagged launches on or off (off drops the ones not taken).
  void SetProfiling(bool on);
  // How many tagged launches wait to be taken.
  size_t PendingTimings();
  // Waits for every tagged launch kept so far and returns their times, in launch order; the
  // kept events are released either way.
  absl::StatusOr<std::vector<LaunchTiming>> TakeTimings();

  // `bytes` (0 allowed) of pinned host memory (PinnedHostMemory above); ResourceExhausted when
  // the driver has none to give.
  absl::StatusOr<std::unique_ptr<PinnedHostMemory>> AllocatePinned(size_t bytes);

  // Waits for everything enqueued.
  absl::Status Finish();

  // Whether a launch over a grid its kernel had not run over before may still be queued or
  // running. PoCL compiles a kernel for a new work-group size (and may specialise it for a new
  // grid) when the launch runs, and LLVM creates static objects as it compiles that exit()
  // destroys before any handler lazycl registered: work left queued while a process exits is
  // safe only when this is false (runtime/step_loop.cpp).
  bool MayCompile();

  // The idle-priority threads keeping a CPU device's cores awake between its kernels
  // (backend/keep_awake.h, LAZYCL_KEEP_AWAKE_US): 0 on other devices, when turned off, before
  // the first launch, or where the threads cannot lower their priority.
  int KeepAwakeThreads() const;

 private:
  struct Impl;
  explicit Device(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace lazycl::backend
