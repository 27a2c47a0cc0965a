#include "backend/thread_policy.h"

#if defined(__linux__)
#include <sched.h>
#endif

namespace lazycl::backend {

ScopedBatchPolicy::ScopedBatchPolicy(bool batch) {
#if defined(__linux__)
  if (!batch || sched_getscheduler(0) != SCHED_OTHER) return;
  const sched_param param{};  // priority 0, as both policies require
  set_ = sched_setscheduler(0, SCHED_BATCH, &param) == 0;
#else
  (void)batch;
#endif
}

ScopedBatchPolicy::~ScopedBatchPolicy() {
#if defined(__linux__)
  if (!set_) return;
  const sched_param param{};
  (void)sched_setscheduler(0, SCHED_OTHER, &param);  // BATCH -> OTHER is always allowed
#endif
}

}  // namespace lazycl::backend
