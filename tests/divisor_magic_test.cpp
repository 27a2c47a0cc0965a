// kernels::MagicOf: index division as a multiply-high and a shift, which generated kernels use
// to split 31-bit linear indices into coordinates. Checked against the integer division for
// every divisor up to 4096 at the edges of each quotient, and for random and extreme divisors.
#include <cstdint>
#include <random>

#include "gtest/gtest.h"
#include "kernels/emitter.h"

namespace lazycl::kernels {
namespace {

uint32_t Divide(uint32_t n, DivisorMagic magic) {
  const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(n) * magic.multiplier) >> 32);
  return hi >> magic.shift;
}

void ExpectExact(int64_t d, uint32_t n) {
  ASSERT_EQ(Divide(n, MagicOf(d)), n / static_cast<uint32_t>(d)) << "n=" << n << " d=" << d;
}

TEST(DivisorMagic, SmallDivisorsAtEveryQuotientEdge) {
  constexpr uint32_t kMax = 0x7fffffffu;
  for (int64_t d = 2; d <= 4096; ++d) {
    for (uint32_t n : {0u, 1u, static_cast<uint32_t>(d - 1), static_cast<uint32_t>(d),
                       static_cast<uint32_t>(d + 1), kMax, kMax - 1, kMax / 2}) {
      ExpectExact(d, n);
    }
    // The last multiples below 2^31, and the numbers just under them.
    const uint32_t top = kMax / static_cast<uint32_t>(d) * static_cast<uint32_t>(d);
    for (uint32_t k = 0; k < 4 && top >= k * d; ++k) {
      ExpectExact(d, top - k * static_cast<uint32_t>(d));
      if (top - k * d > 0) ExpectExact(d, top - k * static_cast<uint32_t>(d) - 1);
    }
  }
}

TEST(DivisorMagic, RandomAndExtremeDivisors) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint32_t> numerator(0, 0x7fffffffu);
  std::uniform_int_distribution<int64_t> divisor(2, 0x7fffffff);
  for (int i = 0; i < 200000; ++i) ExpectExact(divisor(rng), numerator(rng));
  for (int64_t d : {int64_t{3}, int64_t{7}, int64_t{641}, int64_t{1} << 30, (int64_t{1} << 30) + 1,
                    int64_t{0x7fffffff}, int64_t{0x7ffffffe}}) {
    for (int i = 0; i < 1000; ++i) ExpectExact(d, numerator(rng));
    ExpectExact(d, 0x7fffffffu);
  }
}

}  // namespace
}  // namespace lazycl::kernels
