#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "frontend/tensor_impl.h"

// The graph executor: the one place that knows the IR, the lowering and the backend.
namespace lazycl::frontend {

// Graphs whose pending nodes exceed this are computed at once when a node is made, so that a
// loop such as `for (...) a = a + b;` runs in bounded memory and bounded kernel size.
inline constexpr int64_t kMaxPendingNodes = 512;

// Computes every pending device tensor in `tensors` as one graph per device, and replaces each
// one's node with a Buffer leaf holding its result. Host tensors and computed tensors are left
// as they are. A graph that needs the data of a placeholder fails with FailedPrecondition before
// anything runs, and leaves every tensor untouched.
absl::Status Materialize(const std::vector<TensorImpl*>& tensors);

// The message for reading a placeholder: names the word, the shape, the dtype and the device.
std::string PlaceholderMessage(const ir::Node& leaf, const Device& device);

}  // namespace lazycl::frontend
