// Fast f32 maths for the CPU strategy, where PoCL's builtins are slow (log: ~100 ms over 2^24
// floats against exp's ~5 ms) and do not vectorise with the loop over work-items. Straight-line
// selects only, so that loop stays vectorisable.
//
// This file is not compiled as it stands: kernels/cpu_math.cpp copies each function that a
// kernel calls, from its `static inline` line to its closing `}` line, in front of the kernel
// (comments stay here). lc_exp16 is lc_exp with its types renamed to float16 and int16, so
// lc_exp says `float` and `int` for its types only, and casts its constants to `float`.

// lc_tanh: a rational x * P(x^2) / Q(x^2) of degrees 13 / 6, fitted by us to tanh on [0, 9]
// (scripts/fit_tanh.py: minimax relative error, Cheney-Loeb differential correction polished by
// an L^p fit with p up to 128; 1.34e-7 in exact arithmetic), x clamped to [-9, 9] where tanh
// rounds to +-1 in f32. One division and no exp: PoCL's exp cost W1 as much as its memory
// traffic. Max relative error in f32 3.32 * 2^-23 over every float (host emulation); the device
// bound 4 * 2^-23 is enforced by tests/codegen_test.cpp. -0 stays -0, NaN stays NaN, +-inf
// gives +-1.
static inline float lc_tanh(float x) {
  const float c = fmin(fmax(x, -9.0f), 9.0f);
  const float s = c * c;
  float p = 4.9320299037e-14f;
  p = fma(p, s, -4.8425155547e-13f);
  p = fma(p, s, -9.0319400030e-09f);
  p = fma(p, s, 8.3836348042e-06f);
  p = fma(p, s, 2.8392796580e-03f);
  p = fma(p, s, 1.2847369738e-01f);
  p = fma(p, s, 9.9999998595e-01f);
  float q = 2.1604321225e-04f;
  q = fma(q, s, 2.3442009168e-02f);
  q = fma(q, s, 4.6180680223e-01f);
  q = fma(q, s, 1.0f);
  return isnan(x) ? x : p * c / q;
}

// lc_exp (and lc_exp16): Cephes expf (n = round(x / ln 2) by the 1.5 * 2^23 trick, r = x - n ln 2
// in two parts, a degree-7 polynomial), then 2^n applied as two exact power-of-two factors so
// that subnormal results are rounded once and overflow gives inf. x is clamped to [-110, 89]
// (beyond: 0 and inf); NaN stays NaN. Branch-free, so PoCL vectorises it; its builtin exp cost
// softmax's exp pass more than its memory traffic (softmax 8.7 -> 4.7 ms). Max relative error
// measured 0.65 * 2^-23 (normal results; subnormal ones within 2^-149), bound 2^-23 enforced by
// tests/codegen_test.cpp.
static inline float lc_exp(float x) {
  const float t = fmin(fmax(x, -110.0f), 89.0f);
  const float k = fma(t, (float)(1.44269504088896341f), (float)(12582912.0f));
  const float n = k - 12582912.0f;
  float r = fma(n, (float)(-0.693359375f), t);
  r = fma(n, (float)(2.12194440e-4f), r);
  float p = (float)(1.9875691500e-4f);
  p = fma(p, r, (float)(1.3981999507e-3f));
  p = fma(p, r, (float)(8.3334519073e-3f));
  p = fma(p, r, (float)(4.1665795894e-2f));
  p = fma(p, r, (float)(1.6666665459e-1f));
  p = fma(p, r, (float)(5.0000001201e-1f));
  p = fma(p, r * r, r) + 1.0f;
  const int ni = as_int(k) - 0x4B400000;
  const int n1 = ni >> 1;
  const float y = p * as_float((n1 + 127) << 23) * as_float((ni - n1 + 127) << 23);
  return select(y, x, isnan(x));
}

// lc_log: Cephes logf (x = m * 2^e, m in [sqrt(1/2), sqrt(2)), a degree-9 polynomial in m - 1);
// subnormals are scaled by 2^23 first; 0 -> -inf, negative -> NaN, inf -> inf, NaN -> NaN.
static inline float lc_log(float x) {
  const int sub = x < 1.17549435e-38f;
  const float xs = sub ? x * 8388608.0f : x;
  const int bits = as_int(xs);
  const float m0 = as_float((bits & 0x007fffff) | 0x3f000000);
  const int small = m0 < 0.707106781186547524f;
  const float e = (float)(((bits >> 23) & 0xff) - 126 - (sub ? 23 : 0) - small);
  const float f = (small ? m0 + m0 : m0) - 1.0f;
  const float z = f * f;
  float y = ((((((((7.0376836292e-2f * f - 1.1514610310e-1f) * f + 1.1676998740e-1f) * f -
                 1.2420140846e-1f) * f + 1.4249322787e-1f) * f - 1.6668057665e-1f) * f +
              2.0000714765e-1f) * f - 2.4999993993e-1f) * f + 3.3333331174e-1f) * f * z;
  y += -2.12194440e-4f * e;
  y += -0.5f * z;
  float r = f + y + 0.693359375f * e;
  r = x == INFINITY ? x : r;
  r = x == 0.0f ? -INFINITY : r;
  return (x < 0.0f || isnan(x)) ? NAN : r;
}

// lc_erf: Norbert Juffa's erff (published on Stack Overflow, "implementation of erff"):
// x + x P(x^2) for |x| <= 0.927734375, else sign(x) (1 - exp(-|x| - |x| Q(|x|))), here with
// both branches computed and one selected, so PoCL vectorises it (its builtin erf kept gelu at
// 161 ms for 4M floats where silu takes 1.7 ms). Max error 0.97 ulp with an exact exp (host
// emulation over every 97th float); the device bound 4 * 2^-23 relative is enforced by
// tests/codegen_test.cpp. -0 stays -0, NaN stays NaN, +-inf gives +-1.
static inline float lc_erf(float x) {
  const float t = fabs(x);
  const float s = x * x;
  float r = fma(-1.72853470e-5f, t, 3.83197126e-4f);
  const float u = fma(-3.88396438e-3f, t, 2.42546219e-2f);
  r = fma(r, s, u);
  r = fma(r, t, -1.06777877e-1f);
  r = fma(r, t, -6.34846687e-1f);
  r = fma(r, t, -1.28717512e-1f);
  r = fma(r, t, -t);
  const float large = copysign(1.0f - lc_exp(r), x);
  float p = -5.96761703e-4f;
  p = fma(p, s, 4.99119423e-3f);
  p = fma(p, s, -2.67681349e-2f);
  p = fma(p, s, 1.12819925e-1f);
  p = fma(p, s, -3.76125336e-1f);
  p = fma(p, s, 1.28379166e-1f);
  p = fma(p, x, x);
  return t > 0.927734375f ? large : p;
}

// 4/pi to 192 bits, for lc_reduce_large: entry i holds bits 8(i - 3) to 8(i - 3) + 31 after the
// binary point (the first three: the leading 8, 16, 24 bits), so that any 32-bit window at a
// multiple of 8 bits is one aligned read (glibc's and Arm's __inv_pio4).
__constant uint lc_inv_pio4[24] = {
    0xa2u,       0xa2f9u,     0xa2f983u,   0xa2f9836eu, 0xf9836e4eu, 0x836e4e44u,
    0x6e4e4415u, 0x4e441529u, 0x441529fcu, 0x1529fc27u, 0x29fc2757u, 0xfc2757d1u,
    0x2757d1f5u, 0x57d1f534u, 0xd1f534ddu, 0xf534ddc0u, 0x34ddc0dbu, 0xddc0db62u,
    0xc0db6295u, 0xdb629599u, 0x6295993cu, 0x95993c43u, 0x993c4390u, 0x3c439041u};

// lc_reduce_large: for finite ax >= 2, ax = n pi / 2 + r with r in [-pi/4, pi/4]; returns r and
// sets *n (its low two bits are what matter). Payne-Hanek on integer lanes (glibc's and Arm's
// sinf `reduce_large`): the 24-bit mantissa times the 96 bits of 2/pi that its exponent selects,
// as three 32 x 32-bit products, leaves the fraction of ax * 2 / pi in 62 bits; its rounding is
// n, the rest times pi / 2^63 is r. Straight-line code over a table read (a gather), so that a
// lane may take it without keeping PoCL from vectorising the loop over work-items; other lanes
// compute it too (any ax: the index stays in the table) and drop it.
static inline float lc_reduce_large(float ax, int* n) {
  const uint xi = as_uint(ax);
  const int idx = (xi >> 26) & 15;
  const uint m = ((xi & 0xffffffu) | 0x800000u) << ((xi >> 23) & 7);
  ulong res0 = (ulong)(m * lc_inv_pio4[idx]);
  const ulong res1 = (ulong)m * lc_inv_pio4[idx + 4];
  const ulong res2 = (ulong)m * lc_inv_pio4[idx + 8];
  res0 = ((res2 >> 32) | (res0 << 32)) + res1;
  const ulong q = (res0 + (1UL << 61)) >> 62;
  const long f = as_long(res0 - (q << 62));  // in [-2^61, 2^61]
  *n = (int)q;
  const ulong mag = f < 0 ? (ulong)(-f) : (ulong)f;
  const float v = (float)(uint)(mag >> 32) * 4294967296.0f + (float)(uint)mag;
  return (f < 0 ? -v : v) * 3.4061215800865545e-19f;  // pi / 2^63
}

// lc_sincos: sin(x + quadrant * pi / 2), the body of lc_sin (quadrant 0) and lc_cos (1). Cephes
// sinf's method: j = round(x * 2 / pi) by the 1.5 * 2^23 trick, r = x - j pi / 2 with pi / 2 in
// three f32 parts (fma), then Cephes' degree-7 sin and degree-8 cos polynomials on
// [-pi/4, pi/4], chosen and signed by the quadrant j + quadrant. Past |x| = 1e6, where the
// three-part reduction loses bits, r and j come from lc_reduce_large (exact), chosen per lane
// by a select. Max error (host emulation, scripts/check_sincos.cpp): for |x| <= 1e6 over every
// float, sin 1.67 ulp, cos 1.81 ulp; beyond, over every 31st float to FLT_MAX, 2.7 ulp. The
// device bound 4 ulp is enforced by tests/codegen_test.cpp.
//
// The builtins took the lanes past 1e6 before, in a branch that kept PoCL from vectorising the
// loop over work-items. On the README's Zen 4 (2 cores), 2^24 floats: sin of |x| < 100 took
// 30-32 ms with that branch, 18-19 ms now; cos of |x| < 1e9 376-407 ms (the builtin), 18 ms now;
// randn over 2^20 (Box-Muller's cos) 8-10 ms, 3-6 ms now.
static inline float lc_sincos(float x, int quadrant) {
  const float k = fma(x, 0.636619772367581343f, 12582912.0f);
  const float j = k - 12582912.0f;
  float r = fma(j, -1.57079637050628662109375f, x);
  r = fma(j, 4.371138828673793e-08f, r);
  r = fma(j, 1.7151245100058819e-15f, r);
  int q = as_int(k) - 0x4B400000;
  const float ax = fabs(x);
  int n;
  const float rl = lc_reduce_large(ax, &n);
  const int big = ax > 1.0e6f && ax < INFINITY;
  r = big ? (x < 0.0f ? -rl : rl) : r;
  q = (big ? (x < 0.0f ? -n : n) : q) + quadrant;
  const float s = r * r;
  float ps = fma(-1.9515295891e-4f, s, 8.3321608736e-3f);
  ps = fma(ps, s, -1.6666654611e-1f);
  ps = fma(ps, s * r, r);
  float pc = fma(2.443315711809948e-5f, s, -1.388731625493765e-3f);
  pc = fma(pc, s, 4.166664568298827e-2f);
  pc = fma(pc, s * s, fma(-0.5f, s, 1.0f));
  const float y = (q & 1) ? pc : ps;
  return (q & 2) ? -y : y;
}

// lc_sin: -0 stays -0, NaN stays NaN, +-inf gives NaN (as the builtin).
static inline float lc_sin(float x) {
  return x == 0.0f ? x : lc_sincos(x, 0);
}

// lc_cos: NaN stays NaN, +-inf gives NaN.
static inline float lc_cos(float x) {
  return lc_sincos(x, 1);
}
