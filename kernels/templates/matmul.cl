// C[b] = A[b] @ B[b] for every batch b, with TS x TS tiles in local memory.
// With LC_EPILOGUE defined before this text (see matmul_cpu.cl), C holds lc_epilogue's value.
#ifndef LC_EPILOGUE
#define LC_EPI_PARAMS
#define LC_EPI_ARGS
#define lc_epilogue(acc, batch, row, col) (acc)
#endif
// T is the element type; A and B are strided views (offset and strides in elements, the batch
// dims folded into one stride or two levels: batch b at (b / a_bi) * a_sg + (b % a_bi) * a_sb);
// C's element (b, row, col) is at c_off + (b / c_bi) * c_sg + (b % c_bi) * c_sb + row * c_sm +
// col (contiguous [batches, M, N]: c_sb = M * N, c_sm = N; or the layout of a permute of C).
// RB (1 unless defined): each work-item computes RB x RB elements of C, rows ly + i * TS and
// columns lx + j * TS of the work-group's (TS * RB)-square block, from TS-wide slices of K in
// local memory: 2 * RB local reads per RB * RB multiply-adds instead of 2 per 1.
#ifndef RB
#define RB 1
#endif
#define LC_BS (TS * RB)
__kernel __attribute__((reqd_work_group_size(TS, TS, 1)))
void matmul(__global const T* restrict A, long a_off, long a_sb, long a_bi, long a_sg, long a_sm,
            long a_sk, __global const T* restrict B, long b_off, long b_sb, long b_bi, long b_sg,
            long b_sk, long b_sn,
            __global T* restrict C, long c_off, long c_sb, long c_bi, long c_sg, long c_sm,
            long M, long N, long K LC_EPI_PARAMS) {
  const int lx = get_local_id(0);
  const int ly = get_local_id(1);
  const long col0 = (long)get_group_id(0) * LC_BS;
  const long row0 = (long)get_group_id(1) * LC_BS;
  const long batch = get_global_id(2);
  __local T a_tile[LC_BS][TS];
  __local T b_tile[TS][LC_BS];
  A += a_off + (batch / a_bi) * a_sg + (batch % a_bi) * a_sb;
  B += b_off + (batch / b_bi) * b_sg + (batch % b_bi) * b_sb;
  T acc[RB][RB];
  for (int i = 0; i < RB; ++i)
    for (int j = 0; j < RB; ++j) acc[i][j] = (T)0;
  for (long k0 = 0; k0 < K; k0 += TS) {
    const long ka = k0 + lx;
    const long kb = k0 + ly;
    for (int i = 0; i < RB; ++i) {
      const long row = row0 + ly + i * TS;
      a_tile[ly + i * TS][lx] = (row < M && ka < K) ? A[row * a_sm + ka * a_sk] : (T)0;
    }
    for (int j = 0; j < RB; ++j) {
      const long col = col0 + lx + j * TS;
      b_tile[ly][lx + j * TS] = (kb < K && col < N) ? B[kb * b_sk + col * b_sn] : (T)0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < TS; ++k) {
      T a[RB], b[RB];
      for (int i = 0; i < RB; ++i) a[i] = a_tile[ly + i * TS][k];
      for (int j = 0; j < RB; ++j) b[j] = b_tile[k][lx + j * TS];
      for (int i = 0; i < RB; ++i)
        for (int j = 0; j < RB; ++j) acc[i][j] += a[i] * b[j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int i = 0; i < RB; ++i) {
    const long row = row0 + ly + i * TS;
    for (int j = 0; j < RB; ++j) {
      const long col = col0 + lx + j * TS;
      if (row < M && col < N)
        C[c_off + (batch / c_bi) * c_sg + (batch % c_bi) * c_sb + row * c_sm + col] =
            lc_epilogue(acc[i][j], batch, row, col LC_EPI_ARGS);
    }
  }
}
