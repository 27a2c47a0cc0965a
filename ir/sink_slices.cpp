#include "ir/sink_slices.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "base/check.h"

namespace lazycl::ir {
namespace {

// A window of a value: its start and size along every dim (a Slice's args and shape).
struct Window {
  std::vector<int64_t> starts;
  Shape shape;
};

// Slices are moved through at most this many nodes below each slice: the walk recurses once per
// node, and a graph's chains can be long.
constexpr int kMaxDepth = 256;

// The window of a Reshape's operand `in` that holds exactly window `w` of its result `out`, or
// nullopt. The two shapes split into groups of dims with equal products; a group the window
// covers whole maps to the whole operand group, and a group that holds one dim of size above 1
// on each side (the window's sliced dim, with only size-1 dims beside it) maps that dim's range.
std::optional<Window> ReshapeWindow(const Shape& in, const Shape& out, const Window& w) {
  if (NumElements(in) == 0) return std::nullopt;
  Window r{std::vector<int64_t>(in.size(), 0), in};
  size_t i = 0, o = 0;
  while (i < in.size() || o < out.size()) {
    const size_t i0 = i, o0 = o;
    int64_t pi = i < in.size() ? in[i++] : 1;
    int64_t po = o < out.size() ? out[o++] : 1;
    while (pi != po) {
      if (pi < po && i < in.size()) {
        pi *= in[i++];
      } else if (po < pi && o < out.size()) {
        po *= out[o++];
      } else {
        return std::nullopt;
      }
    }
    bool whole = true;
    for (size_t d = o0; d < o; ++d) whole = whole && w.starts[d] == 0 && w.shape[d] == out[d];
    if (whole) continue;
    std::vector<size_t> in_big, out_big;
    for (size_t d = i0; d < i; ++d) {
      if (in[d] != 1) in_big.push_back(d);
    }
    for (size_t d = o0; d < o; ++d) {
      if (out[d] != 1) out_big.push_back(d);
    }
    if (in_big.size() != 1 || out_big.size() != 1) return std::nullopt;
    r.starts[in_big[0]] = w.starts[out_big[0]];
    r.shape[in_big[0]] = w.shape[out_big[0]];
  }
  return r;
}

class Sinker {
 public:
  Sinker(std::span<const Node* const> roots, std::span<const Node* const> order)
      : roots_(roots), order_(order) {}

  std::vector<NodePtr> Run() {
    // Most graphs have no slice of a computed value: they pay one pass over their nodes.
    const bool any = std::any_of(order_.begin(), order_.end(), [&](const Node* n) {
      return n->op == Op::kSlice && MovesWindows(*n->operands[0]);
    });
    if (!any) return std::vector<NodePtr>(roots_.size());
    users_.reserve(order_.size());
    for (const Node* n : order_) {
      for (const NodePtr& o : n->operands) ++users_[o.get()];
    }
    for (const Node* root : roots_) ++users_[root];
    const bool movable = std::any_of(order_.begin(), order_.end(), [&](const Node* n) {
      return n->op == Op::kSlice && Movable(*n->operands[0]);
    });
    if (!movable) return std::vector<NodePtr>(roots_.size());
    for (const Node* n : order_) {
      if (n->op == Op::kSlice && Movable(*n->operands[0])) {
        done_[n] = Slice(n->operands[0], {n->args, n->shape}, 0);
        moved_ = true;
        continue;
      }
      if (NodePtr rebuilt = WithOperands(*n, [this](const NodePtr& o) { return Now(o); }))
        done_[n] = std::move(rebuilt);
    }
    std::vector<NodePtr> out;
    for (const Node* root : roots_) {
      auto it = done_.find(root);
      out.push_back(moved_ && it != done_.end() ? it->second : nullptr);
    }
    return out;
  }

 private:
  // x as it is in the rewritten graph.
  NodePtr Now(const NodePtr& x) const {
    auto it = done_.find(x.get());
    return it != done_.end() ? it->second : x;
  }

  // Whether a Slice of x is taken of x's operands: x is computed, read by that slice alone, and
  // its op passes windows through.
  bool Movable(const Node& x) const {
    return MovesWindows(x) && users_.at(&x) == 1 && NumElements(x.shape) > 0;
  }
  static bool MovesWindows(const Node& x) {
    return IsElementwise(x.op) || IsReduce(x.op) || x.op == Op::kMatmul || x.op == Op::kExpand ||
           x.op == Op::kPermute || x.op == Op::kSlice ||
           (x.op == Op::kReshape && !IsStopGradient(x));
  }

  // Window w of x (an original node), as a node of the rewritten graph.
  NodePtr Slice(const NodePtr& x, Window w, int depth) {
    if (w.shape == x->shape) return Now(x);
    if (depth < kMaxDepth && Movable(*x) && NumElements(w.shape) > 0) {
      if (NodePtr moved = Move(*x, w, depth + 1)) return moved;
    }
    absl::StatusOr<NodePtr> s = MakeSlice(Now(x), std::move(w.starts), std::move(w.shape));
    LAZYCL_CHECK(s.ok(), "SinkSlices: %s", s.status().ToString().c_str());
    return *std::move(s);
  }

  // Window w of x computed from windows of x's operands, or null where x's op cannot.
  NodePtr Move(const Node& x, const Window& w, int depth) {
    const size_t rank = x.shape.size();
    std::vector<NodePtr> operands;
    if (IsElementwise(x.op)) {
      for (const NodePtr& o : x.operands) operands.push_back(Slice(o, w, depth));
    } else if (IsReduce(x.op)) {  // the reduced dims have size 1 in x: whole
      Window in = w;
      for (int64_t a : x.args) in.shape[static_cast<size_t>(a)] = x.operands[0]->shape[a];
      operands.push_back(Slice(x.operands[0], std::move(in), depth));
    } else if (x.op == Op::kMatmul) {  // batch dims of both, rows of A, columns of B
      Window a = w, b = w;
      const int64_t k = x.operands[0]->shape[rank - 1];
      a.starts[rank - 1] = 0;
      a.shape[rank - 1] = k;
      b.starts[rank - 2] = 0;
      b.shape[rank - 2] = k;
      operands.push_back(Slice(x.operands[0], std::move(a), depth));
      operands.push_back(Slice(x.operands[1], std::move(b), depth));
    } else if (x.op == Op::kExpand) {  // a broadcast dim keeps its one element
      const Shape& in_shape = x.operands[0]->shape;
      Window in = w;
      for (size_t d = 0; d < rank; ++d) {
        if (in_shape[d] == 1 && x.shape[d] != 1) {
          in.starts[d] = 0;
          in.shape[d] = 1;
        }
      }
      operands.push_back(Slice(x.operands[0], std::move(in), depth));
    } else if (x.op == Op::kPermute) {  // result dim d is operand dim args[d]
      Window in{std::vector<int64_t>(rank), Shape(rank)};
      for (size_t d = 0; d < rank; ++d) {
        in.starts[static_cast<size_t>(x.args[d])] = w.starts[d];
        in.shape[static_cast<size_t>(x.args[d])] = w.shape[d];
      }
      operands.push_back(Slice(x.operands[0], std::move(in), depth));
    } else if (x.op == Op::kSlice) {  // a window of a window
      Window in = w;
      for (size_t d = 0; d < rank; ++d) in.starts[d] += x.args[d];
      return Slice(x.operands[0], std::move(in), depth);
    } else if (x.op == Op::kReshape) {
      std::optional<Window> in = ReshapeWindow(x.operands[0]->shape, x.shape, w);
      if (!in) return nullptr;
      operands.push_back(Slice(x.operands[0], *std::move(in), depth));
    } else {
      return nullptr;
    }
    Node copy = x;
    copy.operands = std::move(operands);
    copy.shape = w.shape;
    return FinishNode(std::move(copy));
  }

  const std::span<const Node* const> roots_;
  const std::span<const Node* const> order_;
  absl::flat_hash_map<const Node*, int> users_;
  absl::flat_hash_map<const Node*, NodePtr> done_;  // rewritten nodes
  bool moved_ = false;
};

}  // namespace

std::vector<NodePtr> SinkSlices(std::span<const Node* const> roots,
                                std::span<const Node* const> order) {
  return Sinker(roots, order).Run();
}

}  // namespace lazycl::ir
