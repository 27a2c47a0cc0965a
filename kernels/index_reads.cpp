#include "kernels/index_reads.h"

#include "absl/container/flat_hash_map.h"

namespace lazycl::kernels {
namespace {

using ir::Node;
using ir::Op;

// Whether node `n`, on a path from root to x, keeps x read at root's own index (or row).
bool Allowed(const Node& n, const Node& root, const Node& x, OwnIndex mode) {
  const bool pointwise = ir::IsElementwise(n.op) || IsIdentityReshape(n);
  if (pointwise && n.shape == root.shape) return true;
  if (mode == OwnIndex::kLinear) {
    return (ir::IsElementwise(n.op) || n.op == Op::kReshape) &&
           ir::NumElements(n.shape) == ir::NumElements(root.shape);
  }
  if (mode == OwnIndex::kElement) return false;
  return (pointwise && n.shape == x.shape) ||
         (ir::IsReduce(n.op) && n.operands[0]->shape == root.shape) ||
         (n.op == Op::kExpand && n.shape == root.shape && n.operands[0]->shape == x.shape);
}

}  // namespace

bool IsIdentityReshape(const Node& n) {
  return n.op == Op::kReshape && n.shape == n.operands[0]->shape;
}

bool SplitsRows(const ir::Shape& product, const ir::Shape& view) {
  return product.size() == 2 && view.size() > 2 && view.back() == product.back() &&
         ir::NumElements(view) == ir::NumElements(product);
}

bool ReadsOnlyAtOwnIndex(const Node& root, const Node& x, const IsKernelInput& is_input,
                         OwnIndex mode) {
  // Per node visited below root: whether it reaches x. Every operand is visited (no
  // short-circuit), so every node on a path is judged.
  absl::flat_hash_map<const Node*, bool> reaches;
  bool ok = true;
  std::function<bool(const Node&)> reach = [&](const Node& n) {
    if (&n == &x) return true;
    if (&n != &root) {
      if (is_input(n)) return false;
      if (mode != OwnIndex::kRow && ir::IsReduce(n.op)) return false;
    }
    if (auto it = reaches.find(&n); it != reaches.end()) return it->second;
    bool any = false;
    for (const ir::NodePtr& o : n.operands) any = reach(*o) || any;
    reaches[&n] = any;
    if (any && !Allowed(n, root, x, mode)) ok = false;
    return any;
  };
  return reach(root) && ok;
}

}  // namespace lazycl::kernels
