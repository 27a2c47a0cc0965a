// The graph walks that mark nodes in place (ir/node_marks.h): PostOrder's order, NodePositions,
// the right to mark held by one walk at a time, and walks on several threads over one shared
// graph, each of which must see every node exactly once whether it holds the marks or falls
// back to a set of its own. scripts/test.sh also runs this binary under ThreadSanitizer.
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "ir/ir.h"
#include "ir/node_marks.h"
#include "ir/post_order.h"
#include "ir_test_util.h"

namespace lazycl {
namespace {

using ir::NodePtr;
using ir::Op;
using test::Ok;

NodePtr Leaf() { return ir::MakeBuffer(nullptr, DType::f32, {4}); }
NodePtr Add(NodePtr a, NodePtr b) { return Ok(ir::MakeBinary(Op::kAdd, a, b)); }
NodePtr Mul(NodePtr a, NodePtr b) { return Ok(ir::MakeBinary(Op::kMul, a, b)); }

// A transformer-like chain: each layer reads its input from several places, so a walk meets
// most nodes many times over (the case marks must get right: a node listed once).
struct Layers {
  std::vector<NodePtr> leaves;
  NodePtr out;
  int64_t distinct = 0;  // nodes in the graph, counted as it is built
};

Layers MakeLayers(int layers) {
  Layers g;
  g.leaves = {Leaf(), Leaf(), Leaf()};
  g.distinct = 3;
  NodePtr x = g.leaves[0];
  for (int l = 0; l < layers; ++l) {
    NodePtr a = Mul(x, g.leaves[1]);
    NodePtr b = Add(x, g.leaves[2]);
    NodePtr c = Mul(a, b);
    x = Add(Add(c, x), a);  // x, a read again: joins of shared branches
    g.distinct += 5;
  }
  g.out = x;
  return g;
}

// "" where `order` lists `distinct` nodes, each once and after its operands; else what is wrong.
std::string CheckOrder(const std::vector<const ir::Node*>& order, int64_t distinct) {
  absl::flat_hash_map<const ir::Node*, size_t> at;
  for (size_t i = 0; i < order.size(); ++i) {
    if (!at.emplace(order[i], i).second) return "node " + std::to_string(i) + " listed twice";
  }
  for (size_t i = 0; i < order.size(); ++i) {
    for (const NodePtr& o : order[i]->operands) {
      auto it = at.find(o.get());
      if (it == at.end()) return "an operand of node " + std::to_string(i) + " is missing";
      if (it->second >= i) return "node " + std::to_string(i) + " comes before its operand";
    }
  }
  if (static_cast<int64_t>(order.size()) != distinct)
    return std::to_string(order.size()) + " nodes listed, " + std::to_string(distinct) + " made";
  return "";
}

TEST(IrWalk, PostOrderIsDepthFirstOperandsLeftToRight) {
  const NodePtr a = Leaf(), b = Leaf();
  const NodePtr c = Add(a, b);
  const NodePtr d = Mul(c, a);
  const NodePtr e = Add(d, c);
  const NodePtr f = Mul(b, a);  // a second root, sharing leaves with the first
  const std::vector<const ir::Node*> want = {a.get(), b.get(), c.get(), d.get(), e.get(), f.get()};
  EXPECT_EQ(ir::PostOrder(std::vector<NodePtr>{e, f}), want);
  // A root listed twice, or reachable from another root, is listed once.
  EXPECT_EQ(ir::PostOrder(std::vector<NodePtr>{e, f, c, e}), want);
  // `stop`: the node is listed, its operands are not walked through it.
  const std::vector<const ir::Node*> stopped =
      ir::PostOrder(std::vector<NodePtr>{e}, [&](const ir::Node& n) { return &n == d.get(); });
  EXPECT_EQ(stopped, (std::vector<const ir::Node*>{d.get(), a.get(), b.get(), c.get(), e.get()}));
}

TEST(IrWalk, OneWalkAtATimeHoldsTheMarks) {
  uint64_t first_id = 0;
  {
    const ir::NodeMarks first;
    ASSERT_TRUE(first.held());
    first_id = first.id();
    const ir::NodeMarks second;  // asked while the first holds them
    EXPECT_FALSE(second.held());
  }
  const ir::NodeMarks third;
  EXPECT_TRUE(third.held());
  EXPECT_NE(third.id(), first_id);
}

TEST(IrWalk, WalksWithoutTheMarksGiveTheSameOrder) {
  const Layers g = MakeLayers(30);
  const std::vector<const ir::Node*> marked = ir::PostOrder(std::vector<NodePtr>{g.out});
  EXPECT_EQ(CheckOrder(marked, g.distinct), "");
  std::vector<const ir::Node*> unmarked;
  {
    const ir::NodeMarks holder;  // another walk holds them: PostOrder keeps a set
    ASSERT_TRUE(holder.held());
    unmarked = ir::PostOrder(std::vector<NodePtr>{g.out});
    // Positions without the marks, and with them (after the holder gave them back) below.
    const ir::NodePositions positions(marked);
    for (size_t i = 0; i < marked.size(); ++i) ASSERT_EQ(positions.at(marked[i]), int(i));
  }
  EXPECT_EQ(unmarked, marked);
  const ir::NodePositions positions(marked);
  for (size_t i = 0; i < marked.size(); ++i) ASSERT_EQ(positions.at(marked[i]), int(i));
  // Marks left by earlier walks do not count for a later one.
  EXPECT_EQ(ir::PostOrder(std::vector<NodePtr>{g.out}), marked);
}

TEST(IrWalk, WalksOfOneGraphOnFourThreads) {
  const Layers g = MakeLayers(40);
  const std::vector<const ir::Node*> want = ir::PostOrder(std::vector<NodePtr>{g.out});
  ASSERT_EQ(CheckOrder(want, g.distinct), "");
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        // Walks of the whole graph and of parts of it (other roots), and positions looked up,
        // interleaved on every thread.
        const NodePtr& root = (i + t) % 3 == 0 ? g.out : g.out->operands[0];
        const std::vector<const ir::Node*> order = ir::PostOrder(std::vector<NodePtr>{root});
        if (root == g.out && order != want) wrong.fetch_add(1);
        const ir::NodePositions positions(order);
        for (size_t k = 0; k < order.size(); ++k) {
          if (positions.at(order[k]) != static_cast<int>(k)) {
            wrong.fetch_add(1);
            break;
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace lazycl
