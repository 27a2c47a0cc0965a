#include "frontend/trace_scope.h"

#include <algorithm>

#include "base/metrics_registry.h"
#include "lazycl/metrics.h"

namespace lazycl::frontend {
namespace {

thread_local int depth = 0;

int64_t BytesMoved() {
  return metrics::counter("TransferToDeviceBytes") + metrics::counter("TransferFromDeviceBytes");
}

}  // namespace

TraceScope::TraceScope() : bytes_at_start_(depth == 0 ? BytesMoved() : 0) { ++depth; }

TraceScope::~TraceScope() {
  // A metrics::reset() inside the scope would make the difference negative: count nothing then.
  if (--depth == 0)
    base::metrics::Add("TraceTransferBytes", std::max<int64_t>(0, BytesMoved() - bytes_at_start_));
}

bool TraceScope::active() { return depth > 0; }

}  // namespace lazycl::frontend
