#pragma once

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kernels/partition.h"

// The rules that move the first cut (Partition's constructor) before kernels are emitted. Each
// owns one reason a node ends a kernel or fuses into its reader; lower.cpp applies them in
// order: shared expensive subexpressions, broadcast expensive ones, the depth cap, then (CPU) row
// kernels and the depth cap again. Matmul epilogues do not move the cut: they merge two kernels at
// emission.
namespace lazycl::kernels {

// The relative cost of evaluating `op` once per element: a transcendental (exp, sin, sqrt, ...)
// is worth kExpensivePerElement arithmetic ops, a division half that; views and leaves are free.
int OpCost(ir::Op op);
// A subexpression worth computing once rather than again: one transcendental, or 8 ops.
inline constexpr int kExpensivePerElement = 8;

// A fused subexpression that two kernels read is materialized once rather than recomputed by
// both where it has more than 32 nodes, reads more than two inputs of its own size from memory
// (a residual stream summed over a loop of layers), or gathers; otherwise it is recomputed.
void MaterializeSharedExpensiveNodes(Partition* p);

// An expensive subexpression (a transcendental or more than 8 ops) that a kernel would
// recompute for every element of a much larger iteration it is broadcast into is materialized
// at its own size first: the rotary tables cos(pos * exp(..)) of [T, hd/2] read by [B, H, T, hd]
// kernels were 54% of a char-LM training step. Only subexpressions that read no reduction are
// taken (a row's statistic such as RMSNorm's rsqrt belongs to the row kernel), and only where
// the recomputation saved is large (at least 2^16 weighted ops per run).
void MaterializeBroadcastExpensiveNodes(Partition* p);

// Cuts fused chains deeper than 128 by materializing the node at the limit: code generation
// recurses once per level, and very long kernels compile slowly.
void MaterializeDeepChains(Partition* p);

// CPU: a reduction over the trailing dims of a value shaped like an elementwise root, read
// only per row back into that root's kernel, is computed inside that kernel, one work-item
// per row (EmitRowKernel): softmax's max, sum of exp and normalisation become one pass over
// memory instead of three kernels.
void FuseRowReductions(Partition* p);

// Matmuls whose result only an elementwise chain reads, at the result's own index, run that
// chain as their epilogue: relu(h @ w + bias) is one kernel, also where the chain reads a 2-D
// product through a Reshape that splits its rows ([B, T, K] @ [K, N] + residual). A matmul whose
// result only a Permute root reads (keeping the last dim, views.h PermutedStore) stores its product
// straight into the permute's buffer: attention's p @ v written as [b, t, h, d], with no copy
// kernel. With `dual_products` (the CPU f32 matmul), a chain that reads two such products of one
// A view and one shape, each B row-major, computes both in one kernel (a dual product:
// SwiGLU's silu(y @ w1) * (y @ w3) at inference, where neither product is kept).
//
// Reductions likewise: an elementwise chain that only reads a reduction's result (and nothing else
// does), at the result's own linear index, is computed by the reduction's kernel as it stores each
// element (XLA's reduction epilogue fusion): a mean's scale, a norm's sqrt, an argmax's index
// fix-up, the SGD update of a bias from its gradient's column sums. A row kernel's root (which
// holds reductions itself) carries none.
struct Epilogues {
  absl::flat_hash_map<int, int> matmul_of;  // root of an epilogue chain -> its matmul
  absl::flat_hash_map<int, int> second_of;  // root of a dual product's chain -> its second matmul
  absl::flat_hash_map<int, int> permuted;   // Permute root -> the matmul that stores into it
  absl::flat_hash_map<int, int> reduce_of;  // root of an epilogue chain -> its reduction
  std::vector<bool> fused;  // per node: a matmul or reduction that launches no kernel itself
};
Epilogues FindEpilogues(const Partition& p, bool dual_products);

}  // namespace lazycl::kernels
