#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "ir/ir.h"

// The host semantics of Gather and ScatterAdd (ir.h), for host_eval.cpp's rows.
namespace lazycl::runtime {

// Gather along dim k: x and index agree outside k, so both are [outer, n, inner] with n = x's
// extent in k for x and index's for index; every index is clamped into [0, x.shape[k] - 1].
template <typename T, typename I>
std::vector<T> GatherOnHost(const ir::Node& node, const std::vector<T>& x,
                            const std::vector<I>& index) {
  const ir::Shape& xs = node.operands[0]->shape;
  const size_t k = static_cast<size_t>(node.args[0]);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < k; ++d) outer *= xs[d];
  for (size_t d = k + 1; d < xs.size(); ++d) inner *= xs[d];
  const int64_t n_x = xs[k];
  const int64_t n_i = node.shape[k];
  std::vector<T> out(index.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < n_i; ++j) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t at = (o * n_i + j) * inner + i;
        int64_t c = static_cast<int64_t>(index[at]);
        c = c < 0 ? 0 : (c >= n_x ? n_x - 1 : c);
        out[at] = x[(o * n_x + c) * inner + i];
      }
    }
  }
  return out;
}

// ScatterAdd: out = x, then every src element in row-major order is added at its index (with
// k replaced by its index value) unless that value is outside [0, x.shape[k]). Floats add in
// float, in that order (what every device kernel does too); integers wrap.
template <typename T, typename I>
std::vector<T> ScatterAddOnHost(const ir::Node& node, const std::vector<T>& x,
                                const std::vector<I>& index, const std::vector<T>& src) {
  const ir::Shape& xs = node.shape;
  const ir::Shape& is = node.operands[1]->shape;
  const size_t k = static_cast<size_t>(node.args[0]);
  std::vector<T> out = x;
  if (index.empty()) return out;
  std::vector<int64_t> strides(xs.size(), 1);
  for (size_t d = xs.size(); d-- > 1;) strides[d - 1] = strides[d] * xs[d];
  std::vector<int64_t> at(is.size(), 0);
  for (size_t j = 0; j < index.size(); ++j) {
    const int64_t c = static_cast<int64_t>(index[j]);
    if (c >= 0 && c < xs[k]) {
      int64_t pos = 0;
      for (size_t d = 0; d < xs.size(); ++d) pos += (d == k ? c : at[d]) * strides[d];
      if constexpr (std::is_floating_point_v<T>) {
        out[pos] = out[pos] + src[j];
      } else {
        using U = std::make_unsigned_t<T>;
        out[pos] = static_cast<T>(static_cast<U>(out[pos]) + static_cast<U>(src[j]));
      }
    }
    for (size_t d = is.size(); d-- > 0;) {
      if (++at[d] < is[d]) break;
      at[d] = 0;
    }
  }
  return out;
}

}  // namespace lazycl::runtime
