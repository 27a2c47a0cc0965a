#include "runtime/donation.h"

#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace lazycl::runtime {

std::string DonationRefusal(const kernels::Graph& graph, const kernels::Plan& plan,
                            const Donation& offer, long storage_holders_in_graph) {
  const ir::Storage* storage = offer.storage.get();
  // The parameter and its leaf (one: BuildGraph gives a buffer one parameter, and a second leaf
  // of the same storage is someone else holding the old value).
  int param = -1;
  std::vector<int> leaves;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& n = *graph.nodes[i];
    if (n.op == ir::Op::kBuffer && n.storage.get() == storage) {
      leaves.push_back(static_cast<int>(i));
      param = graph.param_of[i];
    }
  }
  if (leaves.empty()) return "the buffer is not a parameter of the graph";
  if (leaves.size() > 1) return "two tensors read the buffer";
  const ir::Node* leaf = graph.nodes[static_cast<size_t>(leaves[0])];
  const int output_node = graph.outputs.at(static_cast<size_t>(offer.output));
  if (plan.output_bytes.at(static_cast<size_t>(offer.output)) != storage->bytes())
    return "the output's size differs";
  if (graph.nodes[static_cast<size_t>(output_node)]->shape != leaf->shape)
    return "the output's shape differs";

  // Every reader, transitively, is elementwise over the leaf's shape.
  absl::flat_hash_set<const ir::Node*> downstream = {leaf};
  long leaf_uses = 0, leaf_holders = 0;
  for (const ir::Node* n : graph.nodes) {
    bool reads = false;
    for (const ir::NodePtr& o : n->operands) {
      if (o.get() == leaf) {
        ++leaf_uses;
        leaf_holders = o.use_count();
      }
      reads = reads || downstream.contains(o.get());
    }
    if (!reads) continue;
    if (!ir::IsElementwise(n->op) || n->shape != leaf->shape)
      return absl::StrCat("the graph reads the buffer through ", ir::OpName(n->op));
    downstream.insert(n);
  }
  if (leaf_uses == 0) return "the graph does not compute from the buffer";
  // Nobody else holds the old value: the leaf's holders are the graph's operands and the
  // caller's known ones; the storage's are the leaf, the caller's parameter list and the offer.
  if (leaf_holders != leaf_uses + offer.known_leaf_holders)
    return "another tensor or a pending computation reads the old value";
  if (offer.storage.use_count() != 1 + storage_holders_in_graph + 1)
    return "another tensor holds the buffer";

  // In the plan: one kernel writes the output, and no later kernel reads the parameter.
  int writer = -1;
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    for (const kernels::KernelArgSpec& a : plan.kernels[k].args) {
      if (a.kind == kernels::KernelArgSpec::Kind::kBuffer && a.written &&
          a.buffer.kind == kernels::BufferRef::Kind::kOutput && a.buffer.index == offer.output) {
        if (writer >= 0 && writer != static_cast<int>(k)) return "two kernels write the output";
        writer = static_cast<int>(k);
      }
    }
  }
  if (writer < 0) return "no kernel writes the output";
  for (size_t k = static_cast<size_t>(writer) + 1; k < plan.kernels.size(); ++k) {
    for (const kernels::KernelArgSpec& a : plan.kernels[k].args) {
      if (a.kind == kernels::KernelArgSpec::Kind::kBuffer &&
          a.buffer.kind == kernels::BufferRef::Kind::kParam && a.buffer.index == param) {
        return "a kernel after the one writing the output reads the buffer";
      }
    }
  }
  if (graph.bind_offsets) return "the graph binds buffers at offsets";
  return "";
}

}  // namespace lazycl::runtime
