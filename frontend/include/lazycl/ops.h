#pragma once

#include <cstdint>
#include <utility>
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

// ---- More maths (frontend/ops_more.cpp) ----
// Elementwise. Integral inputs compute in f32.
Tensor rsqrt(const Tensor& x);  // 1 / sqrt(x)
Tensor silu(const Tensor& x);   // x * sigmoid(x)
// x * Phi(x) with the exact erf form, or PyTorch's approximate="tanh" form.
Tensor gelu(const Tensor& x, bool approximate_tanh = false);
// lo where x < lo, hi where x > hi, else x (NaN stays NaN); the gradient passes where
// lo <= x <= hi, as in PyTorch. lo > hi or a NaN bound is an Error; bool tensors too.
Tensor clamp(const Tensor& x, double lo, double hi);
Tensor clamp_min(const Tensor& x, double lo);
Tensor clamp_max(const Tensor& x, double hi);
// The lower (upper) triangle of the last two dims: elements with col - row <= k (>= k); the
// rest are 0.
Tensor tril(const Tensor& x, int64_t k = 0);
Tensor triu(const Tensor& x, int64_t k = 0);

// Comparisons with a number on either side. The number is a kernel argument (a new value
// compiles nothing); integral tensors compare exactly with fractional or huge numbers.
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(double a, const Tensor& b);
Tensor le(double a, const Tensor& b);
Tensor gt(double a, const Tensor& b);
Tensor ge(double a, const Tensor& b);
Tensor eq(double a, const Tensor& b);
Tensor ne(double a, const Tensor& b);

// Reductions. min like max (NaN is skipped unless all are NaN; no empty dims); prod of bool
// or integers gives i64 (products wrap).
Tensor min(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor prod(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
// The index (i64) of the largest (smallest) element along `dim`; ties take the first index,
// and a row holding NaN gives its first NaN's index (as NumPy). An empty dim is an Error.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
// Inclusive running sum along `dim` (a scan kernel, one pass per row); bool and integers give
// i64 (sums wrap).
Tensor cumsum(const Tensor& x, int64_t dim);
// The k largest elements along `dim`, sorted descending, ties by lower index first (as
// jax.lax.top_k), and their i64 indices. NaN ranks as +inf. 0 <= k <= size(dim).
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1);

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
