#pragma once

#include <cstdint>
#include <cstring>

// f16 and bf16 from and to f32, rounding to nearest even (the host's side of the conversions
// the kernels do in OpenCL C, kernels/cl_text.cpp; both are written from the IEEE 754 and
// bfloat16 definitions and must agree bit for bit).
namespace lazycl::base {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline float Bf16ToFloat(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

// NaN stays a (quiet) NaN with its sign; everything else rounds to nearest even, overflowing to
// infinity.
inline uint16_t FloatToBf16(float f) {
  const uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float F16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1fu) return BitsFloat(sign | 0x7f800000u | (man << 13));  // inf, NaN
  if (exp != 0) return BitsFloat(sign | ((exp + 112u) << 23) | (man << 13));
  // Zero or subnormal: man * 2^-24, exact in float.
  const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
  return sign != 0 ? -v : v;
}

inline uint16_t FloatToF16(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (a >= 0x38800000u) {  // normal in f16: rebias, round the 13 dropped bits to nearest even
    const uint32_t r = a - 0x38000000u;
    return static_cast<uint16_t>(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
  }
  if (a < 0x33000000u) return sign;  // below half the smallest subnormal: zero
  // Subnormal in f16: the significand with its implicit bit, shifted right, rounded to even.
  const uint32_t exp = a >> 23, man = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exp;  // 14 .. 24
  uint32_t h = man >> shift;
  const uint32_t rest = man & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

}  // namespace lazycl::base
