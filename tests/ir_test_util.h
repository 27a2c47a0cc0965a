#pragma once

// Helpers shared by the tests that build IR by hand (the code generator's and the host
// interpreter's).
#include <cstdlib>
#include <utility>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "ir/ir.h"

namespace lazycl::test {

// The node a builder made. Builders only fail on bad shapes, a bug in the test itself: the
// test fails there, with the builder's message, and stops.
inline ir::NodePtr Ok(absl::StatusOr<ir::NodePtr> node) {
  if (!node.ok()) {
    ADD_FAILURE() << node.status();
    std::abort();
  }
  return *std::move(node);
}

}  // namespace lazycl::test
