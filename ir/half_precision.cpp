#include "ir/half_precision.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "base/check.h"
#include "base/status.h"
#include "ir/post_order.h"

namespace lazycl::ir {
namespace {

bool Touches(const Node& n) {
  if (is_half(n.dtype)) return true;
  for (const NodePtr& o : n.operands) {
    if (is_half(o->dtype)) return true;
  }
  return false;
}

// A cast; a cast of Cast(f32, h) back to h's half dtype is h itself (exact).
NodePtr Cast(NodePtr x, DType to) {
  if (is_half(to) && x->op == Op::kCast && x->dtype == DType::f32 && x->operands[0]->dtype == to) {
    return x->operands[0];
  }
  return base::ValueOrThrow(MakeCast(std::move(x), to));
}

// The f32 form of a half value, rounded as the half dtype holds it.
NodePtr Round(NodePtr f32_value, DType half) {
  return Cast(Cast(std::move(f32_value), half), DType::f32);
}

}  // namespace

bool HasHalf(std::span<const Node* const> roots) {
  for (const Node* n : PostOrder(roots)) {
    if (is_half(n->dtype)) return true;
  }
  return false;
}

std::vector<NodePtr> ComputeHalfInF32(
    std::span<const Node* const> roots,
    std::vector<std::pair<const Node*, const Node*>>* scalars_made) {
  // rewritten[n]: n's value computed in f32 where n is half (else in n's own dtype); absent when
  // nothing in n's graph changes.
  absl::flat_hash_map<const Node*, NodePtr> rewritten;
  // A half Buffer leaf is kept (the same node: parameters and donation see the same buffer) and
  // read through one Cast to f32, which converts its bits as they are loaded.
  absl::flat_hash_map<const Node*, NodePtr> loaded;
  auto operand = [&](const NodePtr& o) -> NodePtr {
    if (o->op == Op::kBuffer && is_half(o->dtype)) {
      NodePtr& cast = loaded[o.get()];
      if (cast == nullptr) cast = Cast(o, DType::f32);
      return cast;
    }
    auto it = rewritten.find(o.get());
    return it != rewritten.end() ? it->second : o;
  };
  for (const Node* n : PostOrder(roots)) {
    if (n->op == Op::kBuffer) continue;
    bool changed = Touches(*n);
    for (const NodePtr& o : n->operands) {
      changed =
          changed || rewritten.contains(o.get()) || (o->op == Op::kBuffer && is_half(o->dtype));
    }
    if (!changed) continue;
    const DType computed = is_half(n->dtype) ? DType::f32 : n->dtype;
    NodePtr value;
    switch (n->op) {
      case Op::kConstant:
      case Op::kScalar: {
        Node fill = *n;  // the value is already what the half dtype holds (MakeFill)
        fill.dtype = DType::f32;
        value = FinishNode(std::move(fill));
        if (scalars_made != nullptr && n->op == Op::kScalar)
          scalars_made->push_back({value.get(), n});
        break;
      }
      case Op::kCast: {
        const NodePtr x = operand(n->operands[0]);
        if (is_half(n->dtype)) {
          value = Round(x->dtype == DType::f32 ? x : Cast(x, DType::f32), n->dtype);
        } else {
          value = x->dtype == n->dtype ? x : Cast(x, n->dtype);
        }
        break;
      }
      default: {
        // The same op on the operands' f32 forms; a half result is rounded (views only move
        // values that the half dtype already holds).
        Node op = *n;
        op.dtype = computed;
        for (NodePtr& o : op.operands) o = operand(o);
        value = FinishNode(std::move(op));
        if (is_half(n->dtype) && !IsView(n->op)) value = Round(std::move(value), n->dtype);
        break;
      }
    }
    rewritten.emplace(n, std::move(value));
  }
  std::vector<NodePtr> out;
  for (const Node* root : roots) {
    auto it = rewritten.find(root);
    if (it == rewritten.end()) {
      out.push_back(nullptr);  // unchanged, or a Buffer leaf (read as it is)
    } else {
      out.push_back(is_half(root->dtype) ? Cast(it->second, root->dtype) : it->second);
    }
  }
  return out;
}

}  // namespace lazycl::ir
