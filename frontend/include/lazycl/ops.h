#pragma once

#include <cstdint>
#include <vector>

#include "lazycl/dtype.h"
#include "lazycl/indexing.h"
#include "lazycl/tensor.h"

// Tensor operations. Binary ops broadcast as NumPy does and promote dtypes bool < i32 < i64 <
// f32; a scalar takes the tensor's dtype unless it is fractional and the tensor is integral
// (then f32). Negative dims count from the end. Bad shapes, dims or dtypes throw lazycl::Error
// on the caller's line, naming both shapes.
namespace lazycl {

// Elementwise, unary. Floating maths on integral inputs computes in f32.
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor erf(const Tensor& x);  // the Gauss error function
Tensor relu(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor cast(const Tensor& x, DType dtype);

// Elementwise, binary.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integral inputs give f32
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);

// Comparisons give DType::boolean.
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);

// cond must be bool; a and b are promoted to a common dtype; all three broadcast.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);

// Reductions over `dims` ({} = all). sum of bool or integers gives i64; mean of integers f32.
Tensor sum(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor max(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);

// [.., M, K] @ [.., K, N] -> [.., M, N]; leading (batch) dims broadcast. 1-D operands are not
// promoted: both must be at least 2-D.
Tensor matmul(const Tensor& a, const Tensor& b);

// Views: index arithmetic in the generated kernels, never copies.
Tensor reshape(const Tensor& x, std::vector<int64_t> shape);  // one -1 may be inferred
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& x, std::vector<int64_t> dims);
Tensor broadcast_to(const Tensor& x, std::vector<int64_t> shape);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end);  // clamped like Python
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// Operators: tensors and scalars on either side.
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

}  // namespace lazycl
