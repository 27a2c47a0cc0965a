#include "base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lazycl::base {

std::string ErrnoText(int err) {
  char buf[256];
  // GNU strerror_r returns the message (maybe not in buf); XSI fills buf.
  auto result = strerror_r(err, buf, sizeof(buf));
  if constexpr (std::is_same_v<decltype(result), char*>) {
    return result;
  } else {
    return result == 0 ? std::string(buf) : absl::StrCat("errno ", err);
  }
}

absl::StatusOr<std::shared_ptr<const ReadOnlyFile>> ReadOnlyFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string why = absl::StrCat("cannot open '", path, "': ", ErrnoText(err));
    if (err == ENOENT) return absl::NotFoundError(why);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(why);
    return absl::InvalidArgumentError(why);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("cannot stat '", path, "': ", ErrnoText(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read '", path, "': it is not a regular file"));
  }
  return std::shared_ptr<const ReadOnlyFile>(
      new ReadOnlyFile(path, fd, static_cast<uint64_t>(st.st_size)));
}

ReadOnlyFile::~ReadOnlyFile() { ::close(fd_); }

absl::Status ReadOnlyFile::ReadAt(uint64_t offset, void* dst, size_t bytes) const {
  auto* out = static_cast<char*>(dst);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd_, out + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InternalError(absl::StrCat("reading bytes [", offset, ", ", offset + bytes,
                                              ") of '", path_, "': ", ErrnoText(errno)));
    }
    if (n == 0) {
      return absl::DataLossError(
          absl::StrCat("reading bytes [", offset, ", ", offset + bytes, ") of '", path_,
                       "': the file ends at ", offset + done, " (it had ", size_,
                       " bytes when it was loaded: it was truncated or replaced in place since)"));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace lazycl::base
