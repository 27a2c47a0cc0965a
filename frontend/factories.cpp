#include "lazycl/factories.h"

#include <cmath>
#include <memory>
#include <new>
#include <stdexcept>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backend/host_memory.h"
#include "base/status.h"
#include "frontend/dispatch.h"
#include "frontend/tensor_impl.h"
#include "lazycl/env.h"
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

// A counter-based generator (splitmix64 of seed and index): the same values on every device,
// whatever order they are made in.
uint64_t Mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + (i + 1) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Uniform(uint64_t seed, uint64_t i) {
  return (static_cast<double>(Mix(seed, i) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

Tensor Random(std::vector<int64_t> shape, DType dtype, std::optional<Device> device, const char* op,
              const auto& sample) {
  CheckShape(shape, op);
  if (dtype != DType::f32) {
    base::Throw(absl::InvalidArgumentError(
        absl::StrCat(op, ": expected a floating dtype, got ", dtype_name(dtype))));
  }
  const int64_t n = ir::NumElements(shape);
  std::vector<float> values;
  try {
    values.resize(static_cast<size_t>(n));
  } catch (const std::bad_alloc&) {
    base::Throw(base::HostOutOfMemory(op, n * static_cast<int64_t>(sizeof(float))));
  } catch (const std::length_error&) {
    base::Throw(base::HostOutOfMemory(op, n * static_cast<int64_t>(sizeof(float))));
  }
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(sample(i));
  return FromVector(values, std::move(shape), DType::f32, device);
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
Tensor tensor_bool(std::vector<uint8_t> data, std::vector<int64_t> shape,
                   std::optional<Device> device) {
  for (uint8_t& b : data) b = b != 0;
  return FromVector(data, std::move(shape), DType::boolean, device);
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
  return Random(std::move(shape), dtype, device, "randn", [seed](size_t i) {
    // Box-Muller on two independent uniforms per element.
    const double u1 = Uniform(seed, 2 * i);
    const double u2 = Uniform(seed, 2 * i + 1);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  });
}

Tensor rand(std::vector<int64_t> shape, uint64_t seed, double low, double high, DType dtype,
            std::optional<Device> device) {
  if (!(low <= high)) {  // NaN bounds too
    base::Throw(absl::InvalidArgumentError(
        absl::StrCat("rand: expected low <= high for the range [low, high), got low = ", low,
                     " and high = ", high)));
  }
  return Random(std::move(shape), dtype, device, "rand",
                [=](size_t i) { return low + (high - low) * Uniform(seed, i); });
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
