#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/metrics_registry.h"
#include "base/string_view.h"
#include "lazycl/metrics.h"

// One process-wide registry behind both the internal API (backend/metrics_registry.h) and the
// public one (<lazycl/metrics.h>). The registry owns every counter for the life of the process
// (it is leaked, so counting during static destruction stays safe); callers may keep references.
namespace lazycl::base::metrics {
namespace {

constexpr std::string_view kLive = "DeviceLiveBytes";
constexpr std::string_view kPeak = "DevicePeakBytes";
// Gauges describe the present rather than count events, so reset() leaves them alone.
constexpr std::string_view kPool = "DevicePoolBytes";

// Thread-safe: each counter is an atomic, found in maps guarded by `mu`, a leaf lock (nothing
// else is locked or called with it held). std::mutex rather than
// absl::Mutex so that ThreadSanitizer, which sees pthread locks, sees this one in the TSan build
// against an uninstrumented Abseil.
struct Registry {
  std::mutex mu;
  // unique_ptr keeps each atomic at a stable address while the map rehashes.
  absl::flat_hash_map<std::string, std::unique_ptr<std::atomic<int64_t>>> counters;
  absl::flat_hash_map<std::string, std::vector<int64_t>> timers;
};

Registry& GetRegistry() {
  static Registry* const registry = new Registry;
  return *registry;
}

// Nearest-rank percentile of sorted samples.
int64_t Percentile(const std::vector<int64_t>& sorted, double p) {
  size_t rank = static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size()) + 0.999999);
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

double Ms(int64_t nanos) { return static_cast<double>(nanos) / 1e6; }

}  // namespace

std::atomic<int64_t>& Counter(std::string_view name) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto it = registry.counters.find(base::Sv(name));
  if (it == registry.counters.end()) {
    it = registry.counters.emplace(std::string(name), std::make_unique<std::atomic<int64_t>>(0))
             .first;
  }
  return *it->second;
}

void Add(std::string_view name, int64_t delta) {
  // The counters this thread added to last, by where their names' characters are (names are
  // literals, so a call site's name is always at one place): finding a name in the registry
  // takes its lock and hashes the name, ~200 instructions, and kernel launches, buffer
  // allocations and graph runs add to a few counters each. A slot also holds its name, so a name
  // at a place another name was (a temporary string) is looked up afresh.
  struct Recent {
    const char* data = nullptr;
    std::string name;
    std::atomic<int64_t>* counter = nullptr;
  };
  thread_local std::array<Recent, 32> recent;
  Recent& r = recent[(reinterpret_cast<uintptr_t>(name.data()) >> 3) % recent.size()];
  if (r.data != name.data() || r.name != name) {
    r.counter = &Counter(name);
    r.data = name.data();
    r.name.assign(name);
  }
  r.counter->fetch_add(delta, std::memory_order_relaxed);
}

void RecordTime(std::string_view name, int64_t nanos) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.timers[std::string(name)].push_back(nanos);
}

int64_t& ThreadTransferBytes() {
  thread_local int64_t bytes = 0;
  return bytes;
}

void AddLiveBytes(int64_t delta) {
  static std::atomic<int64_t>& live = Counter(kLive);
  static std::atomic<int64_t>& peak = Counter(kPeak);
  const int64_t now = live.fetch_add(delta, std::memory_order_relaxed) + delta;
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

}  // namespace lazycl::base::metrics

namespace lazycl::metrics {

namespace internal = lazycl::base::metrics;

int64_t counter(std::string_view name) {
  internal::Registry& registry = internal::GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto it = registry.counters.find(base::Sv(name));
  return it == registry.counters.end() ? 0 : it->second->load(std::memory_order_relaxed);
}

void reset() {
  internal::Registry& registry = internal::GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  int64_t live = 0;
  if (auto it = registry.counters.find(base::Sv(internal::kLive)); it != registry.counters.end()) {
    live = it->second->load();
  }
  for (auto& [name, value] : registry.counters) {
    if (name == internal::kLive || name == internal::kPool) continue;
    value->store(name == internal::kPeak ? live : 0);
  }
  registry.timers.clear();
}

std::string report() {
  internal::Registry& registry = internal::GetRegistry();
  std::vector<std::pair<std::string, int64_t>> counters;
  std::vector<std::pair<std::string, std::vector<int64_t>>> timers;
  {
    std::lock_guard<std::mutex> lock(registry.mu);
    for (const auto& [name, value] : registry.counters) {
      counters.emplace_back(name, value->load(std::memory_order_relaxed));
    }
    for (const auto& [name, samples] : registry.timers) timers.emplace_back(name, samples);
  }
  std::sort(counters.begin(), counters.end());
  std::sort(timers.begin(), timers.end());

  size_t width = 7;  // "counter"
  for (const auto& c : counters) width = std::max(width, c.first.size());
  for (const auto& t : timers) width = std::max(width, t.first.size());
  const int w = static_cast<int>(width);

  std::string out = absl::StrFormat("%-*s %20s\n", w, "counter", "value");
  for (const auto& [name, value] : counters) {
    absl::StrAppendFormat(&out, "%-*s %20d\n", w, name, value);
  }
  if (!timers.empty()) {
    absl::StrAppendFormat(&out, "\n%-*s %8s %12s %10s %10s %10s\n", w, "timer", "count", "total ms",
                          "p50 ms", "p90 ms", "p99 ms");
    for (auto& [name, samples] : timers) {
      std::sort(samples.begin(), samples.end());
      int64_t total = 0;
      for (int64_t s : samples) total += s;
      absl::StrAppendFormat(&out, "%-*s %8d %12.3f %10.3f %10.3f %10.3f\n", w, name, samples.size(),
                            internal::Ms(total), internal::Ms(internal::Percentile(samples, 50)),
                            internal::Ms(internal::Percentile(samples, 90)),
                            internal::Ms(internal::Percentile(samples, 99)));
    }
  }
  return out;
}

}  // namespace lazycl::metrics
