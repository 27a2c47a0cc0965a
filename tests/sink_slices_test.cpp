// Slices moved toward the operands of what they slice (ir/sink_slices.h). The device computes the
// rewritten graph and the host interpreter the graph as written, so every case below compares
// the two, for each op a slice moves through and each layout of the operand; the IR cases check
// what moved and what did not.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/post_order.h"
#include "ir/sink_slices.h"
#include "ir_test_util.h"
#include "lazycl/lazycl.h"
#include "lazycl/profile.h"
#include "ops_more_util.h"

namespace lazycl {
namespace {

using ir::NodePtr;
using ir::Op;
using more::Check;
using more::Layout;
using test::Ok;

NodePtr Leaf(ir::Shape shape) { return ir::MakeBuffer(nullptr, DType::f32, std::move(shape)); }

// A language model's head over a [1, 64, 128] window: RMSNorm's scale, the weight, the
// [64, 128] @ [128, 256] product read back as [1, 64, 256].
struct Head {
  NodePtr x = Leaf({1, 64, 128});
  NodePtr logits;
  Head() {
    const NodePtr w = Leaf({128}), out = Leaf({128, 256});
    const NodePtr sum = Ok(ir::MakeReduce(Op::kSum, Ok(ir::MakeBinary(Op::kMul, x, x)), {2}));
    const NodePtr scale = Ok(ir::MakeExpand(Ok(ir::MakeUnary(Op::kRsqrt, sum)), {1, 64, 128}));
    const NodePtr weight = Ok(ir::MakeExpand(Ok(ir::MakeReshape(w, {1, 1, 128})), {1, 64, 128}));
    const NodePtr y = Ok(ir::MakeBinary(Op::kMul, Ok(ir::MakeBinary(Op::kMul, x, scale)), weight));
    const NodePtr m = Ok(ir::MakeMatmul(Ok(ir::MakeReshape(y, {64, 128})), out));
    logits = Ok(ir::MakeReshape(m, {1, 64, 256}));
  }
};

std::vector<NodePtr> Sink(const std::vector<const ir::Node*>& roots) {
  const std::vector<const ir::Node*> order = ir::PostOrder(roots);
  return ir::SinkSlices(roots, order);
}

// logits[:, -1]: the norm and the product of one row; the only slice left is of the input.
TEST(SinkSlicesTest, TheLastPositionsLogitsComputeOneRow) {
  const Head head;
  const NodePtr last = Ok(ir::MakeSlice(head.logits, {0, 63, 0}, {1, 1, 256}));
  const std::vector<NodePtr> sunk = Sink({last.get()});
  ASSERT_EQ(sunk.size(), 1u);
  ASSERT_NE(sunk[0], nullptr);
  EXPECT_EQ(sunk[0]->shape, last->shape);
  int matmuls = 0, slices = 0;
  for (const ir::Node* n : ir::PostOrder(std::vector<const ir::Node*>{sunk[0].get()})) {
    if (n->op == Op::kMatmul) {
      ++matmuls;
      EXPECT_EQ(n->shape, (ir::Shape{1, 256}));
    }
    if (n->op == Op::kSum) {
      EXPECT_EQ(n->shape, (ir::Shape{1, 1, 1}));
    }
    if (n->op == Op::kSlice) {
      ++slices;
      EXPECT_EQ(n->operands[0], head.x);
      EXPECT_EQ(n->args, (std::vector<int64_t>{0, 63, 0}));
    }
  }
  EXPECT_EQ(matmuls, 1);
  EXPECT_GE(slices, 1);
}

// A value something else reads all of (here the logits, also an output) is computed whole,
// once, and sliced: nothing moves.
TEST(SinkSlicesTest, AValueReadElsewhereIsNotMoved) {
  const Head head;
  const NodePtr last = Ok(ir::MakeSlice(head.logits, {0, 63, 0}, {1, 1, 256}));
  const std::vector<NodePtr> sunk = Sink({last.get(), head.logits.get()});
  EXPECT_EQ(sunk[0], nullptr);
  EXPECT_EQ(sunk[1], nullptr);
  // A slice of a leaf is a view: nothing to move either.
  const NodePtr view = Ok(ir::MakeSlice(head.x, {0, 1, 0}, {1, 2, 128}));
  EXPECT_EQ(Sink({view.get()})[0], nullptr);
}

// A value that several readers need parts of is computed once, over the box of those parts:
// here rows 1 and 3..4 of exp(x), so rows 1..4. A reader of all of it (a root) keeps it whole.
TEST(SinkSlicesTest, AValueSeveralReadersNeedPartsOfIsComputedOnceOverTheirBox) {
  const NodePtr x = Leaf({8, 4});
  const NodePtr e = Ok(ir::MakeUnary(Op::kExp, x));
  const NodePtr a = Ok(ir::MakeSlice(e, {1, 0}, {1, 4}));
  const NodePtr b = Ok(ir::MakeSlice(Ok(ir::MakeBinary(Op::kMul, e, e)), {3, 0}, {2, 4}));
  const std::vector<NodePtr> sunk = Sink({a.get(), b.get()});
  ASSERT_NE(sunk[0], nullptr);
  ASSERT_NE(sunk[1], nullptr);
  int exps = 0;
  for (const ir::Node* n :
       ir::PostOrder(std::vector<const ir::Node*>{sunk[0].get(), sunk[1].get()})) {
    if (n->op != Op::kExp) continue;
    ++exps;
    EXPECT_EQ(n->shape, (ir::Shape{4, 4}));
    ASSERT_EQ(n->operands[0]->op, Op::kSlice);
    EXPECT_EQ(n->operands[0]->args, (std::vector<int64_t>{1, 0}));
  }
  EXPECT_EQ(exps, 1);
  // With exp(x) a root too, it is computed whole; the product only b reads still moves.
  const std::vector<NodePtr> kept = Sink({a.get(), b.get(), e.get()});
  EXPECT_EQ(kept[0], nullptr);
  EXPECT_EQ(kept[2], nullptr);
  ASSERT_NE(kept[1], nullptr);
  ASSERT_EQ(kept[1]->operands[0]->op, Op::kSlice);
  EXPECT_EQ(kept[1]->operands[0]->operands[0], e);
}

// Through each op a slice moves through, and where it cannot move (a reshape that splits the
// sliced dim, a stop-gradient, a value also read elsewhere), against the host interpreter.
TEST(SinkSlicesTest, SlicedResultsMatchTheHost) {
  using Fn = more::Fn;
  const auto other = [](const Tensor& x, std::vector<int64_t> shape, uint64_t seed) {
    return randn(std::move(shape), seed, DType::f32, x.device());
  };
  const std::vector<std::pair<std::string, Fn>> cases = {
      {"broadcast elementwise",
       [&](const Tensor& x) {
         return std::vector<Tensor>{slice(exp(x) * other(x, {1, 1, 8}, 1) + 1.0, 1, 1, 3)};
       }},
      {"row of a reduction",
       [](const Tensor& x) { return std::vector<Tensor>{slice(sum(x * x, {2}, true), 1, 4, 5)}; }},
      {"rows, columns and batches of a matmul",
       [&](const Tensor& x) {
         const Tensor y = matmul(tanh(x), other(x, {8, 6}, 2));
         return std::vector<Tensor>{slice(y, 1, 2, 4), slice(y + 0.0, 2, 1, 5),
                                    slice(y * 1.0, 0, 1, 2)};
       }},
      {"batched matmul",
       [&](const Tensor& x) {
         return std::vector<Tensor>{slice(matmul(x, other(x, {3, 8, 4}, 3)), 0, 2, 3)};
       }},
      {"permute",
       [](const Tensor& x) {
         return std::vector<Tensor>{slice(transpose(x * 2.0, 0, 2), 0, 3, 5)};
       }},
      {"reshape with size-1 dims",
       [](const Tensor& x) {
         return std::vector<Tensor>{slice(reshape(x * 3.0, {3, 1, 5, 8}), 2, 4, 5)};
       }},
      {"reshape splitting the sliced dim",
       [](const Tensor& x) {
         return std::vector<Tensor>{slice(reshape(x + 1.0, {3, 5, 2, 4}), 2, 1, 2)};
       }},
      {"slice of a slice",
       [](const Tensor& x) {
         return std::vector<Tensor>{slice(slice(tanh(x), 1, 1, 5), 2, 2, 6)};
       }},
      {"row of a softmax",
       [](const Tensor& x) { return std::vector<Tensor>{slice(softmax(x, -1), 1, 4, 5)}; }},
      {"value read elsewhere too",
       [](const Tensor& x) {
         const Tensor e = exp(x * 0.5);
         return std::vector<Tensor>{slice(e, 1, 0, 1), sum(e, {1}, false)};
       }},
      {"empty and whole windows",
       [](const Tensor& x) {
         return std::vector<Tensor>{slice(x * 2.0, 1, 2, 2), slice(x - 1.0, 1, 0, 5)};
       }},
      {"two readers' box",
       [](const Tensor& x) {
         const Tensor e = exp(x * 0.5);
         return std::vector<Tensor>{slice(e, 1, 0, 1), slice(e + 1.0, 1, 2, 4)};
       }},
      {"pieces of a cat: inside one, across the join",
       [](const Tensor& x) {
         const Tensor c = cat({x * 2.0, exp(x)}, 2);
         return std::vector<Tensor>{slice(c, 1, 3, 4), slice(slice(c * 1.0, 2, 6, 10), 1, 1, 2),
                                    slice(slice(c + 0.0, 2, 9, 12), 0, 2, 3)};
       }},
      {"last position of a decoder block (a norm reads x twice, the residual once more)",
       [&](const Tensor& x) {
         const Tensor n = nn::rms_norm(x, other(x, {8}, 6), 1e-5);
         const Tensor y = x + matmul(silu(matmul(n, other(x, {8, 12}, 7))), other(x, {12, 8}, 8));
         return std::vector<Tensor>{slice(y, 1, 4, 5)};
       }},
      {"last position of a norm and a head",
       [&](const Tensor& x) {
         const Tensor logits =
             matmul(nn::rms_norm(x, other(x, {8}, 4), 1e-5), other(x, {8, 16}, 5));
         return std::vector<Tensor>{reshape(slice(logits, 1, 4, 5), {3, 16})};
       }},
  };
  uint64_t seed = 50;
  for (const auto& [name, fn] : cases) {
    for (Layout layout : {Layout::kContiguous, Layout::kTransposed, Layout::kLazy}) {
      Check(name, fn, {3, 5, 8}, DType::f32, layout, ++seed, 1e-5, 1e-5);
    }
  }
}

// The executor runs the moved graph: the profiler names what each kernel computed, and the
// head of the last position is a [1, 16] product, not [5, 16].
TEST(SinkSlicesTest, TheDeviceRunsTheMovedGraph) {
  const Device cl = Device::opencl();
  const Tensor x = randn({1, 5, 8}, 7, DType::f32, cl), g = randn({8}, 9, DType::f32, cl);
  const Tensor w = randn({8, 16}, 8, DType::f32, cl);
  sync({x, g, w});
  auto last = [](const Tensor& x, const Tensor& g, const Tensor& w) {
    return slice(matmul(nn::rms_norm(x, g, 1e-5), w), 1, 4, 5);
  };
  const Device host = Device::host();
  const Tensor want = last(x.to(host), g.to(host), w.to(host));
  metrics::set_profiling(true);
  metrics::reset_profile();
  const Tensor got = last(x, g, w);
  sync({got});
  std::vector<std::string> kernels;
  for (const metrics::KernelProfile& k : metrics::kernel_profile()) kernels.push_back(k.kernel);
  metrics::set_profiling(false);
  EXPECT_TRUE(more::Near(want, got, 1e-5, 1e-6));
  auto ran = [&](const std::string& what) {
    return std::any_of(kernels.begin(), kernels.end(),
                       [&](const std::string& k) { return k.find(what) != std::string::npos; });
  };
  EXPECT_TRUE(ran("Matmul f32[1,16]")) << ::testing::PrintToString(kernels);
  EXPECT_FALSE(ran("Matmul f32[5,16]")) << ::testing::PrintToString(kernels);
}

}  // namespace
}  // namespace lazycl
