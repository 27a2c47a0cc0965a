#include "lazycl/memory.h"

#include "runtime/devices.h"

namespace lazycl {

void empty_cache() { runtime::EmptyPools(); }

}  // namespace lazycl
