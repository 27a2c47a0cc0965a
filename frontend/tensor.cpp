#include "lazycl/tensor.h"

#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/host_memory.h"
#include "base/dtype_table.h"
#include "base/half.h"
#include "base/pool_allocator.h"
#include "base/settings.h"
#include "base/status.h"
#include "frontend/dispatch.h"
#include "frontend/materialize.h"
#include "frontend/tensor_impl.h"
#include "runtime/devices.h"
#include "runtime/executor.h"
#include "runtime/storage.h"

namespace lazycl::frontend {

std::shared_ptr<TensorImpl> NewImpl(ir::NodePtr node, Device device, bool requires_grad) {
  // Throws (and is tried again on the next call) while a variable is malformed.
  static const bool settings_checked = (base::CurrentSettings(), true);
  (void)settings_checked;
  // From the thread's pool of blocks, as IR nodes are (base/pool_allocator.h): every op makes
  // one, ~420 a char-LM sampling token built op by op, each a malloc and free otherwise.
  auto impl = std::allocate_shared<TensorImpl>(base::PoolAllocator<TensorImpl>());
  impl->node = std::move(node);
  impl->device = device;
  impl->requires_grad = requires_grad;
  return impl;
}

}  // namespace lazycl::frontend

namespace lazycl {

using base::Throw;
using base::ThrowIfError;
using frontend::ImplOf;

Tensor::Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

using frontend::NodeOf;

std::vector<int64_t> Tensor::shape() const { return NodeOf(ImplOf(*this, "shape"))->shape; }
int64_t Tensor::dim() const {
  return static_cast<int64_t>(NodeOf(ImplOf(*this, "dim"))->shape.size());
}

int64_t Tensor::size(int64_t d) const {
  const ir::NodePtr node = NodeOf(ImplOf(*this, "size"));
  const ir::Shape& shape = node->shape;  // not copied: a sampling token asked 113 times
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (d < -rank || d >= rank) {
    base::Throw(absl::InvalidArgumentError(
        absl::StrCat("size: dim ", d, " is out of range for a tensor of rank ", rank, " (expected ",
                     -rank, " <= dim < ", rank, ")")));
  }
  return shape[d < 0 ? d + rank : d];
}

DType Tensor::dtype() const { return NodeOf(ImplOf(*this, "dtype"))->dtype; }
Device Tensor::device() const { return ImplOf(*this, "device").device; }
int64_t Tensor::numel() const { return ir::NumElements(NodeOf(ImplOf(*this, "numel"))->shape); }

bool Tensor::is_placeholder() const {
  const ir::NodePtr node = NodeOf(ImplOf(*this, "is_placeholder"));
  const ir::Node& n = *node;
  return n.op == ir::Op::kBuffer && n.storage->placeholder() &&
         !n.storage->manager().IsWritten(n.storage->id());
}

bool Tensor::requires_grad() const { return ImplOf(*this, "requires_grad").requires_grad; }

Tensor& Tensor::requires_grad_(bool requires_grad) {
  ImplOf(*this, "requires_grad_");
  if (requires_grad && !is_floating(dtype())) {
    base::Throw(absl::InvalidArgumentError(
        absl::StrCat("requires_grad_: only floating tensors can require gradients, this one is ",
                     dtype_name(dtype()))));
  }
  impl_->requires_grad = requires_grad;
  // Turning it off detaches a computed tensor from its record (it becomes a leaf).
  if (!requires_grad) impl_->grad_fn = nullptr;
  return *this;
}

Tensor Tensor::to(Device device) const { return frontend::Transfer(*this, device); }

namespace {

template <class T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<float>() {
  return DType::f32;
}
template <>
constexpr DType DTypeOf<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType DTypeOf<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType DTypeOf<uint8_t>() {
  return DType::boolean;
}
template <>
constexpr DType DTypeOf<double>() {
  return DType::f64;
}

const char* CppName(DType d) { return base::Info(d).cpp; }

// Whether to_vector<T> reads `have`: T's own dtype; f16 and bf16 also as float (converted)
// and as uint16_t (their bits).
template <class T>
bool Reads(DType have) {
  if constexpr (std::is_same_v<T, uint16_t>) {
    return is_half(have);
  } else if constexpr (std::is_same_v<T, float>) {
    return have == DType::f32 || is_half(have);
  } else {
    return have == DTypeOf<T>();
  }
}

template <class T>
const char* CppNameOf() {
  if constexpr (std::is_same_v<T, uint16_t>) {
    return "uint16_t";
  } else {
    return CppName(DTypeOf<T>());
  }
}

std::string ReadAdvice(DType have) {
  return is_half(have) ? absl::StrCat(
                             "read it with to_vector<float>() or, for its bits, "
                             "to_vector<uint16_t>()")
                       : absl::StrCat("read it with to_vector<", CppName(have), ">()");
}

}  // namespace

template <class T>
std::vector<T> Tensor::to_vector() const {
  const TensorImpl& impl = ImplOf(*this, "to_vector");
  const DType have = NodeOf(impl)->dtype;
  if (!Reads<T>(have)) {
    base::Throw(absl::InvalidArgumentError(absl::StrCat("to_vector<", CppNameOf<T>(),
                                                        ">: the tensor's dtype is ",
                                                        dtype_name(have), "; ", ReadAdvice(have))));
  }
  if constexpr (std::is_same_v<T, float>) {
    if (is_half(have)) {
      const std::vector<uint16_t> bits = to_vector<uint16_t>();
      std::vector<float> out(bits.size());
      for (size_t i = 0; i < bits.size(); ++i) {
        out[i] = have == DType::bf16 ? base::Bf16ToFloat(bits[i]) : base::F16ToFloat(bits[i]);
      }
      return out;
    }
  }
  const int64_t n = ir::NumElements(NodeOf(impl)->shape);
  std::vector<T> out;
  try {
    out.resize(static_cast<size_t>(n));
  } catch (const std::bad_alloc&) {
    base::Throw(base::HostOutOfMemory("to_vector", n * static_cast<int64_t>(sizeof(T))));
  } catch (const std::length_error&) {
    base::Throw(base::HostOutOfMemory("to_vector", n * static_cast<int64_t>(sizeof(T))));
  }
  frontend::ReadBytes(*this, out.data());  // straight into `out`: no host tensor in between
  return out;
}

void Tensor::copy_to_host(void* dst, size_t bytes) const {
  const TensorImpl& impl = ImplOf(*this, "copy_to_host");
  const ir::NodePtr node = NodeOf(impl);
  const int64_t n = ir::NumElements(node->shape);
  const size_t need = static_cast<size_t>(n) * dtype_size(node->dtype);
  if (bytes != need) {
    base::Throw(absl::InvalidArgumentError(
        absl::StrCat("copy_to_host: the destination holds ", bytes, " bytes but ", str(), " has ",
                     n, " elements of ", dtype_size(node->dtype), " bytes = ", need, " bytes")));
  }
  if (dst == nullptr && bytes > 0) {
    base::Throw(absl::InvalidArgumentError(
        absl::StrCat("copy_to_host: the destination is null for ", bytes, " bytes")));
  }
  frontend::ReadBytes(*this, dst);
}

template <class T>
T Tensor::item() const {
  if (numel() != 1) {
    base::Throw(absl::InvalidArgumentError(
        absl::StrCat("item: the tensor has ", numel(), " elements (shape ",
                     ir::ShapeString(shape()), "); item() needs exactly one")));
  }
  if (!Reads<T>(dtype())) {
    base::Throw(absl::InvalidArgumentError(absl::StrCat(
        "item<", CppNameOf<T>(), ">: the tensor's dtype is ", dtype_name(dtype()), "; ",
        is_half(dtype()) ? std::string("read it with item<float>()")
                         : absl::StrCat("read it with item<", CppName(dtype()), ">()"))));
  }
  return to_vector<T>()[0];
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;
template std::vector<uint16_t> Tensor::to_vector<uint16_t>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template float Tensor::item<float>() const;
template int32_t Tensor::item<int32_t>() const;
template int64_t Tensor::item<int64_t>() const;
template uint8_t Tensor::item<uint8_t>() const;
template uint16_t Tensor::item<uint16_t>() const;
template double Tensor::item<double>() const;

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  const ir::NodePtr node = NodeOf(*impl_);
  const ir::Node& n = *node;
  const char* state = is_placeholder()          ? "placeholder"
                      : n.op == ir::Op::kBuffer ? "data"
                                                : "pending";
  return absl::StrCat("Tensor(", dtype_name(n.dtype), ir::ShapeString(n.shape), ", ",
                      impl_->device.str(), ", ", state, ")");
}

void sync(const std::vector<Tensor>& tensors) {
  std::vector<TensorImpl*> impls;
  for (const Tensor& t : tensors) {
    frontend::ImplOf(t, "sync");
    impls.push_back(t.impl().get());
  }
  // Returns when the work is done (Materialize waits), so that it can be timed.
  base::ThrowIfError(frontend::Materialize(impls));
}

}  // namespace lazycl
