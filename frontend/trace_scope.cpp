#include "frontend/trace_scope.h"

#include "base/metrics_registry.h"

namespace lazycl::frontend {
namespace {

thread_local int depth = 0;
thread_local int computing_nothing = 0;  // open scopes of Kind::kComputesNothing

// This thread's bytes only: another thread's transfers during the trace are not the trace's.
int64_t BytesMoved() { return base::metrics::ThreadTransferBytes(); }

}  // namespace

TraceScope::TraceScope(Kind kind) : bytes_at_start_(depth == 0 ? BytesMoved() : 0), kind_(kind) {
  ++depth;
  if (kind_ == Kind::kComputesNothing) ++computing_nothing;
}

TraceScope::~TraceScope() {
  if (kind_ == Kind::kComputesNothing) --computing_nothing;
  if (--depth == 0) base::metrics::Add("TraceTransferBytes", BytesMoved() - bytes_at_start_);
}

bool TraceScope::active() { return depth > 0; }

bool TraceScope::folds_tables() { return computing_nothing == 0; }

}  // namespace lazycl::frontend
