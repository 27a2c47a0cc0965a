// lazycl-bench tune: runs the f32 CPU matmul tuner (runtime/matmul_tuner.h) ahead of time and
// prints what the candidates derive from, each candidate's GFLOP/s and the winner kept in the
// kernel cache directory.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/device.h"
#include "base/settings.h"
#include "bench/args.h"
#include "bench/commands.h"
#include "bench/cpu_flags.h"
#include "lazycl/lazycl.h"
#include "runtime/devices.h"
#include "runtime/matmul_tuner.h"

namespace lazycl::bench {

int Tune(const std::vector<std::string>& argv) {
  Args args(argv, {"cached"}, {"width"});
  const int width = static_cast<int>(args.positive("width", 0));
  if (!args.error().empty()) {
    std::fprintf(stderr, "lazycl-bench tune: %s\nusage: lazycl-bench tune [--cached] [--width N]\n",
                 args.error().c_str());
    return 2;
  }
  try {
    backend::Device& device = runtime::OpenClDevice(0);
    const backend::DeviceInfo& info = device.info();
    runtime::SimdInfo simd = runtime::SimdOf(info);
    if (width > 0) {
      // As if the device reported `width` floats per vector: that width's candidates, timed
      // here and kept nowhere.
      simd = runtime::WithWidth(simd, width);
      std::printf("--width %d: candidates for that reported width; nothing is cached\n", width);
    }
    std::printf("lazycl-bench tune on %s (%s)\ncpu: %s\n", info.device_name.c_str(),
                info.driver_version.c_str(), CpuFlags().c_str());
    std::printf(
        "device reports: float vector width preferred %d, native %d; L1 %lld KiB, L2 %lld KiB, "
        "local memory %lld KiB\n",
        simd.preferred_float_width, simd.native_float_width,
        static_cast<long long>(simd.l1_bytes >> 10), static_cast<long long>(simd.l2_bytes >> 10),
        static_cast<long long>(simd.local_mem_bytes >> 10));
    std::printf("default (untuned): %s\n",
                runtime::BlockingString(runtime::DefaultBlocking(simd)).c_str());
    const std::string dir = width > 0 ? "" : base::CurrentSettings().kernel_cache_dir;
    absl::StatusOr<runtime::TuneResult> result = runtime::TuneMatmul(
        device, dir, /*force=*/!args.flag("cached"),
        width > 0 ? runtime::MatmulCandidates(simd) : std::vector<kernels::MatmulBlocking>{});
    if (!result.ok()) throw Error(std::string(result.status().message()));
    for (const runtime::CandidateResult& c : result->probe) {
      std::printf("  probe: %-33s %8.1f GFLOP/s %s\n", runtime::BlockingString(c.blocking).c_str(),
                  c.gflops, c.error.c_str());
    }
    for (const runtime::CandidateResult& c : result->candidates) {
      std::printf("  %-40s %8.1f GFLOP/s %s\n", runtime::BlockingString(c.blocking).c_str(),
                  c.gflops, c.error.c_str());
    }
    std::printf("best: %s%s\ncache: %s\n", runtime::BlockingString(result->best).c_str(),
                result->from_cache ? " (from the cache)" : "",
                result->cache_path.empty() ? "(none: --width given, or LAZYCL_KERNEL_CACHE_DIR=off)"
                                           : result->cache_path.c_str());
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "lazycl-bench tune: %s\n", e.what());
    return 1;
  }
}

}  // namespace lazycl::bench
