#include "kernels/fusion_rules.h"

#include <algorithm>
#include <cstdint>

#include "absl/container/flat_hash_set.h"
#include "kernels/index_reads.h"
#include "kernels/views.h"

namespace lazycl::kernels {
namespace {

using ir::Node;
using ir::Op;

// A fused subexpression larger than this is materialized rather than recomputed when two
// kernels need it.
constexpr int kMaxRecomputedNodes = 32;
// Nor is one that reads more than this many inputs of (at least half) its own size from memory
// (CostlyToRecompute).
constexpr int kMaxRecomputedStreams = 2;
// A kernel's fused expression is at most this deep: code generation recurses once per level
// (and the stack frames are large under sanitizers), and very long kernels compile slowly.
constexpr int kMaxFusedDepth = 128;

IsKernelInput InputsOf(const Partition& p) {
  return [&p](const Node& n) { return p.IsInput(n); };
}

// A row kernel over fewer rows than cores is worth it up to this many elements.
constexpr int64_t kSmallRowKernel = 1 << 14;

// Whether `red` reduces trailing dims of a value shaped like `root`, all rows reducing the
// same number of dims (`*reduced_dims`, 0 until the first), with rows worth a row kernel:
// long enough for vectors and many enough to spread over the device, or few and small.
bool RowReduction(const Node& red, const Node& root, size_t* reduced_dims) {
  if ((red.op != Op::kSum && red.op != Op::kMax) || red.dtype != DType::f32) return false;
  const Node& x = *red.operands[0];
  if (x.shape != root.shape) return false;
  const size_t k = red.args.size();
  if (*reduced_dims != 0 && k != *reduced_dims) return false;
  for (size_t i = 0; i < k; ++i) {
    if (red.args[i] != static_cast<int64_t>(x.shape.size() - k + i)) return false;
  }
  int64_t row = 1;
  for (size_t d = x.shape.size() - k; d < x.shape.size(); ++d) row *= x.shape[d];
  const int64_t rows = ir::NumElements(x.shape) / std::max<int64_t>(row, 1);
  // Few rows leave cores idle, unless the whole reduction is small: one row of a sampling
  // step's final norm is one kernel, not a reduction and an elementwise kernel.
  if (row < 16 || (rows < 16 && rows * row > kSmallRowKernel)) return false;
  *reduced_dims = k;
  return true;
}

// Whether node `r`, no longer a root, is read only inside root `o`'s kernel, and there only as
// a value of the row being computed (OwnIndex::kRow).
bool OnlyReadPerRowBy(const Partition& p, int r, int o) {
  for (int k = 0; k < p.size(); ++k) {
    if (!p.IsRoot(k) || k == o) continue;
    for (int i : p.Region(k)) {
      if (i == r) return false;
    }
  }
  return ReadsOnlyAtOwnIndex(p.node(o), p.node(r), InputsOf(p), OwnIndex::kRow);
}

constexpr int64_t kMinRecomputationSaved = int64_t{1} << 16;

// Whether products `a` and `b` can run as one dual product (matmul_cpu.cl's LC_DUAL): f32, one
// shape, the same view of one A, and each B read in place row by row.
bool DualPair(const Partition& p, const Node& a, const Node& b) {
  if (a.dtype != DType::f32 || b.dtype != DType::f32 || a.shape != b.shape) return false;
  const auto materialized = InputsOf(p);
  const auto a1 = MatmulAccess(*a.operands[0], materialized);
  const auto a2 = MatmulAccess(*b.operands[0], materialized);
  if (!a1 || !a2 || a1->base != a2->base || !(a1->access == a2->access)) return false;
  for (const Node* m : {&a, &b}) {
    const auto bv = MatmulAccess(*m->operands[1], materialized);
    if (!bv || bv->access.col_stride != 1) return false;
  }
  return true;
}

}  // namespace

int OpCost(Op op) {
  if (ir::IsTranscendental(op)) return kExpensivePerElement;
  if (op == Op::kDiv) return kExpensivePerElement / 2;
  return ir::IsElementwise(op) ? 1 : 0;
}

void MaterializeBroadcastExpensiveNodes(Partition* p) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (int r = 0; r < p->size() && !changed; ++r) {
      if (!p->IsRoot(r) || p->IsParam(r)) continue;
      const std::vector<int> region = p->Region(r);
      // Every node of the region is evaluated once per element of the kernel's iteration. A
      // leaf (a fill, an iota) is not: it is read where its readers need it, and a slice of a
      // large one is small (a scan unrolled in a trace over a lazy ones({n, 8}) slices it once
      // per step; counting its n * 8 elements made each step's carry look broadcast, so the
      // chain was materialized one node per pass: cubic in n).
      int64_t iteration = 0;
      for (int i : region) {
        if (p->node(i).operands.empty()) continue;
        iteration = std::max(iteration, ir::NumElements(p->node(i).shape));
      }
      // The largest candidate first: materializing it takes its own subexpressions with it.
      int best = -1;
      int64_t best_saved = 0;
      for (int i : region) {
        const Node& n = p->node(i);
        if (i == r || !ir::IsElementwise(n.op)) continue;
        const int64_t elements = ir::NumElements(n.shape);
        if (elements * 2 > iteration) continue;
        int64_t cost = 0;
        bool reads_reduction = false;
        for (int j : p->Region(i)) {
          cost += OpCost(p->node(j).op);
          for (const ir::NodePtr& o : p->node(j).operands) {
            if (p->IsInput(*o) && ir::IsReduce(o->op)) reads_reduction = true;
          }
        }
        const int64_t saved = (iteration - elements) * cost;
        if (reads_reduction || cost < kExpensivePerElement || saved < kMinRecomputationSaved)
          continue;
        if (saved > best_saved) {
          best = i;
          best_saved = saved;
        }
      }
      if (best >= 0) {
        p->SetRoot(best, true);
        changed = true;
      }
    }
  }
}

namespace {

// Whether two kernels had better read node i's value from memory than both compute it: its
// fused subexpression has more than kMaxRecomputedNodes nodes; or it reads more than
// kMaxRecomputedStreams inputs of (at least half) its own size, which every reader would read
// again (a residual stream h + a + f + ... built by a loop over layers: each layer's norm would
// re-add every earlier layer's outputs, the work growing with the square of the depth); or it
// gathers (an embedding lookup), which keeps the kernels that compute it off their vector path.
bool CostlyToRecompute(const Partition& p, int i) {
  const std::vector<int> region = p.Region(i);
  if (static_cast<int>(region.size()) > kMaxRecomputedNodes) return true;
  const int64_t elements = ir::NumElements(p.node(i).shape);
  absl::flat_hash_set<int> streams;
  for (int j : region) {
    if (p.node(j).op == Op::kGather) return true;
    for (const ir::NodePtr& o : p.node(j).operands) {
      const int k = p.IndexOf(*o);
      if (p.IsInput(k) && ir::NumElements(o->shape) * 2 >= elements) streams.insert(k);
    }
  }
  return static_cast<int>(streams.size()) > kMaxRecomputedStreams;
}

}  // namespace

void MaterializeSharedExpensiveNodes(Partition* p) {
  bool changed = true;
  while (changed) {
    changed = false;
    std::vector<int> kernels_using(p->size(), 0);
    for (int r = 0; r < p->size(); ++r) {
      if (!p->IsRoot(r)) continue;
      for (int i : p->Region(r)) {
        if (i != r) ++kernels_using[i];
      }
    }
    for (int i = 0; i < p->size(); ++i) {
      if (kernels_using[i] >= 2 && !p->IsInput(i) && CostlyToRecompute(*p, i)) {
        p->SetRoot(i, true);
        changed = true;
        break;
      }
    }
  }
}

void MaterializeDeepChains(Partition* p) {
  std::vector<int> depth(p->size(), 0);
  for (int i = 0; i < p->size(); ++i) {
    if (p->node(i).op == Op::kBuffer) continue;
    int d = 0;
    for (const ir::NodePtr& o : p->node(i).operands) {
      const int j = p->IndexOf(*o);
      if (!p->IsInput(j)) d = std::max(d, depth[j]);
    }
    depth[i] = d + 1;
    if (depth[i] >= kMaxFusedDepth && !p->IsRoot(i)) p->SetRoot(i, true);
  }
}

// Nested reductions (the sum reads the max) are taken in as they become reachable, so each
// root's region is walked again until nothing changes.
void FuseRowReductions(Partition* p) {
  for (int o = 0; o < p->size(); ++o) {
    const Node& root = p->node(o);
    if (!p->IsRoot(o) || !ir::IsElementwise(root.op) || root.dtype != DType::f32) continue;
    size_t reduced_dims = 0;
    bool changed = true;
    while (changed) {
      changed = false;
      for (int j : p->Region(o)) {
        for (const ir::NodePtr& operand : p->node(j).operands) {
          const int r = p->IndexOf(*operand);
          if (!p->IsRoot(r) || p->IsOutput(r) || !RowReduction(*operand, root, &reduced_dims))
            continue;
          p->SetRoot(r, false);  // tentatively part of o's kernel
          if (OnlyReadPerRowBy(*p, r, o)) {
            changed = true;
          } else {
            p->SetRoot(r, true);
          }
        }
      }
    }
  }
}

Epilogues FindEpilogues(const Partition& p, bool dual_products) {
  Epilogues epilogues;
  epilogues.fused.assign(p.size(), false);
  // For every matmul, the roots whose kernels read it.
  absl::flat_hash_map<int, std::vector<int>> readers;
  for (int r = 0; r < p.size(); ++r) {
    if (!p.IsRoot(r) || p.IsParam(r)) continue;
    absl::flat_hash_set<int> read;
    for (int i : p.Region(r)) {
      for (const ir::NodePtr& o : p.node(i).operands) {
        const int j = p.IndexOf(*o);
        const Op op = p.node(j).op;
        if ((op == Op::kMatmul || ir::IsReduce(op)) && j != r && read.insert(j).second)
          readers[j].push_back(r);
      }
    }
  }
  for (int mi = 0; mi < p.size(); ++mi) {
    const Node& m = p.node(mi);
    if (m.op != Op::kMatmul || p.IsOutput(mi)) continue;
    auto it = readers.find(mi);
    if (it == readers.end() || it->second.size() != 1) continue;
    const int r = it->second[0];
    const Node& root = p.node(r);
    if (root.op == Op::kPermute && root.operands[0].get() == &m &&
        PermutedStore(root).has_value()) {
      epilogues.permuted[r] = mi;
      epilogues.fused[mi] = true;
      continue;
    }
    if (!(ir::IsElementwise(root.op) || IsIdentityReshape(root)) || root.dtype != m.dtype) {
      continue;
    }
    // A chain that carries one product already takes a second only as a dual product.
    const auto carried = epilogues.matmul_of.find(r);
    if (carried != epilogues.matmul_of.end() &&
        (!dual_products || epilogues.second_of.contains(r) ||
         !DualPair(p, p.node(carried->second), m))) {
      continue;
    }
    // An output that only reshapes the matmul (`matmul(a, b).detach()`) is written by the
    // matmul itself (Memory's reshaped outputs): its root runs no kernel, so it cannot carry the
    // matmul. One that reshapes a chain over it (`(w - lr * grad).detach()`, SGD's update of a
    // weight from its gradient) is that chain's root and carries it like any other.
    if (IsIdentityReshape(root) && p.IsOutput(r) && RootBelowReshapes(p, r) == mi) continue;
    // A row kernel (reductions taken in by FuseRowReductions) has no per-element epilogue.
    const std::vector<int> region = p.Region(r);
    const bool row_kernel = std::any_of(region.begin(), region.end(),
                                        [&](int i) { return ir::IsReduce(p.node(i).op); });
    if (row_kernel) continue;
    // The chain reads the product itself, or (a [B, T, K] @ [K, N] product, which the frontend
    // runs as [B * T, K] @ [K, N]) only through one Reshape of it that splits its rows.
    const Node* read = &m;
    if (root.shape != m.shape) {
      read = nullptr;
      for (int i : region) {
        const Node& n = p.node(i);
        const bool reads_m = std::any_of(n.operands.begin(), n.operands.end(),
                                         [&](const ir::NodePtr& o) { return o.get() == &m; });
        if (!reads_m) continue;
        const bool split =
            n.op == Op::kReshape && n.shape == root.shape && SplitsRows(m.shape, n.shape);
        if (read != nullptr || !split) {
          read = nullptr;
          break;
        }
        read = &n;
      }
      if (read == nullptr) continue;
    }
    if (ReadsOnlyAtOwnIndex(root, *read, InputsOf(p), OwnIndex::kElement)) {
      (carried != epilogues.matmul_of.end() ? epilogues.second_of : epilogues.matmul_of)[r] = mi;
      epilogues.fused[mi] = true;
    }
  }
  for (int ri = 0; ri < p.size(); ++ri) {
    const Node& red = p.node(ri);
    if (!ir::IsReduce(red.op) || !p.IsRoot(ri) || p.IsOutput(ri) || p.IsParam(ri)) continue;
    auto it = readers.find(ri);
    if (it == readers.end() || it->second.size() != 1) continue;
    const int r = it->second[0];
    const Node& root = p.node(r);
    // A Reshape root (an output's detach()) carries a chain too; Reshapes of the reduction
    // itself only are an output that the reduction writes directly (Memory's reshaped outputs),
    // with no kernel.
    const bool reshape = root.op == Op::kReshape && RootBelowReshapes(p, r) != ri;
    if (!(ir::IsElementwise(root.op) || reshape) || p.IsParam(r) ||
        epilogues.matmul_of.contains(r) || epilogues.reduce_of.contains(r) ||
        ir::NumElements(root.shape) != ir::NumElements(red.shape) ||
        ir::NumElements(root.shape) == 0) {
      continue;
    }
    const std::vector<int> region = p.Region(r);
    if (std::any_of(region.begin(), region.end(),
                    [&](int i) { return ir::IsReduce(p.node(i).op); })) {
      continue;  // a row kernel
    }
    if (ReadsOnlyAtOwnIndex(root, red, InputsOf(p), OwnIndex::kLinear)) {
      epilogues.reduce_of[r] = ri;
      epilogues.fused[ri] = true;
    }
  }
  return epilogues;
}

}  // namespace lazycl::kernels
