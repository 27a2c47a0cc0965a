#include "backend/file_slot_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

namespace lazycl::backend {

FileSlotLock& FileSlotLock::operator=(FileSlotLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FileSlotLock::~FileSlotLock() {
  if (fd_ >= 0) close(fd_);  // closing the description releases its lock
}

FileSlotLock FileSlotLock::Acquire(const std::string& path, uint64_t slot) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return FileSlotLock();
  int result = 0;
#ifdef F_OFD_SETLKW
  struct flock range = {};
  range.l_type = F_WRLCK;
  range.l_whence = SEEK_SET;
  range.l_start = static_cast<off_t>(slot);
  range.l_len = 1;
  do {
    result = fcntl(fd, F_OFD_SETLKW, &range);
  } while (result != 0 && errno == EINTR);
#else
  // No open file description locks here: the whole file, one slot for all.
  static_cast<void>(slot);
  do {
    result = flock(fd, LOCK_EX);
  } while (result != 0 && errno == EINTR);
#endif
  if (result != 0) {
    close(fd);
    return FileSlotLock();
  }
  return FileSlotLock(fd);
}

}  // namespace lazycl::backend
