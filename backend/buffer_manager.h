#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace lazycl::backend {

// Identifies one buffer within one BufferManager. Never reused within a process.
using BufferId = uint64_t;

// A fresh id from one process-wide counter, shared by every BufferManager, so an id names one
// buffer across managers and is never reused. Never 0.
BufferId NewBufferId();

// The error for reading a buffer that was declared but never written.
absl::Status NotWrittenError(const std::string& label, size_t bytes);

// A buffer is *declared* (a size and a label, no memory), then *allocated* (storage obtained
// when a kernel is about to write it or data is uploaded), and *written* once data is in it.
// A declared buffer that is never written is what a placeholder is: reading it is an error.
// One BufferManager serves one device (or host memory); it is not thread-safe.
class BufferManager {
 public:
  virtual ~BufferManager() = default;

  // Costs no memory. `label` names the buffer in error messages.
  virtual BufferId Declare(size_t bytes, std::string label) = 0;

  // Copies bytes [offset, offset + bytes) from `src` into the buffer, allocating storage first
  // if needed, and marks it written. Counted as a host->device transfer where that is real.
  virtual absl::Status Upload(BufferId id, const void* src, size_t offset, size_t bytes) = 0;

  // Copies bytes [offset, offset + bytes) of the buffer into `dst`. FailedPrecondition, naming
  // the buffer, when it was never written.
  virtual absl::Status Download(BufferId id, void* dst, size_t offset, size_t bytes) = 0;

  // Obtains storage because a kernel is about to write the buffer, and marks it written.
  // ResourceExhausted when the device (or LAZYCL_DEVICE_MEMORY_LIMIT) has no room.
  virtual absl::Status PrepareWrite(BufferId id) = 0;

  // OK when the buffer holds data; FailedPrecondition naming it otherwise.
  virtual absl::Status CheckReadable(BufferId id) const = 0;

  // Forgets the buffer; its storage goes back to the pool.
  virtual void Release(BufferId id) = 0;

  virtual size_t Bytes(BufferId id) const = 0;
  virtual bool IsAllocated(BufferId id) const = 0;
  virtual bool IsWritten(BufferId id) const = 0;
  virtual const std::string& Label(BufferId id) const = 0;
};

}  // namespace lazycl::backend
