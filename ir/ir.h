#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "ir/op_table.h"
#include "ir/shape.h"
#include "lazycl/dtype.h"

// The IR: one plain node type. A node holds real references to its operands; nothing holds a
// reference to its users. Shapes and dtypes are inferred and checked when a node is made, and
// the structural hash is computed then too. Leaves hash by op, dtype and shape only (a Constant
// also by its value, which codegen bakes into the kernel; a Scalar not, its value is a kernel
// argument), never by data or address, so new data of the same shapes reuses compiled graphs.
namespace lazycl::ir {

class Storage;  // frontend/storage.h: data of a Buffer leaf

struct Node;
using NodePtr = std::shared_ptr<const Node>;
// A node's operands, held in place up to three (every op but a few takes at most three): a node
// is made and dropped by the hundred per step of a loop built op by op, and a std::vector cost a
// malloc and a free each (443 a char-LM sampling token).
using Operands = absl::InlinedVector<NodePtr, 3>;

// What is learned about a pending node after it is made, for the frontend's automatic cut
// (PastPendingLimit, frontend/materialize.h MaterializeCut). Read and set from any thread; a
// copied or moved Node starts with nothing learned.
class NodeMemo {
 public:
  NodeMemo() = default;
  NodeMemo(const NodeMemo&) {}
  NodeMemo& operator=(const NodeMemo&) { return *this; }
  ~NodeMemo();

  // The node's value, where a cut computed it while other pending graphs still read the node:
  // later graphs read that buffer in the node's place (ReadComputed) instead of computing the
  // node again. The first value set stays (two cuts may compute one node).
  bool computed() const { return has_value_.load(std::memory_order_acquire); }
  std::shared_ptr<Storage> value() const { return computed() ? value_.load() : nullptr; }
  void set_value(std::shared_ptr<Storage> value) const;

  // An upper bound on the distinct non-leaf nodes of the node's graph (itself included, nodes
  // with a value not), tighter than Node::pending; -1 where not known.
  int64_t distinct() const { return distinct_.load(std::memory_order_relaxed); }
  void set_distinct(int64_t n) const { distinct_.store(n, std::memory_order_relaxed); }

  // Counts the node among the live pending nodes (LivePendingNodes) until it is destroyed: set
  // once, by the builder that made it, before the node is shared.
  void CountLivePending() const;

  // Marks the node seen by counting walk `walk` (a number no other walk uses); false where that
  // walk had seen it already. Walks of other threads may overwrite the mark, which only makes a
  // walk count a node twice: a count that errs high, never low.
  bool Visit(uint64_t walk) const {
    return visited_.exchange(walk, std::memory_order_relaxed) != walk;
  }
  uint64_t visited() const { return visited_.load(std::memory_order_relaxed); }
  // Marks of the one walk at a time that holds the right to mark nodes (ir/node_marks.h
  // NodeMarks; numbers of their own, so that they do not disturb the counting walks' marks).
  // Mark: false where walk `walk` had marked the node already. SetPosition and PositionIn: the
  // node's position in that walk's order (-1 where it set none).
  bool Mark(uint64_t walk) const {
    if (marked_.load(std::memory_order_relaxed) == walk) return false;
    marked_.store(walk, std::memory_order_relaxed);
    return true;
  }
  void SetPosition(uint64_t walk, int64_t position) const {
    position_.store(position, std::memory_order_relaxed);
    marked_.store(walk, std::memory_order_relaxed);
  }
  int64_t PositionIn(uint64_t walk) const {
    return marked_.load(std::memory_order_relaxed) == walk
               ? position_.load(std::memory_order_relaxed)
               : -1;
  }
  // The walk that counted the node's graph, or one below it that its graph holds whole (0:
  // none): a node that walk met is in this node's graph, with all of its own (PastPendingLimit).
  uint64_t counted_by() const { return counted_by_.load(std::memory_order_relaxed); }
  // What walk counted_by() found: the nodes it counted, and ComputedEpoch() when it began. While
  // no node has been computed since, the node's graph holds all of those nodes, so its count
  // beyond them is at most distinct() - walk_total(): two branches of one counted graph (q and k
  // of one layer's input) joined add their own nodes, not the shared graph twice.
  int64_t walk_total() const { return walk_total_.load(std::memory_order_relaxed); }
  uint64_t walk_epoch() const { return walk_epoch_.load(std::memory_order_relaxed); }
  // Sets counted_by() and what that walk found.
  void set_walk(uint64_t walk, int64_t total, uint64_t epoch) const {
    counted_by_.store(walk, std::memory_order_relaxed);
    walk_total_.store(total, std::memory_order_relaxed);
    walk_epoch_.store(epoch, std::memory_order_relaxed);
  }

 private:
  mutable bool counted_live_pending_ = false;
  mutable std::atomic<std::shared_ptr<Storage>> value_;
  mutable std::atomic<bool> has_value_{false};
  mutable std::atomic<int64_t> distinct_{-1};
  mutable std::atomic<uint64_t> visited_{0};
  mutable std::atomic<uint64_t> marked_{0};
  mutable std::atomic<int64_t> position_{-1};
  mutable std::atomic<uint64_t> counted_by_{0};
  mutable std::atomic<int64_t> walk_total_{0};
  mutable std::atomic<uint64_t> walk_epoch_{0};
};

// How many nodes have been given a value (NodeMemo::set_value) so far, in every thread.
uint64_t ComputedEpoch();

// Non-leaf nodes alive now, in every thread (computed ones included): no graph holds more
// distinct pending nodes than this, so while it is at most MaxPendingNodes() no graph is past
// the limit and PastPendingLimit answers without counting.
int64_t LivePendingNodes();

// CopyOfFields (ir.cpp) copies a node field by field: a field added here is copied there too.
struct Node {
  Node() = default;
  Node(const Node&) = default;
  Node(Node&&) = default;
  Node& operator=(const Node&) = default;
  Node& operator=(Node&&) = default;
  // Releases the operands iteratively, so that dropping the last handle of a chain of a million
  // nodes does not recurse a million destructors deep (a stack overflow on small stacks).
  ~Node();

  Op op = Op::kConstant;
  DType dtype = DType::f32;
  Shape shape;
  Operands operands;
  // The small argument, by op: Permute: the permutation; Slice: start per dim; Pad: padding
  // before each dim (after is implied by the shape); Sum/Max: the reduced axes, sorted (the
  // output keeps them with size 1). Gather, ScatterAdd: {dim}.
  base::InlineList<int64_t, 4> args;
  double value = 0;                  // Constant, Scalar; Pad: the fill
  std::shared_ptr<Storage> storage;  // Buffer
  uint64_t hash = 0;
  // Non-leaf nodes in this node's graph, counted through every path (so shared nodes count
  // more than once) and saturating: an upper bound on the distinct ones, free to compute.
  int64_t pending = 0;
  // Whether the node's graph reads no data (no Buffer leaf and no random numbers: only iota,
  // constants and scalars), and whether such a graph holds a transcendental op
  // (IsTranscendental): what constant folding looks for (runtime/constant_fold.h). Set with the
  // hash; false for a graph that reads data.
  bool reads_no_data = false;
  bool holds_transcendental = false;
  NodeMemo memo;
};

// Graphs of more pending nodes than this are computed at once when a tensor is made (the
// frontend's automatic cut), so that a loop such as `for (...) a = a + b;` runs in bounded
// memory and bounded kernel size: LAZYCL_MAX_PENDING_NODES (base::Settings), read once.
int64_t MaxPendingNodes();

// Whether `node`'s graph holds more than MaxPendingNodes() distinct non-leaf nodes (nodes with a
// computed value count as leaves). Node::pending counts a node once per path, and a transformer
// layer reads its input from a dozen places, so the cheap count doubles with each layer; past
// the limit the distinct nodes are counted (at most MaxPendingNodes() + 1 of them) and the count
// kept in node.memo, whose later users start from it.
bool PastPendingLimit(const Node& node);

std::string NodeString(const Node& node);  // "Add f32[2,3]"

// Fills in the hash and the pending count of a node whose other fields are set (the builders'
// last step; for builders in other files of ir/).
NodePtr FinishNode(Node node);

// Builders. Each checks its operands and returns InvalidArgument naming the op and the shapes.
NodePtr MakeBuffer(std::shared_ptr<Storage> storage, DType dtype, Shape shape);
NodePtr MakeConstant(double value, DType dtype, Shape shape);
// Like MakeConstant (the value converted alike), but the value is not part of the hash: codegen
// passes it as a kernel argument (op_table.h says which values are which).
NodePtr MakeScalar(double value, DType dtype, Shape shape);
NodePtr MakeIota(DType dtype, int64_t n);
absl::StatusOr<NodePtr> MakeUnary(Op op, NodePtr x);  // result dtype: x's, except where noted
absl::StatusOr<NodePtr> MakeCast(NodePtr x, DType dtype);
// Binary and Compare ops: operands must already have equal shapes and (for Binary) dtypes; the
// frontend broadcasts and promotes first.
absl::StatusOr<NodePtr> MakeBinary(Op op, NodePtr a, NodePtr b);
absl::StatusOr<NodePtr> MakeWhere(NodePtr cond, NodePtr a, NodePtr b);
absl::StatusOr<NodePtr> MakeReshape(NodePtr x, Shape shape);
// x itself as a node of its own that reverse mode does not go through (Tensor::detach() of a
// pending value, JAX's stop_gradient): an identity Reshape tagged by its args, so that every
// other pass sees the Reshape it is.
NodePtr MakeStopGradient(NodePtr x);
bool IsStopGradient(const Node& n);
absl::StatusOr<NodePtr> MakePermute(NodePtr x, std::vector<int64_t> perm);
// Same rank; every dim either equal or 1 in x.
absl::StatusOr<NodePtr> MakeExpand(NodePtr x, Shape shape);
absl::StatusOr<NodePtr> MakeSlice(NodePtr x, std::vector<int64_t> starts, Shape shape);
// Pad: x placed at `before` in `shape`, the rest `fill` (cat pads with -0.0, the one value that
// adds to every float, -0.0 included, without changing it).
absl::StatusOr<NodePtr> MakePad(NodePtr x, std::vector<int64_t> before, Shape shape,
                                double fill = 0);
// Reduces `axes` (sorted, unique, in range) to size 1.
absl::StatusOr<NodePtr> MakeReduce(Op op, NodePtr x, std::vector<int64_t> axes);
// A running fold of x along `axis` (a Scan op: Cumsum), from the end when `reverse`; x's shape.
absl::StatusOr<NodePtr> MakeScan(Op op, NodePtr x, int64_t axis, bool reverse);
// a [B.., M, K] and b [B.., K, N] with equal batch dims -> [B.., M, N].
absl::StatusOr<NodePtr> MakeMatmul(NodePtr a, NodePtr b);

// Data-dependent indexing (ir/indexing.cpp). `index` is i32 or i64, of x's rank.
// Gather: out[i..] = x[i.. with i_dim = clamp(index[i..], 0, x.shape[dim] - 1)]; index's dims
// other than `dim` equal x's (the frontend slices x first); the result has index's shape and
// x's dtype. x.shape[dim] may be 0 only when index is empty.
absl::StatusOr<NodePtr> MakeGather(NodePtr x, int64_t dim, NodePtr index);
// ScatterAdd: x plus, for every element of src, src[j..] added at j.. with j_dim = index[j..];
// an index outside [0, x.shape[dim]) drops its element. index and src have one shape, whose dims
// other than `dim` are at most x's; the result has x's shape and dtype (f32, i32 or i64).
absl::StatusOr<NodePtr> MakeScatterAdd(NodePtr x, int64_t dim, NodePtr index, NodePtr src);

// `n` with each operand o swapped for now(o), or null where every operand stays as it is: the
// step of each pass that rebuilds a graph (Substitute, SinkSlices).
NodePtr WithOperands(const Node& n, absl::FunctionRef<NodePtr(const NodePtr&)> now);
// `n`'s fields but its operands (left empty), its memo and what Finish derives: the start of a
// rebuilt node (WithOperands, SinkSlices). Copying `n` whole would copy its operands (a reference
// count each) only to drop them.
Node CopyOfFields(const Node& n);

// `roots` with every node that has a computed value (NodeMemo) read from its buffer as a
// Buffer leaf; `roots` themselves where no node in their graphs has one (at no cost while no
// node anywhere has one).
std::vector<NodePtr> ReadComputed(const std::vector<NodePtr>& roots);

// Rebuilds `roots` with every node in `replace` swapped for its replacement (shapes and dtypes
// must match); nodes that reach no replaced node are shared, not copied.
std::vector<NodePtr> Substitute(const std::vector<NodePtr>& roots,
                                const absl::flat_hash_map<const Node*, NodePtr>& replace);
// The same for roots held elsewhere (a graph's outputs): null where a root is unchanged.
std::vector<NodePtr> SubstituteRoots(std::span<const Node* const> roots,
                                     const absl::flat_hash_map<const Node*, NodePtr>& replace);

}  // namespace lazycl::ir
