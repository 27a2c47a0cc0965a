#pragma once

#include <cstdint>
#include <string>
#include <string_view>

// Counters that lazycl keeps about real work: transfers, allocations, launches, compiles.
// Names are part of the API; README, "Metrics", lists them.
namespace lazycl::metrics {

// Current value of the named counter; 0 when it was never touched.
int64_t counter(std::string_view name);

// Zeroes every counter and time series. Gauges stay truthful: DeviceLiveBytes keeps the bytes
// held now, and DevicePeakBytes restarts from that level.
void reset();

// Human-readable table of every counter, and count / total / percentiles of every timer.
std::string report();

}  // namespace lazycl::metrics
