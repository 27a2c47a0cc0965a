#include "runtime/profile.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/settings.h"
#include "runtime/devices.h"

namespace lazycl::runtime::profile {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<KernelRow> rows;                      // guarded by mu; a tag is an index
  absl::flat_hash_map<std::string, int64_t> index;  // guarded by mu
  std::vector<std::string> errors;                  // guarded by mu: failed reads of timings
  Gaps gaps;                                        // guarded by mu
  absl::flat_hash_map<int, uint64_t> last_end_ns;   // guarded by mu: per device
  std::atomic<int64_t> generation{0};
};

Registry& GetRegistry() {
  static auto* registry = new Registry();  // never destroyed: the exit report reads it
  return *registry;
}

std::atomic<bool>& Flag() {
  static std::atomic<bool> flag{[] {
    const absl::StatusOr<base::Settings>& settings = base::ProcessSettings();
    return settings.ok() && settings->profile;
  }()};
  return flag;
}

void PrintAtExit() { std::fprintf(stderr, "%s", Report().c_str()); }

// Taken this many timings waiting on a device, the executor reads them (which waits for those
// kernels) so that a long profiled run does not hold an event per launch.
constexpr size_t kMaxPending = 1 << 16;

}  // namespace

bool Enabled() { return Flag().load(std::memory_order_relaxed); }

void SetEnabled(bool on) {
  Flag().store(on);
  ForEachOpenDevice([on](int index, backend::Device& d) {
    if (!on) Collect(index, d);  // the runs counted so far keep their times
    d.SetProfiling(on);
  });
}

int64_t TagOf(int device, const kernels::KernelSpec& spec) {
  const std::string entry = spec.launches.empty() ? std::string() : spec.launches.front().name;
  std::string key = absl::StrCat(device, "\n", entry, "\n", spec.summary);
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto [it, inserted] = r.index.try_emplace(std::move(key), static_cast<int64_t>(r.rows.size()));
  if (inserted) {
    KernelRow row;
    row.device = device;
    row.entry = entry;
    row.summary = spec.summary;
    row.ops = spec.fused_ops;
    row.bytes = spec.bytes;
    row.flops = spec.flops;
    r.rows.push_back(std::move(row));
  }
  return it->second * kLaunchesPerTag;
}

int64_t Generation() { return GetRegistry().generation.load(); }

void CountRun(int64_t tag) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  const int64_t index = tag / kLaunchesPerTag;
  if (tag >= 0 && index < static_cast<int64_t>(r.rows.size())) ++r.rows[index].runs;
}

void Collect(int device, backend::Device& d) {
  absl::StatusOr<std::vector<backend::LaunchTiming>> timings = d.TakeTimings();
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!timings.ok()) {
    r.errors.push_back(absl::StrCat("cl:", device, ": ", timings.status().message()));
    return;
  }
  for (const backend::LaunchTiming& t : *timings) {
    const int64_t index = t.tag / kLaunchesPerTag;
    if (t.tag < 0 || index >= static_cast<int64_t>(r.rows.size())) continue;  // reset since
    KernelRow& row = r.rows[index];
    ++row.launches;
    const double ns = t.end_ns > t.start_ns ? static_cast<double>(t.end_ns - t.start_ns) : 0;
    const unsigned bit = 1u << (t.tag % kLaunchesPerTag);
    auto [last, first_on_device] = r.last_end_ns.try_emplace(device, t.end_ns);
    if (!first_on_device && (row.seen_launches & bit) != 0 && t.start_ns >= last->second) {
      const double gap = static_cast<double>(t.start_ns - last->second);
      if (t.queued_ns > last->second) {
        ++r.gaps.host_gaps;
        r.gaps.host_ns += gap;
        row.host_wait_ns += gap;
      } else {
        ++r.gaps.handoff_gaps;
        r.gaps.handoff_ns += gap;
      }
    }
    last->second = t.end_ns;
    if ((row.seen_launches & bit) == 0) {
      row.seen_launches |= bit;
      // A first run counts from its submission: PoCL compiles it between submission and start.
      const uint64_t from = t.submit_ns > 0 && t.submit_ns <= t.start_ns ? t.submit_ns : t.start_ns;
      row.first_ns += t.end_ns > from ? static_cast<double>(t.end_ns - from) : 0;
    } else {
      row.device_ns += ns;
    }
  }
}

std::vector<KernelRow> Rows() {
  ForEachOpenDevice([](int index, backend::Device& d) { Collect(index, d); });
  Registry& r = GetRegistry();
  std::vector<KernelRow> rows;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (const KernelRow& row : r.rows) {
      if (row.runs > 0) rows.push_back(row);
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const KernelRow& a, const KernelRow& b) {
    return a.device_ns != b.device_ns ? a.device_ns > b.device_ns : a.first_ns > b.first_ns;
  });
  return rows;
}

Gaps LaunchGaps() {
  ForEachOpenDevice([](int index, backend::Device& d) { Collect(index, d); });
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.gaps;
}

std::string Report() {
  const std::vector<KernelRow> rows = Rows();
  const Gaps gaps = LaunchGaps();
  double total_ns = 0, first_ns = 0;
  int64_t runs = 0;
  for (const KernelRow& row : rows) {
    total_ns += row.device_ns;
    first_ns += row.first_ns;
    runs += row.runs;
  }
  std::string out = absl::StrFormat(
      "lazycl profile: %d kernels, %d runs: %.3f ms of device time after each kernel's first "
      "run, %.3f ms in first runs (which include compiling for the launch); OpenCL profiling "
      "events\n",
      rows.size(), runs, total_ns / 1e6, first_ns / 1e6);
  auto mean_us = [](double ns, int64_t n) { return n > 0 ? ns / 1e3 / static_cast<double>(n) : 0; };
  absl::StrAppend(
      &out,
      absl::StrFormat(
          "idle between launches: %.3f ms waiting for the host to enqueue the next kernel "
          "(%d gaps, %.1f us each), %.3f ms starting a kernel already enqueued (%d gaps, "
          "%.1f us each)\n",
          gaps.host_ns / 1e6, gaps.host_gaps, mean_us(gaps.host_ns, gaps.host_gaps),
          gaps.handoff_ns / 1e6, gaps.handoff_gaps, mean_us(gaps.handoff_ns, gaps.handoff_gaps)));
  absl::StrAppend(&out,
                  absl::StrFormat("%6s %10s %7s %9s %9s %8s %8s %8s %12s  %-32s %s\n", "share",
                                  "total_ms", "runs", "mean_us", "first_us", "launches", "GB/s",
                                  "GFLOP/s", "host_wait_ms", "ops", "kernel"));
  for (const KernelRow& row : rows) {
    const int64_t later = row.runs - 1;
    const double seconds = row.device_ns / 1e9;
    auto rate = [&](int64_t per_run) {
      if (per_run <= 0 || seconds <= 0 || later <= 0) return std::string("-");
      return absl::StrFormat("%.1f", static_cast<double>(per_run) * later / seconds / 1e9);
    };
    const std::string mean =
        later > 0 ? absl::StrFormat("%.1f", row.device_ns / 1e3 / later) : std::string("-");
    absl::StrAppend(
        &out, absl::StrFormat("%5.1f%% %10.3f %7d %9s %9.1f %8d %8s %8s %12.3f  %-32s %s%s [%s]\n",
                              total_ns > 0 ? 100 * row.device_ns / total_ns : 0,
                              row.device_ns / 1e6, row.runs, mean, row.first_ns / 1e3, row.launches,
                              rate(row.bytes), rate(row.flops), row.host_wait_ns / 1e6, row.ops,
                              row.device == 0 ? "" : absl::StrCat("cl:", row.device, " "),
                              row.summary, row.entry));
  }
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const std::string& e : r.errors) absl::StrAppend(&out, "timings lost: ", e, "\n");
  return out;
}

void Reset() {
  ForEachOpenDevice([](int, backend::Device& d) { (void)d.TakeTimings(); });
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.rows.clear();
  r.index.clear();
  r.errors.clear();
  r.gaps = Gaps();
  r.last_end_ns.clear();
  ++r.generation;
}

void OnDeviceOpened(int device, backend::Device& d) {
  (void)device;
  d.SetProfiling(Enabled());
  const absl::StatusOr<base::Settings>& settings = base::ProcessSettings();
  static std::once_flag at_exit;
  if (settings.ok() && settings->profile) std::call_once(at_exit, [] { std::atexit(PrintAtExit); });
}

void MaybeCollect(int device, backend::Device& d) {
  if (d.PendingTimings() >= kMaxPending) Collect(device, d);
}

}  // namespace lazycl::runtime::profile
