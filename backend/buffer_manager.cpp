#include "backend/buffer_manager.h"

#include <atomic>

namespace lazycl::backend {

BufferId NewBufferId() {
  static std::atomic<BufferId> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace lazycl::backend
