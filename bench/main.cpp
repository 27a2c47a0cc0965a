// lazycl-bench: one executable, one subcommand per measurement. Each subcommand is a function
// over its own arguments; add one by adding a row to kCommands.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "backend/device.h"
#include "backend/device_select.h"
#include "base/settings.h"
#include "bench/commands.h"

namespace lazycl::bench {

using lazycl::backend::Device;
using lazycl::backend::PlatformDesc;
using lazycl::base::DeviceTypeName;

int Devices(const std::vector<std::string>& args) {
  if (!args.empty()) {
    std::fprintf(stderr, "lazycl-bench devices takes no arguments\n");
    return 2;
  }
  absl::StatusOr<std::vector<PlatformDesc>> platforms = Device::Enumerate();
  if (!platforms.ok()) {
    std::fprintf(stderr, "lazycl-bench: %s\n", std::string(platforms.status().message()).c_str());
    return 1;
  }
  const absl::StatusOr<lazycl::base::Settings>& settings = lazycl::base::ProcessSettings();
  if (!settings.ok()) {
    std::fprintf(stderr, "lazycl-bench: %s\n", std::string(settings.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<std::vector<lazycl::backend::DeviceChoice>> choices =
      lazycl::backend::SelectDevices(*platforms, *settings);

  std::printf("%-4s %-40s %-12s %-16s %6s %12s %10s\n", "", "device", "type", "driver", "CUs",
              "global MiB", "max param");
  for (size_t p = 0; p < platforms->size(); ++p) {
    const PlatformDesc& platform = (*platforms)[p];
    std::printf("platform %zu: %s (%s, %s)\n", p, platform.name.c_str(), platform.vendor.c_str(),
                platform.version.c_str());
    for (size_t d = 0; d < platform.devices.size(); ++d) {
      bool selected = choices.ok() && !choices->empty() &&
                      (*choices)[0].platform == static_cast<int>(p) &&
                      (*choices)[0].device == static_cast<int>(d);
      // Compute units and limits need the device opened; names and types do not.
      std::string cus = "-", mem = "-", param = "-";
      lazycl::base::Settings one = *settings;
      one.platform = std::to_string(p);
      one.device_type = lazycl::base::DeviceTypeFilter::kAll;
      one.device = std::to_string(d);
      one.kernel_cache_dir = "";
      if (absl::StatusOr<std::unique_ptr<Device>> device = Device::Open(one); device.ok()) {
        const lazycl::backend::DeviceInfo& info = (*device)->info();
        cus = std::to_string(info.compute_units);
        mem = std::to_string(info.global_mem_bytes >> 20);
        param = std::to_string(info.max_param_bytes);
      }
      const auto& dev = platform.devices[d];
      std::printf("%-4s %-40s %-12s %-16s %6s %12s %10s\n", selected ? " *" : "",
                  absl::StrFormat("%zu.%zu %s", p, d, dev.name).c_str(),
                  std::string(DeviceTypeName(dev.type)).c_str(), dev.driver_version.c_str(),
                  cus.c_str(), mem.c_str(), param.c_str());
    }
  }
  if (!choices.ok()) {
    std::fprintf(stderr, "lazycl-bench: no device selected: %s\n",
                 std::string(choices.status().message()).c_str());
    return 1;
  }
  const auto& choice = (*choices)[0];
  std::printf("selected (*): platform %d device %d: %s\n", choice.platform, choice.device,
              (*platforms)[choice.platform].devices[choice.device].name.c_str());
  return 0;
}

}  // namespace lazycl::bench

namespace {

struct Command {
  std::string_view name;
  std::string_view help;
  int (*run)(const std::vector<std::string>& args);
};

constexpr Command kCommands[] = {
    {"transfer",
     "host<->device bytes of for_loop / scan_materialized / scan_placeholder [--layers L] "
     "[--hidden D] "
     "[--batch B] [--steps S] [--sweep] [--train] [--json F] [--csv F] [--svg F]",
     lazycl::bench::Transfer},
    {"ops",
     "fused elementwise, reductions, softmax, matmul, MLP beside measured limits [--json F] "
     "[--repeat N]",
     lazycl::bench::Ops},
    {"models",
     "MLP train step and forward, matmul nn/tn/nt at 1024 and 2048, attention bmm [--json F] "
     "[--repeat N] [--only PREFIX]",
     lazycl::bench::Models},
    {"tune",
     "time the f32 CPU matmul's candidate blockings, keep the best in the kernel cache "
     "[--cached: reuse a cached choice] [--width N: the candidates for N floats per vector]",
     lazycl::bench::Tune},
    {"scaling",
     "examples/data_parallel at 1 and 2 ranks under mpirun, and the all-reduce arithmetic for N "
     "machines [--steps N] [--batch B] [--link-gbps G] [--mpirun P] [--data-parallel P] "
     "[--json F]",
     lazycl::bench::Scaling},
    {"warmup",
     "build the generic kernels of tiered execution (LAZYCL_COMPILE) into the caches, and have "
     "the driver compile each",
     lazycl::bench::Warmup},
    {"ops-first-result", "(internal) W1 once in this process, for ops' first-result rows",
     lazycl::bench::OpsFirstResult},
    {"devices", "list OpenCL platforms and devices, and the one LAZYCL_* selects",
     lazycl::bench::Devices},
    {"backend", "cold build, disk-cache load, 64 MiB upload/download [--reps N]",
     lazycl::bench::Backend},
};

int Usage(FILE* out) {
  std::fprintf(out, "usage: lazycl-bench <command> [options]\n\ncommands:\n");
  for (const Command& command : kCommands) {
    std::fprintf(out, "  %-10.*s %.*s\n", static_cast<int>(command.name.size()),
                 command.name.data(), static_cast<int>(command.help.size()), command.help.data());
  }
  return out == stdout ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage(stderr);
  const std::string_view name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") return Usage(stdout);
  for (const Command& command : kCommands) {
    if (command.name == name) return command.run(std::vector<std::string>(argv + 2, argv + argc));
  }
  std::fprintf(stderr, "lazycl-bench: unknown command '%s'\n\n", argv[1]);
  return Usage(stderr);
}
