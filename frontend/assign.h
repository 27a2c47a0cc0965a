#pragma once

#include <vector>

#include "frontend/tensor_impl.h"

// In-place updates: the tensor layer's side of buffer donation (runtime/donation.h).
namespace lazycl::frontend {

// Gives each targets[i] the value of values[i] (same shape, dtype and device; checked by the
// caller), as PyTorch's in-place ops do: every handle of a target sees the new value. The
// pending values of each device are computed as one graph, each into its target's own buffer
// where the executor finds that safe, so an update holds its state once; otherwise into a new
// buffer, and the old one goes when its last reader does. Host tensors are eager: their values
// are already computed, and the targets are rebound to them. On failure the targets keep their
// old values, except that a device failure part-way through a graph may leave a donated buffer
// partly updated (as an interrupted in-place op in PyTorch would).
void AssignInPlace(const std::vector<TensorImpl*>& targets, const std::vector<Tensor>& values);

}  // namespace lazycl::frontend
