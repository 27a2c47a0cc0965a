#include "kernels/partition.h"

#include <functional>
#include <vector>

#include "kernels/views.h"

namespace lazycl::kernels {

using ir::Node;
using ir::Op;

Partition::Partition(const Graph& graph)
    : g_(graph), outputs_(graph.outputs.begin(), graph.outputs.end()) {
  for (int i = 0; i < size(); ++i) index_[g_.nodes[i]] = i;
  root_.assign(g_.nodes.size(), false);
  for (int o : g_.outputs) root_[o] = true;
  for (int i = 0; i < size(); ++i) {
    const Node& n = node(i);
    if (ir::IsReduce(n.op) || ir::IsScan(n.op) || n.op == Op::kMatmul || n.op == Op::kScatterAdd)
      root_[i] = true;
  }
  // In node order, so that an operand made a root here reads as memory to later matmuls.
  const std::function<bool(const Node&)> materialized = [this](const Node& n) {
    return IsInput(n);
  };
  // ScatterAdd reads its index and src many times: the computed values under their views are
  // materialized first; the views stay, so that the emitter sees a broadcast index as one.
  for (const Node* n : g_.nodes) {
    if (n->op != Op::kScatterAdd) continue;
    for (size_t k = 1; k < 3; ++k) {
      const Node* base = n->operands[k].get();
      while (!IsInput(*base) && ir::IsView(base->op)) base = base->operands[0].get();
      if (!IsInput(*base) && !ir::IsLeaf(base->op)) root_[IndexOf(*base)] = true;
    }
  }
  for (const Node* n : g_.nodes) {
    if (n->op != Op::kMatmul) continue;
    for (const ir::NodePtr& operand : n->operands) {
      if (MatmulAccess(*operand, materialized).has_value()) continue;
      // Views over a computed value (k^T of the rotated keys): the value is materialized in its
      // own layout, written contiguously, and the matmul reads the views in place; only where
      // they are not strided is the operand itself materialized.
      // The lowest node of the view chain that works (the repeated keys of grouped-query
      // attention before their transpose, when the repeat itself is not strided).
      std::vector<const Node*> chain = {operand.get()};
      while (!IsInput(*chain.back()) && ir::IsView(chain.back()->op))
        chain.push_back(chain.back()->operands[0].get());
      bool done = false;
      for (size_t c = chain.size(); c-- > 1 && !done;) {
        const Node* candidate = chain[c];
        if (IsInput(*candidate) || ir::IsLeaf(candidate->op)) continue;
        root_[IndexOf(*candidate)] = true;
        done = MatmulAccess(*operand, materialized).has_value();
        if (!done) root_[IndexOf(*candidate)] = false;
      }
      if (!done) root_[IndexOf(*operand)] = true;
    }
  }
}

int RootBelowReshapes(const Partition& p, int r) {
  if (p.node(r).op != ir::Op::kReshape) return -1;
  int j = p.IndexOf(*p.node(r).operands[0]);
  while (!p.IsRoot(j) && p.node(j).op == ir::Op::kReshape) j = p.IndexOf(*p.node(j).operands[0]);
  return p.IsRoot(j) ? j : -1;
}

std::vector<int> Partition::Region(int r) const {
  std::vector<int> region;
  absl::flat_hash_set<int> seen;
  std::vector<int> stack = {r};
  while (!stack.empty()) {
    int i = stack.back();
    stack.pop_back();
    if (!seen.insert(i).second) continue;
    region.push_back(i);
    for (const ir::NodePtr& o : g_.nodes[i]->operands) {
      int j = index_.at(o.get());
      if (!IsInput(j)) stack.push_back(j);
    }
  }
  return region;
}

}  // namespace lazycl::kernels
