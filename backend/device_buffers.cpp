#include "backend/device_buffers.h"

#include <sys/mman.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "backend/cl_error.h"
#include "backend/pool_bins.h"
#include "base/check.h"
#include "base/metrics_registry.h"
#include "base/string_view.h"

namespace lazycl::backend {
namespace {

absl::Status CheckRange(const std::string& label, size_t size, size_t offset, size_t bytes) {
  if (offset > size || bytes > size - offset) {
    return absl::InvalidArgumentError(absl::StrCat("buffer '", label, "' of ", size,
                                                   " bytes: range [", offset, ", ", offset, " + ",
                                                   bytes, ") is out of bounds"));
  }
  return absl::OkStatus();
}

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

}  // namespace

DeviceBuffers::DeviceBuffers(cl::Context context, cl::CommandQueue queue, int64_t memory_limit,
                             int64_t max_alloc_bytes, bool host_pages)
    : context_(std::move(context)),
      queue_(std::move(queue)),
      memory_limit_(memory_limit),
      max_alloc_bytes_(max_alloc_bytes),
      host_pages_(host_pages) {}

DeviceBuffers::~DeviceBuffers() {
  // Buffers still owned by ids die with the manager; the gauges must not keep counting them.
  for (auto& [id, entry] : entries_) Free(entry, /*to_pool=*/false);
  TrimPool();
}

BufferId DeviceBuffers::Declare(size_t bytes, std::string label) {
  BufferId id = NewBufferId();
  Entry& entry = entries_[id];
  entry.bytes = bytes;
  entry.label = std::move(label);
  return id;
}

absl::Status DeviceBuffers::OutOfMemory(size_t bin_bytes, std::string_view why) const {
  std::string limit = memory_limit_ > 0
                          ? absl::StrCat(memory_limit_, " bytes (LAZYCL_DEVICE_MEMORY_LIMIT)")
                          : std::string("none set");
  return absl::ResourceExhaustedError(
      absl::StrCat("device out of memory (", base::Sv(why), "): requested ", bin_bytes,
                   " bytes, live ", live_bytes_, " bytes, peak ", peak_bytes_, " bytes, pooled ",
                   pool_bytes_, " bytes, limit ", limit));
}

void DeviceBuffers::TrimPool() {
  pool_.clear();
  if (pool_bytes_ != 0) base::metrics::Add("DevicePoolBytes", -pool_bytes_);
  pool_bytes_ = 0;
}

absl::StatusOr<cl::Buffer> DeviceBuffers::CreateFromDevice(size_t bin_bytes) {
  if (max_alloc_bytes_ > 0 && static_cast<int64_t>(bin_bytes) > max_alloc_bytes_) {
    return OutOfMemory(bin_bytes, absl::StrCat("above CL_DEVICE_MAX_MEM_ALLOC_SIZE of ",
                                               max_alloc_bytes_, " bytes"));
  }
  if (memory_limit_ > 0 &&
      live_bytes_ + pool_bytes_ + static_cast<int64_t>(bin_bytes) > memory_limit_) {
    TrimPool();
    if (live_bytes_ + static_cast<int64_t>(bin_bytes) > memory_limit_) {
      return OutOfMemory(bin_bytes, "over LAZYCL_DEVICE_MEMORY_LIMIT");
    }
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    cl_int err = CL_SUCCESS;
    cl::Buffer buffer = host_pages_ && bin_bytes >= kHugePage
                            ? HugePageBuffer(context_, bin_bytes, &err)
                            : cl::Buffer(context_, CL_MEM_READ_WRITE, bin_bytes, nullptr, &err);
    if (err == CL_SUCCESS) {
      base::metrics::Add("DeviceAllocBytes", static_cast<int64_t>(bin_bytes));
      base::metrics::Add("DeviceAllocCount", 1);
      return buffer;
    }
    if (!IsClOutOfMemory(err)) return ClStatus(err, "clCreateBuffer");
    if (attempt == 0) {
      TrimPool();
    } else {
      return OutOfMemory(bin_bytes, ClErrorName(err));
    }
  }
  return OutOfMemory(bin_bytes, "clCreateBuffer");
}

absl::Status DeviceBuffers::Allocate(Entry& entry) {
  if (entry.allocated) return absl::OkStatus();
  if (entry.bytes == 0) {
    entry.allocated = true;
    return absl::OkStatus();
  }
  const size_t bin = PoolBinBytes(entry.bytes);
  if (auto it = pool_.find(bin); it != pool_.end() && !it->second.empty()) {
    entry.buffer = std::move(it->second.back());
    it->second.pop_back();
    pool_bytes_ -= static_cast<int64_t>(bin);
    base::metrics::Add("DevicePoolBytes", -static_cast<int64_t>(bin));
  } else {
    absl::StatusOr<cl::Buffer> buffer = CreateFromDevice(bin);
    if (!buffer.ok()) return buffer.status();
    entry.buffer = *std::move(buffer);
  }
  entry.bin_bytes = bin;
  entry.allocated = true;
  live_bytes_ += static_cast<int64_t>(bin);
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  base::metrics::AddLiveBytes(static_cast<int64_t>(bin));
  return absl::OkStatus();
}

void DeviceBuffers::Free(Entry& entry, bool to_pool) {
  if (!entry.allocated) return;
  entry.allocated = false;
  if (entry.bin_bytes == 0) return;
  const int64_t bin = static_cast<int64_t>(entry.bin_bytes);
  live_bytes_ -= bin;
  base::metrics::AddLiveBytes(-bin);
  if (to_pool) {
    pool_[entry.bin_bytes].push_back(std::move(entry.buffer));
    pool_bytes_ += bin;
    base::metrics::Add("DevicePoolBytes", bin);
  }
  entry.buffer = cl::Buffer();
  entry.bin_bytes = 0;
}

absl::Status DeviceBuffers::Upload(BufferId id, const void* src, size_t offset, size_t bytes) {
  Entry& entry = Get(id);
  if (absl::Status s = CheckRange(entry.label, entry.bytes, offset, bytes); !s.ok()) return s;
  const bool fresh = !entry.allocated;
  if (absl::Status s = Allocate(entry); !s.ok()) return s;
  if (bytes > 0) {
    cl::Event event;
    cl_int err =
        queue_.enqueueWriteBuffer(entry.buffer, CL_TRUE, offset, bytes, src, nullptr, &event);
    if (IsClOutOfMemory(err) && fresh) {
      // Some drivers only commit memory on first use: give this buffer back to the device, empty
      // the pool and try once more with fresh storage.
      Free(entry, /*to_pool=*/false);
      TrimPool();
      if (absl::Status s = Allocate(entry); !s.ok()) return s;
      err = queue_.enqueueWriteBuffer(entry.buffer, CL_TRUE, offset, bytes, src, nullptr, &event);
      if (IsClOutOfMemory(err)) {
        absl::Status oom = OutOfMemory(entry.bin_bytes, "clEnqueueWriteBuffer");
        Free(entry, /*to_pool=*/false);
        return oom;
      }
    }
    if (err != CL_SUCCESS) return ClStatus(err, "clEnqueueWriteBuffer");
    base::metrics::Add("TransferToDeviceBytes", static_cast<int64_t>(bytes));
    base::metrics::Add("TransferToDeviceCount", 1);
    base::metrics::RecordTime("TransferToDeviceTime", EventNanos(event));
  }
  entry.written = true;
  return absl::OkStatus();
}

absl::Status DeviceBuffers::Download(BufferId id, void* dst, size_t offset, size_t bytes) {
  if (absl::Status s = CheckReadable(id); !s.ok()) return s;
  Entry& entry = Get(id);
  if (absl::Status s = CheckRange(entry.label, entry.bytes, offset, bytes); !s.ok()) return s;
  if (bytes == 0) return absl::OkStatus();
  cl::Event event;
  cl_int err = queue_.enqueueReadBuffer(entry.buffer, CL_TRUE, offset, bytes, dst, nullptr, &event);
  if (err != CL_SUCCESS) return ClStatus(err, "clEnqueueReadBuffer");
  base::metrics::Add("TransferFromDeviceBytes", static_cast<int64_t>(bytes));
  base::metrics::Add("TransferFromDeviceCount", 1);
  base::metrics::RecordTime("TransferFromDeviceTime", EventNanos(event));
  return absl::OkStatus();
}

absl::Status DeviceBuffers::PrepareWrite(BufferId id) {
  Entry& entry = Get(id);
  if (absl::Status s = Allocate(entry); !s.ok()) return s;
  entry.written = true;
  return absl::OkStatus();
}

absl::Status DeviceBuffers::CheckReadable(BufferId id) const {
  const Entry& entry = Get(id);
  if (!entry.written) return NotWrittenError(entry.label, entry.bytes);
  return absl::OkStatus();
}

absl::StatusOr<cl_mem> DeviceBuffers::Mem(BufferId id) {
  Entry& entry = Get(id);
  LAZYCL_CHECK(entry.allocated, "DeviceBuffers::Mem of unallocated buffer '%s'",
               entry.label.c_str());
  if (entry.bytes > 0) return entry.buffer();
  if (dummy_() == nullptr) {
    cl_int err = CL_SUCCESS;
    dummy_ = cl::Buffer(context_, CL_MEM_READ_WRITE, sizeof(cl_long), nullptr, &err);
    if (err != CL_SUCCESS) return ClStatus(err, "clCreateBuffer (dummy for a 0-byte buffer)");
  }
  return dummy_();
}

void DeviceBuffers::Release(BufferId id) {
  auto it = entries_.find(id);
  LAZYCL_CHECK(it != entries_.end(), "DeviceBuffers::Release of unknown buffer id %llu",
               static_cast<unsigned long long>(id));
  Free(it->second, /*to_pool=*/true);
  entries_.erase(it);
}

size_t DeviceBuffers::Bytes(BufferId id) const { return Get(id).bytes; }
bool DeviceBuffers::IsAllocated(BufferId id) const { return Get(id).allocated; }
bool DeviceBuffers::IsWritten(BufferId id) const { return Get(id).written; }
const std::string& DeviceBuffers::Label(BufferId id) const { return Get(id).label; }

const DeviceBuffers::Entry& DeviceBuffers::Get(BufferId id) const {
  auto it = entries_.find(id);
  LAZYCL_CHECK(it != entries_.end(), "unknown device buffer id %llu",
               static_cast<unsigned long long>(id));
  return it->second;
}

DeviceBuffers::Entry& DeviceBuffers::Get(BufferId id) {
  auto it = entries_.find(id);
  LAZYCL_CHECK(it != entries_.end(), "unknown device buffer id %llu",
               static_cast<unsigned long long>(id));
  return it->second;
}

}  // namespace lazycl::backend
