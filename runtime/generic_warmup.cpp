#include "runtime/generic_warmup.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/device.h"
#include "kernels/generic_library.h"
#include "kernels/lower_generic.h"
#include "runtime/devices.h"
#include "runtime/executor.h"
#include "runtime/storage.h"

namespace lazycl::runtime {
namespace {

// Work-groups of the warm-up's launch over a grid (every work-item returns at once).
constexpr size_t kWarmupGroups = 4096;

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

absl::StatusOr<WarmupReport> WarmGenericKernels(int device_index) {
  backend::Device& device = OpenClDevice(device_index);
  kernels::Target target;
  target.cpu = UsesCpuStrategy(device);
  target.fp64 = device.info().fp64;
  const kernels::GenericLibrary& library = kernels::GenericLibraryFor(target.cpu, target.fp64);
  std::vector<kernels::KernelSpec> matmuls;
  for (DType d : {DType::f32, DType::i32, DType::i64, DType::f64}) {
    if (d != DType::f64 || target.fp64) matmuls.push_back(kernels::GenericMatmulKernel(d, target));
  }
  std::vector<backend::ProgramSource> sources = {{library.source, ""}};
  for (const kernels::KernelSpec& m : matmuls) sources.push_back({m.source, m.options});

  WarmupReport report;
  auto start = std::chrono::steady_clock::now();
  if (absl::Status s = device.PreparePrograms(sources); !s.ok()) return s;
  report.build_ms = MsSince(start);

  // Every buffer parameter is bound to one small buffer, every number to 0: n = 0 (and a
  // matmul's M = N = K = 0) returns before any access.
  const Device where = Device::opencl(device_index);
  ir::Storage scratch(where, &device.buffers(), 64, "warm-up scratch");
  // PoCL compiles a kernel for one work-group alone apart from one for a grid of many: both.
  auto launch_both = [&](const backend::KernelRef& kernel,
                         const std::vector<backend::KernelArg>& args,
                         const std::vector<size_t>& local) -> absl::Status {
    for (const size_t groups : {size_t{1}, kWarmupGroups}) {
      std::vector<size_t> global = local;
      global[0] *= groups;
      if (absl::Status s = device.Launch(kernel, args, global, local); !s.ok()) return s;
    }
    ++report.kernels;
    return absl::OkStatus();
  };
  start = std::chrono::steady_clock::now();
  for (const auto& [name, signature] : library.kernels) {
    absl::StatusOr<backend::KernelRef> kernel = device.GetKernel(library.source, "", name);
    if (!kernel.ok()) return kernel.status();
    std::vector<backend::KernelArg> args;
    for (char c : signature) {
      switch (c) {
        case 'b':
          args.push_back(backend::KernelArg::Write(scratch.id()));
          break;
        case 'l':
          args.push_back(backend::KernelArg::Int64(0));
          break;
        case 'i':
          args.push_back(backend::KernelArg::Int32(0));
          break;
        case 'f':
          args.push_back(backend::KernelArg::Float32(0));
          break;
        case 'd':
          args.push_back(backend::KernelArg::Float64(0));
          break;
        default:
          return absl::InternalError(
              absl::StrCat("generic kernel ", name, " has a parameter of unknown kind"));
      }
    }
    if (absl::Status s = launch_both(*kernel, args, {kernels::kGenericLocal}); !s.ok()) return s;
  }
  for (const kernels::KernelSpec& m : matmuls) {
    const kernels::Launch& launch = m.launches.front();
    absl::StatusOr<backend::KernelRef> kernel = device.GetKernel(m.source, m.options, launch.name);
    if (!kernel.ok()) return kernel.status();
    std::vector<backend::KernelArg> args;
    size_t fields = 0;
    for (const kernels::KernelArgSpec& a : m.args) fields = std::max(fields, a.fields.size());
    const std::vector<int64_t> zeros(fields, 0);  // every packed argument's fields
    for (const kernels::KernelArgSpec& a : m.args) {
      if (a.kind == kernels::KernelArgSpec::Kind::kPack) {
        args.push_back(backend::KernelArg::Bytes(zeros.data(), a.fields.size() * sizeof(int64_t)));
        continue;
      }
      args.push_back(a.kind == kernels::KernelArgSpec::Kind::kBuffer
                         ? backend::KernelArg::Write(scratch.id())
                         : backend::KernelArg::Int64(0));
    }
    if (absl::Status s = launch_both(*kernel, args, launch.local); !s.ok()) return s;
  }
  if (absl::Status s = device.Finish(); !s.ok()) return s;
  report.launch_ms = MsSince(start);
  device.MarkProgramsWarm(sources);
  return report;
}

}  // namespace lazycl::runtime
