#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// A file opened read-only and kept open, read at offsets (pread). The lazily loaded tensors of a
// checkpoint share one (a shared_ptr): its descriptor lives while any of them waits for its
// bytes, so the bytes are those of the file that was loaded even if the path is replaced.
//
// Why pread and not a mapping: a mapped file that another process truncates afterwards makes
// the next touch of the lost pages a SIGBUS, which kills the process; a read past the new end
// is a short read, which ReadAt turns into an error naming the file. The price is one copy
// through a caller's buffer, which a copy out of a mapping costs too.
namespace lazycl::base {

class ReadOnlyFile {
 public:
  // NotFound / PermissionDenied / ... naming `path` and the system's reason.
  static absl::StatusOr<std::shared_ptr<const ReadOnlyFile>> Open(const std::string& path);
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  const std::string& path() const { return path_; }
  // The size when it was opened.
  uint64_t size() const { return size_; }

  // Reads bytes [offset, offset + bytes) into `dst`. DataLoss naming the file when it ends
  // before that (it was truncated since it was opened); the system's error otherwise.
  absl::Status ReadAt(uint64_t offset, void* dst, size_t bytes) const;

 private:
  ReadOnlyFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_;
  uint64_t size_;
};

// The system's message for errno `err`, e.g. "No such file or directory".
std::string ErrnoText(int err);

}  // namespace lazycl::base
