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
__kernel __attribute__((reqd_work_group_size(TS, TS, 1)))
void matmul(__global const T* restrict A, long a_off, long a_sb, long a_bi, long a_sg, long a_sm,
            long a_sk, __global const T* restrict B, long b_off, long b_sb, long b_bi, long b_sg,
            long b_sk, long b_sn,
            __global T* restrict C, long c_off, long c_sb, long c_bi, long c_sg, long c_sm,
            long M, long N, long K LC_EPI_PARAMS) {
  const int lx = get_local_id(0);
  const int ly = get_local_id(1);
  const long col = get_global_id(0);
  const long row = get_global_id(1);
  const long batch = get_global_id(2);
  __local T a_tile[TS][TS];
  __local T b_tile[TS][TS];
  A += a_off + (batch / a_bi) * a_sg + (batch % a_bi) * a_sb;
  B += b_off + (batch / b_bi) * b_sg + (batch % b_bi) * b_sb;
  T acc = (T)0;
  for (long k0 = 0; k0 < K; k0 += TS) {
    const long ka = k0 + lx;
    const long kb = k0 + ly;
    a_tile[ly][lx] = (row < M && ka < K) ? A[row * a_sm + ka * a_sk] : (T)0;
    b_tile[ly][lx] = (kb < K && col < N) ? B[kb * b_sk + col * b_sn] : (T)0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < TS; ++k) acc += a_tile[ly][k] * b_tile[k][lx];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (row < M && col < N)
    C[c_off + (batch / c_bi) * c_sg + (batch % c_bi) * c_sb + row * c_sm + col] =
        lc_epilogue(acc, batch, row, col LC_EPI_ARGS);
}
