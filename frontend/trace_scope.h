#pragma once

#include <cstdint>

namespace lazycl::frontend {

// Marks the tracing of a trace/call/scan body on this thread. While one is open, graphs are
// not cut (their placeholders have no data to compute with), and every byte moved between host
// and devices by this thread is added to TraceTransferBytes when the outermost scope closes.
class TraceScope {
 public:
  // A trace or call computes nothing while it traces. A scan's body is traced as the scan is made
  // (outside any other trace: inside one, a scan is unrolled into it), and may fold the constant
  // tables it reads as an op outside a trace does (runtime/constant_fold.h): a sampling loop
  // traces its layers' body every token, and the step loop hoisted the rotary tables out of it
  // again every time, rebuilding the body's graph around them.
  enum class Kind { kComputesNothing, kScanBody };
  explicit TraceScope(Kind kind = Kind::kComputesNothing);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

  static bool active();
  // Whether an op made now folds the constant tables it reads: outside every trace, or inside
  // scan bodies only.
  static bool folds_tables();

 private:
  int64_t bytes_at_start_;
  Kind kind_;
};

}  // namespace lazycl::frontend
