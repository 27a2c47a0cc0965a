#pragma once

#include <cstdint>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "ir/ir.h"

// Marks kept in the nodes themselves (NodeMemo::Mark, SetPosition) in place of a set or a map of
// the nodes a pass has met: on the host's path of every graph run (the executor's topological
// orders, the slice analysis), inserting into and looking up such sets was a tenth of the host's
// work per token of a sampling loop. Nodes are shared by every thread, so one walk at a time in
// the process holds the right to mark them; a walk that cannot have it keeps a set of its own.
namespace lazycl::ir {

// The right to mark nodes, taken (if no other walk holds it) for this object's lifetime. While
// it is held no other walk marks a node, so a mark equal to id() was set by this walk; marks
// of earlier walks hold other numbers. Taking and giving it back synchronise with the last
// holder (its marks happen before this one's reads).
class NodeMarks {
 public:
  NodeMarks();
  ~NodeMarks();
  NodeMarks(const NodeMarks&) = delete;
  NodeMarks& operator=(const NodeMarks&) = delete;

  bool held() const { return held_; }
  uint64_t id() const { return id_; }

 private:
  bool held_ = false;
  uint64_t id_ = 0;
};

// Each node's position in `order`, looked up by node: in the nodes' marks where this object
// holds them, in a map otherwise.
class NodePositions {
 public:
  explicit NodePositions(std::span<const Node* const> order);

  // The position of `node`, which must be in the order.
  int at(const Node* node) const {
    if (!marks_.held()) return map_.at(node);
    const int64_t position = node->memo.PositionIn(marks_.id());
    if (position < 0) NotInOrder(*node);
    return static_cast<int>(position);
  }

 private:
  [[noreturn]] static void NotInOrder(const Node& node);

  NodeMarks marks_;
  absl::flat_hash_map<const Node*, int> map_;  // where the marks are not held
};

}  // namespace lazycl::ir
