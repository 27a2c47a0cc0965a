#pragma once

#include <bit>
#include <cstddef>

// How BufferManager rounds device-memory requests into pool bins. Free of OpenCL so tests can
// predict the exact bytes that allocation counters will show.
namespace lazycl::backend {

inline constexpr size_t kMinPoolBinBytes = 256;

// Bytes actually obtained for a request: at least 256, and otherwise rounded up to one of 8
// evenly spaced steps between consecutive powers of two, so a bin wastes at most 12.5% while
// buffers of nearby sizes still share a bin. 0 stays 0 (nothing is allocated for it).
constexpr size_t PoolBinBytes(size_t requested) {
  if (requested == 0) return 0;
  if (requested <= kMinPoolBinBytes) return kMinPoolBinBytes;
  const int k = std::bit_width(requested - 1);  // 2^(k-1) < requested <= 2^k
  const size_t step = size_t{1} << (k - 4);
  return (requested + step - 1) / step * step;
}

static_assert(PoolBinBytes(1) == 256);
static_assert(PoolBinBytes(257) == 288);
static_assert(PoolBinBytes(1024) == 1024);
static_assert(PoolBinBytes(1025) == 1152);

}  // namespace lazycl::backend
