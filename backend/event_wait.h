#pragma once

#include <cstdint>

#include "backend/cl.h"

namespace lazycl::backend {

// Waits for `event`'s command to end: polls for up to `spin_ns`, then blocks in
// clWaitForEvents. Returns CL_SUCCESS once it has completed, or clWaitForEvents' error when it
// failed. The caller has flushed the queue that holds it.
//
// Why spin: a host thread blocked in clWaitForEvents sleeps on a condition variable that the
// driver's thread signals when the command ends. On PoCL's CPU device in a virtual machine that
// signal is a futex wake of a thread on another vCPU: an inter-processor interrupt, which exits
// to the hypervisor in the thread that sends it, and a wake-up in the one that receives it.
// A read of a small result (a training loop's `loss.item()`) is ready microseconds after it is
// enqueued, so the host polls first: a waiter that is not asleep needs no wake. Measured on a
// 2-core Zen 4 EPYC VM (AVX2, PoCL 3.1), `lazycl-bench models --only scalar_read`: 0.044-0.047
// ms a read blocking, 0.028-0.030 ms polling first. Polling takes a core only for `spin_ns`
// (LAZYCL_HOST_SPIN_US); a longer wait sleeps as before.
//
// What it polls: a flag that a CL_COMPLETE callback raises, and the event's status only every
// ~25 us (PoCL 3.1 runs no CL_COMPLETE callback for a command that fails). PoCL reads the status
// under the event's lock, which the worker that ends the command takes too; a host that asked
// every ~1 us made them take turns on it through futex waits. Each round ends in a yield, so a
// worker woken onto the host's CPU runs at once (backend/thread_policy.h). On a 2-core Emerald
// Rapids Xeon VM (KVM, PoCL 3.1, workers pinned and under SCHED_BATCH), `scalar_read_ms`:
// 0.038-0.039 ms asking the status every round, 0.022-0.023 with the flag, 0.035 with the flag
// but no yield (three and four alternating processes).
cl_int WaitForEvent(cl_event event, int64_t spin_ns);

}  // namespace lazycl::backend
