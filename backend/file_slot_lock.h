#pragma once

#include <cstdint>
#include <string>

// A lock that processes sharing a directory take around work only one of them should do at a
// time (internal to backend/). The program cache holds one while it builds a program and saves
// its binary: two processes that compile the same source at once race inside PoCL 3.1, which
// deletes and rewrites its cached program.bc while the other process serializes it for
// CL_PROGRAM_BINARIES, and then saves a binary without it or reads a directory it failed to open
// (SIGSEGV in readdir; seen in CI with ctest -j2).
namespace lazycl::backend {

class FileSlotLock {
 public:
  FileSlotLock() = default;  // holds nothing
  FileSlotLock(FileSlotLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileSlotLock& operator=(FileSlotLock&& other) noexcept;
  FileSlotLock(const FileSlotLock&) = delete;
  FileSlotLock& operator=(const FileSlotLock&) = delete;
  ~FileSlotLock();

  // Blocks until this object holds slot `slot` (one byte, at that offset) of the file at `path`,
  // which is created if missing. An open file description lock (F_OFD_SETLKW): exclusive between
  // threads of one process as between processes, and released when the object goes away or its
  // process dies. Where the file cannot be created or locked (an unwritable directory), returns
  // a lock that holds nothing, and the caller goes on unlocked: the lock guards a cache, which
  // is an optimisation.
  static FileSlotLock Acquire(const std::string& path, uint64_t slot);

  bool held() const { return fd_ >= 0; }

 private:
  explicit FileSlotLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace lazycl::backend
