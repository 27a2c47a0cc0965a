#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "lazycl/device.h"
#include "lazycl/dtype.h"

namespace lazycl {

struct TensorImpl;  // frontend/tensor_impl.h
class Tensor;

// The entries of x.index({...}), PyTorch's x[...] (torch::indexing): an integer picks one
// element of a dim and drops it; Slice(start, stop, step) keeps a range (Python's rules:
// negative values count from the end, out-of-range bounds clamp, step >= 1); `ellipsis` stands
// for as many full dims as the others leave; `newaxis` inserts a dim of size 1; an integer
// tensor picks elements along a dim, its shape replacing the dim (negative ids count from the
// end, out-of-range ones clamp as index_select's; as in NumPy, when integers and the tensor
// entry are not side by side, the tensor's dims go first; several tensor entries broadcast
// together); a bool tensor is a mask whose true elements are picked.
struct Slice {
  explicit Slice(std::optional<int64_t> start_ = {}, std::optional<int64_t> stop_ = {},
                 int64_t step_ = 1)
      : start(start_), stop(stop_), step(step_) {}
  std::optional<int64_t> start, stop;
  int64_t step;
};
struct Ellipsis {};
struct NewAxis {};
inline constexpr Ellipsis ellipsis{};
inline constexpr NewAxis newaxis{};
using TensorIndex = std::variant<int64_t, Slice, Ellipsis, NewAxis, Tensor>;

// A handle to a value: a shape, a dtype, a device and either data or a recorded computation.
// Copies share the value (like torch.Tensor). Device tensors are lazy: ops record IR and
// nothing runs until sync(), to_vector(), item() or to(Device::host()) needs a result.
class Tensor {
 public:
  Tensor() = default;  // undefined: any use but defined() is an Error
  explicit Tensor(std::shared_ptr<TensorImpl> impl);

  bool defined() const { return impl_ != nullptr; }
  std::vector<int64_t> shape() const;
  int64_t dim() const;
  int64_t size(int64_t dim) const;  // negative dims count from the end
  DType dtype() const;
  Device device() const;
  int64_t numel() const;
  bool is_placeholder() const;
  bool requires_grad() const;
  Tensor& requires_grad_(bool requires_grad = true);

  // Host <-> device copy (counted). to(own device) returns the same tensor.
  Tensor to(Device device) const;

  // Runs pending work and reads the data back (a counted transfer for device tensors). T must
  // match the dtype: float for f32, double for f64, int32_t, int64_t, uint8_t for bool; f16 and
  // bf16 read as float (converted exactly) or as uint16_t (their bits).
  template <class T>
  std::vector<T> to_vector() const;
  // Writes the values, row-major in the tensor's dtype (f16/bf16 as their 16-bit patterns, bool
  // as bytes 0 and 1), to `dst`, which must hold `bytes` = numel() x the dtype's size: one
  // counted device-to-host copy straight into the caller's memory, no host tensor in between
  // (into a PinnedBuffer, lazycl/memory.h, on the driver's fastest path). Pending work runs first.
  void copy_to_host(void* dst, size_t bytes) const;
  // The single element of a one-element tensor.
  template <class T>
  T item() const;

  // Autograd (autograd.h). grad(): the gradient that backward() accumulated into this leaf,
  // undefined until then (and for tensors that are not leaves). backward(): adds d this / d leaf
  // to the grad() of every leaf that requires grad and that this was computed from; this must
  // have one element, else pass `gradient` (this tensor's shape): an Error otherwise.
  Tensor grad() const;
  void backward() const;
  void backward(const Tensor& gradient) const;
  // The same value with no gradient record (a leaf that does not require grad).
  Tensor detach() const;
  // Writes `src`'s values into this tensor, in place (PyTorch's copy_): every handle of it sees
  // them. `src` must have this tensor's shape and dtype; on another device it is moved here
  // (counted). On a device the values go into this tensor's own buffer when nothing else reads
  // the old ones (README, "Optimizers"). Records no gradient.
  Tensor& copy_(const Tensor& src);
  // Writes the `bytes` at `src` (row-major, in this tensor's dtype's layout, as copy_to_host
  // gives them; bytes = numel() x the dtype's size) into this tensor, in place: every handle
  // sees them. One counted upload, into the tensor's own buffer when nothing else reads its old
  // values (else into a new one); no kernel. Records no gradient.
  Tensor& copy_from_host(const void* src, size_t bytes);
  // Replaces grad() (PyTorch's `p.grad = g`): g must have this tensor's shape, dtype and device;
  // an undefined g clears it.
  Tensor& set_grad(const Tensor& g);
  // A leaf: not computed from anything (a tensor that requires grad and has no record).
  bool is_leaf() const;

  // x[i]: select(x, 0, i), dim 0 dropped. x.index({1, Slice(), Slice(0, 4, 2)}): x[1, :, 0:4:2]
  // (TensorIndex above). Views where a view does it (a step > 1 or a tensor entry gathers);
  // several tensor entries broadcast together, and a bool mask selects its true elements
  // (NumPy's rules; a mask is read when index is called, an Error inside a traced body);
  // gradients flow through them. A bad entry (out of range, too many, a mask that does not
  // match) is an Error naming it.
  Tensor operator[](int64_t i) const;
  Tensor index(std::initializer_list<TensorIndex> indices) const;
  // In place, as PyTorch's (x[...] = v is x.index_put_({...}, v)): copy_ of index_put's or
  // masked_fill's result (lazycl/indexing.h), which every handle of this tensor sees. They
  // record no gradient: on a tensor that requires grad, with grad mode on, they are an Error
  // that says to write x = index_put(x, ...) instead.
  Tensor& index_put_(std::initializer_list<TensorIndex> indices, const Tensor& values,
                     bool accumulate = false);
  Tensor& index_put_(std::initializer_list<TensorIndex> indices, double value,
                     bool accumulate = false);
  Tensor& masked_fill_(const Tensor& mask, double value);

  // "Tensor(f32[2,3], cl:0, lazy)"
  std::string str() const;

  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

extern template std::vector<float> Tensor::to_vector<float>() const;
extern template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
extern template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
extern template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;
extern template std::vector<uint16_t> Tensor::to_vector<uint16_t>() const;
extern template std::vector<double> Tensor::to_vector<double>() const;
extern template float Tensor::item<float>() const;
extern template int32_t Tensor::item<int32_t>() const;
extern template int64_t Tensor::item<int64_t>() const;
extern template uint8_t Tensor::item<uint8_t>() const;
extern template uint16_t Tensor::item<uint16_t>() const;
extern template double Tensor::item<double>() const;

// Runs the pending work of every tensor in `tensors` as one graph, without reading back.
void sync(const std::vector<Tensor>& tensors);

}  // namespace lazycl
