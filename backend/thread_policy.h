#pragma once

// How a CPU device's worker threads are scheduled against the host's threads.
//
// PoCL's workers sleep whenever their queue is empty, and every enqueue wakes them all (a
// condition-variable broadcast). Under Linux's fair scheduler a thread that wakes after a sleep
// preempts the thread running on its CPU, so a worker pinned to the CPU where the host thread
// runs (backend/cpu_affinity.h) takes that CPU from the host at each of the host's enqueues,
// finds nothing to do or a lock the host holds, and sleeps again: `perf sched timehist` of the
// `scalar_read_ms` row (a `loss.item()`) on a 2-core Emerald Rapids Xeon VM (KVM, Linux 6.x,
// PoCL 3.1) showed the host and worker 0 switching on CPU 0 every 1-4 us, several times per
// read, while worker 1, alone on CPU 1, ran the kernel: 0.080-0.091 ms a read. The same
// workers under SCHED_BATCH, which never preempts on wake-up (they run when the host yields
// or sleeps, or on a CPU of their own), gave 0.022-0.025 ms (JAX: 0.026 on that VM).
//
// SCHED_BATCH keeps the normal priority and time share (nice 0): a worker that runs a long
// kernel gets its CPU as before. PoCL creates its workers with default attributes, so they
// inherit the creating thread's policy; ScopedBatchPolicy sets it on the thread that makes the
// first platform query (backend/opencl_device.cpp), for that query only.
namespace lazycl::backend {

// Sets the calling thread's policy to SCHED_BATCH for its lifetime, when `batch` is true and the
// thread runs under SCHED_OTHER (a real-time or idle-priority thread is left as it is), and puts
// SCHED_OTHER back when it goes. Linux only; elsewhere, or where the call fails, it does nothing.
class ScopedBatchPolicy {
 public:
  explicit ScopedBatchPolicy(bool batch);
  ~ScopedBatchPolicy();
  ScopedBatchPolicy(const ScopedBatchPolicy&) = delete;
  ScopedBatchPolicy& operator=(const ScopedBatchPolicy&) = delete;

  bool set() const { return set_; }  // whether this changed the policy

 private:
  bool set_ = false;
};

}  // namespace lazycl::backend
