// C[b] = A[b] @ B[b] for f32 on CPU devices. PoCL runs a loop inside one work-item as written
// (POCL.md), so the vector width is written out: a work-item owns a 32-column panel of C and
// `mb` of its rows, computed in blocks of MR x 32 held in 2 * MR float16 accumulators.
// B's rows are `b_sk` apart (8 KiB at N = 2048): reading the panel straight from B maps every row
// onto the same few cache sets and a new page per k, so nothing is reused from cache. Instead
// the work-item first copies KB rows of its panel into contiguous local memory (KB * 128 bytes =
// 32 KiB, which stays in L1; private to the work-group of one work-item), then runs every row
// block over that copy; a copy costs 1/mb of the multiply-adds. K > KB takes several passes that
// add into C. Measured at 2048 (2 cores): ~120-175 GFLOP/s against ~50-85 reading B in place;
// KB = 1024 or 2048 (the copy in L2) was slower at 2048 and no faster at 1024.
// Same arguments as matmul.cl plus `mb` (rows per work-item, a multiple of MR): A and B are strided
// views (offset and strides in elements, the batch dims folded into one stride); C is contiguous
// [batches, M, N] from element c_off. Work-items: (ceil(M / mb), ceil(N / 32), batches), local
// size {1, 1, 1}. Rows past C's edge are clamped for reading and not stored; columns past it read
// zeros from the copy and are not stored; B with non-unit column stride is gathered when copied.
// With an epilogue, earlier passes store plain partial sums, the last one the epilogue's value.
// A generated source may put an epilogue before this text: LC_EPILOGUE defined, and
// `lc_epilogue(acc, batch, row, col LC_EPI_ARGS)` the value to store for the element of C at
// (batch, row, col) whose product is `acc`, reading the extra kernel arguments LC_EPI_PARAMS.
#ifndef LC_EPILOGUE
#define LC_EPI_PARAMS
#define LC_EPI_ARGS
#endif

#define MR 8
#define KB 256

// Accumulators of one row: lo (columns 0..15) and hi (16..31) of the panel.
#define LC_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

static inline void lc_load_row(__global const float* restrict c, long n0, long N, float16* lo,
                               float16* hi) {
  if (n0 + 32 <= N) {
    *lo = vload16(0, c + n0);
    *hi = vload16(1, c + n0);
    return;
  }
  float t[32];
  for (int j = 0; j < 32; ++j) t[j] = n0 + j < N ? c[n0 + j] : 0.0f;
  *lo = vload16(0, t);
  *hi = vload16(1, t);
}

static inline void lc_store_row(__global float* restrict c, long n0, long N, float16 lo,
                                float16 hi) {
  if (n0 + 32 <= N) {
    vstore16(lo, 0, c + n0);
    vstore16(hi, 1, c + n0);
    return;
  }
  float t[32];
  vstore16(lo, 0, t);
  vstore16(hi, 1, t);
  for (int j = 0; j < 32 && n0 + j < N; ++j) c[n0 + j] = t[j];
}

#ifdef LC_EPILOGUE
// The last pass over K: the epilogue's value of each element, one at a time.
static inline void lc_store_epilogue(__global float* restrict c, long n0, long N, float16 lo,
                                     float16 hi, long batch, long row LC_EPI_PARAMS) {
  float t[32];
  vstore16(lo, 0, t);
  vstore16(hi, 1, t);
  for (int j = 0; j < 32 && n0 + j < N; ++j)
    c[n0 + j] = lc_epilogue(t[j], batch, row, n0 + j LC_EPI_ARGS);
}
#define LC_STORE_LAST(i) \
  lc_store_epilogue(c + (m0 + i) * N, n0, N, lo##i, hi##i, batch, m0 + i LC_EPI_ARGS)
#else
#define LC_STORE_LAST(i) lc_store_row(c + (m0 + i) * N, n0, N, lo##i, hi##i)
#endif

__kernel void matmul_cpu(__global const float* restrict A, long a_off, long a_sb, long a_sm,
                         long a_sk, __global const float* restrict B, long b_off, long b_sb,
                         long b_sk, long b_sn, __global float* restrict C, long c_off, long M,
                         long N, long K, long mb LC_EPI_PARAMS) {
  __local float panel[KB * 32];
  const long m_begin = (long)get_global_id(0) * mb;
  const long m_end = min(m_begin + mb, M);
  const long n0 = (long)get_global_id(1) * 32;
  const long batch = get_global_id(2);
  A += a_off + batch * a_sb;
  B += b_off + batch * b_sb;
  __global float* c = C + c_off + batch * M * N;
  for (long k0 = 0; k0 == 0 || k0 < K; k0 += KB) {  // K = 0 stores zeros
    const long kn = min((long)KB, K - k0);
    const bool last = k0 + KB >= K;
    __global const float* bk = B + k0 * b_sk;
    if (b_sn == 1 && n0 + 32 <= N) {
      for (long k = 0; k < kn; ++k) {
        vstore16(vload16(0, bk + k * b_sk + n0), 0, panel + k * 32);
        vstore16(vload16(1, bk + k * b_sk + n0), 1, panel + k * 32);
      }
    } else {
      for (long k = 0; k < kn; ++k) {
        for (int j = 0; j < 32; ++j)
          panel[k * 32 + j] = n0 + j < N ? bk[k * b_sk + (n0 + j) * b_sn] : 0.0f;
      }
    }
    for (long m0 = m_begin; m0 < m_end; m0 += MR) {
#define LC_DECL(i)                                                           \
  float16 lo##i = (float16)(0.0f), hi##i = (float16)(0.0f);                  \
  __global const float* a##i = A + min(m0 + i, M - 1) * a_sm + k0 * a_sk;    \
  if (k0 > 0 && m0 + i < M) lc_load_row(c + (m0 + i) * N, n0, N, &lo##i, &hi##i);
      LC_ROWS(LC_DECL)
#undef LC_DECL
      for (long k = 0; k < kn; ++k) {
        const float16 bl = vload16(0, panel + k * 32);
        const float16 bh = vload16(1, panel + k * 32);
        const long ak = k * a_sk;
#define LC_FMA(i)                            \
  {                                          \
    const float16 x = (float16)(a##i[ak]);   \
    lo##i = fma(x, bl, lo##i);               \
    hi##i = fma(x, bh, hi##i);               \
  }
        LC_ROWS(LC_FMA)
#undef LC_FMA
      }
#define LC_STORE(i)                                                  \
  if (m0 + i < M) {                                                  \
    if (last)                                                        \
      LC_STORE_LAST(i);                                              \
    else                                                             \
      lc_store_row(c + (m0 + i) * N, n0, N, lo##i, hi##i);           \
  }
      LC_ROWS(LC_STORE)
#undef LC_STORE
    }
  }
}
