// C[b] = A[b] @ B[b] for f32 on CPU devices. PoCL runs a loop inside one work-item as written
// (POCL.md), so the vector width is written out: a work-item owns an NR-column panel of C and
// `mb` of its rows, computed in blocks of MR x NR held in MR * (NR / LC_VW) vector accumulators.
// The blocking (kernels/emit_matmul.cpp, chosen per device by runtime/matmul_tuner) comes as
// build options -DLC_VW= (floats per vector: 4, 8 or 16) -DMR= -DNR= (a multiple of LC_VW)
// -DKB=, and the source before this text defines the unrolling macros LC_ROWS(X) = X(0) ..
// X(MR - 1) and LC_VECS(X, i) = X(i, 0) .. X(i, NR / LC_VW - 1).
// B's rows are `b_sk` apart (8 KiB at N = 2048): reading the panel straight from B maps every row
// onto the same few cache sets and a new page per k, so nothing is reused from cache. Instead
// the work-item first copies KB rows of its panel into contiguous local memory (KB * NR floats,
// sized for L1; private to the work-group of one work-item), then runs every row block over
// that copy; a copy costs 1/mb of the multiply-adds. K > KB takes several passes that add into
// C. B^T (b_sk == 1) is copied 16 columns by 16 k at a time, reading B contiguously and
// transposing in registers (a scalar copy before: the MLP step's dA = dC W^T took 1.105x the
// time of its forward product, 1.062x with this and B^T's next pass prefetched, medians of 8
// rounds alternating on a 2-core Zen 4 EPYC).
// A whole panel of a row-major B is read in place instead (`direct`) when the work-item has few
// rows to amortise the copy over (fewer than 4 MR: the small-M products of sampling, where the
// copy made [64, 352] x [352, 128]-like products 1.4-1.9x slower; and the last rows of C past a
// whole number of work-items' `mb`: [256, 1024] x [1024, 1024] in 126-row work-items left 4
// rows to the last, which copied every panel for them). Reading in place also gained
// 6-7% on large products whose B rows are not a multiple of 4 KiB apart, but lost 8% on the
// batched attention products (K = 32): measured, not kept.
// The buffers A, B and C, then the integers of matmul.cl plus `mb` (rows per work-item, a multiple
// of MR) as one struct (lc_matmul_args, below): A and B are strided views (offset and strides in
// elements, the batch dims folded into one stride or two levels, as matmul.cl says); C's element
// (b, row, col) at c_off + batch offset + row * c_sm + col, as matmul.cl says (contiguous, or a
// permute's layout). One struct, not ~25 arguments: PoCL copies every argument of a launch
// apart, an aligned allocation each (~25% of the host's instructions a launch of the char-LM
// sampling step). Work-items: (ceil(M / mb), ceil(N / NR),
// batches) (with LC_PANELS, ceil(N / NR / np) along dim 1), local size {1, 1, 1}. Rows past C's
// edge are clamped for reading and not stored; columns past it read zeros from the copy and are
// not stored; B with non-unit column stride is gathered when copied.
// With an epilogue, earlier passes store plain partial sums, the last one the epilogue's value.
// A generated source may put an epilogue before this text: LC_EPILOGUE defined, and
// `lc_epilogue(acc, batch, row, col LC_EPI_ARGS)` the value to store for the element of C at
// (batch, row, col) whose product is `acc`, reading the extra kernel arguments LC_EPI_PARAMS;
// with LC_EPILOGUE16 also defined, `lc_epilogue16` is the same for the 16 elements from col of
// one row (float16 in and out), used on whole panels (NR is a multiple of 16), and
// `lc_prefetch16(batch, row, col LC_EPI_ARGS)` prefetches what lc_epilogue16 would read there.
// prefetch.cl, before this text, defines LC_PREFETCH.
#ifndef LC_EPILOGUE
#define LC_EPI_PARAMS
#define LC_EPI_ARGS
#endif
// A group of products sharing A (q, k and v of one x; SwiGLU's two of one y) in one launch:
// the generated source defines LC_GROUP_BUFFERS (B and C of every product after the first, after
// C), LC_GROUP_FIELDS (their integers: B's and C's views and N, at the struct's end) and
// LC_GROUP_SELECT (moves `panel_index` into its product's range, switches B, C, N and their
// strides to that product's). Work-items: the panels of every product along dim 1.
#ifndef LC_GROUP_BUFFERS
#define LC_GROUP_BUFFERS
#define LC_GROUP_FIELDS
#define LC_GROUP_SELECT
#endif
// A dual product (SwiGLU's silu(y @ w1) * (y @ w3) where nothing else reads the two products):
// with LC_DUAL defined, a second B (B2, after C; its view's integers those of B but for b_sn,
// which is 1 for both, after `mb`) whose product has the same shape. A work-item computes its panel
// of both products over all of K at once (no partial sums), reading both Bs in place, or from
// the local panel where both fit side by side, and stores the epilogue's value of the two
// accumulators, `lc_epilogue(acc, acc2, batch, row, col LC_EPI_ARGS)`: neither product goes to
// memory.
// Several panels per work-item (LC_PANELS defined): a work-item takes `np` consecutive panels
// (the argument after `mb`), each pass over all of them, so its rows of A for that pass are read
// from L2 by every panel after the first (1024^3 +4%, 2048^3 +11% on a Zen 4 EPYC). With
// LC_APACK also defined (A^T: its rows contiguous, a_sm == 1, its k a_sk apart), each pass first
// copies those rows into local memory, k by k, in MR-row slivers ([LC_APACK / MR][KB][MR], each
// padded by a line; LC_APACK = the most rows), which all its panels then read: in place, each k
// of a block is a line a_sk floats from the last (8 KiB at M = 2048), a new page in the same few
// cache sets for every k, fetched from L3 once per panel and block half (2048^3 A^T B 120 -> 181
// GFLOP/s there). Copying a row-major A was slower than reading it in place. Not with groups or
// a dual product.
#ifdef LC_PANELS
#define LC_PANELS_FIELDS , np
#else
#define LC_PANELS_FIELDS
#endif
#ifdef LC_DUAL
#define LC_DUAL_BUFFERS , __global const float* restrict B2
#define LC_DUAL_FIELDS , b2_off, b2_sb, b2_bi, b2_sg, b2_sk
#else
#define LC_DUAL_BUFFERS
#define LC_DUAL_FIELDS
#endif
#define LC_MATMUL_FIELDS                                                                    \
  long a_off, a_sb, a_bi, a_sg, a_sm, a_sk, b_off, b_sb, b_bi, b_sg, b_sk, b_sn, c_off, c_sb, \
      c_bi, c_sg, c_sm, M, N, K, mb LC_PANELS_FIELDS LC_DUAL_FIELDS LC_GROUP_FIELDS;
// On one line, anonymous: a program bundle (backend/program_bundle.h) renames typedefs it finds
// on one line, and struct tags not at all.
typedef struct { LC_MATMUL_FIELDS } lc_matmul_args;
#if defined(LC_EPILOGUE16)
#define LC_PREFETCH_EPILOGUE(b, r, c) \
  if (last) lc_prefetch16(b, r, c LC_EPI_ARGS);
#else
#define LC_PREFETCH_EPILOGUE(b, r, c)
#endif

#define LC_CAT(a, b) a##b
#define LC_XCAT(a, b) LC_CAT(a, b)
#define LC_FV LC_XCAT(float, LC_VW)  // the vector type
// Vectors of LC_VW floats (lc_fvu) and of 16 (lc_f16u) read and written at any float-aligned
// address through a type aligned as a float: one unaligned vector instruction each, where
// PoCL's vloadN/vstoreN came out as 128-bit pieces and inserts in the panel copy.
typedef LC_FV lc_fvu __attribute__((aligned(4)));
typedef float16 lc_f16u __attribute__((aligned(4)));
#define LC_GLOAD(v, p) (*((const __global lc_fvu*)(p) + (v)))
#define LC_LLOAD(v, p) (*((const __local lc_fvu*)(p) + (v)))
#define LC_PLOAD(v, p) (*((const lc_fvu*)(p) + (v)))
#define LC_GSTORE(x, v, p) (*((__global lc_fvu*)(p) + (v)) = (x))
#define LC_LSTORE(x, v, p) (*((__local lc_fvu*)(p) + (v)) = (x))
#define LC_PSTORE(x, v, p) (*((lc_fvu*)(p) + (v)) = (x))
#define LC_PLOAD16(p) (*(const lc_f16u*)(p))
#define LC_GLOAD16(p) (*(const __global lc_f16u*)(p))
#define LC_GSTORE16(x, p) (*(__global lc_f16u*)(p) = (x))
#define LC_LSTORE16(x, p) (*(__local lc_f16u*)(p) = (x))
#define LC_X16(X) \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
// One round of a 16 x 16 transpose: row i of o holds the even elements of rows 2i and 2i + 1 of
// r, row i + 8 their odd ones. Four rounds move the element at (row, col) to (col, row): each
// rotates the 8 bits row:col right by one.
#define LC_TPAIR(r, x, y, half) (float16)((r##x).half, (r##y).half)
#define LC_TROUND(o, r)                                                             \
  const float16 o##0 = LC_TPAIR(r, 0, 1, even), o##1 = LC_TPAIR(r, 2, 3, even),     \
                o##2 = LC_TPAIR(r, 4, 5, even), o##3 = LC_TPAIR(r, 6, 7, even),     \
                o##4 = LC_TPAIR(r, 8, 9, even), o##5 = LC_TPAIR(r, 10, 11, even),   \
                o##6 = LC_TPAIR(r, 12, 13, even), o##7 = LC_TPAIR(r, 14, 15, even), \
                o##8 = LC_TPAIR(r, 0, 1, odd), o##9 = LC_TPAIR(r, 2, 3, odd),       \
                o##10 = LC_TPAIR(r, 4, 5, odd), o##11 = LC_TPAIR(r, 6, 7, odd),     \
                o##12 = LC_TPAIR(r, 8, 9, odd), o##13 = LC_TPAIR(r, 10, 11, odd),   \
                o##14 = LC_TPAIR(r, 12, 13, odd), o##15 = LC_TPAIR(r, 14, 15, odd);

// Accumulator v (a vector of LC_VW columns) of row i, and row i's pointer into C.
#define LC_ACC(i, v) acc##i##_##v
#define LC_ZERO(i, v) LC_FV LC_ACC(i, v) = (LC_FV)(0.0f);
#define LC_LOAD_C(i, v) LC_ACC(i, v) = LC_GLOAD(v, cr##i + n0);
#define LC_LOAD_T(i, v) LC_ACC(i, v) = LC_PLOAD(v, t);
#define LC_STORE_C(i, v) LC_GSTORE(LC_ACC(i, v), v, cr##i + n0);
#define LC_STORE_T(i, v) LC_PSTORE(LC_ACC(i, v), v, t);
#define LC_LOAD_B(i, v) const LC_FV b##v = LC_LLOAD(v, panel + k * NR);
#define LC_LOAD_B_DIRECT(i, v) const LC_FV b##v = LC_GLOAD(v, bk + k * b_sk + n0);
#define LC_FMA(i, v) LC_ACC(i, v) = fma(x, b##v, LC_ACC(i, v));
// The second product's accumulators and B vectors (LC_DUAL).
#define LC_ACC2(i, v) dacc##i##_##v
#define LC_ZERO2(i, v) LC_FV LC_ACC2(i, v) = (LC_FV)(0.0f);
#define LC_LOAD_B2_DIRECT(i, v) const LC_FV d##v = LC_GLOAD(v, B2 + k * b2_sk + n0);
#define LC_LOAD_B_TAIL(i, v) const LC_FV b##v = LC_PLOAD(v, bt);
#define LC_LOAD_B2_TAIL(i, v) const LC_FV d##v = LC_PLOAD(v, dt);
// Both panels side by side in local memory (a dual product with 2 K NR <= KB NR floats).
#define LC_LOAD_B_PAIR(i, v) const LC_FV b##v = LC_LLOAD(v, panel + k * (2 * NR));
#define LC_LOAD_B2_PAIR(i, v) const LC_FV d##v = LC_LLOAD(v, panel + k * (2 * NR) + NR);
#define LC_FMA2(i, v) LC_ACC2(i, v) = fma(x, d##v, LC_ACC2(i, v));
#define LC_STORE_T2(i, v) LC_PSTORE(LC_ACC2(i, v), v, t2);

__kernel void matmul_cpu(__global const float* restrict A, __global const float* restrict B,
                         __global float* restrict C LC_DUAL_BUFFERS LC_GROUP_BUFFERS,
                         const lc_matmul_args lc_p LC_EPI_PARAMS) {
  const long a_off = lc_p.a_off, a_sb = lc_p.a_sb, a_bi = lc_p.a_bi, a_sg = lc_p.a_sg,
             a_sm = lc_p.a_sm, a_sk = lc_p.a_sk, M = lc_p.M, K = lc_p.K, mb = lc_p.mb;
  // A group's select switches these to its product's.
  long b_off = lc_p.b_off, b_sb = lc_p.b_sb, b_bi = lc_p.b_bi, b_sg = lc_p.b_sg,
       b_sk = lc_p.b_sk, b_sn = lc_p.b_sn, c_off = lc_p.c_off, c_sb = lc_p.c_sb,
       c_bi = lc_p.c_bi, c_sg = lc_p.c_sg, c_sm = lc_p.c_sm, N = lc_p.N;
#ifdef LC_PANELS
  const long np = lc_p.np;
#endif
#ifdef LC_DUAL
  const long b2_off = lc_p.b2_off, b2_sb = lc_p.b2_sb, b2_bi = lc_p.b2_bi, b2_sg = lc_p.b2_sg,
             b2_sk = lc_p.b2_sk;
#endif
  __local float panel[KB * NR];
  const long m_begin = (long)get_global_id(0) * mb;
  const long m_end = min(m_begin + mb, M);
  long panel_index = (long)get_global_id(1);
  LC_GROUP_SELECT
  const long batch = get_global_id(2);
#ifdef LC_APACK
  // Each MR-row sliver is one 64-byte line longer than its KB * MR floats: at a power-of-two
  // stride (KB * MR * 4 bytes, 4 or 8 KiB) every piece the copy stores for one k fell into the
  // same L1 set, and the copy took 18.5% of A^T B's kernel samples on an Emerald Rapids Xeon.
#define LC_ASTRIDE (KB * MR + 16)
  __local float apack[LC_ASTRIDE * ((LC_APACK + MR - 1) / MR)];
#endif
#ifdef LC_PANELS
  const long p_begin = panel_index * np;
  const long p_end = min(p_begin + np, (N + NR - 1) / NR);
#else
  const long n0 = panel_index * NR;
  const bool full = n0 + NR <= N;
  const bool direct = b_sn == 1 && full && m_end - m_begin < 4 * MR;
#endif
  A += a_off + (batch / a_bi) * a_sg + (batch % a_bi) * a_sb;
  B += b_off + (batch / b_bi) * b_sg + (batch % b_bi) * b_sb;
  __global float* c = C + c_off + (batch / c_bi) * c_sg + (batch % c_bi) * c_sb;
#ifdef LC_DUAL
  B2 += b2_off + (batch / b2_bi) * b2_sg + (batch % b2_bi) * b2_sb;
  // Read in place, the two panels' rows (N floats apart in each B) fall into a few cache sets
  // ([64, 128] x [128, 352]: 1408 bytes apart, 32 of L1's 64 sets, 8 lines each, filling them),
  // so every row block fetched them again from L2. Where both fit the local panel (2 K <= KB)
  // they are copied into it once, side by side, and every block reads them from there.
  const bool paired = full && 2 * K <= KB && m_end - m_begin > MR;
  if (paired) {
    for (long k = 0; k < K; ++k) {
      for (int v = 0; v < NR / LC_VW; ++v) {
        LC_LSTORE(LC_GLOAD(v, B + k * b_sk + n0), v, panel + k * (2 * NR));
        LC_LSTORE(LC_GLOAD(v, B2 + k * b2_sk + n0), v, panel + k * (2 * NR) + NR);
      }
    }
  }
  for (long m0 = m_begin; m0 < m_end; m0 += MR) {
#define LC_DECL2(i)                                            \
  LC_VECS(LC_ZERO, i)                                          \
  LC_VECS(LC_ZERO2, i)                                         \
  __global const float* a##i = A + min(m0 + i, M - 1) * a_sm; \
  __global float* cr##i = c + (m0 + i) * c_sm;
    LC_ROWS(LC_DECL2)
#undef LC_DECL2
#define LC_ROW_FMA2(i)                 \
  {                                    \
    const LC_FV x = (LC_FV)(a##i[ak]); \
    LC_VECS(LC_FMA, i)                 \
    LC_VECS(LC_FMA2, i)                \
  }
    if (paired) {
      for (long k = 0; k < K; ++k) {
        LC_VECS(LC_LOAD_B_PAIR, 0)
        LC_VECS(LC_LOAD_B2_PAIR, 0)
        const long ak = k * a_sk;
        LC_ROWS(LC_ROW_FMA2)
      }
    } else if (full) {
      for (long k = 0; k < K; ++k) {
        __global const float* bk = B;
        LC_VECS(LC_LOAD_B_DIRECT, 0)
        LC_VECS(LC_LOAD_B2_DIRECT, 0)
        const long ak = k * a_sk;
        LC_ROWS(LC_ROW_FMA2)
      }
    } else {  // the last panel: columns past N read as zeros
      for (long k = 0; k < K; ++k) {
        float bt[NR], dt[NR];
        for (int j = 0; j < NR; ++j) {
          bt[j] = n0 + j < N ? B[k * b_sk + n0 + j] : 0.0f;
          dt[j] = n0 + j < N ? B2[k * b2_sk + n0 + j] : 0.0f;
        }
        LC_VECS(LC_LOAD_B_TAIL, 0)
        LC_VECS(LC_LOAD_B2_TAIL, 0)
        const long ak = k * a_sk;
        LC_ROWS(LC_ROW_FMA2)
      }
    }
#undef LC_ROW_FMA2
#if defined(LC_EPILOGUE16)
#define LC_STORE_DUAL_FULL(i)                                                                 \
  for (int j = 0; j < NR; j += 16)                                                            \
    LC_GSTORE16(lc_epilogue16(LC_PLOAD16(t + j), LC_PLOAD16(t2 + j), batch, m0 + i, n0 + j \
                              LC_EPI_ARGS),                                                 \
                cr##i + n0 + j);
#else
#define LC_STORE_DUAL_FULL(i)                                                                 \
  for (int j = 0; j < NR; ++j)                                                                \
    cr##i[n0 + j] = lc_epilogue(t[j], t2[j], batch, m0 + i, n0 + j LC_EPI_ARGS);
#endif
#define LC_STORE_DUAL(i)                                                                      \
  if (m0 + i < M) {                                                                           \
    float t[NR], t2[NR];                                                                      \
    LC_VECS(LC_STORE_T, i)                                                                    \
    LC_VECS(LC_STORE_T2, i)                                                                   \
    if (full) {                                                                               \
      LC_STORE_DUAL_FULL(i)                                                                   \
    } else {                                                                                  \
      for (int j = 0; j < NR && n0 + j < N; ++j)                                              \
        cr##i[n0 + j] = lc_epilogue(t[j], t2[j], batch, m0 + i, n0 + j LC_EPI_ARGS);          \
    }                                                                                         \
  }
    LC_ROWS(LC_STORE_DUAL)
#undef LC_STORE_DUAL
#undef LC_STORE_DUAL_FULL
  }
#else
  for (long k0 = 0; k0 == 0 || k0 < K; k0 += KB) {  // K = 0 stores zeros
    const long kn = min((long)KB, K - k0);
    const bool last = k0 + KB >= K;
    __global const float* bk = B + k0 * b_sk;
#ifdef LC_APACK
    // Each k's rows of A are a run of `mb` floats a_sk apart from the last k's (a new page at
    // a_sk = 1024): the runs 8 k ahead are fetched while this one is copied. A run is cut into
    // MR-row pieces, each stored at row k of its block's sliver ([KB][MR]; rows past M, up to
    // the last block's end, are zeros), so that a block's FMA loop reads its A^T as one
    // contiguous run of KB * MR floats. Stored instead as rows of the pack ([KB][LC_APACK]),
    // every k of a block read a line of its own, LC_APACK floats from the last: 16 KiB of lines
    // for 6 KiB of values a block at kb 256, beside a 16 KiB panel in a 32 KiB L1. On a 2-core
    // Zen 3 EPYC VM (AVX2, no AVX-512), best of 15 runs each, alternating run by run against a
    // build of the rows layout, 6 rounds: 1024^3 A^T B 1.04x, 2048^3 1.07x, [1024, 256]^T x
    // [256, 1024] (the MLP's weight gradient) 1.05x (geometric means; rounds 0.91-1.21x). On a
    // Zen 4 with AVX2 code the two layouts had measured the same, and the rows layout had
    // replaced slivers copied a float at a time, 14-25% slower than A B there.
    const long run = m_end - m_begin;
    const long run_blocks = (run + MR - 1) / MR * MR;
    for (long k = 0; k < kn; ++k) {
      __global const float* src = A + (k0 + k) * a_sk + m_begin;
      if (k + 8 < kn) {
        for (long r = 0; r < run; r += 16) LC_PREFETCH(src + 8 * a_sk + r);
      }
      __local float* d = apack + k * MR;
      long r = 0;
      for (; r + MR <= run; r += MR, d += LC_ASTRIDE) {
        for (int i = 0; i < MR; ++i) d[i] = src[r + i];
      }
      if (r < run_blocks) {
        for (int i = 0; i < MR; ++i) d[i] = r + i < run ? src[r + i] : 0.0f;
      }
    }
#endif
#ifdef LC_PANELS
    for (long p = p_begin; p < p_end; ++p) {
    const long n0 = p * NR;
    const bool full = n0 + NR <= N;
    const bool direct = b_sn == 1 && full && m_end - m_begin < 4 * MR;
#endif
    if (direct) {
      // read in place below
    } else if (b_sn == 1 && full) {
      for (long k = 0; k < kn; ++k) {
        for (int v = 0; v < NR / LC_VW; ++v)
          LC_LSTORE(LC_GLOAD(v, bk + k * b_sk + n0), v, panel + k * NR);
      }
    } else if (b_sk == 1) {  // B^T: each column of the panel is contiguous in B
      long k_done = 0;
      if (full) {
        // 16 columns by 16 k at a time: 16 vector loads down the columns, a transpose in
        // registers, 16 vector stores into rows of the panel.
        for (; k_done + 16 <= kn; k_done += 16) {
          for (int j = 0; j < NR; j += 16) {
            __global const float* src = bk + (n0 + j) * b_sn + k_done;
            __local float* dst = panel + k_done * NR + j;
#define LC_TLOAD(x) const float16 lc_a##x = LC_GLOAD16(src + x * b_sn);
            LC_X16(LC_TLOAD)
#undef LC_TLOAD
            LC_TROUND(lc_b, lc_a)
            LC_TROUND(lc_c, lc_b)
            LC_TROUND(lc_d, lc_c)
            LC_TROUND(lc_e, lc_d)
#define LC_TSTORE(x) LC_LSTORE16(lc_e##x, dst + x * NR);
            LC_X16(LC_TSTORE)
#undef LC_TSTORE
          }
        }
      }
      for (int j = 0; j < NR; ++j) {  // the k left after whole blocks of 16, or a partial panel
        __global const float* col = bk + (n0 + j) * b_sn;
        if (n0 + j < N) {
          for (long k = k_done; k < kn; ++k) panel[k * NR + j] = col[k];
        } else {
          for (long k = k_done; k < kn; ++k) panel[k * NR + j] = 0.0f;
        }
      }
    } else {
      for (long k = 0; k < kn; ++k) {
        for (int j = 0; j < NR; ++j)
          panel[k * NR + j] = n0 + j < N ? bk[k * b_sk + (n0 + j) * b_sn] : 0.0f;
      }
    }
    for (long m0 = m_begin; m0 < m_end; m0 += MR) {
#define LC_DECL(i)                                                         \
  LC_VECS(LC_ZERO, i)                                                      \
  __global const float* a##i = A + min(m0 + i, M - 1) * a_sm + k0 * a_sk; \
  __global float* cr##i = c + (m0 + i) * c_sm;                             \
  if (k0 > 0 && m0 + i < M) {                                              \
    if (full) {                                                            \
      LC_VECS(LC_LOAD_C, i)                                                \
    } else {                                                               \
      float t[NR];                                                         \
      for (int j = 0; j < NR; ++j) t[j] = n0 + j < N ? cr##i[n0 + j] : 0.0f; \
      LC_VECS(LC_LOAD_T, i)                                                \
    }                                                                      \
  }
      LC_ROWS(LC_DECL)
#undef LC_DECL
      // What the next block reads or writes besides A and the panel (its lines of C: partial
      // sums, or on the first pass lines its stores would otherwise wait to own; and on the last
      // pass its epilogue's inputs) is fetched while this one computes. The first pass's lines
      // were left out until stop 63 (the comment said otherwise): with them the MLP training
      // step, whose weight gradients [1024, 256] x [256, 1024] write fresh 4 MiB buffers, took
      // 69.9-72.2 ms against 71.1-76.1 (median of 10, 9 of 10 rounds alternating; 2-core Zen 4
      // EPYC VM, AVX-512 code).
      if (full && m0 + MR < m_end) {
#define LC_AHEAD(i)                                                                \
  if (m0 + MR + i < M) {                                                           \
    for (int j = 0; j < NR; j += 16) {                                             \
      LC_PREFETCH(c + (m0 + MR + i) * c_sm + n0 + j);                              \
      LC_PREFETCH_EPILOGUE(batch, m0 + MR + i, n0 + j);                            \
    }                                                                              \
  }
        LC_ROWS(LC_AHEAD)
#undef LC_AHEAD
      }
      // The next pass's rows of B, a share of them per block, fetched while this pass computes:
      // its copy into the panel otherwise waits on rows that are N floats apart, a page each at
      // N = 1024, which the hardware prefetchers do not follow (+4-10% on [256, 1024] x
      // [1024, 1024], +2% at 1024 and 2048 on a Zen 4 EPYC; no change where K <= KB). B^T's
      // columns likewise, each a run of the next pass's k.
      // With several panels (LC_PANELS), the next panel of this pass is what comes next, and
      // after the last one the first of the next pass.
#ifdef LC_PANELS
      const bool same_pass = p + 1 < p_end;
      const long next_n0 = same_pass ? n0 + NR : p_begin * NR;
      const long next_k0 = same_pass ? k0 : k0 + KB;
      const bool ahead = (same_pass || !last) && !direct && next_n0 + NR <= N;
#else
      const long next_n0 = n0;
      const long next_k0 = k0 + KB;
      const bool ahead = !last && !direct && full;
#endif
#ifdef LC_APACK
      // During the last panel of a pass, each block fetches a share of the next pass's runs of
      // A^T, which the next pack copy then reads from cache: it otherwise waited on them (5% of
      // the kernel's samples in `perf`), the prefetch 8 k ahead in the copy hiding too little.
      // 1024^3 A^T B 8% faster (median of per-round ratios, 7 of 10 rounds alternating), 2048^3
      // 3% (3 of 6); AVX2 code on a 2-core Zen 4 EPYC VM; AVX-512 code 1.6% (5 of 8).
      if (p + 1 == p_end && !last) {
        const long next_kn = min((long)KB, K - k0 - KB);
        const long blocks = (m_end - m_begin + MR - 1) / MR;
        const long block = (m0 - m_begin) / MR;
        const long per = (next_kn + blocks - 1) / blocks;
        for (long k = block * per; k < min(block * per + per, next_kn); ++k) {
          __global const float* src = A + (k0 + KB + k) * a_sk + m_begin;
          for (long r = 0; r < run; r += 16) LC_PREFETCH(src + r);
        }
      }
#endif
      if (ahead) {
        const long next_kn = min((long)KB, K - next_k0);
        const long blocks = (m_end - m_begin + MR - 1) / MR;
        const long block = (m0 - m_begin) / MR;
        if (b_sn == 1) {
          __global const float* next = B + next_k0 * b_sk + next_n0;
          const long per = (KB + blocks - 1) / blocks;
          for (long k = block * per; k < min(block * per + per, next_kn); ++k) {
            for (int j = 0; j < NR; j += 16) LC_PREFETCH(next + k * b_sk + j);
          }
        } else if (b_sk == 1) {
          // In the pass's last NR blocks at most: fetched at the start of a long pass (2048
          // rows, 256 blocks), columns b_sn apart (few cache sets) would have to wait out all of
          // it in cache. At 2048^3 A B^T neither placement, nor none, was measurably faster on
          // the noisy VM (4 rounds alternating); at [256, 1024] x [1024, 1024]^T every block
          // fetches one column, as before.
          __global const float* next = B + next_k0 + next_n0 * b_sn;
          const long late = max(0L, blocks - NR);
          const long per = (NR + (blocks - late) - 1) / (blocks - late);
          const long first = (block - late) * per;
          for (long j = max(0L, first); block >= late && j < min(first + per, (long)NR); ++j) {
            for (long k = 0; k < next_kn; k += 16) LC_PREFETCH(next + j * b_sn + k);
          }
        }
      }
#define LC_ROW_FMA(i)                  \
  {                                    \
    const LC_FV x = (LC_FV)(a##i[ak]); \
    LC_VECS(LC_FMA, i)                 \
  }
      if (direct) {
        for (long k = 0; k < kn; ++k) {
          LC_VECS(LC_LOAD_B_DIRECT, 0)
          const long ak = k * a_sk;
          LC_ROWS(LC_ROW_FMA)
        }
      }
#ifdef LC_APACK
      else {
        __local const float* ap = apack + (m0 - m_begin) / MR * LC_ASTRIDE;
#define LC_ROW_FMA_PACKED(i)                 \
  {                                          \
    const LC_FV x = (LC_FV)(ap[k * MR + i]); \
    LC_VECS(LC_FMA, i)                       \
  }
        for (long k = 0; k < kn; ++k) {
          LC_VECS(LC_LOAD_B, 0)
          LC_ROWS(LC_ROW_FMA_PACKED)
        }
#undef LC_ROW_FMA_PACKED
      }
#else
      else if (a_sm == 1) {
        // A^T read in place: for each k a block's rows share a line, and the lines of
        // consecutive k are a_sk floats apart (8 KiB at 2048), so they fall into a few cache sets
        // and are evicted before the next block reads the other half of them; each is fetched 32
        // k ahead instead (2048^3 A^T B 1.4-1.6x faster on a Zen 4 EPYC, 1024^3 1.03x; 16 and
        // 64 ahead were no better).
        for (long k = 0; k < kn; ++k) {
          if (k + 32 < kn) LC_PREFETCH(a0 + (k + 32) * a_sk);
          LC_VECS(LC_LOAD_B, 0)
          const long ak = k * a_sk;
          LC_ROWS(LC_ROW_FMA)
        }
      } else {
        for (long k = 0; k < kn; ++k) {
          LC_VECS(LC_LOAD_B, 0)
          const long ak = k * a_sk;
          LC_ROWS(LC_ROW_FMA)
        }
      }
#endif
#undef LC_ROW_FMA
#if defined(LC_EPILOGUE16)
#define LC_STORE_LAST(i)                                                                \
  {                                                                                     \
    float t[NR];                                                                        \
    LC_VECS(LC_STORE_T, i)                                                              \
    if (full) {                                                                         \
      for (int j = 0; j < NR; j += 16)                                                  \
        LC_GSTORE16(lc_epilogue16(LC_PLOAD16(t + j), batch, m0 + i, n0 + j LC_EPI_ARGS), \
                    cr##i + n0 + j);                                                    \
    } else {                                                                            \
      for (int j = 0; j < NR && n0 + j < N; ++j)                                        \
        cr##i[n0 + j] = lc_epilogue(t[j], batch, m0 + i, n0 + j LC_EPI_ARGS);           \
    }                                                                                   \
  }
#elif defined(LC_EPILOGUE)
#define LC_STORE_LAST(i)                                                      \
  {                                                                           \
    float t[NR];                                                              \
    LC_VECS(LC_STORE_T, i)                                                    \
    for (int j = 0; j < NR && n0 + j < N; ++j)                                \
      cr##i[n0 + j] = lc_epilogue(t[j], batch, m0 + i, n0 + j LC_EPI_ARGS);   \
  }
#else
#define LC_STORE_LAST(i) LC_STORE_PLAIN(i)
#endif
#define LC_STORE_PLAIN(i)                                          \
  if (full) {                                                      \
    LC_VECS(LC_STORE_C, i)                                         \
  } else {                                                         \
    float t[NR];                                                   \
    LC_VECS(LC_STORE_T, i)                                         \
    for (int j = 0; j < NR && n0 + j < N; ++j) cr##i[n0 + j] = t[j]; \
  }
#define LC_STORE(i)     \
  if (m0 + i < M) {     \
    if (last) {         \
      LC_STORE_LAST(i)  \
    } else {            \
      LC_STORE_PLAIN(i) \
    }                   \
  }
      LC_ROWS(LC_STORE)
#undef LC_STORE
    }
#ifdef LC_PANELS
    }  // panels
#endif
  }
#endif
}
