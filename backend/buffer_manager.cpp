#include "backend/buffer_manager.h"

#include <atomic>

#include "absl/strings/str_cat.h"

namespace lazycl::backend {

BufferId NewBufferId() {
  static std::atomic<BufferId> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

absl::Status NotWrittenError(const std::string& label, size_t bytes) {
  return absl::FailedPreconditionError(absl::StrCat(
      "buffer '", label, "' (", bytes, " bytes) holds no data: it was declared but never written"));
}

}  // namespace lazycl::backend
