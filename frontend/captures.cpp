#include "frontend/captures.h"

#include <span>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "frontend/autograd.h"
#include "ir/post_order.h"

namespace lazycl::frontend {

Captures FindCaptures(const std::vector<Tensor>& outputs,
                      const std::vector<ir::NodePtr>& placeholder_nodes) {
  Captures captures;
  absl::flat_hash_set<const ir::Storage*> placeholders;
  for (const ir::NodePtr& p : placeholder_nodes) placeholders.insert(p->storage.get());
  absl::flat_hash_map<const ir::Node*, bool> reads;  // reads a placeholder, by node
  auto reads_placeholder = [&](const ir::NodePtr& node) {
    if (auto it = reads.find(node.get()); it != reads.end()) return it->second;
    const ir::Node* root = node.get();
    // Nodes already known are listed but not walked below: each node is walked once in all.
    for (const ir::Node* n : ir::PostOrder(std::span<const ir::Node* const>(&root, 1),
                                           [&](const ir::Node& m) { return reads.contains(&m); })) {
      if (reads.contains(n)) continue;
      bool r = n->op == ir::Op::kBuffer && placeholders.contains(n->storage.get());
      for (const ir::NodePtr& o : n->operands) r = r || reads.at(o.get());
      reads[n] = r;
    }
    return reads.at(node.get());
  };
  // (tensor, the node the trace read for it): a host tensor uploaded twice is read as two nodes.
  using Read = std::pair<std::shared_ptr<TensorImpl>, ir::NodePtr>;
  std::vector<Read> stack;
  absl::flat_hash_set<std::pair<const TensorImpl*, const ir::Node*>> seen;
  auto push = [&](const std::shared_ptr<TensorImpl>& impl, ir::NodePtr node) {
    if (!impl || !impl->requires_grad) return;
    if (!node) node = NodeOf(*impl);
    if (seen.insert({impl.get(), node.get()}).second) stack.emplace_back(impl, std::move(node));
  };
  for (const Tensor& out : outputs) push(out.impl(), nullptr);
  while (!stack.empty()) {
    auto [impl, node] = std::move(stack.back());
    stack.pop_back();
    if (!reads_placeholder(node)) {
      captures.tensors.push_back(std::move(impl));
      captures.nodes.push_back(std::move(node));
      continue;
    }
    if (!impl->grad_fn) continue;
    const GradFn& fn = *impl->grad_fn;
    for (size_t i = 0; i < fn.inputs.size(); ++i) push(fn.inputs[i], fn.ReadNode(i));
  }
  return captures;
}

}  // namespace lazycl::frontend
