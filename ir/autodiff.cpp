// Reverse-mode differentiation of IR graphs: one vector-Jacobian product per IR op.

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "base/status.h"
#include "ir/autodiff.h"

namespace lazycl::ir {
namespace {

using ir::NodePtr;
using ir::Op;

NodePtr Must(absl::StatusOr<NodePtr> n) { return base::ValueOrThrow(std::move(n)); }

NodePtr Const(double value, const NodePtr& like) {
  return ir::MakeConstant(value, like->dtype, like->shape);
}
NodePtr Bin(Op op, NodePtr a, NodePtr b) {
  return Must(ir::MakeBinary(op, std::move(a), std::move(b)));
}
NodePtr Un(Op op, NodePtr a) { return Must(ir::MakeUnary(op, std::move(a))); }
NodePtr Mul(NodePtr a, NodePtr b) { return Bin(Op::kMul, std::move(a), std::move(b)); }
NodePtr Where(NodePtr c, NodePtr a, NodePtr b) {
  return Must(ir::MakeWhere(std::move(c), std::move(a), std::move(b)));
}
NodePtr Zero(const NodePtr& like) { return Const(0, like); }

// The adjoint that node `n` (adjoint `g`) sends to its operand `k`, or null when none flows
// (not differentiable there). `v` reads forward values.
template <class Value>
NodePtr Vjp(const ir::Node& n, size_t k, const NodePtr& g, const Value& v) {
  const NodePtr& x = n.operands[0];
  switch (n.op) {
    case Op::kNeg:
      return Un(Op::kNeg, g);
    case Op::kExp:
      return Mul(g, v(nullptr));
    case Op::kLog:
      return Bin(Op::kDiv, g, v(x));
    case Op::kSqrt:  // g / (2 sqrt(x))
      return Bin(Op::kDiv, Mul(g, Const(0.5, g)), v(nullptr));
    case Op::kTanh: {  // g (1 - y^2)
      NodePtr y = v(nullptr);
      return Mul(g, Bin(Op::kSub, Const(1, y), Mul(y, y)));
    }
    case Op::kSigmoid: {  // g y (1 - y)
      NodePtr y = v(nullptr);
      return Mul(g, Mul(y, Bin(Op::kSub, Const(1, y), y)));
    }
    case Op::kRelu:  // 0 at x == 0, as in PyTorch
      return Where(Bin(Op::kGt, v(x), Zero(x)), g, Zero(g));
    case Op::kAbs: {  // sign(x) g, 0 at x == 0
      NodePtr xv = v(x);
      return Where(Bin(Op::kGt, xv, Zero(x)), g,
                   Where(Bin(Op::kLt, xv, Zero(x)), Un(Op::kNeg, g), Zero(g)));
    }
    case Op::kSin:
      return Mul(g, Un(Op::kCos, v(x)));
    case Op::kCos:
      return Un(Op::kNeg, Mul(g, Un(Op::kSin, v(x))));
    case Op::kCast:
      if (!is_floating(x->dtype) || !is_floating(n.dtype)) return nullptr;
      return Must(ir::MakeCast(g, x->dtype));
    case Op::kAdd:
      return g;
    case Op::kSub:
      return k == 0 ? g : Un(Op::kNeg, g);
    case Op::kMul:
      return Mul(g, v(n.operands[1 - k]));
    case Op::kDiv:
      if (k == 0) return Bin(Op::kDiv, g, v(n.operands[1]));
      // -g a / b^2 = -g (a / b) / b
      return Un(Op::kNeg, Bin(Op::kDiv, Mul(g, v(nullptr)), v(n.operands[1])));
    case Op::kMaximum:
    case Op::kMinimum: {
      // The operand that wins gets g; equal operands split it evenly.
      NodePtr self = v(n.operands[k]);
      NodePtr other = v(n.operands[1 - k]);
      const Op wins = n.op == Op::kMaximum ? Op::kGt : Op::kLt;
      return Where(Bin(wins, self, other), g,
                   Where(Bin(Op::kEq, self, other), Mul(g, Const(0.5, g)), Zero(g)));
    }
    case Op::kPow: {
      NodePtr a = v(n.operands[0]);
      NodePtr b = v(n.operands[1]);
      if (k == 0) {  // g b a^(b-1)
        return Mul(g, Mul(b, Bin(Op::kPow, a, Bin(Op::kSub, b, Const(1, b)))));
      }
      // g a^b log(a); 0 where a == 0 (the limit for b > 0), as in PyTorch.
      NodePtr d = Mul(g, Mul(v(nullptr), Un(Op::kLog, a)));
      return Where(Bin(Op::kEq, a, Zero(a)), Zero(g), d);
    }
    case Op::kWhere:
      if (k == 0) return nullptr;
      return k == 1 ? Where(v(x), g, Zero(g)) : Where(v(x), Zero(g), g);
    case Op::kReshape:
      return Must(ir::MakeReshape(g, x->shape));
    case Op::kPermute: {
      std::vector<int64_t> inverse(n.args.size());
      for (size_t d = 0; d < n.args.size(); ++d) inverse[n.args[d]] = static_cast<int64_t>(d);
      return Must(ir::MakePermute(g, std::move(inverse)));
    }
    case Op::kExpand: {  // sum over the broadcast dims
      std::vector<int64_t> axes;
      for (size_t d = 0; d < n.shape.size(); ++d) {
        if (x->shape[d] != n.shape[d]) axes.push_back(static_cast<int64_t>(d));
      }
      if (axes.empty()) return g;
      return Must(ir::MakeReduce(Op::kSum, g, std::move(axes)));
    }
    case Op::kSlice:  // zeros outside the window
      return Must(ir::MakePad(g, n.args, x->shape));
    case Op::kPad:
      return Must(ir::MakeSlice(g, n.args, x->shape));
    case Op::kSum:
      return Must(ir::MakeExpand(g, x->shape));
    case Op::kMax: {
      // Every element equal to the maximum gets an even share: g / (number of ties).
      NodePtr xv = v(x);
      NodePtr is_max = Bin(Op::kEq, xv, Must(ir::MakeExpand(v(nullptr), x->shape)));
      NodePtr count = Must(ir::MakeReduce(Op::kSum, Where(is_max, Const(1, xv), Zero(xv)), n.args));
      NodePtr share = Must(ir::MakeExpand(Bin(Op::kDiv, g, count), x->shape));
      return Where(is_max, share, Zero(share));
    }
    case Op::kMatmul: {
      // a [..,M,K] @ b [..,K,N]: da = g b^T, db = a^T g (equal batch dims: the frontend
      // broadcasts with Expand, whose VJP sums the batch back).
      const size_t r = n.shape.size();
      std::vector<int64_t> swap(r);
      for (size_t d = 0; d < r; ++d) swap[d] = static_cast<int64_t>(d);
      std::swap(swap[r - 1], swap[r - 2]);
      if (k == 0) return Must(ir::MakeMatmul(g, Must(ir::MakePermute(v(n.operands[1]), swap))));
      return Must(ir::MakeMatmul(Must(ir::MakePermute(v(n.operands[0]), swap)), g));
    }
    default:  // leaves, comparisons, Not, Iota
      return nullptr;
  }
}

bool Differentiable(const ir::Node& n) { return is_floating(n.dtype); }

}  // namespace

std::vector<NodePtr> Backprop(const std::vector<NodePtr>& roots, const std::vector<NodePtr>& seeds,
                              const std::vector<NodePtr>& targets,
                              const absl::flat_hash_map<const ir::Node*, NodePtr>& values) {
  const absl::flat_hash_set<const ir::Node*> stop = [&] {
    absl::flat_hash_set<const ir::Node*> s;
    for (const NodePtr& t : targets) s.insert(t.get());
    return s;
  }();
  // Post-order over the nodes between roots and targets; `reaches` marks the nodes with a
  // differentiable path to a target. Iterative, so that deep graphs do not exhaust the stack.
  absl::flat_hash_map<const ir::Node*, bool> reaches;
  std::vector<const ir::Node*> order;
  std::vector<std::pair<const ir::Node*, size_t>> stack;
  for (const NodePtr& root : roots) {
    if (reaches.contains(root.get())) continue;
    stack.push_back({root.get(), 0});
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (stop.contains(n)) {
        reaches[n] = true;
        stack.pop_back();
        continue;
      }
      if (next < n->operands.size() && Differentiable(*n)) {
        const ir::Node* operand = n->operands[next++].get();
        if (!reaches.contains(operand)) stack.push_back({operand, 0});
        continue;
      }
      bool r = false;
      if (Differentiable(*n)) {
        for (const NodePtr& o : n->operands) r = r || reaches.at(o.get());
      }
      reaches[n] = r;
      if (r) order.push_back(n);
      stack.pop_back();
    }
  }

  // Forward values: one substitution for every node a rule may read.
  std::vector<NodePtr> wanted;
  absl::flat_hash_map<const ir::Node*, size_t> slot;
  auto want = [&](const NodePtr& n) {
    if (slot.emplace(n.get(), wanted.size()).second) wanted.push_back(n);
  };
  absl::flat_hash_map<const ir::Node*, NodePtr> owner;  // raw -> shared, for the nodes in order
  for (const NodePtr& root : roots) owner[root.get()] = root;
  for (const ir::Node* n : order) {
    for (const NodePtr& o : n->operands) {
      owner[o.get()] = o;
      want(o);
    }
  }
  for (const ir::Node* n : order) want(owner.at(n));
  const std::vector<NodePtr> substituted = values.empty() ? wanted : ir::Substitute(wanted, values);

  absl::flat_hash_map<const ir::Node*, NodePtr> adjoint;
  auto accumulate = [&](const ir::Node* n, NodePtr g) {
    auto [it, inserted] = adjoint.emplace(n, g);
    if (!inserted) it->second = Bin(Op::kAdd, it->second, std::move(g));
  };
  for (size_t i = 0; i < roots.size(); ++i) {
    if (seeds[i] && reaches.at(roots[i].get())) accumulate(roots[i].get(), seeds[i]);
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const ir::Node& n = **it;
    auto found = adjoint.find(&n);
    if (found == adjoint.end() || stop.contains(&n)) continue;
    const NodePtr g = found->second;
    auto value = [&](const NodePtr& operand) {
      return substituted[slot.at(operand ? operand.get() : &n)];
    };
    for (size_t k = 0; k < n.operands.size(); ++k) {
      const ir::Node* operand = n.operands[k].get();
      if (!reaches.at(operand)) continue;
      NodePtr contribution = Vjp(n, k, g, value);
      if (contribution) accumulate(operand, std::move(contribution));
    }
  }
  std::vector<NodePtr> out;
  for (const NodePtr& t : targets) {
    auto it = adjoint.find(t.get());
    out.push_back(it == adjoint.end() ? nullptr : it->second);
  }
  return out;
}

}  // namespace lazycl::ir
