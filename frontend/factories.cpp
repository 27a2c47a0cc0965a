#include "lazycl/factories.h"

#include <cmath>
#include <memory>
#include <new>
#include <stdexcept>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backend/host_memory.h"
#include "base/random.h"
#include "base/status.h"
#include "frontend/dispatch.h"
#include "frontend/tensor_impl.h"
#include "lazycl/env.h"
#include "lazycl/ops.h"
#include "runtime/devices.h"
#include "runtime/storage.h"

namespace lazycl {
namespace {

using base::Throw;

Device Resolve(const std::optional<Device>& device) { return device ? *device : default_device(); }

void CheckShape(const std::vector<int64_t>& shape, absl::string_view op) {
  base::ThrowIfError(ir::ValidateShape(shape, op));
}

template <class T>
Tensor FromVector(const std::vector<T>& data, std::vector<int64_t> shape, DType dtype,
                  std::optional<Device> device) {
  CheckShape(shape, "tensor");
  if (ir::NumElements(shape) != static_cast<int64_t>(data.size())) {
    base::Throw(absl::InvalidArgumentError(
        absl::StrCat("tensor: ", data.size(), " values do not fill shape ", ir::ShapeString(shape),
                     " (", ir::NumElements(shape), " elements)")));
  }
  return frontend::FromHostBytes(data.data(), data.size() * sizeof(T), dtype, std::move(shape),
                                 Resolve(device));
}

// Uniform values in (0, 1) over `shape` from the counters stride * i + offset (i the element's
// row-major index): one RandomUniform over an iota, computed inside the kernels that read it
// (ir/op_table.h), the same bits on the host and every device.
Tensor Uniform01(const std::vector<int64_t>& shape, uint64_t seed, int64_t stride, int64_t offset,
                 Device device) {
  const int64_t n = ir::NumElements(shape);
  auto constant = [n](int64_t v) {
    return ir::MakeConstant(static_cast<double>(v), DType::i64, {n});
  };
  absl::StatusOr<ir::NodePtr> counter = ir::MakeIota(DType::i64, n);
  if (counter.ok() && stride != 1)
    counter = ir::MakeBinary(ir::Op::kMul, *counter, constant(stride));
  if (counter.ok() && offset != 0)
    counter = ir::MakeBinary(ir::Op::kAdd, *counter, constant(offset));
  if (counter.ok()) counter = ir::MakeReshape(*counter, shape);
  if (!counter.ok()) base::Throw(counter.status());
  ir::NodePtr seed_node =
      ir::MakeScalar(static_cast<double>(base::FoldSeed(seed)), DType::i64, shape);
  return frontend::Wrap(ir::MakeBinary(ir::Op::kRandomUniform, *counter, std::move(seed_node)),
                        device);
}

void CheckRandom(const std::vector<int64_t>& shape, DType dtype, const char* op) {
  CheckShape(shape, op);
  if (!is_floating(dtype)) {
    base::Throw(absl::InvalidArgumentError(absl::StrCat(
        op, ": expected a floating dtype (f32, f64, f16 or bf16), got ", dtype_name(dtype))));
  }
}

// full(), zeros() and ones(); `op` is the name the user called, for error messages. full's value
// is the user's: a Scalar, passed to kernels as an argument, so a new value compiles nothing;
// zeros' and ones' are structural Constants, baked into the source.
Tensor Full(std::vector<int64_t> shape, double value, DType dtype, std::optional<Device> device,
            absl::string_view op, bool user_value) {
  CheckShape(shape, op);
  ir::NodePtr n = user_value ? ir::MakeScalar(value, dtype, std::move(shape))
                             : ir::MakeConstant(value, dtype, std::move(shape));
  return frontend::Wrap(std::move(n), Resolve(device));
}

}  // namespace

Tensor tensor(std::vector<float> data, std::vector<int64_t> shape, std::optional<Device> device) {
  return FromVector(data, std::move(shape), DType::f32, device);
}
Tensor tensor(std::vector<int32_t> data, std::vector<int64_t> shape, std::optional<Device> device) {
  return FromVector(data, std::move(shape), DType::i32, device);
}
Tensor tensor(std::vector<int64_t> data, std::vector<int64_t> shape, std::optional<Device> device) {
  return FromVector(data, std::move(shape), DType::i64, device);
}
Tensor tensor(const std::vector<double>& data, std::vector<int64_t> shape, DType dtype,
              std::optional<Device> device) {
  if (dtype == DType::f64) return FromVector(data, std::move(shape), DType::f64, device);
  // Converted on the host as cast() converts, then moved.
  const Tensor wide = FromVector(data, std::move(shape), DType::f64, Device::host());
  const Tensor narrow = cast(wide, dtype);
  const Device to = Resolve(device);
  return to.is_host() ? narrow : narrow.to(to);
}
Tensor tensor_bool(std::vector<uint8_t> data, std::vector<int64_t> shape,
                   std::optional<Device> device) {
  for (uint8_t& b : data) b = b != 0;
  return FromVector(data, std::move(shape), DType::boolean, device);
}

Tensor from_host_memory(const void* data, size_t bytes, std::vector<int64_t> shape, DType dtype,
                        std::optional<Device> device) {
  CheckShape(shape, "from_host_memory");
  const int64_t n = ir::NumElements(shape);
  const size_t need = static_cast<size_t>(n) * dtype_size(dtype);
  if (bytes != need) {
    base::Throw(absl::InvalidArgumentError(absl::StrCat(
        "from_host_memory: ", bytes, " bytes given for ", dtype_name(dtype), ir::ShapeString(shape),
        ", which holds ", n, " elements of ", dtype_size(dtype), " bytes = ", need, " bytes")));
  }
  if (data == nullptr && bytes > 0) {
    base::Throw(absl::InvalidArgumentError(
        absl::StrCat("from_host_memory: data is null for ", bytes, " bytes")));
  }
  if (dtype == DType::boolean) {
    // A bool is stored as one byte, 0 or 1; kernels compare against 1-valued bytes.
    const auto* b = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < bytes; ++i) {
      if (b[i] > 1) {
        base::Throw(absl::InvalidArgumentError(
            absl::StrCat("from_host_memory: byte ", i, " of a bool tensor is ", b[i],
                         "; bools are bytes 0 or 1 (tensor_bool() converts any byte)")));
      }
    }
  }
  return frontend::FromHostBytes(data, bytes, dtype, std::move(shape), Resolve(device));
}

Tensor full(std::vector<int64_t> shape, double value, DType dtype, std::optional<Device> device) {
  return Full(std::move(shape), value, dtype, device, "full", /*user_value=*/true);
}
Tensor zeros(std::vector<int64_t> shape, DType dtype, std::optional<Device> device) {
  return Full(std::move(shape), 0, dtype, device, "zeros", /*user_value=*/false);
}
Tensor ones(std::vector<int64_t> shape, DType dtype, std::optional<Device> device) {
  return Full(std::move(shape), 1, dtype, device, "ones", /*user_value=*/false);
}

Tensor arange(int64_t n, DType dtype, std::optional<Device> device) {
  if (n < 0)
    base::Throw(absl::InvalidArgumentError(absl::StrCat("arange: n = ", n, " is negative")));
  if (dtype == DType::boolean)
    base::Throw(absl::InvalidArgumentError("arange: bool is not a numeric dtype"));
  return frontend::Wrap(ir::MakeIota(dtype, n), Resolve(device));
}

Tensor randn(std::vector<int64_t> shape, uint64_t seed, DType dtype, std::optional<Device> device) {
  CheckRandom(shape, dtype, "randn");
  // Box-Muller on two independent uniforms per element (counters 2i and 2i + 1).
  // The uniforms are f32 (24 random bits); f64 does the maths in double, f16 and bf16 round
  // the f32 result.
  const Device d = Resolve(device);
  Tensor u1 = Uniform01(shape, seed, 2, 0, d);
  Tensor u2 = Uniform01(shape, seed, 2, 1, d);
  if (dtype == DType::f64) {
    u1 = cast(u1, DType::f64);
    u2 = cast(u2, DType::f64);
  }
  const Tensor normal = sqrt(log(u1) * -2.0) * cos(u2 * 6.283185307179586);
  return is_half(dtype) ? cast(normal, dtype) : normal;
}

Tensor rand(std::vector<int64_t> shape, uint64_t seed, double low, double high, DType dtype,
            std::optional<Device> device) {
  if (!(low <= high)) {  // NaN bounds too
    base::Throw(absl::InvalidArgumentError(
        absl::StrCat("rand: expected low <= high for the range [low, high), got low = ", low,
                     " and high = ", high)));
  }
  CheckRandom(shape, dtype, "rand");
  Tensor u = Uniform01(shape, seed, 1, 0, Resolve(device));
  if (dtype == DType::f64) u = cast(u, DType::f64);
  if (low != 0 || high != 1) u = u * (high - low) + low;
  return is_half(dtype) ? cast(u, dtype) : u;
}

Tensor placeholder(std::vector<int64_t> shape, DType dtype, Device device, bool requires_grad) {
  CheckShape(shape, "placeholder");
  if (requires_grad && !is_floating(dtype)) {
    base::Throw(absl::InvalidArgumentError(absl::StrCat(
        "placeholder: only floating tensors can require gradients, got ", dtype_name(dtype))));
  }
  backend::BufferManager* manager =
      device.is_host() ? static_cast<backend::BufferManager*>(&backend::HostMemory())
                       : &runtime::OpenClDevice(device.index()).buffers();
  const size_t bytes = static_cast<size_t>(ir::NumElements(shape)) * dtype_size(dtype);
  auto storage = std::make_shared<ir::Storage>(
      device, manager, bytes,
      absl::StrCat("placeholder ", dtype_name(dtype), ir::ShapeString(shape)), true);
  return frontend::MakeTensor(ir::MakeBuffer(std::move(storage), dtype, std::move(shape)), device,
                              requires_grad);
}

}  // namespace lazycl
