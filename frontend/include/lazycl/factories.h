#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "lazycl/device.h"
#include "lazycl/dtype.h"
#include "lazycl/tensor.h"

// Tensor factories. Without an explicit device they follow the current environment (env.h):
// outside any EnvGuard they make host tensors.
namespace lazycl {

Tensor tensor(std::vector<float> data, std::vector<int64_t> shape, std::optional<Device> = {});
Tensor tensor(std::vector<int32_t> data, std::vector<int64_t> shape, std::optional<Device> = {});
Tensor tensor(std::vector<int64_t> data, std::vector<int64_t> shape, std::optional<Device> = {});
// Values given as doubles, stored as `dtype` (f64 exactly; the others converted as cast()
// converts): tensor({0.1, 0.2}, {2}, DType::f64).
Tensor tensor(const std::vector<double>& data, std::vector<int64_t> shape, DType dtype,
              std::optional<Device> = {});
// A bool tensor from bytes (0 false, anything else true).
Tensor tensor_bool(std::vector<uint8_t> data, std::vector<int64_t> shape,
                   std::optional<Device> = {});

// A copy of the `bytes` at `data`: row-major values of `shape` in `dtype`'s layout (f16/bf16 as
// 16-bit patterns, bool as bytes 0 and 1), bytes = the elements x the dtype's size. One counted
// upload from the caller's memory (from a PinnedBuffer, lazycl/memory.h, on the driver's
// fastest path), no host tensor in between. The inverse of Tensor::copy_to_host.
Tensor from_host_memory(const void* data, size_t bytes, std::vector<int64_t> shape, DType dtype,
                        std::optional<Device> = {});

Tensor zeros(std::vector<int64_t> shape, DType dtype = DType::f32, std::optional<Device> = {});
Tensor ones(std::vector<int64_t> shape, DType dtype = DType::f32, std::optional<Device> = {});
Tensor full(std::vector<int64_t> shape, double value, DType dtype = DType::f32,
            std::optional<Device> = {});
// 0, 1, ..., n-1.
Tensor arange(int64_t n, DType dtype = DType::f32, std::optional<Device> = {});
// Standard normal values from a counter-based generator: the same seed gives the same values
// on every device.
Tensor randn(std::vector<int64_t> shape, uint64_t seed, DType dtype = DType::f32,
             std::optional<Device> = {});
// Uniform values in [low, high).
Tensor rand(std::vector<int64_t> shape, uint64_t seed, double low = 0, double high = 1,
            DType dtype = DType::f32, std::optional<Device> = {});

// A tensor with a shape, a dtype and a device but no data (SPEC, "Placeholders").
Tensor placeholder(std::vector<int64_t> shape, DType dtype, Device device,
                   bool requires_grad = false);

}  // namespace lazycl
