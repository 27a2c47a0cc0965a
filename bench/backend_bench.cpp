// lazycl-bench backend: costs of the backend alone, below any graph: a cold program build, a
// load from lazycl's disk cache, and host<->device copies of 64 MiB.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/device.h"
#include "base/settings.h"
#include "bench/commands.h"
#include "bench/timing.h"
#include "lazycl/metrics.h"

namespace lazycl::bench {
namespace {

using backend::BufferId;
using backend::Device;

absl::StatusOr<std::unique_ptr<Device>> OpenWithCache(const std::string& cache_dir) {
  const absl::StatusOr<base::Settings>& process = base::ProcessSettings();
  if (!process.ok()) return process.status();
  base::Settings settings = *process;
  settings.kernel_cache_dir = cache_dir;
  return Device::Open(settings);
}

}  // namespace

int Backend(const std::vector<std::string>& args) {
  int reps = 5;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--reps" && i + 1 < args.size()) {
      reps = std::max(1, std::atoi(args[++i].c_str()));
    } else {
      std::fprintf(stderr, "usage: lazycl-bench backend [--reps N]\n");
      return 2;
    }
  }
  char dir[] = "/tmp/lazycl-bench-backend-XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  // A source nobody has built before, so neither lazycl's cache nor PoCL's can hold it.
  const std::string source = absl::StrCat(
      "__kernel void axpb_", std::chrono::steady_clock::now().time_since_epoch().count(),
      "(__global float* x, float a, float b) { size_t i = get_global_id(0); x[i] = a * x[i] + b; "
      "}\n");
  const std::string name = source.substr(14, source.find('(') - 14);

  double cold_ms = 0, warm_ms = 0;
  {
    auto device = OpenWithCache(dir);
    if (!device.ok()) {
      std::fprintf(stderr, "lazycl-bench: %s\n", std::string(device.status().message()).c_str());
      return 1;
    }
    std::printf("device: %s (%s)\n", (*device)->info().device_name.c_str(),
                (*device)->info().platform_name.c_str());
    const auto start = std::chrono::steady_clock::now();
    auto kernel = (*device)->GetKernel(source, "", name);
    cold_ms = MsSince(start);
    if (!kernel.ok()) {
      std::fprintf(stderr, "lazycl-bench: %s\n", std::string(kernel.status().message()).c_str());
      return 1;
    }
  }
  auto device = OpenWithCache(dir);
  if (!device.ok()) return 1;
  metrics::reset();
  {
    const auto start = std::chrono::steady_clock::now();
    auto kernel = (*device)->GetKernel(source, "", name);
    warm_ms = MsSince(start);
    if (!kernel.ok() || metrics::counter("ProgramDiskCacheHits") != 1) {
      std::fprintf(stderr, "lazycl-bench: expected a disk-cache hit\n");
      return 1;
    }
  }
  std::printf("program build, cold (incl. saving the binary): %8.2f ms\n", cold_ms);
  std::printf("program load from lazycl disk cache:          %8.2f ms\n", warm_ms);

  const size_t bytes = size_t{64} << 20;
  std::vector<char> host(bytes, 1), back(bytes);
  backend::BufferManager& buffers = (*device)->buffers();
  BufferId id = buffers.Declare(bytes, "bench64MiB");
  std::vector<double> up, down;
  for (int r = 0; r < reps + 1; ++r) {  // the first round faults pages in and is not counted
    auto start = std::chrono::steady_clock::now();
    if (!buffers.Upload(id, host.data(), 0, bytes).ok()) return 1;
    const double u = MsSince(start);
    start = std::chrono::steady_clock::now();
    if (!buffers.Download(id, back.data(), 0, bytes).ok()) return 1;
    const double d = MsSince(start);
    if (r > 0) {
      up.push_back(u);
      down.push_back(d);
    }
  }
  buffers.Release(id);
  const double gb = static_cast<double>(bytes) / 1e9;
  std::printf("upload   64 MiB (median of %d): %7.2f ms  %6.2f GB/s\n", reps, Median(up),
              gb / (Median(up) / 1e3));
  std::printf("download 64 MiB (median of %d): %7.2f ms  %6.2f GB/s\n", reps, Median(down),
              gb / (Median(down) / 1e3));
  std::printf("\n%s", metrics::report().c_str());
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace lazycl::bench
