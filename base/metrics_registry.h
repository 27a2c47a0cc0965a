#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

// The library side of lazycl::metrics (public API in <lazycl/metrics.h>). Counters are created
// on first use and live for the whole process, so a reference to one may be cached in a static.
namespace lazycl::base::metrics {

std::atomic<int64_t>& Counter(std::string_view name);
void Add(std::string_view name, int64_t delta);

// Records one sample of a timer, e.g. "TransferToDeviceTime", in nanoseconds.
void RecordTime(std::string_view name, int64_t nanos);

// Bytes this thread has moved between host and devices (uploads plus downloads), never reset:
// what TraceTransferBytes counts, per thread, so that a trace on one thread is not charged with
// another thread's transfers.
int64_t& ThreadTransferBytes();

// DeviceLiveBytes changes by `delta`; DevicePeakBytes follows the maximum.
void AddLiveBytes(int64_t delta);

}  // namespace lazycl::base::metrics
