#include "ir/post_order.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_set.h"

namespace lazycl::ir {
namespace {

// The most nodes PostOrder reserves room for up front.
constexpr int64_t kMaxReserve = 1024;

}  // namespace

std::vector<const Node*> PostOrder(std::span<const Node* const> roots,
                                   absl::FunctionRef<bool(const Node&)> stop) {
  std::vector<const Node*> order;
  // A node is marked when it is pushed: in a DAG it cannot be met again while on the stack.
  absl::flat_hash_set<const Node*> seen;
  // Sized from the roots' pending counts (paths to their non-leaf nodes, an upper bound on
  // those), so that a graph of hundreds of nodes is not rehashed on the way up.
  int64_t hint = static_cast<int64_t>(roots.size());
  for (const Node* root : roots) hint += std::min<int64_t>(root->pending, kMaxReserve);
  seen.reserve(static_cast<size_t>(std::min<int64_t>(hint, kMaxReserve)));
  order.reserve(seen.capacity() / 2);
  std::vector<std::pair<const Node*, size_t>> stack;  // node, next operand to walk
  for (const Node* root : roots) {
    if (!seen.insert(root).second) continue;
    stack.push_back({root, stop(*root) ? root->operands.size() : 0});
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n->operands.size()) {
        const Node* operand = n->operands[next++].get();
        if (seen.insert(operand).second) {
          stack.push_back({operand, stop(*operand) ? operand->operands.size() : 0});
        }
        continue;
      }
      order.push_back(n);
      stack.pop_back();
    }
  }
  return order;
}

std::vector<const Node*> PostOrder(std::span<const NodePtr> roots,
                                   absl::FunctionRef<bool(const Node&)> stop) {
  std::vector<const Node*> raw;
  raw.reserve(roots.size());
  for (const NodePtr& root : roots) raw.push_back(root.get());
  return PostOrder(std::span<const Node* const>(raw), stop);
}

}  // namespace lazycl::ir
