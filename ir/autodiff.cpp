// Reverse-mode differentiation of IR graphs: one vector-Jacobian product per IR op.

#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "base/status.h"
#include "ir/autodiff.h"
#include "ir/post_order.h"

namespace lazycl::ir {
namespace {

using ir::Node;
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
NodePtr Add(NodePtr a, NodePtr b) { return Bin(Op::kAdd, std::move(a), std::move(b)); }
NodePtr Where(NodePtr c, NodePtr a, NodePtr b) {
  return Must(ir::MakeWhere(std::move(c), std::move(a), std::move(b)));
}
NodePtr Zero(const NodePtr& like) { return Const(0, like); }

// The adjoint that node `n` (adjoint `g`) sends to its operand `k`, or null when none flows
// (not differentiable there). `v` reads forward values: v(operand), or v(nullptr) for n's own.
using Value = absl::FunctionRef<NodePtr(const NodePtr&)>;
using VjpRule = NodePtr (*)(const Node& n, size_t k, const NodePtr& g, Value v);
struct VjpRow {
  Op op;
  VjpRule vjp;  // null: no adjoint flows to any operand
};

NodePtr MaximumOrMinimum(Op wins, const Node& n, size_t k, const NodePtr& g, Value v) {
  // The operand that wins gets g; equal operands split it evenly.
  NodePtr self = v(n.operands[k]);
  NodePtr other = v(n.operands[1 - k]);
  return Where(Bin(wins, self, other), g,
               Where(Bin(Op::kEq, self, other), Mul(g, Const(0.5, g)), Zero(g)));
}

NodePtr Neg(NodePtr x) {
  NodePtr minus_one = Const(-1, x);
  return Mul(std::move(x), std::move(minus_one));
}

std::vector<int64_t> LastTwoSwapped(size_t rank) {
  std::vector<int64_t> swap(rank);
  for (size_t d = 0; d < rank; ++d) swap[d] = static_cast<int64_t>(d);
  std::swap(swap[rank - 1], swap[rank - 2]);
  return swap;
}

bool IsLastTwoSwap(const Node& n) {
  return n.op == Op::kPermute && n.shape.size() >= 2 && n.args == LastTwoSwapped(n.shape.size());
}

// x permuted by `perm`, where a Permute of a Permute becomes one (none when they cancel).
NodePtr PermuteFolded(const NodePtr& x, const std::vector<int64_t>& perm) {
  if (x->op != Op::kPermute) return Must(ir::MakePermute(x, perm));
  std::vector<int64_t> both(perm.size());
  bool identity = true;
  for (size_t d = 0; d < perm.size(); ++d) {
    both[d] = x->args[perm[d]];
    identity = identity && both[d] == static_cast<int64_t>(d);
  }
  if (identity) return x->operands[0];
  return Must(ir::MakePermute(x->operands[0], std::move(both)));
}

// `index` clamped into [0, last], as Gather reads it. A broadcast index is clamped before it is
// broadcast, so that ScatterAdd still sees one vector repeated (kernels/emit_gather.cpp).
NodePtr ClampIndex(const NodePtr& index, double last) {
  if (index->op == Op::kExpand) {
    return Must(ir::MakeExpand(ClampIndex(index->operands[0], last), index->shape));
  }
  return Bin(Op::kMinimum, Bin(Op::kMaximum, index, Zero(index)), Const(last, index));
}

// The adjoint of ScatterAdd's src: g gathered at the index (g sliced to the index's extent in
// the other dims first), zero where the index is outside x's dim and the element was dropped.
NodePtr ScatterAddSrcVjp(const Node& n, const NodePtr& g, const NodePtr& index) {
  const int64_t dim = n.args[0];
  const int64_t size = n.shape[dim];
  if (size == 0) return Zero(n.operands[2]);
  Shape window = index->shape;
  window[dim] = size;
  NodePtr sliced = Must(ir::MakeSlice(g, std::vector<int64_t>(window.size(), 0), window));
  NodePtr gathered = Must(ir::MakeGather(std::move(sliced), dim, index));
  NodePtr in_range =
      Where(Bin(Op::kLt, index, Const(static_cast<double>(size), index)), gathered, Zero(gathered));
  return Where(Bin(Op::kGe, index, Zero(index)), in_range, Zero(gathered));
}

// Max and Min reductions: every element equal to the result gets an even share, g / (ties).
NodePtr ExtremumVjp(const Node& n, const NodePtr& g, Value v) {
  const NodePtr& x = n.operands[0];
  NodePtr xv = v(x);
  NodePtr is_hit = Bin(Op::kEq, xv, Must(ir::MakeExpand(v(nullptr), x->shape)));
  NodePtr count = Must(ir::MakeReduce(Op::kSum, Where(is_hit, Const(1, xv), Zero(xv)), n.args));
  NodePtr share = Must(ir::MakeExpand(Bin(Op::kDiv, g, count), x->shape));
  return Where(is_hit, share, Zero(share));
}

// Prod: g y / x where x != 0. Where x == 0: g times the product of the others when x is the
// row's only zero, else 0 (PyTorch's rule).
NodePtr ProdVjp(const Node& n, const NodePtr& g, Value v) {
  const NodePtr& x = n.operands[0];
  NodePtr xv = v(x);
  NodePtr zero = Bin(Op::kEq, xv, Zero(xv));
  NodePtr zeros = Must(ir::MakeReduce(Op::kSum, Where(zero, Const(1, xv), Zero(xv)), n.args));
  NodePtr others = Must(ir::MakeReduce(Op::kProd, Where(zero, Const(1, xv), xv), n.args));
  NodePtr only_zero = Bin(Op::kEq, zeros, Const(1, zeros));
  NodePtr at_zero = Mul(g, Where(only_zero, others, Zero(others)));
  NodePtr gy = Must(ir::MakeExpand(Mul(g, v(nullptr)), x->shape));
  // The divisor is 1 at zeros, so that no inf or NaN is made where it is not chosen.
  NodePtr away = Bin(Op::kDiv, gy, Where(zero, Const(1, xv), xv));
  return Where(zero, Must(ir::MakeExpand(at_zero, x->shape)), away);
}

// d/dx of x sigmoid(x): s (1 + x (1 - s)).
NodePtr SiluVjp(const Node& n, const NodePtr& g, Value v) {
  NodePtr x = v(n.operands[0]);
  NodePtr s = Un(Op::kSigmoid, x);
  return Mul(g, Mul(s, Add(Const(1, x), Mul(x, Add(Const(1, s), Neg(s))))));
}

// d/dx of x Phi(x): Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
NodePtr GeluVjp(const Node& n, const NodePtr& g, Value v) {
  NodePtr x = v(n.operands[0]);
  NodePtr cdf =
      Mul(Const(0.5, x), Add(Const(1, x), Un(Op::kErf, Mul(x, Const(0.7071067811865476, x)))));
  NodePtr pdf = Mul(Const(0.3989422804014327, x), Un(Op::kExp, Mul(Mul(x, x), Const(-0.5, x))));
  return Mul(g, Add(cdf, Mul(x, pdf)));
}

// gelu tanh = x s, s = sigmoid(2u), u = c (x + 0.044715 x^3) (= x (1 + tanh u) / 2):
// d/dx = s + x 2 s (1 - s) c (1 + 3 0.044715 x^2). Through sigmoid, which saturates to exactly
// 0 and 1 (a builtin tanh a ulp short of +-1 made 1 - t^2 times x^3 garbage in the tails).
NodePtr GeluTanhVjp(const Node& n, const NodePtr& g, Value v) {
  NodePtr x = v(n.operands[0]);
  NodePtr x2 = Mul(x, x);
  NodePtr two_u = Mul(Const(1.5957691216057308, x), Add(x, Mul(Const(0.044715, x), Mul(x2, x))));
  NodePtr s = Un(Op::kSigmoid, two_u);
  NodePtr du = Mul(Const(0.7978845608028654, x), Add(Const(1, x), Mul(Const(0.134145, x), x2)));
  NodePtr slope = Mul(Mul(Const(2, x), Mul(s, Add(Const(1, s), Neg(s)))), du);
  return Mul(g, Add(s, Mul(x, slope)));
}

constexpr VjpRow kVjpRows[] = {
    {Op::kBuffer, nullptr},
    {Op::kConstant, nullptr},
    {Op::kScalar, nullptr},
    {Op::kIota, nullptr},
    {Op::kExp, [](const Node&, size_t, const NodePtr& g, Value v) { return Mul(g, v(nullptr)); }},
    {Op::kLog, [](const Node& n, size_t, const NodePtr& g,
                  Value v) { return Bin(Op::kDiv, g, v(n.operands[0])); }},
    {Op::kSqrt,  // g / (2 sqrt(x))
     [](const Node&, size_t, const NodePtr& g, Value v) {
       return Bin(Op::kDiv, Mul(g, Const(0.5, g)), v(nullptr));
     }},
    {Op::kTanh,  // g (1 - y^2)
     [](const Node&, size_t, const NodePtr& g, Value v) {
       NodePtr y = v(nullptr);
       return Mul(g, Add(Const(1, y), Neg(Mul(y, y))));
     }},
    {Op::kSigmoid,  // g y (1 - y)
     [](const Node&, size_t, const NodePtr& g, Value v) {
       NodePtr y = v(nullptr);
       return Mul(g, Mul(y, Add(Const(1, y), Neg(y))));
     }},
    {Op::kRelu,  // 0 at x == 0, as in PyTorch
     [](const Node& n, size_t, const NodePtr& g, Value v) {
       const NodePtr& x = n.operands[0];
       return Where(Bin(Op::kGt, v(x), Zero(x)), g, Zero(g));
     }},
    {Op::kAbs,  // sign(x) g, 0 at x == 0
     [](const Node& n, size_t, const NodePtr& g, Value v) {
       const NodePtr& x = n.operands[0];
       NodePtr xv = v(x);
       return Where(Bin(Op::kGt, xv, Zero(x)), g,
                    Where(Bin(Op::kLt, xv, Zero(x)), Neg(g), Zero(g)));
     }},
    {Op::kSin, [](const Node& n, size_t, const NodePtr& g,
                  Value v) { return Mul(g, Un(Op::kCos, v(n.operands[0]))); }},
    {Op::kCos, [](const Node& n, size_t, const NodePtr& g,
                  Value v) { return Neg(Mul(g, Un(Op::kSin, v(n.operands[0])))); }},
    {Op::kErf,  // g 2/sqrt(pi) exp(-x^2)
     [](const Node& n, size_t, const NodePtr& g, Value v) {
       NodePtr x = v(n.operands[0]);
       return Mul(g, Mul(Const(1.1283791670955126, g), Un(Op::kExp, Neg(Mul(x, x)))));
     }},
    {Op::kNot, nullptr},
    {Op::kCast,  // only between floating dtypes
     [](const Node& n, size_t, const NodePtr& g, Value) -> NodePtr {
       const DType from = n.operands[0]->dtype;
       if (!is_floating(from) || !is_floating(n.dtype)) return nullptr;
       return Must(ir::MakeCast(g, from));
     }},
    {Op::kAdd, [](const Node&, size_t, const NodePtr& g, Value) { return g; }},
    {Op::kMul, [](const Node& n, size_t k, const NodePtr& g,
                  Value v) { return Mul(g, v(n.operands[1 - k])); }},
    {Op::kDiv,
     [](const Node& n, size_t k, const NodePtr& g, Value v) {
       if (k == 0) return Bin(Op::kDiv, g, v(n.operands[1]));
       // -g a / b^2 = -g (a / b) / b
       return Neg(Bin(Op::kDiv, Mul(g, v(nullptr)), v(n.operands[1])));
     }},
    {Op::kMaximum, [](const Node& n, size_t k, const NodePtr& g,
                      Value v) { return MaximumOrMinimum(Op::kGt, n, k, g, v); }},
    {Op::kMinimum, [](const Node& n, size_t k, const NodePtr& g,
                      Value v) { return MaximumOrMinimum(Op::kLt, n, k, g, v); }},
    {Op::kPow,
     [](const Node& n, size_t k, const NodePtr& g, Value v) {
       NodePtr a = v(n.operands[0]);
       NodePtr b = v(n.operands[1]);
       if (k == 0) {  // g b a^(b-1)
         return Mul(g, Mul(b, Bin(Op::kPow, a, Add(b, Const(-1, b)))));
       }
       // g a^b log(a); 0 where a == 0 (the limit for b > 0), as in PyTorch.
       NodePtr d = Mul(g, Mul(v(nullptr), Un(Op::kLog, a)));
       return Where(Bin(Op::kEq, a, Zero(a)), Zero(g), d);
     }},
    {Op::kLt, nullptr},
    {Op::kLe, nullptr},
    {Op::kGt, nullptr},
    {Op::kGe, nullptr},
    {Op::kEq, nullptr},
    {Op::kNe, nullptr},
    {Op::kWhere,  // none to the condition
     [](const Node& n, size_t k, const NodePtr& g, Value v) -> NodePtr {
       if (k == 0) return nullptr;
       NodePtr cond = v(n.operands[0]);
       return k == 1 ? Where(cond, g, Zero(g)) : Where(cond, Zero(g), g);
     }},
    {Op::kReshape, [](const Node& n, size_t, const NodePtr& g,
                      Value) { return Must(ir::MakeReshape(g, n.operands[0]->shape)); }},
    {Op::kPermute,
     [](const Node& n, size_t, const NodePtr& g, Value) {
       std::vector<int64_t> inverse(n.args.size());
       for (size_t d = 0; d < n.args.size(); ++d) inverse[n.args[d]] = static_cast<int64_t>(d);
       return PermuteFolded(g, inverse);
     }},
    {Op::kExpand,  // sum over the broadcast dims
     [](const Node& n, size_t, const NodePtr& g, Value) {
       const NodePtr& x = n.operands[0];
       std::vector<int64_t> axes;
       for (size_t d = 0; d < n.shape.size(); ++d) {
         if (x->shape[d] != n.shape[d]) axes.push_back(static_cast<int64_t>(d));
       }
       if (axes.empty()) return g;
       return Must(ir::MakeReduce(Op::kSum, g, std::move(axes)));
     }},
    {Op::kSlice,  // zeros outside the window
     [](const Node& n, size_t, const NodePtr& g, Value) {
       return Must(ir::MakePad(g, n.args, n.operands[0]->shape));
     }},
    {Op::kPad, [](const Node& n, size_t, const NodePtr& g,
                  Value) { return Must(ir::MakeSlice(g, n.args, n.operands[0]->shape)); }},
    {Op::kSum, [](const Node& n, size_t, const NodePtr& g,
                  Value) { return Must(ir::MakeExpand(g, n.operands[0]->shape)); }},
    {Op::kMax,
     [](const Node& n, size_t, const NodePtr& g, Value v) { return ExtremumVjp(n, g, v); }},
    {Op::kMatmul,
     [](const Node& n, size_t k, const NodePtr& g, Value v) {
       // a [..,M,K] @ b [..,K,N]: da = g b^T, db = a^T g (equal batch dims: the frontend
       // broadcasts with Expand, whose VJP sums the batch back).
       // When the operand is itself a transpose (x^T: q @ k^T in attention, x @ w^T in a linear
       // layer), its adjoint is the transpose of a product; that product is computed the other
       // way round, (a^T g)^T = g^T a, so that x's gradient is written in x's own layout and the
       // transpose folds into the Permute's VJP (a transposed result read back through a view
       // made every reader gather: 2.6 GB/s for the GQA key gradient's sum).
       const std::vector<int64_t> swap = LastTwoSwapped(n.shape.size());
       const bool transposed = IsLastTwoSwap(*n.operands[k]);
       if (k == 0) {
         if (transposed) {
           return PermuteFolded(
               Must(ir::MakeMatmul(v(n.operands[1]), Must(ir::MakePermute(g, swap)))), swap);
         }
         return Must(ir::MakeMatmul(g, Must(ir::MakePermute(v(n.operands[1]), swap))));
       }
       if (transposed) {
         return PermuteFolded(
             Must(ir::MakeMatmul(Must(ir::MakePermute(g, swap)), v(n.operands[0]))), swap);
       }
       return Must(ir::MakeMatmul(Must(ir::MakePermute(v(n.operands[0]), swap)), g));
     }},
    {Op::kGather,  // x gets g added where it was read (the clamped index); the index nothing
     [](const Node& n, size_t k, const NodePtr& g, Value v) -> NodePtr {
       if (k != 0) return nullptr;
       const double last = static_cast<double>(n.operands[0]->shape[n.args[0]] - 1);
       return Must(ir::MakeScatterAdd(Zero(n.operands[0]), n.args[0],
                                      ClampIndex(v(n.operands[1]), std::max(last, 0.0)), g));
     }},
    {Op::kScatterAdd,
     [](const Node& n, size_t k, const NodePtr& g, Value v) -> NodePtr {
       // x gets g; src gets g read where it was added (zero where its index was dropped).
       if (k == 0) return g;
       if (k == 1) return nullptr;
       return ScatterAddSrcVjp(n, g, v(n.operands[1]));
     }},
    // mathops block
    {Op::kRsqrt,  // -g y^3 / 2
     [](const Node&, size_t, const NodePtr& g, Value v) {
       NodePtr y = v(nullptr);
       return Mul(g, Mul(Const(-0.5, y), Mul(y, Mul(y, y))));
     }},
    {Op::kSilu, [](const Node& n, size_t, const NodePtr& g, Value v) { return SiluVjp(n, g, v); }},
    {Op::kGelu, [](const Node& n, size_t, const NodePtr& g, Value v) { return GeluVjp(n, g, v); }},
    {Op::kGeluTanh,
     [](const Node& n, size_t, const NodePtr& g, Value v) { return GeluTanhVjp(n, g, v); }},
    {Op::kMin,
     [](const Node& n, size_t, const NodePtr& g, Value v) { return ExtremumVjp(n, g, v); }},
    {Op::kProd, [](const Node& n, size_t, const NodePtr& g, Value v) { return ProdVjp(n, g, v); }},
    {Op::kCumsum,  // the running sum of g from the other end
     [](const Node& n, size_t, const NodePtr& g, Value) {
       return Must(ir::MakeScan(Op::kCumsum, g, n.args[0], n.args[1] == 0));
     }},
    // random block
    {Op::kRandomUniform, nullptr},  // not differentiable: its operands are integers
};
static_assert(std::size(kVjpRows) == kOpCount, "one VJP row per op");
static_assert(IsOpTable(kVjpRows), "VJP rows in LAZYCL_OPS order");

NodePtr Vjp(const Node& n, size_t k, const NodePtr& g, Value v) {
  const VjpRule rule = kVjpRows[static_cast<int>(n.op)].vjp;
  return rule == nullptr ? nullptr : rule(n, k, g, v);
}

bool Differentiable(const ir::Node& n) { return is_floating(n.dtype) && !ir::IsStopGradient(n); }

// softmax's normalisation, n = e / sum(e) with e = exp(z): z and the reduced dims.
struct SoftmaxParts {
  const ir::Node* e;
  const ir::Node* s;
  const ir::Node* z;
};
std::optional<SoftmaxParts> SoftmaxOf(const ir::Node& n) {
  if (n.op != Op::kDiv) return std::nullopt;
  const ir::Node& e = *n.operands[0];
  const ir::Node& b = *n.operands[1];
  if (e.op != Op::kExp || b.op != Op::kExpand || b.shape != e.shape) return std::nullopt;
  const ir::Node& s = *b.operands[0];
  if (s.op != Op::kSum || s.operands[0].get() != &e) return std::nullopt;
  return SoftmaxParts{&e, &s, e.operands[0].get()};
}

}  // namespace

std::vector<NodePtr> Backprop(const std::vector<NodePtr>& roots, const std::vector<NodePtr>& seeds,
                              const std::vector<NodePtr>& targets,
                              const absl::flat_hash_map<const ir::Node*, NodePtr>& values) {
  const absl::flat_hash_set<const ir::Node*> stop = [&] {
    absl::flat_hash_set<const ir::Node*> s;
    for (const NodePtr& t : targets) s.insert(t.get());
    return s;
  }();
  // The nodes between roots and targets, operands first; `reaches` marks the nodes with a
  // differentiable path to a target. The walk stops at targets and non-differentiable nodes.
  absl::flat_hash_map<const ir::Node*, bool> reaches;
  std::vector<const ir::Node*> order;
  for (const ir::Node* n : ir::PostOrder(
           roots, [&](const ir::Node& n) { return stop.contains(&n) || !Differentiable(n); })) {
    if (stop.contains(n)) {
      reaches[n] = true;
      continue;
    }
    bool r = false;
    if (Differentiable(*n)) {
      for (const NodePtr& o : n->operands) r = r || reaches.at(o.get());
    }
    reaches[n] = r;
    if (r) order.push_back(n);
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
    // softmax as a whole (JAX's rule): z gets y (g - sum(g y)), read from y, where the VJPs of
    // the division, the sum and exp would recompute exp(z) and take three passes over it. e
    // and its sum get nothing from n (their other readers, if any, still send theirs).
    if (auto sm = SoftmaxOf(n); sm && !stop.contains(sm->e) && !stop.contains(sm->s) &&
                                reaches.contains(sm->z) && reaches.at(sm->z)) {
      const NodePtr y = value(nullptr);
      const NodePtr gy_sum = Must(ir::MakeReduce(Op::kSum, Mul(g, y), sm->s->args));
      accumulate(sm->z, Mul(y, Add(g, Neg(Must(ir::MakeExpand(gy_sum, n.shape))))));
      continue;
    }
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
