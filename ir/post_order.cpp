#include "ir/post_order.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "ir/node_marks.h"

namespace lazycl::ir {
namespace {

// The most nodes PostOrder reserves room for up front.
constexpr int64_t kMaxReserve = 1024;

// How many nodes a walk from `roots` meets at most, as far as it is worth reserving room for:
// the roots' pending counts (paths to their non-leaf nodes, an upper bound on those) and the
// roots, up to kMaxReserve.
size_t ReserveHint(std::span<const Node* const> roots) {
  int64_t hint = static_cast<int64_t>(roots.size());
  for (const Node* root : roots) hint += std::min<int64_t>(root->pending, kMaxReserve);
  return static_cast<size_t>(std::min<int64_t>(hint, kMaxReserve));
}

// The walk, with `mark(node)` true where the node is met for the first time.
template <typename Mark>
std::vector<const Node*> Walk(std::span<const Node* const> roots,
                              absl::FunctionRef<bool(const Node&)> stop, Mark mark) {
  std::vector<const Node*> order;
  // So that a graph of hundreds of nodes is not regrown on the way up.
  order.reserve(ReserveHint(roots));
  std::vector<std::pair<const Node*, size_t>> stack;  // node, next operand to walk
  // A node is marked when it is pushed: in a DAG it cannot be met again while on the stack.
  for (const Node* root : roots) {
    if (!mark(root)) continue;
    stack.push_back({root, stop(*root) ? root->operands.size() : 0});
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n->operands.size()) {
        const Node* operand = n->operands[next++].get();
        if (mark(operand)) {
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

}  // namespace

std::vector<const Node*> PostOrder(std::span<const Node* const> roots,
                                   absl::FunctionRef<bool(const Node&)> stop) {
  // Nodes met are marked in place where this walk holds the marks (ir/node_marks.h), in a set
  // of its own otherwise.
  const NodeMarks marks;
  if (marks.held()) {
    return Walk(roots, stop, [id = marks.id()](const Node* n) { return n->memo.Mark(id); });
  }
  absl::flat_hash_set<const Node*> seen;
  seen.reserve(ReserveHint(roots));
  return Walk(roots, stop, [&seen](const Node* n) { return seen.insert(n).second; });
}

std::vector<const Node*> PostOrder(std::span<const NodePtr> roots,
                                   absl::FunctionRef<bool(const Node&)> stop) {
  std::vector<const Node*> raw;
  raw.reserve(roots.size());
  for (const NodePtr& root : roots) raw.push_back(root.get());
  return PostOrder(std::span<const Node* const>(raw), stop);
}

}  // namespace lazycl::ir
