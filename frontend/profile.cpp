#include "lazycl/profile.h"

#include <utility>

#include "runtime/profile.h"

namespace lazycl::metrics {

void set_profiling(bool on) { runtime::profile::SetEnabled(on); }

bool profiling() { return runtime::profile::Enabled(); }

std::vector<KernelProfile> kernel_profile() {
  const std::vector<runtime::profile::KernelRow> rows = runtime::profile::Rows();
  double total_ns = 0;
  for (const runtime::profile::KernelRow& row : rows) total_ns += row.device_ns;
  std::vector<KernelProfile> out;
  for (const runtime::profile::KernelRow& row : rows) {
    KernelProfile p;
    p.device = row.device;
    p.kernel = row.summary;
    p.ops = row.ops;
    p.entry = row.entry;
    p.runs = row.runs;
    p.launches = row.launches;
    p.first_ms = row.first_ns / 1e6;
    p.total_ms = row.device_ns / 1e6;
    p.host_wait_ms = row.host_wait_ns / 1e6;
    const double later = static_cast<double>(row.runs - 1);
    p.mean_us = later > 0 ? row.device_ns / 1e3 / later : 0;
    p.share = total_ns > 0 ? row.device_ns / total_ns : 0;
    if (row.device_ns > 0 && later > 0) {
      const double runs = later;
      p.gb_per_s = static_cast<double>(row.bytes) * runs / row.device_ns;
      p.gflop_per_s = static_cast<double>(row.flops) * runs / row.device_ns;
    }
    out.push_back(std::move(p));
  }
  return out;
}

LaunchGaps launch_gaps() {
  const runtime::profile::Gaps g = runtime::profile::LaunchGaps();
  return {g.host_gaps, g.host_ns / 1e6, g.handoff_gaps, g.handoff_ns / 1e6};
}

std::string profile() { return runtime::profile::Report(); }

void reset_profile() { runtime::profile::Reset(); }

}  // namespace lazycl::metrics
