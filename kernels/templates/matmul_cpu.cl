// C[b] = A[b] @ B[b] for f32 on CPU devices: each work-item computes a 4 x 32 block of C in
// eight float16 accumulators (PoCL runs the loop over k inside one work-item, so the vector
// width has to be written out; POCL.md: ~116 GFLOP/s at 1024 against 6 for local tiles).
// Same arguments as matmul.cl: A and B are strided views (offset and strides in elements, the
// batch dims folded into one stride); C is contiguous [batches, M, N] from element c_off.
// Work-items: (ceil(M / 4), ceil(N / 32), batches): neighbouring work-items share one 32-column
// panel of B (K * 128 bytes, which stays in cache) and stream A's rows. Blocks that cross an edge of C, and every
// block when B's rows are not contiguous, take the bounds-checked scalar-load path.
__kernel void matmul_cpu(__global const float* restrict A, long a_off, long a_sb, long a_sm,
                         long a_sk, __global const float* restrict B, long b_off, long b_sb,
                         long b_sk, long b_sn, __global float* restrict C, long c_off, long M,
                         long N, long K) {
  const long m0 = (long)get_global_id(0) * 4;
  const long n0 = (long)get_global_id(1) * 32;
  const long batch = get_global_id(2);
  A += a_off + batch * a_sb;
  B += b_off + batch * b_sb;
  __global float* c = C + c_off + batch * M * N;
  float16 c0 = (float16)(0.0f), c1 = (float16)(0.0f), c2 = (float16)(0.0f), c3 = (float16)(0.0f);
  if (b_sn == 1 && n0 + 32 <= N && m0 + 4 <= M) {
    float16 d0 = (float16)(0.0f), d1 = (float16)(0.0f), d2 = (float16)(0.0f), d3 = (float16)(0.0f);
    __global const float* a0 = A + m0 * a_sm;
    __global const float* a1 = a0 + a_sm;
    __global const float* a2 = a1 + a_sm;
    __global const float* a3 = a2 + a_sm;
    __global const float* b = B + n0;
    for (long k = 0; k < K; ++k) {
      const float16 bk = vload16(0, b + k * b_sk);
      const float16 bh = vload16(1, b + k * b_sk);
      const long ak = k * a_sk;
      const float16 x0 = (float16)(a0[ak]), x1 = (float16)(a1[ak]);
      const float16 x2 = (float16)(a2[ak]), x3 = (float16)(a3[ak]);
      c0 = fma(x0, bk, c0);
      d0 = fma(x0, bh, d0);
      c1 = fma(x1, bk, c1);
      d1 = fma(x1, bh, d1);
      c2 = fma(x2, bk, c2);
      d2 = fma(x2, bh, d2);
      c3 = fma(x3, bk, c3);
      d3 = fma(x3, bh, d3);
    }
    vstore16(c0, 0, c + m0 * N + n0);
    vstore16(d0, 1, c + m0 * N + n0);
    vstore16(c1, 0, c + (m0 + 1) * N + n0);
    vstore16(d1, 1, c + (m0 + 1) * N + n0);
    vstore16(c2, 0, c + (m0 + 2) * N + n0);
    vstore16(d2, 1, c + (m0 + 2) * N + n0);
    vstore16(c3, 0, c + (m0 + 3) * N + n0);
    vstore16(d3, 1, c + (m0 + 3) * N + n0);
    return;
  }
  // Edge blocks: rows and columns past C's edge are clamped for reading and not stored.
  __global const float* a0 = A + min(m0, M - 1) * a_sm;
  __global const float* a1 = A + min(m0 + 1, M - 1) * a_sm;
  __global const float* a2 = A + min(m0 + 2, M - 1) * a_sm;
  __global const float* a3 = A + min(m0 + 3, M - 1) * a_sm;
  for (long h = n0; h < n0 + 32 && h < N; h += 16) {
    long col[16];
    for (int j = 0; j < 16; ++j) col[j] = min(h + j, N - 1) * b_sn;
    c0 = c1 = c2 = c3 = (float16)(0.0f);
    for (long k = 0; k < K; ++k) {
      __global const float* bk = B + k * b_sk;
      float bv[16];
      for (int j = 0; j < 16; ++j) bv[j] = bk[col[j]];
      const float16 b = vload16(0, bv);
      const long ak = k * a_sk;
      c0 = fma((float16)(a0[ak]), b, c0);
      c1 = fma((float16)(a1[ak]), b, c1);
      c2 = fma((float16)(a2[ak]), b, c2);
      c3 = fma((float16)(a3[ak]), b, c3);
    }
    float out[4][16];
    vstore16(c0, 0, out[0]);
    vstore16(c1, 0, out[1]);
    vstore16(c2, 0, out[2]);
    vstore16(c3, 0, out[3]);
    for (int i = 0; i < 4 && m0 + i < M; ++i) {
      for (int j = 0; j < 16 && h + j < N; ++j) c[(m0 + i) * N + h + j] = out[i][j];
    }
  }
}
