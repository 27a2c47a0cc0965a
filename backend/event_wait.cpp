#include "backend/event_wait.h"

#include <chrono>

#include "backend/cpu_pause.h"

namespace lazycl::backend {

cl_int WaitForEvent(cl_event event, int64_t spin_ns) {
  if (spin_ns > 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin_ns);
    while (true) {
      cl_int status = CL_QUEUED;
      if (clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status,
                         nullptr) != CL_SUCCESS) {
        break;  // clWaitForEvents says what is wrong
      }
      if (status <= CL_COMPLETE) break;  // ended (failed: clWaitForEvents reports it)
      if (std::chrono::steady_clock::now() >= until) break;
      // ~0.5 us between polls: the status is read under a lock the driver's threads take too.
      for (int i = 0; i < 16; ++i) CpuPause();
    }
  }
  return clWaitForEvents(1, &event);
}

}  // namespace lazycl::backend
