// lazycl-bench scaling: data-parallel training (examples/data_parallel) at 1 and 2 ranks under
// mpirun on this machine, and what the measured bytes mean for N machines.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backend/device.h"
#include "bench/args.h"
#include "bench/commands.h"
#include "bench/cpu_flags.h"
#include "lazycl/lazycl.h"
#include "runtime/devices.h"

namespace lazycl::bench {
namespace {

// What one rank printed: "rank R of N: S steps of a P-sequence slice (global batch B): X
// ms/step, all_reduce Y ms/step (Z%), M MiB all-reduced per step in K calls".
struct RankLine {
  int rank = -1, world = 0;
  long long per_rank = 0;
  double step_ms = 0, collective_ms = 0, mib = 0;
};

struct Run {
  int ranks = 0;
  std::vector<RankLine> lines;
  std::string error;  // empty when every rank reported
};

Run RunRanks(const std::string& mpirun, const std::string& program, int ranks, int64_t steps,
             int64_t batch) {
  Run run;
  run.ranks = ranks;
  const std::string command =
      absl::StrCat("'", mpirun, "' --allow-run-as-root --oversubscribe -np ", ranks, " '", program,
                   "' --steps ", steps, " --batch ", batch, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    run.error = "cannot run " + command;
    return run;
  }
  std::string output;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) {
    output += buffer;
    RankLine l;
    long long steps_done = 0, global = 0, calls = 0;
    double share = 0;
    if (std::sscanf(buffer,
                    "rank %d of %d: %lld steps of a %lld-sequence slice (global batch %lld): %lf "
                    "ms/step, all_reduce %lf ms/step (%lf%%), %lf MiB all-reduced per step in "
                    "%lld calls",
                    &l.rank, &l.world, &steps_done, &l.per_rank, &global, &l.step_ms,
                    &l.collective_ms, &share, &l.mib, &calls) == 10) {
      run.lines.push_back(l);
    }
  }
  const int status = pclose(pipe);
  if (status != 0 || static_cast<int>(run.lines.size()) != ranks) {
    run.error = absl::StrCat(command, " exited with status ", status, " after ", run.lines.size(),
                             " of ", ranks, " rank reports:\n", output);
  }
  return run;
}

double Max(const std::vector<RankLine>& lines, double RankLine::*field) {
  double m = 0;
  for (const RankLine& l : lines) m = std::max(m, l.*field);
  return m;
}

}  // namespace

int Scaling(const std::vector<std::string>& argv) {
  Args args(argv, {}, {"steps", "batch", "link-gbps", "mpirun", "data-parallel", "json"});
  const int64_t steps = args.positive("steps", 10);
  const int64_t batch = args.positive("batch", 8);
  const int64_t link_gbps = args.positive("link-gbps", 10);
  if (!args.error().empty()) {
    std::fprintf(stderr,
                 "lazycl-bench scaling: %s\nusage: lazycl-bench scaling [--steps N] [--batch B] "
                 "[--link-gbps G] [--mpirun PATH] [--data-parallel PATH] [--json FILE]\n",
                 args.error().c_str());
    return 2;
  }
  const std::string mpirun = args.option("mpirun").value_or(LAZYCL_BENCH_MPIRUN);
  const std::string program = args.option("data-parallel").value_or(LAZYCL_BENCH_DATA_PARALLEL);
  if (mpirun.empty() || program.empty()) {
    std::fprintf(stderr,
                 "lazycl-bench scaling: this build has no MPI (CMake found no Open MPI, so "
                 "examples/data_parallel was not built); install libopenmpi-dev and openmpi-bin "
                 "and rebuild, or pass --mpirun and --data-parallel\n");
    return 2;
  }
  if (batch % 2 != 0) {
    std::fprintf(stderr, "lazycl-bench scaling: --batch %lld must be even (2 ranks split it)\n",
                 static_cast<long long>(batch));
    return 2;
  }
  std::string device;
  try {
    const backend::DeviceInfo& info = runtime::OpenClDevice(0).info();
    device = absl::StrCat(info.device_name, " (", info.platform_name, ", ", info.driver_version,
                          "), ", info.compute_units, " compute units");
  } catch (const Error& e) {
    std::fprintf(stderr, "lazycl-bench scaling: %s\n", e.what());
    return 1;
  }
  std::printf(
      "lazycl-bench scaling on %s\ncpu: %s; examples/data_parallel, the char-LM model, global "
      "batch %lld, %lld steps per rank (times: the mean after the first, which compiles)\n",
      device.c_str(), CpuFlags().c_str(), static_cast<long long>(batch),
      static_cast<long long>(steps));
  std::printf("  %5s %10s %10s %14s %7s %14s\n", "ranks", "seq/rank", "step_ms", "all_reduce_ms",
              "share", "MiB/step");
  std::vector<Run> runs;
  for (int ranks : {1, 2}) {
    Run run = RunRanks(mpirun, program, ranks, steps, batch);
    if (!run.error.empty()) {
      std::fprintf(stderr, "lazycl-bench scaling: %s\n", run.error.c_str());
      return 1;
    }
    const double step = Max(run.lines, &RankLine::step_ms);
    const double collective = Max(run.lines, &RankLine::collective_ms);
    std::printf("  %5d %10lld %10.1f %14.1f %6.0f%% %14.2f\n", ranks, run.lines[0].per_rank, step,
                collective, step > 0 ? 100 * collective / step : 0.0, run.lines[0].mib);
    runs.push_back(std::move(run));
  }
  // The slowest rank's times: a step ends when the last rank's does.
  const double mib = runs[1].lines[0].mib;
  const double collective = Max(runs[1].lines, &RankLine::collective_ms);
  std::printf(
      "all_reduce at 2 ranks: %.2f MiB per step in %.1f ms (staging, MPI and waiting for the "
      "other rank: %.0f MiB/s end to end)\n",
      mib, collective, collective > 0 ? mib / (collective / 1000) : 0.0);
  std::printf(
      "N machines on a %lld Gb/s link: a ring all-reduce sends and receives 2(N-1)/N x %.2f MiB "
      "per rank per step:\n",
      static_cast<long long>(link_gbps), mib);
  const double bytes_per_s = static_cast<double>(link_gbps) * 1e9 / 8;
  std::vector<std::string> json_rows;
  for (const Run& run : runs) {
    json_rows.push_back(absl::StrFormat(
        "{\"ranks\": %d, \"step_ms\": %.3f, \"all_reduce_ms\": %.3f, \"mib_per_step\": %.4f}",
        run.ranks, Max(run.lines, &RankLine::step_ms), Max(run.lines, &RankLine::collective_ms),
        run.lines[0].mib));
  }
  for (int n : {2, 4, 8, 16}) {
    const double bytes = 2.0 * (n - 1) / n * mib * 1048576.0;
    std::printf("  N = %2d: %7.2f MiB, %6.2f ms of transfer\n", n, bytes / 1048576.0,
                1000 * bytes / bytes_per_s);
  }
  if (auto path = args.option("json")) {
    std::ofstream out(*path);
    out << "{\"device\": \"" << device << "\", \"cpu\": \"" << CpuFlags() << "\", \"runs\": ["
        << absl::StrJoin(json_rows, ", ") << "]}\n";
    if (!out) {
      std::fprintf(stderr, "lazycl-bench scaling: cannot write %s\n", path->c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace lazycl::bench
