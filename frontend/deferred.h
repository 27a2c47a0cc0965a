#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "runtime/storage.h"

// Deferred work (ir::Producer): a device scan's steps (frontend/scan.cpp) and a traced
// Function's call (frontend/function.cpp) return their results declared, and run when one of
// them is first needed. A run first runs the pending work it reads, so a chain of them recurses
// when it finally runs; the chain's length is bounded here.
namespace lazycl::frontend {

// How many pieces of deferred work may wait on one another: one that reads the results of a
// chain this deep runs that chain at once (as the automatic cut computes a graph past 512
// pending nodes).
inline constexpr int kMaxPendingProducers = 16;

// The depth of a Producer whose run reads `pending` (storages still pending): 1 + the deepest of
// their producers; past kMaxPendingProducers they are run now (counted in `cut_metric`) and the
// depth is 1. Throws the error of a run that fails.
int DeferredDepth(const std::vector<std::shared_ptr<ir::Storage>>& pending,
                  std::string_view cut_metric);

}  // namespace lazycl::frontend
