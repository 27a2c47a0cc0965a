#include "backend/opencl_memory.h"

#include <sys/mman.h>

#include <cstdlib>
#include <utility>

#include "backend/cl_error.h"
#include "base/fault.h"

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

OpenClMemory::OpenClMemory(cl::Context context, cl::CommandQueue queue, bool host_pages)
    : context_(std::move(context)), queue_(std::move(queue)), host_pages_(host_pages) {}

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
  cl_int err =
      clEnqueueWriteBuffer(queue_(), Mem(dst), CL_TRUE, offset, bytes, src, 0, nullptr, &event);
  if (err != CL_SUCCESS) return ClStatus(err, "clEnqueueWriteBuffer");
  return EventNanos(cl::Event(event));  // takes over the event's reference
}

absl::StatusOr<int64_t> OpenClMemory::CopyOut(void* dst, MemoryHandle src, size_t offset,
                                              size_t bytes) {
  if (base::fault::ShouldFail(base::fault::Site::kTransfer)) {
    return ClStatus(CL_OUT_OF_RESOURCES, "clEnqueueReadBuffer (injected fault)");
  }
  cl_event event = nullptr;
  cl_int err =
      clEnqueueReadBuffer(queue_(), Mem(src), CL_TRUE, offset, bytes, dst, 0, nullptr, &event);
  if (err != CL_SUCCESS) return ClStatus(err, "clEnqueueReadBuffer");
  return EventNanos(cl::Event(event));
}

}  // namespace lazycl::backend
