// Host emulation of kernels/templates/cpu_math.cl's lc_sincos in f32 (the same fma steps),
// against sinl / cosl, over every float of both signs up to a bound. Its figures are the ones
// that cpu_math.cl quotes.
//   g++ -O2 -o /tmp/check_sincos scripts/check_sincos.cpp
//   /tmp/check_sincos 1e6 1 0   # sin, every float (step 1) up to 1e6: ~2 minutes
//   /tmp/check_sincos 1e6 1 1   # cos
//   /tmp/check_sincos 3.4e38 31 0   # sin, every 31st float to FLT_MAX (lc_reduce_large past 1e6)
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace {

float AsFloat(int32_t i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}

int32_t AsInt(float f) {
  int32_t i;
  std::memcpy(&i, &f, 4);
  return i;
}

const uint32_t kInvPio4[24] = {
    0xa2,       0xa2f9,     0xa2f983,   0xa2f9836e, 0xf9836e4e, 0x836e4e44, 0x6e4e4415, 0x4e441529,
    0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1, 0x2757d1f5, 0x57d1f534, 0xd1f534dd, 0xf534ddc0,
    0x34ddc0db, 0xddc0db62, 0xc0db6295, 0xdb629599, 0x6295993c, 0x95993c43, 0x993c4390, 0x3c439041};

// lc_reduce_large(ax, n), step for step.
float ReduceLarge(float ax, int* n) {
  const uint32_t xi = static_cast<uint32_t>(AsInt(ax));
  const int idx = (xi >> 26) & 15;
  const uint32_t m = ((xi & 0xffffffu) | 0x800000u) << ((xi >> 23) & 7);
  uint64_t res0 = static_cast<uint32_t>(m * kInvPio4[idx]);
  const uint64_t res1 = static_cast<uint64_t>(m) * kInvPio4[idx + 4];
  const uint64_t res2 = static_cast<uint64_t>(m) * kInvPio4[idx + 8];
  res0 = ((res2 >> 32) | (res0 << 32)) + res1;
  const uint64_t q = (res0 + (uint64_t{1} << 61)) >> 62;
  const int64_t f = static_cast<int64_t>(res0 - (q << 62));
  *n = static_cast<int>(q);
  const uint64_t mag = f < 0 ? static_cast<uint64_t>(-f) : static_cast<uint64_t>(f);
  const float v = static_cast<float>(static_cast<uint32_t>(mag >> 32)) * 4294967296.0f +
                  static_cast<float>(static_cast<uint32_t>(mag));
  return (f < 0 ? -v : v) * 3.4061215800865545e-19f;
}

// lc_sincos(x, quadrant), step for step.
float SinCos(float x, int quadrant) {
  const float k = std::fma(x, 0.636619772367581343f, 12582912.0f);
  const float j = k - 12582912.0f;
  float r = std::fma(j, -1.57079637050628662109375f, x);
  r = std::fma(j, 4.371138828673793e-08f, r);
  r = std::fma(j, 1.7151245100058819e-15f, r);
  int q = AsInt(k) - 0x4B400000;
  const float ax = std::fabs(x);
  int n;
  const float rl = ReduceLarge(ax, &n);
  const bool big = ax > 1.0e6f && ax < INFINITY;
  r = big ? (x < 0.0f ? -rl : rl) : r;
  q = (big ? (x < 0.0f ? -n : n) : q) + quadrant;
  const float s = r * r;
  float ps = std::fma(-1.9515295891e-4f, s, 8.3321608736e-3f);
  ps = std::fma(ps, s, -1.6666654611e-1f);
  ps = std::fma(ps, s * r, r);
  float pc = std::fma(2.443315711809948e-5f, s, -1.388731625493765e-3f);
  pc = std::fma(pc, s, 4.166664568298827e-2f);
  pc = std::fma(pc, s * s, std::fma(-0.5f, s, 1.0f));
  const float y = (q & 1) ? pc : ps;
  return (q & 2) ? -y : y;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s BOUND STEP COS(0|1)\n", argv[0]);
    return 2;
  }
  const float bound = std::strtof(argv[1], nullptr);
  const int step = std::atoi(argv[2]);
  const int cosine = std::atoi(argv[3]);
  double worst = 0;
  float worst_x = 0;
  for (int32_t bits = 0; AsFloat(bits) <= bound; bits += step) {
    for (const float x : {AsFloat(bits), -AsFloat(bits)}) {
      const long double want = cosine ? cosl(x) : sinl(x);
      if (want == 0) continue;
      // One ulp of the result's binade (2^-149 for subnormal results).
      double ulp = std::ldexp(1.0, std::ilogb(static_cast<double>(want)) - 23);
      if (std::fabs(static_cast<double>(want)) < 1.17549435e-38) ulp = std::ldexp(1.0, -149);
      const double err =
          static_cast<double>(fabsl(static_cast<long double>(SinCos(x, cosine)) - want)) / ulp;
      if (err > worst) {
        worst = err;
        worst_x = x;
      }
    }
  }
  std::printf("%s, |x| <= %g, every %d float(s): max error %.3f ulp at x = %.9g\n",
              cosine ? "cos" : "sin", bound, step, worst, worst_x);
  return 0;
}
