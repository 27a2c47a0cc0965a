#pragma once

#include <cstdint>

#include "lazycl/tensor.h"

// Indexing by integer tensors. Index tensors ("index", "ids") are i32 or i64; any other dtype is
// a lazycl::Error. Negative dims count from the end.
//
// Out-of-range indices follow JAX's documented defaults for retrieval and update, never reading
// or writing outside a buffer, with the same values on the host and on every device:
// - gather, take_along_dim, index_select (and nn::embedding) clamp every index into
//   [0, size - 1] of the indexed dim: an index >= size reads the last element, and a negative
//   index reads the first (it is clamped too, not counted from the end as Python's -1 would be;
//   jnp's NumPy-style functions wrap -1, lax.gather's "clip" mode clamps as we do). Gathering
//   from an empty dim is an error unless no element is gathered.
// - scatter_add drops every update whose index is outside [0, size) (negative ones included),
//   as JAX's scatter does by default ("fill or drop").
// Gradients: the index gets none; x's gradient of gather/index_select is a scatter_add of the
// cotangent into zeros, and scatter_add sends x the cotangent and src the cotangent gathered at
// the index (zero where the update was dropped). scatter_add is deterministic: the same bits on
// every run and device, each output element adding its updates in ascending index position.
namespace lazycl {

// torch.gather / jnp.take_along_axis: index has x's rank and the result index's shape;
// out[i][j][k] = x[i][index[i][j][k]][k] for dim 1. As in PyTorch, index's dims other than
// `dim` must be at most x's (no broadcasting): a smaller index reads the leading part of x.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// The same op under PyTorch's other name (index of x's rank; no broadcasting).
Tensor take_along_dim(const Tensor& x, const Tensor& index, int64_t dim);

// torch.index_select: `ids` is 1-D; the result is x with its dim `dim` replaced by ids' length,
// slice i being x's slice ids[i].
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& ids);

// torch.scatter_add (out of place): x with every src[j..] added at x[j.. with j_dim =
// index[j..]]. index, src and x have one rank; index's dims are at most src's, and at most x's
// outside `dim` (only the leading index-shaped part of src is read). x and src must have one
// numeric dtype (not bool). Integer sums wrap; f16 and bf16 add in f32 and round once.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

// x[..., index, ...] along `dim`: the dim dropped (torch.select). index in [-size, size).
Tensor select(const Tensor& x, int64_t dim, int64_t index);
// x[..., start:start + length, ...] along `dim` (torch.narrow): start may be negative (from the
// end); start + length must not pass the dim's end.
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
// x.index({...}) as a function.
Tensor index(const Tensor& x, const std::vector<TensorIndex>& indices);

// Index assignment, out of place (torch.index_put; JAX's x.at[...].set / .add): x with the
// elements index(x, indices) selects set to `values` (broadcast to their shape), or with
// `accumulate` increased by them. values must have x's dtype (as PyTorch asks); a number is
// converted to it. Integer ids count from the end when negative; an id outside its dim drops
// its update (JAX's default), never writing elsewhere. With set, elements selected more than
// once are unspecified in PyTorch and JAX; here they get the sum of their values (accumulate
// adds them, deterministically). x[mask] = v with one value is a where() (nothing read, fine
// inside a traced body); every other form reads its bool masks as index() does and scatters
// (scatter_add's cost: it grows with the number of selected elements times the smaller of that
// and x's size). Gradients: x's where it was not set, values' from the selected elements.
Tensor index_put(const Tensor& x, const std::vector<TensorIndex>& indices, const Tensor& values,
                 bool accumulate = false);
Tensor index_put(const Tensor& x, const std::vector<TensorIndex>& indices, double value,
                 bool accumulate = false);

// torch.masked_fill: x with `value` (converted to x's dtype) where the bool `mask`, broadcast
// to x's shape, is true. A where(): nothing is read, and it works inside a traced body.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// PyTorch's one_hot: integer ids -> i64 tensor of shape ids.shape + [classes], 1 where the
// last coordinate equals the id. An id outside [0, classes) gives a row of zeros (as
// jax.nn.one_hot; PyTorch raises). classes must be >= 0 (no inference from the data).
Tensor one_hot(const Tensor& ids, int64_t classes);

}  // namespace lazycl
