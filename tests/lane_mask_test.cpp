// kernels/emitter.h's lane masks: a Where whose condition compares positions (the causal mask
// col <= row) runs in a row kernel's vector loop, 16 positions at a time, instead of sending
// the whole row to the scalar loop. Checked on the generated OpenCL C of the causal softmax;
// fusion_test checks its values on the device.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/ir.h"
#include "ir_test_util.h"
#include "kernels/codegen.h"
#include "kernels/emitter.h"

namespace lazycl::kernels {
namespace {

using ir::NodePtr;
using ir::Op;
using test::Ok;

// col <= row over [t, t] from two iotas, broadcast to `shape`.
NodePtr CausalMask(int64_t t, const ir::Shape& shape) {
  NodePtr row =
      Ok(ir::MakeExpand(Ok(ir::MakeReshape(ir::MakeIota(DType::i32, t), {t, 1})), {t, t}));
  NodePtr col =
      Ok(ir::MakeExpand(Ok(ir::MakeReshape(ir::MakeIota(DType::i32, t), {1, t})), {t, t}));
  NodePtr le = Ok(ir::MakeBinary(Op::kLe, col, row));
  return Ok(ir::MakeExpand(Ok(ir::MakeReshape(le, {1, 1, t, t})), shape));
}

TEST(LaneMask, CausalMaskIsLaneFriendly) {
  const ir::Shape shape = {2, 3, 64, 64};
  NodePtr scores = ir::MakeBuffer(nullptr, DType::f32, shape);
  InputMap inputs = {{scores.get(), BufferRef{}}};
  NodePtr mask = CausalMask(64, shape);
  NodePtr neg = Ok(ir::MakeExpand(ir::MakeConstant(-INFINITY, DType::f32, {1, 1, 1, 1}), shape));
  NodePtr masked = Ok(ir::MakeWhere(mask, scores, neg));
  EXPECT_TRUE(LaneFriendly(*mask, inputs));
  EXPECT_TRUE(VectorFriendly(*masked, inputs, shape, 1));
  // Not over two reduced dims, and not a condition read from memory.
  EXPECT_FALSE(VectorFriendly(*masked, inputs, shape, 2));
  NodePtr stored = ir::MakeBuffer(nullptr, DType::boolean, shape);
  InputMap with_stored = {{scores.get(), BufferRef{}}, {stored.get(), BufferRef{}}};
  EXPECT_FALSE(LaneFriendly(*stored, with_stored));
  EXPECT_FALSE(VectorFriendly(*Ok(ir::MakeWhere(stored, scores, neg)), with_stored, shape, 1));
  // Values compared at the element's own index (max's gradient, x == max) are a mask too.
  NodePtr max = Ok(ir::MakeReduce(Op::kMax, scores, {3}));
  NodePtr at_max = Ok(ir::MakeBinary(Op::kEq, scores, Ok(ir::MakeExpand(max, shape))));
  InputMap with_max = {{scores.get(), BufferRef{}}, {max.get(), BufferRef{}}};
  NodePtr one = Ok(ir::MakeExpand(ir::MakeConstant(1, DType::f32, {1, 1, 1, 1}), shape));
  EXPECT_TRUE(VectorFriendly(*Ok(ir::MakeWhere(at_max, one, neg)), with_max, shape, 1));
  // Positions compared with a float are not a lane mask.
  NodePtr f = Ok(ir::MakeCast(ir::MakeIota(DType::i32, 64), DType::f32));
  EXPECT_FALSE(LaneFriendly(*Ok(ir::MakeBinary(Op::kLe, f, f)), inputs));
}

TEST(LaneMask, CausalSoftmaxRowKernelSelectsInItsVectorLoop) {
  const ir::Shape shape = {2, 3, 64, 64};
  NodePtr scores = ir::MakeBuffer(nullptr, DType::f32, shape);
  InputMap inputs = {{scores.get(), BufferRef{BufferRef::Kind::kParam, 0}}};
  NodePtr neg = Ok(ir::MakeExpand(ir::MakeConstant(-INFINITY, DType::f32, {1, 1, 1, 1}), shape));
  NodePtr x = Ok(ir::MakeWhere(CausalMask(64, shape), scores, neg));
  NodePtr max = Ok(ir::MakeReduce(Op::kMax, x, {3}));
  NodePtr minus_max =
      Ok(ir::MakeBinary(Op::kMul, max, ir::MakeConstant(-1, DType::f32, {2, 3, 64, 1})));
  NodePtr root = Ok(ir::MakeBinary(Op::kAdd, x, Ok(ir::MakeExpand(minus_max, shape))));
  Target target;
  const KernelSpec spec =
      EmitRowKernel(*root, BufferRef{BufferRef::Kind::kOutput, 0}, {max.get()}, inputs, target);
  // The max's vector loop and the row's: float16 values, the mask as an int16 comparison of
  // positions, applied with select.
  EXPECT_NE(spec.source.find("vload16"), std::string::npos) << spec.source;
  EXPECT_NE(spec.source.find("const int16"), std::string::npos) << spec.source;
  EXPECT_NE(spec.source.find("select("), std::string::npos) << spec.source;
}

}  // namespace
}  // namespace lazycl::kernels
