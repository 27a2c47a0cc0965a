// lazycl-bench warmup: the generic kernels of tiered execution, ready before the first graph.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/device.h"
#include "bench/commands.h"
#include "lazycl/error.h"
#include "runtime/devices.h"
#include "runtime/generic_warmup.h"

namespace lazycl::bench {

int Warmup(const std::vector<std::string>& args) {
  if (!args.empty()) {
    std::fprintf(stderr, "lazycl-bench warmup: takes no options, got '%s'\n", args[0].c_str());
    return 2;
  }
  try {
    const backend::DeviceInfo& info = runtime::OpenClDevice(0).info();
    absl::StatusOr<runtime::WarmupReport> report = runtime::WarmGenericKernels(0);
    if (!report.ok()) {
      std::fprintf(stderr, "lazycl-bench warmup: %s\n",
                   std::string(report.status().message()).c_str());
      return 1;
    }
    std::printf(
        "generic kernels on %s (%s): %lld entry points; programs built or loaded in %.0f ms, each "
        "launched once in %.0f ms\n",
        info.device_name.c_str(), info.platform_name.c_str(),
        static_cast<long long>(report->kernels), report->build_ms, report->launch_ms);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "lazycl-bench warmup: %s\n", e.what());
    return 1;
  }
}

}  // namespace lazycl::bench
