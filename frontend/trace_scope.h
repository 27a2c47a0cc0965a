#pragma once

#include <cstdint>

namespace lazycl::frontend {

// Marks the tracing of a trace/call/scan body on this thread. While one is open, graphs are
// not cut (their placeholders have no data to compute with), and every byte moved between host
// and devices by this thread is added to TraceTransferBytes when the outermost scope closes.
class TraceScope {
 public:
  TraceScope();
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

  static bool active();

 private:
  int64_t bytes_at_start_;
};

}  // namespace lazycl::frontend
