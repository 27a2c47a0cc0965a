#include <cstdio>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/buffer_manager.h"
#include "backend/cl.h"
#include "backend/cl_error.h"
#include "backend/cpu_affinity.h"
#include "backend/device.h"
#include "backend/keep_awake.h"
#include "backend/mapping_budget.h"
#include "backend/opencl_memory.h"
#include "backend/program_cache.h"
#include "backend/thread_policy.h"
#include "base/fault.h"
#include "base/metrics_registry.h"
#include "base/string_view.h"

namespace lazycl::backend {
namespace {

base::DeviceType TypeOf(cl_device_type type) {
  if (type & CL_DEVICE_TYPE_GPU) return base::DeviceType::kGpu;
  if (type & CL_DEVICE_TYPE_CPU) return base::DeviceType::kCpu;
  if (type & CL_DEVICE_TYPE_ACCELERATOR) return base::DeviceType::kAccelerator;
  return base::DeviceType::kOther;
}

// The OpenCL objects behind Enumerate's descriptions, index for index.
struct Discovery {
  std::vector<PlatformDesc> descs;
  std::vector<cl::Platform> platforms;
  std::vector<std::vector<cl::Device>> devices;
};

absl::StatusOr<Discovery> Query() {
  Discovery found;
  cl_int err = cl::Platform::get(&found.platforms);
  if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && found.platforms.empty())) {
    return absl::NotFoundError(
        "no OpenCL platform found: install an OpenCL ICD (for a CPU, the Debian package "
        "pocl-opencl-icd) and check /etc/OpenCL/vendors");
  }
  if (err != CL_SUCCESS) return ClStatus(err, "clGetPlatformIDs");
  for (cl::Platform& platform : found.platforms) {
    PlatformDesc desc;
    desc.name = platform.getInfo<CL_PLATFORM_NAME>();
    desc.vendor = platform.getInfo<CL_PLATFORM_VENDOR>();
    desc.version = platform.getInfo<CL_PLATFORM_VERSION>();
    std::vector<cl::Device> devices;
    err = platform.getDevices(CL_DEVICE_TYPE_ALL, &devices);
    if (err != CL_SUCCESS && err != CL_DEVICE_NOT_FOUND) {
      return ClStatus(err, absl::StrCat("clGetDeviceIDs on platform '", desc.name, "'"));
    }
    for (cl::Device& device : devices) {
      desc.devices.push_back({device.getInfo<CL_DEVICE_NAME>(),
                              TypeOf(device.getInfo<CL_DEVICE_TYPE>()),
                              device.getInfo<CL_DRIVER_VERSION>()});
    }
    found.descs.push_back(std::move(desc));
    found.devices.push_back(std::move(devices));
  }
  return found;
}

// The first query starts PoCL's worker threads, pinned where `pin_threads` says so
// (backend/cpu_affinity.h) and under SCHED_BATCH where `batch_workers` does
// (backend/thread_policy.h); later ones find them running.
absl::StatusOr<Discovery> Discover(bool pin_threads, bool batch_workers) {
  static std::once_flag first_query;
  std::optional<absl::StatusOr<Discovery>> first;
  std::call_once(first_query, [&] {
    const ScopedPoclAffinity affinity(pin_threads);
    const ScopedBatchPolicy policy(batch_workers);
    first = Query();
  });
  return first.has_value() ? *std::move(first) : Query();
}

}  // namespace

// Member order is destruction order in reverse: kernels and buffers go before the queue and
// context they were made from.
struct Device::Impl {
  // A CPU device's cores kept awake between its kernels (null elsewhere, or when turned off):
  // touched by every launch and at the end of every wait (Finish, a read), brief in a wait.
  // First, so that it outlives the OpenClMemory that holds it.
  std::unique_ptr<KeepAwake> keep_awake;
  DeviceInfo info;
  cl::Context context;
  cl::CommandQueue queue;
  cl::Device device;
  std::unique_ptr<BufferManager> buffers;  // over an OpenClMemory
  OpenClMemory* memory = nullptr;          // that one (buffers owns it): Finish reaps its copies
  std::unique_ptr<ProgramCache> programs;
  // Setting a kernel's arguments and enqueueing it is one step: two threads launching the same
  // cl::Kernel must not interleave their clSetKernelArg calls. Lock order: launch_mu, then the
  // BufferManager's (PrepareWrite, Handle), then the metrics registry's.
  std::mutex launch_mu;
  // Profiling (SetProfiling): the events of tagged launches, under launch_mu.
  bool profiling = false;
  std::vector<std::pair<int64_t, cl::Event>> timed;
  // The events of kernels' first launches at a work-group size, under launch_mu: their time,
  // in which PoCL compiles the kernel for that size, is recorded as FirstRunTime once they
  // complete (HarvestFirstRuns). Not in CompileTime: PoCL's compiler serves one build at a time,
  // so a first run may wait for a build the host started meanwhile, which CompileTime counts.
  std::vector<cl::Event> first_runs;
  // The events of launches over a grid new to their kernel (MayCompile), under launch_mu; the
  // completed ones are dropped as later launches and MayCompile look.
  std::vector<cl::Event> new_grids;
  // A PoCL before 4.0, which keeps every kernel it loads mapped: first launches are held to the
  // process's MappingBudget.
  bool keeps_kernels = false;
};

namespace {

// Forgets the events whose commands have completed (or failed); the caller holds launch_mu.
void DropCompleted(std::vector<cl::Event>& events) {
  std::erase_if(events, [](const cl::Event& event) {
    cl_int status = CL_QUEUED;
    return event.getInfo(CL_EVENT_COMMAND_EXECUTION_STATUS, &status) == CL_SUCCESS &&
           status <= CL_COMPLETE;
  });
}

// Records the device time of the first runs that have completed (all of them with `wait`) and
// forgets them; the caller holds launch_mu.
void HarvestFirstRuns(std::vector<cl::Event>& events, bool wait) {
  size_t kept = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    cl::Event& event = events[i];
    cl_int status = CL_QUEUED;
    if (event.getInfo(CL_EVENT_COMMAND_EXECUTION_STATUS, &status) != CL_SUCCESS) continue;
    if (status > CL_COMPLETE && !wait) {  // queued, submitted or running: later
      events[kept++] = std::move(event);
      continue;
    }
    if (status > CL_COMPLETE && event.wait() != CL_SUCCESS) continue;
    if (status < 0) continue;  // failed: nothing ran
    // From submission (its predecessors done) to its end: the compile for this work-group size,
    // which PoCL does between submission and start, and the run.
    cl_ulong start = 0, end = 0;
    if (event.getProfilingInfo(CL_PROFILING_COMMAND_SUBMIT, &start) != CL_SUCCESS ||
        event.getProfilingInfo(CL_PROFILING_COMMAND_END, &end) != CL_SUCCESS || end < start) {
      continue;
    }
    const auto ns = static_cast<int64_t>(end - start);
    base::metrics::Add("FirstRuns", 1);
    base::metrics::RecordTime("FirstRunTime", ns);
  }
  events.resize(kept);
}

}  // namespace

Device::Device(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Device::~Device() {
  // Buffers and kernels still queued must finish before their storage is released.
  if (impl_ != nullptr) impl_->queue.finish();
}

absl::StatusOr<std::vector<PlatformDesc>> Device::Enumerate() {
  const absl::StatusOr<base::Settings>& settings = base::ProcessSettings();
  absl::StatusOr<Discovery> found =
      Discover(!settings.ok() || settings->pin_threads, !settings.ok() || settings->batch_workers);
  if (!found.ok()) return found.status();
  return std::move(found->descs);
}

namespace {

// Builds and loads one small kernel, so that a driver that loads its compiler at the first build
// has loaded it (and registered the compiler's own exit handlers) before the runtime registers the
// exit handlers that join its background builder (runtime/tiering.cpp): those then run first, and
// no build is still inside the compiler when its teardown runs. Seen on an NVIDIA H200 (driver
// 580.159.04): without this, 17 of 20 test processes crashed at exit inside libnvidia-nvvm on the
// builder's thread; with a kernel that stores through a pointer, built and created, none did; an
// empty kernel was not enough (the compiler sets up more at its first real compile), so this one
// also calls a builtin and uses local memory. PoCL links its compiler at load and skips this.
absl::Status LoadCompiler(const cl::Context& context, const cl::Device& device) {
  static constexpr const char* kSource = R"CL(
__kernel void lazycl_load_compiler(__global float* p, __local float* t) {
  t[get_local_id(0)] = exp(p[get_global_id(0)]);
  barrier(CLK_LOCAL_MEM_FENCE);
  p[get_global_id(0)] = t[0] * 2.0f;
}
)CL";
  cl_int err = CL_SUCCESS;
  cl::Program program(context, std::string(kSource), /*build=*/false, &err);
  if (err != CL_SUCCESS) return ClStatus(err, "clCreateProgramWithSource");
  err = program.build({device}, "-w");
  if (err != CL_SUCCESS) {
    cl_int log_err = CL_SUCCESS;
    const std::string log = program.getBuildInfo<CL_PROGRAM_BUILD_LOG>(device, &log_err);
    return absl::InternalError(absl::StrCat("the OpenCL compiler failed on a minimal kernel: ",
                                            base::Sv(ClErrorName(err)), " (", err, ")\n", log));
  }
  cl::Kernel kernel(program, "lazycl_load_compiler", &err);
  if (err != CL_SUCCESS) return ClStatus(err, "clCreateKernel");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Device>> Device::Open(const base::Settings& settings, int index) {
  absl::StatusOr<Discovery> found = Discover(settings.pin_threads, settings.batch_workers);
  if (!found.ok()) return found.status();
  absl::StatusOr<std::vector<DeviceChoice>> choices = SelectDevices(found->descs, settings);
  if (!choices.ok()) return choices.status();
  if (index < 0 || index >= static_cast<int>(choices->size())) {
    return absl::OutOfRangeError(
        absl::StrCat("device index ", index, " is out of range: ", choices->size(),
                     " device(s) selected from\n", DescribePlatforms(found->descs)));
  }
  const DeviceChoice choice = (*choices)[index];

  auto impl = std::make_unique<Impl>();
  impl->device = found->devices[choice.platform][choice.device];
  const cl::Platform& platform = found->platforms[choice.platform];
  DeviceInfo& info = impl->info;
  info.platform_name = platform.getInfo<CL_PLATFORM_NAME>();
  info.platform_version = platform.getInfo<CL_PLATFORM_VERSION>();
  impl->keeps_kernels = PoclKeepsEveryKernel(info.platform_name, info.platform_version);
  info.device_name = impl->device.getInfo<CL_DEVICE_NAME>();
  info.vendor = impl->device.getInfo<CL_DEVICE_VENDOR>();
  info.driver_version = impl->device.getInfo<CL_DRIVER_VERSION>();
  info.opencl_c_version = impl->device.getInfo<CL_DEVICE_OPENCL_C_VERSION>();
  info.type = TypeOf(impl->device.getInfo<CL_DEVICE_TYPE>());
  info.compute_units = static_cast<int>(impl->device.getInfo<CL_DEVICE_MAX_COMPUTE_UNITS>());
  info.global_mem_bytes = static_cast<int64_t>(impl->device.getInfo<CL_DEVICE_GLOBAL_MEM_SIZE>());
  info.max_alloc_bytes = static_cast<int64_t>(impl->device.getInfo<CL_DEVICE_MAX_MEM_ALLOC_SIZE>());
  info.max_param_bytes = static_cast<int64_t>(impl->device.getInfo<CL_DEVICE_MAX_PARAMETER_SIZE>());
  info.max_work_group_size =
      static_cast<int64_t>(impl->device.getInfo<CL_DEVICE_MAX_WORK_GROUP_SIZE>());
  info.local_mem_bytes = static_cast<int64_t>(impl->device.getInfo<CL_DEVICE_LOCAL_MEM_SIZE>());
  info.fp64 = impl->device.getInfo<CL_DEVICE_DOUBLE_FP_CONFIG>() != 0;
  info.preferred_float_width =
      static_cast<int>(impl->device.getInfo<CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT>());
  info.native_float_width =
      static_cast<int>(impl->device.getInfo<CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT>());
  info.global_mem_cache_bytes =
      static_cast<int64_t>(impl->device.getInfo<CL_DEVICE_GLOBAL_MEM_CACHE_SIZE>());
  info.cache_line_bytes =
      static_cast<int64_t>(impl->device.getInfo<CL_DEVICE_GLOBAL_MEM_CACHELINE_SIZE>());

  if (info.type == base::DeviceType::kCpu && settings.keep_awake_us > 0) {
    impl->keep_awake = std::make_unique<KeepAwake>(
        info.compute_units, settings.keep_awake_us * 1000, settings.pin_threads);
  }
  cl_int err = CL_SUCCESS;
  impl->context = cl::Context(impl->device, nullptr, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) return ClStatus(err, "clCreateContext");
  impl->queue = cl::CommandQueue(impl->context, impl->device, CL_QUEUE_PROFILING_ENABLE, &err);
  if (err != CL_SUCCESS) return ClStatus(err, "clCreateCommandQueue");
  if (info.platform_name.find("Portable Computing Language") == std::string::npos) {
    if (absl::Status loaded = LoadCompiler(impl->context, impl->device); !loaded.ok()) {
      return loaded;
    }
  }
  const bool host_pages = info.type == base::DeviceType::kCpu &&
                          impl->device.getInfo<CL_DEVICE_HOST_UNIFIED_MEMORY>() == CL_TRUE;
  auto memory = std::make_unique<OpenClMemory>(
      impl->context, impl->queue, host_pages, settings.host_spin_us * 1000, impl->keep_awake.get());
  impl->memory = memory.get();
  impl->buffers = std::make_unique<BufferManager>(
      std::move(memory),
      BufferLimits{settings.device_memory_limit, info.max_alloc_bytes, info.global_mem_bytes,
                   settings.device_pool_limit.value_or(DefaultPoolLimit(info.global_mem_bytes))});
  absl::StatusOr<CachedBinary> binary =
      CachedBinaryFor(settings.kernel_cache_binary, info.platform_name, info.device_name,
                      impl->device.getInfo<CL_DEVICE_LINKER_AVAILABLE>() == CL_TRUE);
  if (!binary.ok()) return binary.status();
  impl->programs = std::make_unique<ProgramCache>(
      impl->context, impl->device,
      ProgramCacheIdentity{info.platform_name, info.device_name, info.driver_version, *binary,
                           (impl->device.getInfo<CL_DEVICE_SINGLE_FP_CONFIG>() &
                            CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0
                               ? "-cl-fp32-correctly-rounded-divide-sqrt"
                               : ""},
      settings.kernel_cache_dir, settings.debug,
      ProgramCacheLimits{settings.program_cache_size, settings.kernel_cache_max_bytes});
  if (settings.debug >= 1) {
    std::fprintf(stderr, "lazycl: opened %s on %s (driver %s)\n", info.device_name.c_str(),
                 info.platform_name.c_str(), info.driver_version.c_str());
  }
  return std::unique_ptr<Device>(new Device(std::move(impl)));
}

const DeviceInfo& Device::info() const { return impl_->info; }

BufferManager& Device::buffers() { return *impl_->buffers; }

absl::StatusOr<KernelRef> Device::GetKernel(std::string_view source, std::string_view options,
                                            std::string_view name) {
  return impl_->programs->GetKernel(source, options, name);
}

absl::Status Device::PreparePrograms(std::span<const ProgramSource> sources) {
  return impl_->programs->Prepare(sources);
}

bool Device::ProgramsCached(std::span<const ProgramSource> sources) {
  return impl_->programs->Cached(sources);
}

bool Device::CompilesAtFirstLaunch() const {
  return impl_->info.platform_name.find("Portable Computing Language") != std::string::npos;
}

bool Device::ProgramsWarm(std::span<const ProgramSource> sources) {
  return CompilesAtFirstLaunch() ? impl_->programs->Warm(sources)
                                 : impl_->programs->Cached(sources);
}

void Device::MarkProgramsWarm(std::span<const ProgramSource> sources) {
  impl_->programs->MarkWarm(sources);
}

absl::Status Device::Launch(const Kernel* kernel, std::span<const KernelArg> args,
                            std::span<const size_t> global, std::span<const size_t> local,
                            int64_t profile_tag) {
  if (global.empty() || global.size() > 3) {
    return absl::InvalidArgumentError(absl::StrCat("launch of '", kernel->name(),
                                                   "': ", global.size(),
                                                   " global dimensions (expected 1 to 3)"));
  }
  if (!local.empty()) {
    if (local.size() != global.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("launch of '", kernel->name(), "': local size has ", local.size(),
                       " dimensions but global size has ", global.size()));
    }
    for (size_t d = 0; d < global.size(); ++d) {
      if (local[d] == 0 || global[d] % local[d] != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "launch of '", kernel->name(), "': global size [", absl::StrJoin(global, ", "),
            "] is not a multiple of local size [", absl::StrJoin(local, ", "), "]"));
      }
    }
  }
  // Every read is checked before any write is prepared, so a failing launch leaves no buffer
  // marked written.
  for (const KernelArg& arg : args) {
    if (arg.kind == KernelArg::Kind::kBuffer && !arg.written) {
      // A buffer still waiting in its file (a checkpoint's tensor) is read in now, once.
      if (absl::Status s = impl_->buffers->PrepareRead(arg.buffer); !s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat("launch of '", kernel->name(), "': ", s.message()));
      }
    }
  }
  for (const KernelArg& arg : args) {
    if (arg.kind == KernelArg::Kind::kBuffer && arg.written) {
      if (absl::Status s = impl_->buffers->PrepareWrite(arg.buffer); !s.ok()) return s;
    }
  }

  std::lock_guard<std::mutex> lock(impl_->launch_mu);
  if (impl_->keeps_kernels && !kernel->LaunchedWith(local)) {
    if (absl::Status s = MappingBudget::Process().BeforeLoad(kernel->name()); !s.ok()) return s;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const KernelArg& arg = args[i];
    const cl_uint index = static_cast<cl_uint>(i);
    cl_int err = CL_SUCCESS;
    switch (arg.kind) {
      case KernelArg::Kind::kBuffer: {
        const cl_mem mem = OpenClMemory::Mem(impl_->buffers->Handle(arg.buffer));
        err = kernel->SetArg(index, sizeof(cl_mem), &mem);
        break;
      }
      case KernelArg::Kind::kInt32: {
        const cl_int v = static_cast<cl_int>(arg.i);
        err = kernel->SetArg(index, sizeof(v), &v);
        break;
      }
      case KernelArg::Kind::kInt64: {
        const cl_long v = static_cast<cl_long>(arg.i);
        err = kernel->SetArg(index, sizeof(v), &v);
        break;
      }
      case KernelArg::Kind::kFloat32: {
        const cl_float v = static_cast<cl_float>(arg.f);
        err = kernel->SetArg(index, sizeof(v), &v);
        break;
      }
      case KernelArg::Kind::kFloat64: {
        const cl_double v = arg.f;
        err = kernel->SetArg(index, sizeof(v), &v);
        break;
      }
      case KernelArg::Kind::kBytes:
        err = kernel->SetArg(index, arg.size, arg.bytes);
        break;
    }
    if (err != CL_SUCCESS) {
      return ClStatus(err, absl::StrCat("clSetKernelArg('", kernel->name(), "', ", i, ")"));
    }
  }

  auto range = [](std::span<const size_t> sizes) {
    switch (sizes.size()) {
      case 1:
        return cl::NDRange(sizes[0]);
      case 2:
        return cl::NDRange(sizes[0], sizes[1]);
      case 3:
        return cl::NDRange(sizes[0], sizes[1], sizes[2]);
      default:
        return cl::NDRange();
    }
  };
  const cl::NDRange local_range = local.empty() ? cl::NullRange : range(local);
  if (base::fault::ShouldFail(base::fault::Site::kLaunch)) {
    return ClStatus(CL_OUT_OF_RESOURCES, absl::StrCat("clEnqueueNDRangeKernel('", kernel->name(),
                                                      "') (injected fault)"));
  }
  const bool timed = impl_->profiling && profile_tag >= 0;
  const bool first = kernel->FirstLaunchWith(local);
  const bool new_grid = kernel->FirstLaunchAt(global, local);
  if (impl_->keep_awake != nullptr) impl_->keep_awake->Touch();  // before the workers wake
  cl::Event event;
  cl_int err =
      impl_->queue.enqueueNDRangeKernel(kernel->handle(), cl::NullRange, range(global), local_range,
                                        nullptr, timed || first || new_grid ? &event : nullptr);
  if (err != CL_SUCCESS) {
    return ClStatus(err, absl::StrCat("clEnqueueNDRangeKernel('", kernel->name(), "')"));
  }
  if (!impl_->first_runs.empty()) HarvestFirstRuns(impl_->first_runs, /*wait=*/false);
  if (!impl_->new_grids.empty()) DropCompleted(impl_->new_grids);
  if (new_grid) impl_->new_grids.push_back(event);
  if (first) impl_->first_runs.push_back(event);
  if (timed) impl_->timed.emplace_back(profile_tag, std::move(event));
  base::metrics::Add("KernelLaunches", 1);
  return absl::OkStatus();
}

namespace {

// A CL_MEM_ALLOC_HOST_PTR buffer and its mapping; unmapped (and the unmap waited for) on
// destruction, so the driver may release the memory at once.
class MappedHostBuffer final : public PinnedHostMemory {
 public:
  MappedHostBuffer(cl::CommandQueue queue, cl::Buffer buffer, void* data, size_t size)
      : queue_(std::move(queue)), buffer_(std::move(buffer)), data_(data), size_(size) {}
  ~MappedHostBuffer() override {
    cl::Event unmapped;
    if (queue_.enqueueUnmapMemObject(buffer_, data_, nullptr, &unmapped) == CL_SUCCESS) {
      unmapped.wait();
    }
  }
  void* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  cl::CommandQueue queue_;
  cl::Buffer buffer_;
  void* data_;
  size_t size_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PinnedHostMemory>> Device::AllocatePinned(size_t bytes) {
  cl_int err = CL_SUCCESS;
  if (base::fault::ShouldFail(base::fault::Site::kAlloc)) {
    err = CL_MEM_OBJECT_ALLOCATION_FAILURE;
  }
  // OpenCL has no 0-byte buffers: 0 bytes maps one byte and reports size 0.
  const size_t allocated = bytes == 0 ? 1 : bytes;
  cl::Buffer buffer;
  if (err == CL_SUCCESS) {
    buffer = cl::Buffer(impl_->context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, allocated,
                        nullptr, &err);
  }
  void* data = nullptr;
  if (err == CL_SUCCESS) {
    data = impl_->queue.enqueueMapBuffer(buffer, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, allocated,
                                         nullptr, nullptr, &err);
  }
  if (err != CL_SUCCESS) {
    return ClStatus(err, absl::StrCat("allocating ", bytes, " bytes of pinned host memory on '",
                                      impl_->info.device_name,
                                      "' (clCreateBuffer with CL_MEM_ALLOC_HOST_PTR, mapped)"));
  }
  return std::unique_ptr<PinnedHostMemory>(
      new MappedHostBuffer(impl_->queue, std::move(buffer), data, bytes));
}

absl::Status Device::Finish() {
  if (impl_->keep_awake != nullptr) impl_->keep_awake->Waiting();
  absl::Status status = ClStatus(impl_->queue.finish(), "clFinish");
  if (impl_->keep_awake != nullptr) impl_->keep_awake->Touch();  // the host works on
  impl_->memory->ReapStaged();  // every staged upload has run: their copies go now
  std::lock_guard<std::mutex> lock(impl_->launch_mu);
  HarvestFirstRuns(impl_->first_runs, /*wait=*/status.ok());
  if (status.ok()) impl_->new_grids.clear();
  return status;
}

int Device::KeepAwakeThreads() const {
  return impl_->keep_awake != nullptr ? impl_->keep_awake->Threads() : 0;
}

bool Device::MayCompile() {
  if (!CompilesAtFirstLaunch()) return false;
  std::lock_guard<std::mutex> lock(impl_->launch_mu);
  DropCompleted(impl_->new_grids);
  return !impl_->new_grids.empty();
}

void Device::SetProfiling(bool on) {
  std::lock_guard<std::mutex> lock(impl_->launch_mu);
  impl_->profiling = on;
  if (!on) impl_->timed.clear();
}

size_t Device::PendingTimings() {
  std::lock_guard<std::mutex> lock(impl_->launch_mu);
  return impl_->timed.size();
}

absl::StatusOr<std::vector<LaunchTiming>> Device::TakeTimings() {
  std::vector<std::pair<int64_t, cl::Event>> events;
  {
    std::lock_guard<std::mutex> lock(impl_->launch_mu);
    events.swap(impl_->timed);
  }
  std::vector<LaunchTiming> timings;
  timings.reserve(events.size());
  for (auto& [tag, event] : events) {
    LaunchTiming t;
    t.tag = tag;
    cl_int err = event.wait();
    if (err == CL_SUCCESS) err = event.getProfilingInfo(CL_PROFILING_COMMAND_QUEUED, &t.queued_ns);
    if (err == CL_SUCCESS) err = event.getProfilingInfo(CL_PROFILING_COMMAND_SUBMIT, &t.submit_ns);
    if (err == CL_SUCCESS) err = event.getProfilingInfo(CL_PROFILING_COMMAND_START, &t.start_ns);
    if (err == CL_SUCCESS) err = event.getProfilingInfo(CL_PROFILING_COMMAND_END, &t.end_ns);
    if (err != CL_SUCCESS) return ClStatus(err, "reading a kernel's profiling event");
    timings.push_back(t);
  }
  return timings;
}

}  // namespace lazycl::backend
