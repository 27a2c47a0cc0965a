#include "ir/sink_slices.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "base/check.h"
#include "ir/node_marks.h"

namespace lazycl::ir {
namespace {

// A window of a value: its start and size along every dim (a Slice's args and shape). Held
// inline: the pass runs on every graph with a slice of a computed value (a sampling loop builds
// one per token), and most of its cost was allocating these.
using Dims = absl::InlinedVector<int64_t, 6>;
struct Window {
  Dims starts;
  Dims shape;
};
using Windows = absl::InlinedVector<Window, 3>;  // one per operand

bool Same(const Dims& a, const Shape& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}
int64_t Elements(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}
Window All(const Shape& shape) { return {Dims(shape.size(), 0), Dims(shape.begin(), shape.end())}; }

// The window of a Reshape's operand `in` that holds exactly window `w` of its result `out`, or
// nullopt. The two shapes split into groups of dims with equal products; a group the window
// covers whole maps to the whole operand group, and a group that holds one dim of size above 1
// on each side (the window's sliced dim, with only size-1 dims beside it) maps that dim's range.
std::optional<Window> ReshapeWindow(const Shape& in, const Shape& out, const Window& w) {
  if (NumElements(in) == 0) return std::nullopt;
  Window r = All(in);
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
    absl::InlinedVector<size_t, 6> in_big, out_big;
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

// Whether a window of x can be computed from windows of x's operands.
bool MovesWindows(const Node& x) {
  return IsElementwise(x.op) || IsReduce(x.op) || x.op == Op::kMatmul || x.op == Op::kExpand ||
         x.op == Op::kPermute || x.op == Op::kSlice || x.op == Op::kReshape || x.op == Op::kPad;
}

// The windows of x's operands that window w of x reads (x.op passes windows: MovesWindows), or
// nullopt where it cannot say (a reshape that splits the window's dim).
std::optional<Windows> OperandWindows(const Node& x, const Window& w) {
  const size_t rank = x.shape.size();
  Windows in;
  if (IsElementwise(x.op) || IsStopGradient(x)) {  // operands of x's shape
    in.assign(x.operands.size(), w);
  } else if (IsReduce(x.op)) {  // the reduced dims have size 1 in x: whole
    Window r = w;
    for (int64_t a : x.args) r.shape[static_cast<size_t>(a)] = x.operands[0]->shape[a];
    in.push_back(std::move(r));
  } else if (x.op == Op::kMatmul) {  // batch dims of both, rows of A, columns of B
    Window a = w, b = w;
    const int64_t k = x.operands[0]->shape[rank - 1];
    a.starts[rank - 1] = 0;
    a.shape[rank - 1] = k;
    b.starts[rank - 2] = 0;
    b.shape[rank - 2] = k;
    in.push_back(std::move(a));
    in.push_back(std::move(b));
  } else if (x.op == Op::kExpand) {  // a broadcast dim keeps its one element
    const Shape& in_shape = x.operands[0]->shape;
    Window r = w;
    for (size_t d = 0; d < rank; ++d) {
      if (in_shape[d] == 1 && x.shape[d] != 1) {
        r.starts[d] = 0;
        r.shape[d] = 1;
      }
    }
    in.push_back(std::move(r));
  } else if (x.op == Op::kPermute) {  // result dim d is operand dim args[d]
    Window r{Dims(rank), Dims(rank)};
    for (size_t d = 0; d < rank; ++d) {
      r.starts[static_cast<size_t>(x.args[d])] = w.starts[d];
      r.shape[static_cast<size_t>(x.args[d])] = w.shape[d];
    }
    in.push_back(std::move(r));
  } else if (x.op == Op::kSlice) {  // a window of a window
    Window r = w;
    for (size_t d = 0; d < rank; ++d) r.starts[d] += x.args[d];
    in.push_back(std::move(r));
  } else if (x.op == Op::kPad) {  // the part of the operand inside the window (cat's pieces)
    const Shape& in_shape = x.operands[0]->shape;
    Window r = w;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t lo = std::clamp(w.starts[d] - x.args[d], int64_t{0}, in_shape[d]);
      const int64_t hi = std::clamp(w.starts[d] + w.shape[d] - x.args[d], int64_t{0}, in_shape[d]);
      if (hi == lo) return std::nullopt;  // the window holds only the fill
      r.starts[d] = lo;
      r.shape[d] = hi - lo;
    }
    in.push_back(std::move(r));
  } else if (x.op == Op::kReshape) {
    std::optional<Window> r = ReshapeWindow(x.operands[0]->shape, x.shape, w);
    if (!r) return std::nullopt;
    in.push_back(*std::move(r));
  } else {
    return std::nullopt;
  }
  return in;
}

// The bounds analysis and the rewrite. Each computed node gets the union (bounding box) of the
// windows its readers need of it: a root all of itself, a Slice its window, a node that passes
// windows what its own window reads, any other reader all. A node that passes windows is then
// computed over that box alone, once, and each reader takes its part of the box.
class Sinker {
 public:
  Sinker(std::span<const Node* const> roots, std::span<const Node* const> order)
      : roots_(roots), order_(order) {}

  std::vector<NodePtr> Run() {
    // Most graphs have no slice of a computed value: they pay one pass over their nodes.
    const bool any = std::any_of(order_.begin(), order_.end(), [&](const Node* n) {
      return n->op == Op::kSlice && MovesWindows(*n->operands[0]);
    });
    if (!any || !Analyze()) return std::vector<NodePtr>(roots_.size());
    return Rewrite();
  }

  std::vector<const Node*> PartlyReadLeaves() {
    const bool any = std::any_of(order_.begin(), order_.end(),
                                 [&](const Node* n) { return n->op == Op::kSlice; });
    if (!any) return {};
    Analyze();
    std::vector<const Node*> leaves;
    for (size_t i = 0; i < order_.size(); ++i) {
      if (order_[i]->op == Op::kBuffer && !need_[i].whole) leaves.push_back(order_[i]);
    }
    return leaves;
  }

 private:
  // The bounds: each node's box (Need). Whether some node other than a slice is computed in part.
  bool Analyze() {
    // Each operand's position, found once.
    positions_.emplace(order_);
    first_operand_.reserve(order_.size() + 1);
    for (size_t i = 0; i < order_.size(); ++i) {
      first_operand_.push_back(static_cast<int>(operands_.size()));
      for (const NodePtr& o : order_[i]->operands) operands_.push_back(positions_->at(o.get()));
    }
    first_operand_.push_back(static_cast<int>(operands_.size()));
    need_.resize(order_.size());
    for (const Node* root : roots_) need_[static_cast<size_t>(positions_->at(root))].whole = true;
    // Readers before what they read: each node's box is complete when its turn comes.
    bool moved = false;
    for (size_t i = order_.size(); i-- > 0;) {
      const Node& n = *order_[i];
      Need& need = need_[i];
      if (!need.whole && need.window < 0) need.whole = true;  // unreachable from the roots
      const std::span<const int> ops = Operands(i);
      // (The windows are made only here: an empty std::optional<Windows> made and destroyed for
      // every node was a fifth of this pass.)
      if (n.op == Op::kSlice || (!need.whole && MovesWindows(n))) {
        std::optional<Windows> in =
            OperandWindows(n, need.whole ? All(n.shape) : boxes_[static_cast<size_t>(need.window)]);
        if (in) {
          need.computed_part = !need.whole;
          moved = moved || (need.computed_part && n.op != Op::kSlice);
          for (size_t k = 0; k < ops.size(); ++k) Demand(ops[k], &(*in)[k]);
          need.reads = static_cast<int>(reads_.size());
          reads_.push_back(*std::move(in));
          continue;
        }
      }
      if (!ops.empty()) need.whole = true;  // computed whole (a leaf keeps its box)
      for (int o : ops) Demand(o, nullptr);
    }
    return moved;
  }

  std::vector<NodePtr> Rewrite() {
    done_.resize(order_.size());
    for (size_t i = 0; i < order_.size(); ++i) {
      const Node& n = *order_[i];
      const Need& need = need_[i];
      const std::span<const int> ops = Operands(i);
      bool changed = false, part_in = false;
      for (int o : ops) {
        changed = changed || done_[static_cast<size_t>(o)] != nullptr;
        part_in = part_in || need_[static_cast<size_t>(o)].computed_part;
      }
      if (!changed && !need.computed_part) continue;  // as it was
      Node copy = CopyOfFields(n);  // not the memo of a value an earlier cut computed
      copy.operands.resize(ops.size());
      if (!need.computed_part && !part_in) {  // all of it, from all of its operands
        for (size_t k = 0; k < ops.size(); ++k) copy.operands[k] = Now(n.operands[k], ops[k]);
        done_[i] = FinishNode(std::move(copy));
        continue;
      }
      Windows& in = reads_[static_cast<size_t>(need.reads)];
      if (n.op == Op::kSlice) {
        done_[i] = Part(n.operands[0], ops[0], std::move(in[0]));
        continue;
      }
      const Window* box = need.computed_part ? &boxes_[static_cast<size_t>(need.window)] : nullptr;
      if (n.op == Op::kPad && box != nullptr) {  // where the operand's part sits in the window
        for (size_t d = 0; d < n.shape.size(); ++d)
          copy.args[d] = in[0].starts[d] + n.args[d] - box->starts[d];
      }
      for (size_t k = 0; k < ops.size(); ++k)
        copy.operands[k] = Part(n.operands[k], ops[k], std::move(in[k]));
      if (box != nullptr) copy.shape.assign(box->shape.begin(), box->shape.end());
      done_[i] = FinishNode(std::move(copy));
    }
    std::vector<NodePtr> out;
    for (const Node* root : roots_) out.push_back(done_[static_cast<size_t>(positions_->at(root))]);
    return out;
  }

  struct Need {
    bool whole = false;          // all of the node (a root, or a reader that needs all of it)
    bool computed_part = false;  // computed over its box alone
    int window = -1;             // boxes_[window]: the box of what its readers need
    int reads = -1;              // reads_[reads]: the windows it reads of its operands
  };

  std::span<const int> Operands(size_t i) const {
    return std::span<const int>(operands_).subspan(
        static_cast<size_t>(first_operand_[i]),
        static_cast<size_t>(first_operand_[i + 1] - first_operand_[i]));
  }

  // A reader needs window w of the node at position x (all of it when w is null or empty).
  void Demand(int x, const Window* w) {
    Need& need = need_[static_cast<size_t>(x)];
    if (need.whole) return;
    const Shape& shape = order_[static_cast<size_t>(x)]->shape;
    if (!w || Elements(w->shape) == 0 || Same(w->shape, shape) || NumElements(shape) == 0) {
      need.whole = true;
      return;
    }
    if (need.window < 0) {
      need.window = static_cast<int>(boxes_.size());
      boxes_.push_back(*w);
      return;
    }
    Window& box = boxes_[static_cast<size_t>(need.window)];
    for (size_t d = 0; d < box.starts.size(); ++d) {
      const int64_t lo = std::min(box.starts[d], w->starts[d]);
      const int64_t hi = std::max(box.starts[d] + box.shape[d], w->starts[d] + w->shape[d]);
      box.starts[d] = lo;
      box.shape[d] = hi - lo;
    }
    if (Same(box.shape, shape)) need.whole = true;
  }

  // x (at position i) as it is in the rewritten graph.
  NodePtr Now(const NodePtr& x, int i) const {
    const NodePtr& d = done_[static_cast<size_t>(i)];
    return d != nullptr ? d : x;
  }

  // Window w of x (an original node, at position i), from what the rewritten graph computes.
  NodePtr Part(const NodePtr& x, int i, Window w) const {
    const Need& need = need_[static_cast<size_t>(i)];
    NodePtr now = Now(x, i);
    if (need.computed_part) {
      const Window& box = boxes_[static_cast<size_t>(need.window)];
      for (size_t d = 0; d < w.starts.size(); ++d) w.starts[d] -= box.starts[d];
    }
    if (Same(w.shape, now->shape)) return now;  // all of what is computed: the starts are 0
    absl::StatusOr<NodePtr> s =
        MakeSlice(std::move(now), std::vector<int64_t>(w.starts.begin(), w.starts.end()),
                  Shape(w.shape.begin(), w.shape.end()));
    LAZYCL_CHECK(s.ok(), "SinkSlices: %s", s.status().ToString().c_str());
    return *std::move(s);
  }

  const std::span<const Node* const> roots_;
  const std::span<const Node* const> order_;
  std::optional<NodePositions> positions_;     // position in order_ (set by Analyze)
  std::vector<int> first_operand_, operands_;  // operands_[first_operand_[i]...]: positions
  std::vector<Need> need_;                     // by position in order_
  std::vector<Window> boxes_;
  std::vector<Windows> reads_;
  std::vector<NodePtr> done_;  // rewritten nodes (null: unchanged)
};

}  // namespace

std::vector<NodePtr> SinkSlices(std::span<const Node* const> roots,
                                std::span<const Node* const> order) {
  return Sinker(roots, order).Run();
}

std::vector<const Node*> PartlyReadLeaves(std::span<const Node* const> roots,
                                          std::span<const Node* const> order) {
  return Sinker(roots, order).PartlyReadLeaves();
}

}  // namespace lazycl::ir
