#pragma once

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "ir/ir.h"
#include "kernels/graph.h"

// Which nodes of a Graph end a kernel ("roots") and which fuse into the kernel of the root that
// reads them. Partition owns that one bit per node and answers questions about it; the fusion
// rules (fusion_rules.h) and the argument-size split (memory.h) move it, and the driver
// (lower.cpp) emits one kernel per root. Nodes are named by their index in Graph::nodes.
namespace lazycl::kernels {

class Partition {
 public:
  // The first cut: every output, Reduce and Matmul is a root, and so is a matmul operand that is
  // not a strided view of a root or Buffer (views.h), since a matmul kernel reads its operands
  // from memory. Elementwise ops, views, Constants and Iotas fuse into their reader.
  explicit Partition(const Graph& graph);

  const Graph& graph() const { return g_; }
  int size() const { return static_cast<int>(g_.nodes.size()); }
  const ir::Node& node(int i) const { return *g_.nodes[i]; }
  int IndexOf(const ir::Node& n) const { return index_.at(&n); }

  bool IsRoot(int i) const { return root_[i]; }
  void SetRoot(int i, bool root) { root_[i] = root; }
  bool IsOutput(int i) const { return outputs_.contains(i); }
  // A Buffer leaf: a parameter of the plan.
  bool IsParam(int i) const { return g_.nodes[i]->op == ir::Op::kBuffer; }
  // Read from memory by the kernels that use it: a root or a Buffer leaf.
  bool IsInput(int i) const { return root_[i] || IsParam(i); }
  bool IsInput(const ir::Node& n) const { return IsInput(IndexOf(n)); }

  // Non-input nodes fused into the kernel of root `r`, the root included, in depth-first order
  // from r.
  std::vector<int> Region(int r) const;

 private:
  const Graph& g_;
  absl::flat_hash_map<const ir::Node*, int> index_;
  absl::flat_hash_set<int> outputs_;
  std::vector<bool> root_;
};

// For a Reshape node `r`: the root that a chain of Reshapes (not roots themselves) leads down to
// from it, or -1 where the chain ends at another kind of node first. An output such is written
// by that root's kernel (memory.h); lowering does not fuse that root into r's kernel.
int RootBelowReshapes(const Partition& p, int r);

}  // namespace lazycl::kernels
