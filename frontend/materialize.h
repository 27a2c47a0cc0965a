#pragma once

#include <vector>

#include "absl/status/status.h"
#include "frontend/tensor_impl.h"

// The tensor layer's side of running graphs: which tensors are pending, on which device, and
// rebinding each handle to its result (the runtime returns buffers; it never touches a Tensor).
namespace lazycl::frontend {

// Computes every pending device tensor in `tensors` as one graph per device and replaces each
// one's node with a Buffer leaf holding its result. Host tensors and computed tensors are left
// as they are; a tensor listed twice (or two handles of one value) is computed once. On failure
// every tensor is left untouched. `wait` as runtime::Materialize.
absl::Status Materialize(const std::vector<TensorImpl*>& tensors, bool wait = true);

// The automatic cut of `t`, a pending device tensor whose graph grew past ir::MaxPendingNodes():
// computes it as Materialize does, and in the same graph every node of its graph that something
// else still holds (a live tensor, another pending graph, the autograd tape), keeping those
// values in their nodes (ir::NodeMemo) so that later graphs read them instead of computing
// them again: without that, each cut of a layer that reads one shared input recomputes the whole
// graph before it.
absl::Status MaterializeCut(TensorImpl& t);

}  // namespace lazycl::frontend
