#include "backend/opencl_memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "backend/cl_error.h"
#include "backend/event_wait.h"
#include "base/fault.h"
#include "base/metrics_registry.h"

namespace lazycl::backend {
namespace {

// Device time of a finished command from its profiling event; 0 when profiling is unavailable.
int64_t EventNanos(const cl::Event& event) {
  cl_int err_start = CL_SUCCESS;
  cl_int err_end = CL_SUCCESS;
  const cl_ulong start = event.getProfilingInfo<CL_PROFILING_COMMAND_START>(&err_start);
  const cl_ulong end = event.getProfilingInfo<CL_PROFILING_COMMAND_END>(&err_end);
  if (err_start != CL_SUCCESS || err_end != CL_SUCCESS || end < start) return 0;
  return static_cast<int64_t>(end - start);
}

constexpr size_t kHugePage = size_t{2} << 20;

// A cl::Buffer over host memory of our own, 2 MiB aligned and advised for transparent huge
// pages (the whole 2 MiB stretches of it; the rest of the last one uses small pages, so no
// buffer holds more than 4 KiB it did not ask for); the memory is freed by OpenCL's destructor
// callback once the cl_mem is really gone (after every command that used it). Returns a null
// buffer with `*err` set on failure.
cl::Buffer HugePageBuffer(const cl::Context& context, size_t bytes, cl_int* err) {
  const size_t rounded = (bytes + 4095) / 4096 * 4096;
  void* memory = nullptr;
  if (posix_memalign(&memory, kHugePage, rounded) != 0) {
    *err = CL_MEM_OBJECT_ALLOCATION_FAILURE;
    return cl::Buffer();
  }
  madvise(memory, rounded, MADV_HUGEPAGE);  // advice only: without THP it is plain memory
  cl::Buffer buffer(context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, memory, err);
  if (*err != CL_SUCCESS) {
    std::free(memory);
    return cl::Buffer();
  }
  *err = clSetMemObjectDestructorCallback(
      buffer(), [](cl_mem, void* p) { std::free(p); }, memory);
  if (*err != CL_SUCCESS) {
    // The buffer cannot outlive this frame without a way to free its memory.
    buffer = cl::Buffer();
    std::free(memory);
  }
  return buffer;
}

// The handle of `buffer`: one more reference to its cl_mem, which Free releases.
MemoryHandle Retained(const cl::Buffer& buffer) {
  clRetainMemObject(buffer());
  return buffer();
}

}  // namespace

OpenClMemory::OpenClMemory(cl::Context context, cl::CommandQueue queue, bool host_pages,
                           int64_t read_spin_ns, KeepAwake* keep_awake)
    : context_(std::move(context)),
      queue_(std::move(queue)),
      host_pages_(host_pages),
      read_spin_ns_(read_spin_ns),
      keep_awake_(keep_awake) {}

absl::StatusOr<MemoryHandle> OpenClMemory::Allocate(size_t bytes) {
  cl_int err = CL_SUCCESS;
  if (base::fault::ShouldFail(base::fault::Site::kAlloc)) {
    return ClStatus(CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer (injected fault)");
  }
  if (bytes == 0) {
    if (empty_() == nullptr) {
      empty_ = cl::Buffer(context_, CL_MEM_READ_WRITE, sizeof(cl_long), nullptr, &err);
      if (err != CL_SUCCESS) return ClStatus(err, "clCreateBuffer (for a 0-byte buffer)");
    }
    return Retained(empty_);
  }
  cl::Buffer buffer = host_pages_ && bytes >= kHugePage
                          ? HugePageBuffer(context_, bytes, &err)
                          : cl::Buffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, &err);
  if (err != CL_SUCCESS) return ClStatus(err, "clCreateBuffer");
  return Retained(buffer);
}

void OpenClMemory::Free(MemoryHandle handle) { clReleaseMemObject(Mem(handle)); }

absl::StatusOr<int64_t> OpenClMemory::CopyIn(MemoryHandle dst, size_t offset, const void* src,
                                             size_t bytes) {
  if (base::fault::ShouldFail(base::fault::Site::kTransfer)) {
    return ClStatus(CL_OUT_OF_RESOURCES, "clEnqueueWriteBuffer (injected fault)");
  }
  cl_event event = nullptr;
  std::unique_lock<std::mutex> lock(staged_mu_);
  ReapStagedLocked(/*wait=*/false);
  if (bytes <= kStagedCopyInBytes && staged_bytes_ + bytes <= kMaxStagedBytes) {
    // A blocking write waits for every command queued ahead of it and then for a hand-off to
    // and from the driver's threads (~50 us for 4 KiB on PoCL, 2-core VM: BM_Upload); a small
    // source is cheaper to copy.
    std::unique_ptr<char[]> data(new char[bytes]);
    std::memcpy(data.get(), src, bytes);
    cl_int err = clEnqueueWriteBuffer(queue_(), Mem(dst), CL_FALSE, offset, bytes, data.get(), 0,
                                      nullptr, &event);
    if (err != CL_SUCCESS) return ClStatus(err, "clEnqueueWriteBuffer");
    staged_bytes_ += bytes;
    staged_.push_back({cl::Event(event), std::move(data), bytes});  // takes over the reference
    return kTimedLater;
  }
  lock.unlock();
  cl_int err =
      clEnqueueWriteBuffer(queue_(), Mem(dst), CL_TRUE, offset, bytes, src, 0, nullptr, &event);
  if (err != CL_SUCCESS) return ClStatus(err, "clEnqueueWriteBuffer");
  return EventNanos(cl::Event(event));  // takes over the event's reference
}

void OpenClMemory::ReapStagedLocked(bool wait) {
  // The queue runs in order: the writes end in the order they were staged.
  size_t done = 0;
  for (; done < staged_.size(); ++done) {
    StagedWrite& w = staged_[done];
    cl_int status = CL_QUEUED;
    if (w.event.getInfo(CL_EVENT_COMMAND_EXECUTION_STATUS, &status) != CL_SUCCESS) status = -1;
    if (status > CL_COMPLETE) {
      if (!wait) break;
      status = w.event.wait() == CL_SUCCESS ? CL_COMPLETE : -1;
    }
    // Failed: nothing reads the copy again, and there is no time to record.
    if (status == CL_COMPLETE) {
      base::metrics::RecordTime("TransferToDeviceTime", EventNanos(w.event));
    }
    staged_bytes_ -= w.bytes;
  }
  staged_.erase(staged_.begin(), staged_.begin() + static_cast<std::ptrdiff_t>(done));
}

void OpenClMemory::ReapStaged() {
  std::lock_guard<std::mutex> lock(staged_mu_);
  if (!staged_.empty()) ReapStagedLocked(/*wait=*/false);
}

size_t OpenClMemory::staged_bytes() {
  std::lock_guard<std::mutex> lock(staged_mu_);
  return staged_bytes_;
}

OpenClMemory::~OpenClMemory() {
  std::lock_guard<std::mutex> lock(staged_mu_);
  ReapStagedLocked(/*wait=*/true);
}

absl::StatusOr<int64_t> OpenClMemory::CopyOut(void* dst, MemoryHandle src, size_t offset,
                                              size_t bytes) {
  if (base::fault::ShouldFail(base::fault::Site::kTransfer)) {
    return ClStatus(CL_OUT_OF_RESOURCES, "clEnqueueReadBuffer (injected fault)");
  }
  cl_event raw = nullptr;
  cl_int err =
      clEnqueueReadBuffer(queue_(), Mem(src), CL_FALSE, offset, bytes, dst, 0, nullptr, &raw);
  if (err != CL_SUCCESS) return ClStatus(err, "clEnqueueReadBuffer");
  const cl::Event event(raw);  // takes over the reference
  // Not blocking: the host polls before it sleeps (backend/event_wait.h).
  const cl_int flushed = clFlush(queue_());
  if (keep_awake_ != nullptr) keep_awake_->Waiting();
  const cl_int waited = WaitForEvent(raw, flushed == CL_SUCCESS ? read_spin_ns_ : 0);
  if (keep_awake_ != nullptr) keep_awake_->Touch();  // the host works on
  if (flushed != CL_SUCCESS || waited != CL_SUCCESS) {
    clFinish(queue_());  // whatever failed, nothing writes into `dst` once this returns
    return flushed != CL_SUCCESS ? ClStatus(flushed, "clFlush")
                                 : ClStatus(waited, "clEnqueueReadBuffer (waiting for the read)");
  }
  ReapStaged();  // the staged writes queued before this read have run
  return EventNanos(event);
}

}  // namespace lazycl::backend
