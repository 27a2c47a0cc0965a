#include "frontend/deferred.h"

#include <algorithm>

#include "base/metrics_registry.h"
#include "base/status.h"

namespace lazycl::frontend {

int DeferredDepth(const std::vector<std::shared_ptr<ir::Storage>>& pending,
                  std::string_view cut_metric) {
  int depth = 0;
  for (const std::shared_ptr<ir::Storage>& storage : pending)
    depth = std::max(depth, storage->pending_depth());
  if (depth < kMaxPendingProducers) return depth + 1;
  for (const std::shared_ptr<ir::Storage>& storage : pending)
    base::ThrowIfError(storage->Produce());
  base::metrics::Add(cut_metric, 1);
  return 1;
}

}  // namespace lazycl::frontend
