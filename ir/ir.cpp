#include "ir/ir.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <string>
#include <utility>

#include "absl/base/casts.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/flat_release.h"
#include "base/half.h"
#include "base/metrics_registry.h"
#include "base/pool_allocator.h"
#include "base/settings.h"
#include "base/status.h"
#include "ir/node_marks.h"
#include "ir/post_order.h"

namespace lazycl::ir {
namespace {

constexpr int64_t kPendingSaturation = int64_t{1} << 40;

// Nodes alive that hold a computed value: ReadComputed walks no graph while there are none.
std::atomic<int64_t> live_computed{0};
std::atomic<uint64_t> computed_epoch{0};  // ComputedEpoch()
std::atomic<int64_t> live_pending{0};     // LivePendingNodes()

const char* const kOpNames[] = {
#define LAZYCL_OP_NAME(name, arity, category) #name,
    LAZYCL_OPS(LAZYCL_OP_NAME)
#undef LAZYCL_OP_NAME
};
const int kOpArity[] = {
#define LAZYCL_OP_ARITY(name, arity, category) arity,
    LAZYCL_OPS(LAZYCL_OP_ARITY)
#undef LAZYCL_OP_ARITY
};
const OpCategory kOpCategory[] = {
#define LAZYCL_OP_CATEGORY(name, arity, category) OpCategory::category,
    LAZYCL_OPS(LAZYCL_OP_CATEGORY)
#undef LAZYCL_OP_CATEGORY
};

// The dtype rule of each op: which dtypes it takes (its operand's; the values' for Where) and
// the dtype it gives. The builders check these and the shapes.
enum class Takes { kAny, kNumeric, kFloating, kBool, kF32OrI64, kI64 };
enum class Gives { kOperand, kBool, kF32 };
struct DTypeRule {
  Op op;
  Takes takes;
  Gives gives;
  const char* name = nullptr;  // the op's name in messages, where not OpName(op)
  bool identity = true;        // a reduction: whether it has one (reduces empty dims)
};

// Leaves, Cast and Matmul set or check their dtypes in their builders (kAny here).
constexpr DTypeRule kDTypeRules[] = {
    {Op::kBuffer, Takes::kAny, Gives::kOperand},
    {Op::kConstant, Takes::kAny, Gives::kOperand},
    {Op::kScalar, Takes::kAny, Gives::kOperand},
    {Op::kIota, Takes::kAny, Gives::kOperand},
    {Op::kExp, Takes::kFloating, Gives::kOperand},
    {Op::kLog, Takes::kFloating, Gives::kOperand},
    {Op::kSqrt, Takes::kFloating, Gives::kOperand},
    {Op::kTanh, Takes::kFloating, Gives::kOperand},
    {Op::kSigmoid, Takes::kFloating, Gives::kOperand},
    {Op::kRelu, Takes::kNumeric, Gives::kOperand},
    {Op::kAbs, Takes::kNumeric, Gives::kOperand},
    {Op::kSin, Takes::kFloating, Gives::kOperand},
    {Op::kCos, Takes::kFloating, Gives::kOperand},
    {Op::kErf, Takes::kFloating, Gives::kOperand},
    {Op::kNot, Takes::kBool, Gives::kOperand, "logical_not"},
    {Op::kCast, Takes::kAny, Gives::kOperand},
    {Op::kAdd, Takes::kNumeric, Gives::kOperand},
    {Op::kMul, Takes::kNumeric, Gives::kOperand},
    {Op::kDiv, Takes::kFloating, Gives::kOperand},
    {Op::kMaximum, Takes::kNumeric, Gives::kOperand},
    {Op::kMinimum, Takes::kNumeric, Gives::kOperand},
    {Op::kPow, Takes::kFloating, Gives::kOperand},
    {Op::kLt, Takes::kAny, Gives::kBool},
    {Op::kLe, Takes::kAny, Gives::kBool},
    {Op::kGt, Takes::kAny, Gives::kBool},
    {Op::kGe, Takes::kAny, Gives::kBool},
    {Op::kEq, Takes::kAny, Gives::kBool},
    {Op::kNe, Takes::kAny, Gives::kBool},
    {Op::kWhere, Takes::kAny, Gives::kOperand},
    {Op::kReshape, Takes::kAny, Gives::kOperand},
    {Op::kPermute, Takes::kAny, Gives::kOperand},
    {Op::kExpand, Takes::kAny, Gives::kOperand},
    {Op::kSlice, Takes::kAny, Gives::kOperand},
    {Op::kPad, Takes::kAny, Gives::kOperand},
    {Op::kSum, Takes::kF32OrI64, Gives::kOperand, "sum"},
    {Op::kMax, Takes::kAny, Gives::kOperand, "max", /*identity=*/false},
    {Op::kMatmul, Takes::kAny, Gives::kOperand},
    {Op::kGather, Takes::kAny, Gives::kOperand},
    {Op::kScatterAdd, Takes::kAny, Gives::kOperand},
    // mathops block
    {Op::kRsqrt, Takes::kFloating, Gives::kOperand, "rsqrt"},
    {Op::kSilu, Takes::kFloating, Gives::kOperand, "silu"},
    {Op::kGelu, Takes::kFloating, Gives::kOperand, "gelu"},
    {Op::kGeluTanh, Takes::kFloating, Gives::kOperand, "gelu"},
    {Op::kMin, Takes::kAny, Gives::kOperand, "min", /*identity=*/false},
    {Op::kProd, Takes::kF32OrI64, Gives::kOperand, "prod"},
    {Op::kCumsum, Takes::kF32OrI64, Gives::kOperand, "cumsum"},
    // random block
    {Op::kRandomUniform, Takes::kI64, Gives::kF32, "random_uniform"},
};
static_assert(std::size(kDTypeRules) == kOpCount, "one dtype rule per op");
static_assert(IsOpTable(kDTypeRules), "dtype rules in LAZYCL_OPS order");

const DTypeRule& RuleOf(Op op) { return kDTypeRules[static_cast<int>(op)]; }

// OK when `op` takes `dtype`, else InvalidArgument naming the op.
absl::Status CheckTakes(Op op, DType dtype) {
  const DTypeRule& rule = RuleOf(op);
  // The user's word for the op: "relu", not the IR's "Relu".
  const std::string name = absl::AsciiStrToLower(rule.name != nullptr ? rule.name : OpName(op));
  const bool unary = OpArity(op) == 1;
  switch (rule.takes) {
    case Takes::kAny:
      return absl::OkStatus();
    case Takes::kNumeric:
      if (dtype != DType::boolean) return absl::OkStatus();
      return base::InvalidArgument(
          name, unary ? "not defined for bool tensors; cast to an integer or float dtype first"
                      : "arithmetic is not defined on bool tensors");
    case Takes::kFloating:
      if (is_floating(dtype)) return absl::OkStatus();
      return base::InvalidArgument(name, absl::StrCat(unary ? "expected a floating tensor, got "
                                                            : "expected floating operands, got ",
                                                      dtype_name(dtype)));
    case Takes::kBool:
      if (dtype == DType::boolean) return absl::OkStatus();
      return base::InvalidArgument(name,
                                   absl::StrCat("expected a bool tensor, got ", dtype_name(dtype)));
    case Takes::kF32OrI64:
      if (is_floating(dtype) || dtype == DType::i64) return absl::OkStatus();
      return base::InvalidArgument(name,
                                   absl::StrCat(name, " accumulates in f32 or i64; cast first"));
    case Takes::kI64:
      if (dtype == DType::i64) return absl::OkStatus();
      return base::InvalidArgument(name,
                                   absl::StrCat("expected i64 operands, got ", dtype_name(dtype)));
  }
  return absl::OkStatus();
}

DType Result(Op op, DType operand) {
  switch (RuleOf(op).gives) {
    case Gives::kBool:
      return DType::boolean;
    case Gives::kF32:
      return DType::f32;
    case Gives::kOperand:
      break;
  }
  return operand;
}

// Fills in the hash and the pending count of a node whose other fields are set. The hash
// covers op, dtype, shape, args, the Constant value (not a Scalar's) and the operands' hashes;
// the Constant value is tagged so that an absent value never collides with a present one.
NodePtr Finish(Node&& node) {
  uint64_t h =
      absl::HashOf(static_cast<int>(node.op), static_cast<int>(node.dtype), node.shape, node.args);
  if (node.op == Op::kConstant || node.op == Op::kPad) {
    // Bits, not value: a Pad filling -0.0 differs from one filling 0.
    h = absl::HashOf(h, 0x9e3779b97f4a7c15ull, absl::bit_cast<uint64_t>(node.value));
  }
  int64_t pending = IsLeaf(node.op) ? 0 : 1;
  bool no_data = node.op != Op::kBuffer && node.op != Op::kRandomUniform;
  bool transcendental = IsTranscendental(node.op);
  for (const NodePtr& operand : node.operands) {
    h = absl::HashOf(h, operand->hash);
    pending = std::min(kPendingSaturation, pending + operand->pending);
    no_data = no_data && operand->reads_no_data;
    transcendental = transcendental || operand->holds_transcendental;
  }
  node.hash = h;
  node.pending = pending;
  node.reads_no_data = no_data;
  node.holds_transcendental = no_data && transcendental;
  NodePtr made = std::allocate_shared<const Node>(base::PoolAllocator<Node>(), std::move(node));
  if (made->pending > 0) made->memo.CountLivePending();
  return made;
}

// A Constant or Scalar leaf. The value is stored as the dtype will hold it: integers truncate
// toward zero and saturate (NaN becomes 0), as a cast does.
NodePtr MakeFill(Op op, double value, DType dtype, Shape shape) {
  Node n;
  n.op = op;
  n.dtype = dtype;
  n.shape = std::move(shape);
  if (dtype == DType::boolean) value = value != 0 ? 1 : 0;
  if (is_integral(dtype)) {
    const double lo = dtype == DType::i32 ? -2147483648.0 : -9223372036854775808.0;
    // The largest double below 2^63: 2^63 itself does not fit in an int64.
    const double hi = dtype == DType::i32 ? 2147483647.0 : 9223372036854774784.0;
    value = std::isnan(value) ? 0 : std::trunc(std::clamp(value, lo, hi));
  }
  if (is_floating(dtype) && dtype != DType::f64 && std::isfinite(value)) {
    value = std::fabs(value) > std::numeric_limits<float>::max()
                ? std::copysign(INFINITY, value)
                : static_cast<double>(static_cast<float>(value));
  }
  if (dtype == DType::bf16) value = base::Bf16ToFloat(base::FloatToBf16(static_cast<float>(value)));
  if (dtype == DType::f16) value = base::F16ToFloat(base::FloatToF16(static_cast<float>(value)));
  n.value = value;
  return Finish(std::move(n));
}

}  // namespace

Node::~Node() { base::ReleaseFlat<Node>(operands); }

uint64_t ComputedEpoch() { return computed_epoch.load(std::memory_order_acquire); }

NodeMemo::~NodeMemo() {
  if (computed()) live_computed.fetch_sub(1, std::memory_order_relaxed);
  if (counted_live_pending_) live_pending.fetch_sub(1, std::memory_order_relaxed);
}

void NodeMemo::CountLivePending() const {
  if (counted_live_pending_) return;
  counted_live_pending_ = true;
  live_pending.fetch_add(1, std::memory_order_relaxed);
}

int64_t LivePendingNodes() { return live_pending.load(std::memory_order_relaxed); }

void NodeMemo::set_value(std::shared_ptr<Storage> value) const {
  std::shared_ptr<Storage> none;
  if (value_.compare_exchange_strong(none, std::move(value))) {
    live_computed.fetch_add(1, std::memory_order_relaxed);
    computed_epoch.fetch_add(1, std::memory_order_acq_rel);
    has_value_.store(true, std::memory_order_release);
  }
}

namespace {

// How deep PastPendingLimit counts operands that were never counted first.
constexpr int kMaxCountDepth = 16;

bool CountPending(const Node& node, int depth);

// What a node adds to its user's count: nothing for a leaf or a computed value. An operand never
// counted (made inside one op: the matmul of a [B, T, K] @ [K, N] under its reshapes) whose
// cheap count is past the limit is counted first, a few levels deep, so that it holds what its
// own operands learned rather than a path count that doubles with each layer.
int64_t Weight(const Node& n, int depth) {
  if (n.pending == 0 || n.memo.computed()) return 0;
  if (n.memo.distinct() < 0 && n.pending > MaxPendingNodes() && depth < kMaxCountDepth)
    CountPending(n, depth + 1);
  const int64_t d = n.memo.distinct();
  return d >= 0 ? d : n.pending;
}

bool CountPending(const Node& node, int depth) {
  const int64_t limit = MaxPendingNodes();
  auto weight = [depth](const Node& n) { return Weight(n, depth); };
  int64_t bound = node.pending > 0 ? 1 : 0;
  for (const NodePtr& operand : node.operands) {
    bound = std::min(kPendingSaturation, bound + weight(*operand));
  }
  // The operands' graphs may be one graph and parts of it (h + attention(h)): where the largest
  // was counted by a walk (or holds the graph of one whole), an operand that walk met is inside
  // it and adds nothing, and only the others add theirs. The node holds that walk's graph too,
  // so the joins above it (this node's count may be below the limit) can start from it.
  const Node* largest = nullptr;
  for (const NodePtr& operand : node.operands) {
    if (weight(*operand) > 0 && (largest == nullptr || weight(*operand) > weight(*largest)))
      largest = operand.get();
  }
  const uint64_t counted = largest != nullptr ? largest->memo.counted_by() : 0;
  if (counted != 0) {
    // Another operand that holds the same walk's graph adds only what it holds beyond it, while
    // no node of that graph has been computed since the walk (NodeMemo::walk_total).
    const int64_t total = largest->memo.walk_total();
    const bool whole = largest->memo.walk_epoch() == ComputedEpoch();
    int64_t joined = 1 + weight(*largest);
    for (const NodePtr& operand : node.operands) {
      if (operand.get() == largest || operand->memo.visited() == counted) continue;
      int64_t add = weight(*operand);
      if (whole && operand->memo.counted_by() == counted && operand->memo.distinct() >= 0) {
        add = std::max<int64_t>(0, std::min(add, operand->memo.distinct() - total));
      }
      joined = std::min(kPendingSaturation, joined + add);
    }
    bound = std::min(bound, joined);
    node.memo.set_walk(counted, total, largest->memo.walk_epoch());
  }
  // Every node of the graph is alive and was counted when made (LivePendingNodes): while the
  // live ones are few enough, that bound decides without a walk. A 4-layer char-LM sampling
  // forward built op by op (~600 nodes a token) walked its graph at joins of two branches
  // whose counts did not start from one walk: 12% of the host's instructions a token.
  bound = std::min(bound, LivePendingNodes());
  if (bound > limit) {
    // Count them, each once; an operand known to be past the limit (by its memo: its own
    // pending may count shared nodes many times) is past it either way.
    bool operand_past = false;
    for (const NodePtr& operand : node.operands) {
      operand_past =
          operand_past || (!operand->memo.computed() && operand->memo.distinct() > limit);
    }
    if (!operand_past) {
      // Each node marked with this walk's number as it is first met (NodeMemo::Visit): a
      // transformer layer built op by op walks a few hundred nodes at every join of two
      // branches, and a hash set of the nodes seen made that most of building its graph.
      static std::atomic<uint64_t> walks{0};
      static std::atomic<int> walking{0};  // walks in progress, in every thread
      const bool alone = walking.fetch_add(1, std::memory_order_acq_rel) == 0;
      const uint64_t walk = walks.fetch_add(1, std::memory_order_relaxed) + 1;
      const uint64_t epoch = ComputedEpoch();
      base::metrics::Add("PendingCountWalks", 1);
      std::vector<const Node*> stack;
      stack.reserve(64);
      auto counts = [](const Node& n) { return n.pending > 0 && !n.memo.computed(); };
      for (const NodePtr& operand : node.operands) {
        if (counts(*operand)) stack.push_back(operand.get());
      }
      int64_t count = 1;
      while (!stack.empty() && count <= limit) {
        const Node* n = stack.back();
        stack.pop_back();
        if (!n->memo.Visit(walk)) continue;
        ++count;
        for (const NodePtr& operand : n->operands) {
          if (counts(*operand)) stack.push_back(operand.get());
        }
      }
      bound = std::min(bound, count);
      // A walk of another thread may have overwritten this one's marks (a node counted twice):
      // then its count is no exact total to subtract (an epoch that never comes).
      const bool exact = alone && walks.load(std::memory_order_acquire) == walk;
      walking.fetch_sub(1, std::memory_order_acq_rel);
      if (stack.empty()) {  // the whole graph met: later joins inside it need no walk
        node.memo.Visit(walk);
        node.memo.set_walk(walk, count, exact ? epoch : ~uint64_t{0});
      }
    }
  }
  node.memo.set_distinct(bound);
  return bound > limit;
}

}  // namespace

bool PastPendingLimit(const Node& node) { return CountPending(node, 0); }

int64_t MaxPendingNodes() {
  static const int64_t limit = base::CurrentSettings().max_pending_nodes;
  return limit;
}

std::vector<NodePtr> ReadComputed(const std::vector<NodePtr>& roots) {
  if (live_computed.load(std::memory_order_relaxed) == 0) return roots;
  absl::flat_hash_map<const Node*, NodePtr> replace;
  const std::vector<const Node*> order = PostOrder(roots, [&](const Node& n) {
    if (n.op == Op::kBuffer || !n.memo.computed()) return false;
    replace.emplace(&n, MakeBuffer(n.memo.value(), n.dtype, n.shape));
    return true;
  });
  if (replace.empty()) return roots;
  return Substitute(roots, replace);
}

NodePtr FinishNode(Node node) { return Finish(std::move(node)); }

const char* OpName(Op op) { return kOpNames[static_cast<int>(op)]; }
int OpArity(Op op) { return kOpArity[static_cast<int>(op)]; }
OpCategory Category(Op op) { return kOpCategory[static_cast<int>(op)]; }

std::string NodeString(const Node& node) {
  std::string s =
      absl::StrCat(OpName(node.op), " ", dtype_name(node.dtype), ShapeString(node.shape));
  if (!node.args.empty()) absl::StrAppend(&s, " args=(", absl::StrJoin(node.args, ","), ")");
  if (node.op == Op::kConstant || node.op == Op::kScalar)
    absl::StrAppend(&s, " value=", node.value);
  return s;
}

NodePtr MakeBuffer(std::shared_ptr<Storage> storage, DType dtype, Shape shape) {
  Node n;
  n.op = Op::kBuffer;
  n.dtype = dtype;
  n.shape = std::move(shape);
  n.storage = std::move(storage);
  return Finish(std::move(n));
}

NodePtr MakeConstant(double value, DType dtype, Shape shape) {
  return MakeFill(Op::kConstant, value, dtype, std::move(shape));
}

NodePtr MakeScalar(double value, DType dtype, Shape shape) {
  return MakeFill(Op::kScalar, value, dtype, std::move(shape));
}

NodePtr MakeIota(DType dtype, int64_t n_elements) {
  Node n;
  n.op = Op::kIota;
  n.dtype = dtype;
  n.shape = {n_elements};
  return Finish(std::move(n));
}

absl::StatusOr<NodePtr> MakeUnary(Op op, NodePtr x) {
  if (Category(op) != OpCategory::Unary || op == Op::kCast) {
    return base::InvalidArgument(OpName(op), "not a unary op");
  }
  if (absl::Status s = CheckTakes(op, x->dtype); !s.ok()) return s;
  Node n;
  n.op = op;
  n.dtype = Result(op, x->dtype);
  n.shape = x->shape;
  n.operands.push_back(std::move(x));
  return Finish(std::move(n));
}

absl::StatusOr<NodePtr> MakeCast(NodePtr x, DType dtype) {
  Node n;
  n.op = Op::kCast;
  n.dtype = dtype;
  n.shape = x->shape;
  n.operands.push_back(std::move(x));
  return Finish(std::move(n));
}

absl::StatusOr<NodePtr> MakeBinary(Op op, NodePtr a, NodePtr b) {
  OpCategory c = Category(op);
  if (c != OpCategory::Binary && c != OpCategory::Compare) {
    return base::InvalidArgument(OpName(op), "not a binary op");
  }
  if (a->shape != b->shape) {
    return base::InvalidArgument(
        OpName(op), absl::StrCat("operand shapes differ: ", ShapeString(a->shape), " and ",
                                 ShapeString(b->shape)));
  }
  if (a->dtype != b->dtype) {
    return base::InvalidArgument(
        OpName(op), absl::StrCat("operand dtypes differ: ", dtype_name(a->dtype), " and ",
                                 dtype_name(b->dtype)));
  }
  if (absl::Status s = CheckTakes(op, a->dtype); !s.ok()) return s;
  Node n;
  n.op = op;
  n.dtype = Result(op, a->dtype);
  n.shape = a->shape;
  n.operands.push_back(std::move(a));
  n.operands.push_back(std::move(b));
  return Finish(std::move(n));
}

absl::StatusOr<NodePtr> MakeWhere(NodePtr cond, NodePtr a, NodePtr b) {
  if (cond->dtype != DType::boolean) {
    return base::InvalidArgument(
        "where", absl::StrCat("condition must be bool, got ", dtype_name(cond->dtype)));
  }
  if (cond->shape != a->shape || a->shape != b->shape) {
    return base::InvalidArgument("where",
                                 absl::StrCat("shapes differ: ", ShapeString(cond->shape), ", ",
                                              ShapeString(a->shape), ", ", ShapeString(b->shape)));
  }
  if (a->dtype != b->dtype) {
    return base::InvalidArgument(
        "where",
        absl::StrCat("value dtypes differ: ", dtype_name(a->dtype), " and ", dtype_name(b->dtype)));
  }
  Node n;
  n.op = Op::kWhere;
  n.dtype = a->dtype;
  n.shape = a->shape;
  n.operands.push_back(std::move(cond));
  n.operands.push_back(std::move(a));
  n.operands.push_back(std::move(b));
  return Finish(std::move(n));
}

absl::StatusOr<NodePtr> MakeReshape(NodePtr x, Shape shape) {
  if (absl::Status s = ValidateShape(shape, "reshape"); !s.ok()) return s;
  if (NumElements(shape) != NumElements(x->shape)) {
    return base::InvalidArgument(
        "reshape",
        absl::StrCat("cannot reshape ", ShapeString(x->shape), " (", NumElements(x->shape),
                     " elements) to ", ShapeString(shape), " (", NumElements(shape), " elements)"));
  }
  Node n;
  n.op = Op::kReshape;
  n.dtype = x->dtype;
  n.shape = std::move(shape);
  n.operands.push_back(std::move(x));
  return Finish(std::move(n));
}

namespace {
constexpr int64_t kStopGradientTag = 1;
}  // namespace

NodePtr MakeStopGradient(NodePtr x) {
  Node n;
  n.op = Op::kReshape;
  n.dtype = x->dtype;
  n.shape = x->shape;
  n.args = {kStopGradientTag};
  n.operands.push_back(std::move(x));
  return Finish(std::move(n));
}

bool IsStopGradient(const Node& n) {
  return n.op == Op::kReshape && n.args.size() == 1 && n.args[0] == kStopGradientTag;
}

absl::StatusOr<NodePtr> MakePermute(NodePtr x, std::vector<int64_t> perm) {
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  std::vector<bool> seen(rank, false);
  bool ok = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t p : perm) {
    if (!ok) break;
    ok = p >= 0 && p < rank && !seen[p];
    if (ok) seen[p] = true;
  }
  if (!ok) {
    return base::InvalidArgument(
        "permute", absl::StrCat("(", absl::StrJoin(perm, ","), ") is not a permutation of the ",
                                rank, " dims of ", ShapeString(x->shape)));
  }
  Node n;
  n.op = Op::kPermute;
  n.dtype = x->dtype;
  for (int64_t p : perm) n.shape.push_back(x->shape[p]);
  n.args = std::move(perm);
  n.operands.push_back(std::move(x));
  return Finish(std::move(n));
}

absl::StatusOr<NodePtr> MakeExpand(NodePtr x, Shape shape) {
  if (absl::Status s = ValidateShape(shape, "broadcast_to"); !s.ok()) return s;
  bool ok = shape.size() == x->shape.size();
  for (size_t d = 0; ok && d < shape.size(); ++d) {
    ok = x->shape[d] == shape[d] || (x->shape[d] == 1 && shape[d] >= 0);
  }
  if (!ok) {
    return base::InvalidArgument(
        "broadcast_to",
        absl::StrCat("cannot broadcast ", ShapeString(x->shape), " to ", ShapeString(shape)));
  }
  Node n;
  n.op = Op::kExpand;
  n.dtype = x->dtype;
  n.shape = std::move(shape);
  n.operands.push_back(std::move(x));
  return Finish(std::move(n));
}

absl::StatusOr<NodePtr> MakeSlice(NodePtr x, std::vector<int64_t> starts, Shape shape) {
  bool ok = starts.size() == x->shape.size() && shape.size() == x->shape.size();
  for (size_t d = 0; ok && d < shape.size(); ++d) {
    ok = starts[d] >= 0 && shape[d] >= 0 && starts[d] + shape[d] <= x->shape[d];
  }
  if (!ok) {
    return base::InvalidArgument(
        "slice", absl::StrCat("window at (", absl::StrJoin(starts, ","), ") of size ",
                              ShapeString(shape), " does not fit in ", ShapeString(x->shape)));
  }
  Node n;
  n.op = Op::kSlice;
  n.dtype = x->dtype;
  n.shape = std::move(shape);
  n.args = std::move(starts);
  n.operands.push_back(std::move(x));
  return Finish(std::move(n));
}

absl::StatusOr<NodePtr> MakePad(NodePtr x, std::vector<int64_t> before, Shape shape, double fill) {
  if (absl::Status s = ValidateShape(shape, "pad"); !s.ok()) return s;
  bool ok = before.size() == x->shape.size() && shape.size() == x->shape.size();
  for (size_t d = 0; ok && d < shape.size(); ++d) {
    ok = before[d] >= 0 && before[d] + x->shape[d] <= shape[d];
  }
  if (!ok) {
    return base::InvalidArgument(
        "pad", absl::StrCat(ShapeString(x->shape), " placed at (", absl::StrJoin(before, ","),
                            ") does not fit in ", ShapeString(shape)));
  }
  Node n;
  n.op = Op::kPad;
  n.dtype = x->dtype;
  n.value = is_floating(x->dtype) ? fill : 0;
  n.shape = std::move(shape);
  n.args = std::move(before);
  n.operands.push_back(std::move(x));
  return Finish(std::move(n));
}

absl::StatusOr<NodePtr> MakeReduce(Op op, NodePtr x, std::vector<int64_t> axes) {
  if (!IsReduce(op)) return base::InvalidArgument(OpName(op), "not a reduction");
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank || (i > 0 && axes[i] <= axes[i - 1])) {
      return base::InvalidArgument(
          OpName(op), absl::StrCat("axes (", absl::StrJoin(axes, ","),
                                   ") are not sorted unique dims of ", ShapeString(x->shape)));
    }
  }
  if (absl::Status s = CheckTakes(op, x->dtype); !s.ok()) return s;
  if (!RuleOf(op).identity) {
    for (int64_t a : axes) {
      if (x->shape[a] == 0) {
        const char* name = RuleOf(op).name;
        return base::InvalidArgument(
            name, absl::StrCat("cannot reduce an empty dim ", a, " of ", ShapeString(x->shape),
                               ": ", name, " has no identity"));
      }
    }
  }
  Node n;
  n.op = op;
  n.dtype = x->dtype;
  n.shape = x->shape;
  for (int64_t a : axes) n.shape[a] = 1;
  n.args = std::move(axes);
  n.operands.push_back(std::move(x));
  return Finish(std::move(n));
}

absl::StatusOr<NodePtr> MakeScan(Op op, NodePtr x, int64_t axis, bool reverse) {
  if (!IsScan(op)) return base::InvalidArgument(OpName(op), "not a scan");
  if (axis < 0 || axis >= static_cast<int64_t>(x->shape.size())) {
    return base::InvalidArgument(
        RuleOf(op).name, absl::StrCat("axis ", axis, " is not a dim of ", ShapeString(x->shape)));
  }
  if (absl::Status s = CheckTakes(op, x->dtype); !s.ok()) return s;
  Node n;
  n.op = op;
  n.dtype = x->dtype;
  n.shape = x->shape;
  n.args = {axis, reverse ? 1 : 0};
  n.operands.push_back(std::move(x));
  return Finish(std::move(n));
}

absl::StatusOr<NodePtr> MakeMatmul(NodePtr a, NodePtr b) {
  const Shape& sa = a->shape;
  const Shape& sb = b->shape;
  if (sa.size() < 2 || sb.size() < 2 || sa.size() != sb.size()) {
    return base::InvalidArgument(
        "matmul", absl::StrCat("expected operands of equal rank >= 2, got ", ShapeString(sa),
                               " and ", ShapeString(sb)));
  }
  const size_t r = sa.size();
  if (sa[r - 1] != sb[r - 2]) {
    return base::InvalidArgument(
        "matmul", absl::StrCat("inner dimensions differ: ", ShapeString(sa), " @ ", ShapeString(sb),
                               " (", sa[r - 1], " vs ", sb[r - 2], ")"));
  }
  if (!std::equal(sa.begin(), sa.end() - 2, sb.begin())) {
    return base::InvalidArgument(
        "matmul",
        absl::StrCat("batch dimensions differ: ", ShapeString(sa), " @ ", ShapeString(sb)));
  }
  if (a->dtype != b->dtype || a->dtype == DType::boolean) {
    return base::InvalidArgument(
        "matmul", absl::StrCat("expected equal numeric dtypes, got ", dtype_name(a->dtype), " and ",
                               dtype_name(b->dtype)));
  }
  Node n;
  n.op = Op::kMatmul;
  n.dtype = a->dtype;
  n.shape = sa;
  n.shape[r - 1] = sb[r - 1];
  if (absl::Status s = ValidateShape(n.shape, "matmul"); !s.ok()) return s;
  n.operands.push_back(std::move(a));
  n.operands.push_back(std::move(b));
  return Finish(std::move(n));
}

NodePtr WithOperands(const Node& n, absl::FunctionRef<NodePtr(const NodePtr&)> now) {
  // Most nodes of a graph a pass rewrites keep their operands: nothing is allocated for them.
  size_t first = 0;
  NodePtr first_new;
  for (; first < n.operands.size(); ++first) {
    first_new = now(n.operands[first]);
    if (first_new != n.operands[first]) break;
  }
  if (first == n.operands.size()) return nullptr;
  Operands operands;
  operands.reserve(n.operands.size());
  operands.insert(operands.end(), n.operands.begin(),
                  n.operands.begin() + static_cast<std::ptrdiff_t>(first));
  operands.push_back(std::move(first_new));
  for (size_t i = first + 1; i < n.operands.size(); ++i) operands.push_back(now(n.operands[i]));
  Node copy = CopyOfFields(n);
  copy.operands = std::move(operands);
  return Finish(std::move(copy));
}

Node CopyOfFields(const Node& n) {
  Node copy;
  copy.op = n.op;
  copy.dtype = n.dtype;
  copy.shape = n.shape;
  copy.args = n.args;
  copy.value = n.value;
  copy.storage = n.storage;
  return copy;
}

namespace {

// The new node of each node reachable from the roots (WithOperands': null where it is
// unchanged), by position in the walk's order: a map of every node walked was most of the
// cost of rebuilding a scan's last step around the graph that reads it, once per token.
class Substitution {
 public:
  Substitution(std::span<const Node* const> roots,
               const absl::flat_hash_map<const Node*, NodePtr>& replace)
      : order_(PostOrder(roots, [&](const Node& n) { return replace.contains(&n); })),
        positions_(order_),
        done_(order_.size()) {
    auto now = [&](const NodePtr& n) { return Now(n); };
    for (size_t i = 0; i < order_.size(); ++i) {
      auto it = replace.find(order_[i]);
      done_[i] = it != replace.end() ? it->second : WithOperands(*order_[i], now);
    }
  }

  // `n` as it is after the substitution.
  NodePtr Now(const NodePtr& n) const {
    const NodePtr& d = done_[static_cast<size_t>(positions_.at(n.get()))];
    return d ? d : n;
  }
  // The new node of `n` (null: unchanged).
  const NodePtr& Done(const Node* n) const { return done_[static_cast<size_t>(positions_.at(n))]; }

 private:
  const std::vector<const Node*> order_;
  const NodePositions positions_;
  std::vector<NodePtr> done_;
};

}  // namespace

std::vector<NodePtr> Substitute(const std::vector<NodePtr>& roots,
                                const absl::flat_hash_map<const Node*, NodePtr>& replace) {
  std::vector<const Node*> raw;
  raw.reserve(roots.size());
  for (const NodePtr& root : roots) raw.push_back(root.get());
  const Substitution done(raw, replace);
  std::vector<NodePtr> out;
  out.reserve(roots.size());
  for (const NodePtr& root : roots) out.push_back(done.Now(root));
  return out;
}

std::vector<NodePtr> SubstituteRoots(std::span<const Node* const> roots,
                                     const absl::flat_hash_map<const Node*, NodePtr>& replace) {
  const Substitution done(roots, replace);
  std::vector<NodePtr> out;
  out.reserve(roots.size());
  for (const Node* root : roots) out.push_back(done.Done(root));
  return out;
}

}  // namespace lazycl::ir
