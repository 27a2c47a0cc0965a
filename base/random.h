#pragma once

#include <cstdint>

// The counter-based generator of rand, randn and dropout (ir/op_table.h, RandomUniform): the
// host's arithmetic, bit for bit as the kernels' lc_uniform (kernels/cpu_math.cpp).
namespace lazycl::base {

// splitmix64's finaliser over seed * golden ratio + (counter + 1) * its first multiplier: every
// (seed, counter) pair maps to 64 well-mixed bits; the arithmetic wraps.
inline uint64_t RandomBits(uint64_t counter, uint64_t seed) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + (counter + 1) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The top 23 bits k of RandomBits as (k + 0.5) / 2^23: in (0, 1), every step exact in f32.
inline float RandomUniform(int64_t counter, int64_t seed) {
  const auto k = static_cast<uint32_t>(
      RandomBits(static_cast<uint64_t>(counter), static_cast<uint64_t>(seed)) >> 41);
  return (static_cast<float>(k) + 0.5f) * 1.1920928955078125e-7f;
}

// A user's 64-bit seed as the generator's: a Scalar holds a double, so seeds are folded to 53
// bits (distinct seeds collide with probability 2^-53).
inline int64_t FoldSeed(uint64_t seed) { return static_cast<int64_t>(RandomBits(seed, 0) >> 11); }

}  // namespace lazycl::base
