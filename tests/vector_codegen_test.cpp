// Which generated CPU kernels take Emitter's vector mode (16 f32 lanes at a time), checked on
// their OpenCL C: a matmul's epilogue on whole panels (lc_epilogue16, and lc_prefetch16 for the
// block ahead) and reductions that keep the last dim (16 columns per work-item). The values
// of both are checked against the host in ops_more_test (MatmulEpiloguesMatchHost,
// ReductionsThatKeepTheLastDimMatchHost), under both codegen strategies.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/ir.h"
#include "ir_test_util.h"
#include "kernels/codegen.h"
#include "kernels/emitter.h"
#include "kernels/lower.h"
#include "kernels/packed_params.h"

namespace lazycl::kernels {
namespace {

using ir::NodePtr;
using ir::Op;
using test::Ok;

BufferRef Param(int i) { return BufferRef{BufferRef::Kind::kParam, i}; }

bool Has(const std::string& source, const std::string& what) {
  return source.find(what) != std::string::npos;
}

// [m, k] @ [k, n], both contiguous parameters 0 and 1.
struct Product {
  NodePtr a, b, c;
  StridedOperand sa, sb;
};

Product MakeProduct(int64_t m, int64_t k, int64_t n) {
  Product p;
  p.a = ir::MakeBuffer(nullptr, DType::f32, {m, k});
  p.b = ir::MakeBuffer(nullptr, DType::f32, {k, n});
  p.c = Ok(ir::MakeMatmul(p.a, p.b));
  p.sa = StridedOperand{Param(0), 0, 0, k, 1, 0, 0};
  p.sb = StridedOperand{Param(1), 0, 0, n, 1, 0, 0};
  return p;
}

// A work-item takes several panels of a product with a row-major B or a transposed A (a view:
// rows 1 apart, k m apart), where that leaves work-items for every core, and packs a transposed
// A once per pass for them (matmul_cpu.cl's LC_PANELS, LC_APACK); B^T with a row-major A, a
// product too small to share, and a group of products (its panels are other products') keep one
// panel per work-item. The values are checked on every blocking in matmul_tune_test.
TEST(VectorCodegen, MatmulSharesRowsOfAOverSeveralPanels) {
  Target target;
  target.compute_units = 2;
  auto emit = [&](int64_t m, int64_t k, int64_t n, bool ta, bool tb = false) {
    Product p = MakeProduct(m, k, n);
    if (ta) p.sa = StridedOperand{Param(0), 0, 0, 1, m, 0, 0};
    if (tb) p.sb = StridedOperand{Param(1), 0, 0, 1, k, 0, 0};
    return EmitMatmul(*p.c, BufferRef{BufferRef::Kind::kOutput, 0}, p.sa, p.sb, target);
  };
  const KernelSpec packed = emit(2048, 2048, 2048, true);
  EXPECT_TRUE(Has(packed.options, "-DLC_PANELS")) << packed.options;
  EXPECT_TRUE(Has(packed.options, "-DLC_APACK=128")) << packed.options;
  ASSERT_EQ(packed.launches.size(), 1u);
  EXPECT_EQ(packed.launches[0].global[0], 16u);          // 2048 rows, 128 per work-item
  EXPECT_EQ(packed.launches[0].global[1], 8u);           // 64 panels of 32 columns, 8 per work-item
  EXPECT_EQ(packed.args.back().fields.back().value, 8);  // np
  const KernelSpec nn = emit(2048, 2048, 2048, false);
  EXPECT_TRUE(Has(nn.options, "-DLC_PANELS")) << nn.options;
  EXPECT_FALSE(Has(nn.options, "LC_APACK")) << nn.options;
  // 256 rows: 2 row groups, so 2 panels per work-item keep 32 work-items.
  EXPECT_EQ(emit(256, 1024, 1024, false).args.back().fields.back().value, 2);
  EXPECT_FALSE(Has(emit(2048, 2048, 2048, false, true).options, "LC_PANELS"));
  // B^T takes all of M while a pass's rows of A (here 2048 x 256 floats, 2 MiB) fill at most a
  // quarter of the device's cache; past that the tuned rows over several panels, as A B.
  target.cache_bytes = 8 << 20;
  const KernelSpec bt_whole = emit(2048, 2048, 2048, false, true);
  EXPECT_FALSE(Has(bt_whole.options, "LC_PANELS")) << bt_whole.options;
  EXPECT_EQ(bt_whole.launches[0].global[0], 1u);  // all 2048 rows in one work-item
  target.cache_bytes = (8 << 20) - 1;
  const KernelSpec bt_panels = emit(2048, 2048, 2048, false, true);
  EXPECT_TRUE(Has(bt_panels.options, "-DLC_PANELS")) << bt_panels.options;
  EXPECT_FALSE(Has(bt_panels.options, "LC_APACK")) << bt_panels.options;
  EXPECT_EQ(bt_panels.launches[0].global[0], 16u);  // 128 rows per work-item
  target.cache_bytes = 0;
  EXPECT_FALSE(Has(emit(33, 65, 40, true).options, "LC_PANELS"));
  EXPECT_TRUE(Has(packed.options, "-DKB=256")) << packed.options;
  // No more local memory than the device has: the pass depth of A^T halves until the pack fits
  // (48 KiB: 64 rows of A^T and of the panel, 40 KiB); where not even 64 fit, the panels are
  // still shared, A^T read in place, at the tuned depth.
  target.local_mem_bytes = 48 * 1024;
  const KernelSpec small_local = emit(2048, 2048, 2048, true);
  EXPECT_TRUE(Has(small_local.options, "-DLC_PANELS")) << small_local.options;
  EXPECT_TRUE(Has(small_local.options, "-DLC_APACK=128")) << small_local.options;
  EXPECT_TRUE(Has(small_local.options, "-DKB=64 ")) << small_local.options;
  target.local_mem_bytes = 32 * 1024;
  const KernelSpec tiny_local = emit(2048, 2048, 2048, true);
  EXPECT_TRUE(Has(tiny_local.options, "-DLC_PANELS")) << tiny_local.options;
  EXPECT_FALSE(Has(tiny_local.options, "LC_APACK")) << tiny_local.options;
  EXPECT_TRUE(Has(tiny_local.options, "-DKB=256")) << tiny_local.options;
  target.local_mem_bytes = 0;
  // A deeper tuned panel (the tuner times A B only): A^T packs at half of it, A B keeps it.
  target.matmul.kb = 512;  // 512 * (128 + 32) floats: 320 KiB, past kMatmulPackBytes
  const KernelSpec deep = emit(2048, 2048, 2048, true);
  EXPECT_TRUE(Has(deep.options, "-DLC_APACK=128")) << deep.options;
  EXPECT_TRUE(Has(deep.options, "-DKB=256")) << deep.options;
  EXPECT_TRUE(Has(emit(2048, 2048, 2048, false).options, "-DKB=512")) << deep.options;
  target.matmul.kb = 256;
  // At most 256 columns per work-item: 16 panels of 16.
  target.matmul = MatmulBlocking{8, 6, 16, 256, 126};
  const KernelSpec narrow = emit(2048, 2048, 2048, true);
  EXPECT_TRUE(Has(narrow.options, "-DLC_APACK=126")) << narrow.options;
  EXPECT_EQ(narrow.args.back().fields.back().value, 16);
  EXPECT_EQ(narrow.launches[0].global[1], 8u);  // 128 panels of 16 columns, 16 per work-item
  target.matmul = MatmulBlocking{};

  Product p = MakeProduct(2048, 2048, 2048);
  NodePtr b2 = ir::MakeBuffer(nullptr, DType::f32, {2048, 2048});
  NodePtr c2 = Ok(ir::MakeMatmul(p.a, b2));
  const KernelSpec group = EmitMatmulGroup(
      {p.c.get(), c2.get()},
      {BufferRef{BufferRef::Kind::kOutput, 0}, BufferRef{BufferRef::Kind::kOutput, 1}}, p.sa,
      {p.sb, StridedOperand{Param(2), 0, 0, 2048, 1, 0, 0}}, target);
  EXPECT_FALSE(Has(group.options, "LC_PANELS")) << group.options;
  EXPECT_EQ(group.launches[0].global[1], 128u);  // every panel of both products
  // The buffers (A, B, C, then B and C of the second product), then every integer as one struct:
  // the first product's 21, and the second's views of B and C and its N.
  ASSERT_EQ(group.args.size(), 6u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(group.args[i].kind, KernelArgSpec::Kind::kBuffer);
  EXPECT_EQ(group.args[5].kind, KernelArgSpec::Kind::kPack);
  EXPECT_EQ(group.args[5].fields.size(), 21u + 12u);
  EXPECT_EQ(group.args[5].fields.back().value, 2048);  // the second product's N
}

TEST(VectorCodegen, MatmulEpilogueWithAVectorFormRunsOnWholePanels) {
  const Product p = MakeProduct(64, 32, 48);
  const ir::Shape shape = {64, 48};
  // relu(acc + bias): the bias is an Expand that keeps the last dim.
  NodePtr bias = ir::MakeBuffer(nullptr, DType::f32, {48});
  NodePtr biased = Ok(
      ir::MakeBinary(Op::kAdd, p.c, Ok(ir::MakeExpand(Ok(ir::MakeReshape(bias, {1, 48})), shape))));
  NodePtr relu = Ok(ir::MakeUnary(Op::kRelu, biased));
  InputMap inputs = {{p.a.get(), Param(0)}, {p.b.get(), Param(1)}, {bias.get(), Param(2)}};
  Target target;
  KernelSpec spec = EmitMatmul(*p.c, BufferRef{BufferRef::Kind::kOutput, 0}, p.sa, p.sb, target,
                               relu.get(), &inputs);
  EXPECT_TRUE(Has(spec.source, "#define LC_EPILOGUE16 1")) << spec.source;
  EXPECT_TRUE(Has(spec.source, "float16 lc_epilogue16(")) << spec.source;
  EXPECT_TRUE(Has(spec.source, "void lc_prefetch16(")) << spec.source;
  EXPECT_TRUE(Has(spec.source, "LC_PREFETCH(")) << spec.source;
  EXPECT_TRUE(Has(spec.source, " lc_epilogue(")) << spec.source;  // the edges
  // The generated functions are compiled uncontracted (a * b + c rounded twice, as on the host)
  // and the template after them with the default contraction.
  const size_t off = spec.source.find("#pragma OPENCL FP_CONTRACT OFF");
  const size_t on = spec.source.find("#pragma OPENCL FP_CONTRACT ON");
  ASSERT_NE(off, std::string::npos) << spec.source;
  ASSERT_NE(on, std::string::npos) << spec.source;
  for (const char* f : {"float16 lc_epilogue16(", " lc_epilogue(", "void lc_prefetch16("}) {
    const size_t at = spec.source.find(f);
    EXPECT_TRUE(off < at && at < on) << f << " is not between the pragmas:\n" << spec.source;
  }
  EXPECT_LT(on, spec.source.find("__kernel void matmul_cpu(")) << spec.source;

  // relu's gradient: a comparison of a stored activation at the element's own index.
  NodePtr h = ir::MakeBuffer(nullptr, DType::f32, shape);
  NodePtr positive = Ok(ir::MakeBinary(
      Op::kGt, h, Ok(ir::MakeExpand(ir::MakeConstant(0, DType::f32, {1, 1}), shape))));
  NodePtr masked = Ok(ir::MakeWhere(
      positive, p.c, Ok(ir::MakeExpand(ir::MakeConstant(0, DType::f32, {1, 1}), shape))));
  InputMap with_h = {{p.a.get(), Param(0)}, {p.b.get(), Param(1)}, {h.get(), Param(2)}};
  spec = EmitMatmul(*p.c, BufferRef{BufferRef::Kind::kOutput, 0}, p.sa, p.sb, target, masked.get(),
                    &with_h);
  EXPECT_TRUE(Has(spec.source, "float16 lc_epilogue16(")) << spec.source;

  // SwiGLU's gate, silu(acc) * g: silu has a vector form too.
  NodePtr gate = Ok(ir::MakeBinary(Op::kMul, Ok(ir::MakeUnary(Op::kSilu, p.c)), h));
  spec = EmitMatmul(*p.c, BufferRef{BufferRef::Kind::kOutput, 0}, p.sa, p.sb, target, gate.get(),
                    &with_h);
  EXPECT_TRUE(Has(spec.source, "float16 lc_epilogue16(")) << spec.source;

  // The GPU strategy has no panels: the scalar epilogue only.
  Target gpu;
  gpu.cpu = false;
  spec = EmitMatmul(*p.c, BufferRef{BufferRef::Kind::kOutput, 0}, p.sa, p.sb, gpu, relu.get(),
                    &inputs);
  EXPECT_FALSE(Has(spec.source, "#define LC_EPILOGUE16")) << spec.source;
  EXPECT_TRUE(Has(spec.source, "lc_epilogue(")) << spec.source;
}

TEST(VectorCodegen, MatmulEpilogueWithoutAVectorFormStaysScalar) {
  const Product p = MakeProduct(64, 32, 48);
  const ir::Shape shape = {64, 48};
  // tanh has no 16-lane form (VectorFriendly's list).
  NodePtr curved = Ok(ir::MakeUnary(Op::kTanh, p.c));
  InputMap inputs = {{p.a.get(), Param(0)}, {p.b.get(), Param(1)}};
  InputMap with_acc = inputs;
  with_acc[p.c.get()] = Param(3);
  EXPECT_FALSE(VectorFriendly(*curved, with_acc, shape, 0));
  Target target;
  const KernelSpec spec = EmitMatmul(*p.c, BufferRef{BufferRef::Kind::kOutput, 0}, p.sa, p.sb,
                                     target, curved.get(), &inputs);
  EXPECT_FALSE(Has(spec.source, "#define LC_EPILOGUE16")) << spec.source;
  EXPECT_TRUE(Has(spec.source, "lc_epilogue(")) << spec.source;
}

// A per-row value broadcast along the last dim ([64, 1] over [64, 48]) is one scalar for the 16
// lanes of one row: read once at the row and splatted, in an epilogue and in a column reduction
// (RMSNorm's weight gradient, sum over rows of dy * x * rsqrt(ms), took the scalar kernel at
// 2.8 GB/s).
TEST(VectorCodegen, APerRowValueBroadcastAlongTheRowIsOneScalarForTheLanes) {
  const Product p = MakeProduct(64, 32, 48);
  const ir::Shape shape = {64, 48};
  NodePtr scale = ir::MakeBuffer(nullptr, DType::f32, {64, 1});
  NodePtr scaled = Ok(ir::MakeBinary(Op::kMul, p.c, Ok(ir::MakeExpand(scale, shape))));
  InputMap inputs = {{p.a.get(), Param(0)}, {p.b.get(), Param(1)}, {scale.get(), Param(2)}};
  InputMap with_acc = inputs;  // as EmitMatmul asks: the accumulator is an input
  with_acc[p.c.get()] = Param(3);
  EXPECT_TRUE(VectorFriendly(*scaled, with_acc, shape, 0));
  Target target;
  KernelSpec spec = EmitMatmul(*p.c, BufferRef{BufferRef::Kind::kOutput, 0}, p.sa, p.sb, target,
                               scaled.get(), &inputs);
  EXPECT_TRUE(Has(spec.source, "float16 lc_epilogue16(")) << spec.source;
  EXPECT_TRUE(Has(spec.source, "(float16)(")) << spec.source;  // the splat

  NodePtr x = ir::MakeBuffer(nullptr, DType::f32, shape);
  NodePtr stat = ir::MakeBuffer(nullptr, DType::f32, {64, 1});
  NodePtr weighted = Ok(
      ir::MakeBinary(Op::kMul, x, Ok(ir::MakeExpand(Ok(ir::MakeUnary(Op::kRsqrt, stat)), shape))));
  NodePtr column_sum = Ok(ir::MakeReduce(Op::kSum, weighted, {0}));
  InputMap column_inputs = {{x.get(), Param(0)}, {stat.get(), Param(1)}};
  spec = EmitReduce(*column_sum, BufferRef{BufferRef::Kind::kOutput, 0}, column_inputs, 1, target);
  EXPECT_TRUE(Has(spec.summary, "16 columns per work-item")) << spec.summary;
  EXPECT_TRUE(Has(spec.source, "vload16")) << spec.source;

  // Not across rows: a row kernel's lanes along a row of two reduced dims may cross the last
  // dim's rows, so there the broadcast value is not one scalar.
  const ir::Shape cube = {4, 8, 48};
  NodePtr y = ir::MakeBuffer(nullptr, DType::f32, cube);
  NodePtr per_row = ir::MakeBuffer(nullptr, DType::f32, {4, 8, 1});
  NodePtr mixed = Ok(ir::MakeBinary(Op::kMul, y, Ok(ir::MakeExpand(per_row, cube))));
  InputMap cube_inputs = {{y.get(), Param(0)}, {per_row.get(), Param(1)}};
  EXPECT_FALSE(VectorFriendly(*mixed, cube_inputs, cube, 2));
}

TEST(VectorCodegen, ReductionKeepingTheLastDimTakesSixteenColumnsPerWorkItem) {
  NodePtr x = ir::MakeBuffer(nullptr, DType::f32, {100, 40});
  InputMap inputs = {{x.get(), Param(0)}};
  NodePtr s = Ok(ir::MakeReduce(Op::kSum, x, {0}));
  Target target;
  KernelSpec spec = EmitReduce(*s, BufferRef{BufferRef::Kind::kOutput, 0}, inputs, 1, target);
  EXPECT_TRUE(Has(spec.summary, "16 columns per work-item")) << spec.summary;
  EXPECT_TRUE(Has(spec.source, "vload16")) << spec.source;
  EXPECT_TRUE(Has(spec.source, "vstore16")) << spec.source;

  // Not for the last dim itself, rows shorter than 16, or the GPU strategy.
  NodePtr rows = Ok(ir::MakeReduce(Op::kSum, x, {1}));
  spec = EmitReduce(*rows, BufferRef{BufferRef::Kind::kOutput, 0}, inputs, 1, target);
  EXPECT_FALSE(Has(spec.summary, "16 columns")) << spec.summary;
  NodePtr narrow = ir::MakeBuffer(nullptr, DType::f32, {100, 15});
  InputMap narrow_inputs = {{narrow.get(), Param(0)}};
  spec = EmitReduce(*Ok(ir::MakeReduce(Op::kSum, narrow, {0})),
                    BufferRef{BufferRef::Kind::kOutput, 0}, narrow_inputs, 1, target);
  EXPECT_FALSE(Has(spec.summary, "16 columns")) << spec.summary;
  Target gpu;
  gpu.cpu = false;
  spec = EmitReduce(*s, BufferRef{BufferRef::Kind::kOutput, 0}, inputs, 1, gpu);
  EXPECT_FALSE(Has(spec.summary, "16 columns")) << spec.summary;
}

// In a row kernel (one reduced dim) an Expand that keeps the last dim is read 16 elements at a
// time too: RMSNorm's weight, x * rsqrt(mean(x^2)) * w, runs in the vector loop.
TEST(VectorCodegen, RowKernelReadsAWeightAlongTheRowAsAVector) {
  const ir::Shape shape = {8, 64};
  NodePtr x = ir::MakeBuffer(nullptr, DType::f32, shape);
  NodePtr w = ir::MakeBuffer(nullptr, DType::f32, {64});
  NodePtr ss = Ok(ir::MakeReduce(Op::kSum, Ok(ir::MakeBinary(Op::kMul, x, x)), {1}));
  InputMap inputs = {{x.get(), Param(0)}, {w.get(), Param(1)}, {ss.get(), Param(2)}};
  NodePtr normed = Ok(ir::MakeBinary(Op::kMul, x, Ok(ir::MakeExpand(ss, shape))));
  NodePtr weighted = Ok(
      ir::MakeBinary(Op::kMul, normed, Ok(ir::MakeExpand(Ok(ir::MakeReshape(w, {1, 64})), shape))));
  EXPECT_TRUE(VectorFriendly(*weighted, inputs, shape, 1));
  // Over two reduced dims the 16 elements may cross a row of the last dim: not there.
  const ir::Shape shape3 = {2, 4, 64};
  NodePtr x3 = ir::MakeBuffer(nullptr, DType::f32, shape3);
  NodePtr w3 = Ok(ir::MakeExpand(Ok(ir::MakeReshape(w, {1, 1, 64})), shape3));
  InputMap inputs3 = {{x3.get(), Param(0)}, {w.get(), Param(1)}};
  EXPECT_FALSE(VectorFriendly(*Ok(ir::MakeBinary(Op::kMul, x3, w3)), inputs3, shape3, 2));
  EXPECT_TRUE(VectorFriendly(*Ok(ir::MakeBinary(Op::kMul, x3, w3)), inputs3, shape3, 1));
}

// A small elementwise kernel (below the size where a second, guarded launch pays) runs the
// unguarded entry point alone when its size is whole work-groups, since PoCL vectorises only an
// unguarded work-item loop; otherwise the guarded one alone.
TEST(VectorCodegen, SmallElementwiseKernelOfWholeGroupsRunsUnguarded) {
  Target target;
  for (const int64_t n : {int64_t{64} * 352, int64_t{1000}}) {
    NodePtr x = ir::MakeBuffer(nullptr, DType::f32, {n});
    InputMap inputs = {{x.get(), Param(0)}};
    const KernelSpec spec = EmitElementwise(*Ok(ir::MakeUnary(Op::kSilu, x)),
                                            BufferRef{BufferRef::Kind::kOutput, 0}, inputs, target);
    ASSERT_EQ(spec.launches.size(), 2u);
    const bool whole = n % 64 == 0;
    EXPECT_EQ(spec.launches[0].global, (std::vector<size_t>{whole ? static_cast<size_t>(n) : 0}))
        << n;
    EXPECT_EQ(spec.launches[1].global, (std::vector<size_t>{whole ? 0u : 1024u})) << n;
  }
}

// An elementwise kernel over views with rows of whole vectors runs a row per work-group; a cat
// along the last dim runs a piece at a time, each reading its operand with no clamp: pieces of
// one width in one launch (each work-item computes its column of each), others one launch each.
TEST(VectorCodegen, CatOfSlicesRunsAPieceAtATimeWithoutClamps) {
  NodePtr x = ir::MakeBuffer(nullptr, DType::f32, {4, 64});
  InputMap inputs = {{x.get(), Param(0)}};
  // cat(x[:, 32:], x[:, :32]) as the sum of two pads.
  NodePtr hi = Ok(ir::MakePad(Ok(ir::MakeSlice(x, {0, 32}, {4, 32})), {0, 0}, {4, 64}, -0.0));
  NodePtr lo = Ok(ir::MakePad(Ok(ir::MakeSlice(x, {0, 0}, {4, 32})), {0, 32}, {4, 64}, -0.0));
  NodePtr swapped = Ok(ir::MakeBinary(Op::kAdd, hi, lo));
  Target target;
  KernelSpec spec =
      EmitElementwise(*swapped, BufferRef{BufferRef::Kind::kOutput, 0}, inputs, target);
  EXPECT_TRUE(Has(spec.summary, "a row per work-group, 2 column ranges in one launch"))
      << spec.summary;
  ASSERT_EQ(spec.launches.size(), 1u);
  EXPECT_EQ(spec.launches[0].global, (std::vector<size_t>{32, 4}));
  ASSERT_EQ(spec.launches[0].extra_args.size(), 2u);  // each piece's first column
  EXPECT_EQ(spec.launches[0].extra_args[0].value, 0);
  EXPECT_EQ(spec.launches[0].extra_args[1].value, 32);
  EXPECT_FALSE(Has(spec.source, "< 0 ? 0 :")) << spec.source;  // no clamped index
  // Pieces of different widths (16 and 48 columns): a launch each.
  NodePtr x2 = ir::MakeBuffer(nullptr, DType::f32, {4, 64});
  InputMap inputs2 = {{x2.get(), Param(0)}};
  NodePtr head = Ok(ir::MakePad(Ok(ir::MakeSlice(x2, {0, 48}, {4, 16})), {0, 0}, {4, 64}, -0.0));
  NodePtr rest = Ok(ir::MakePad(Ok(ir::MakeSlice(x2, {0, 0}, {4, 48})), {0, 16}, {4, 64}, -0.0));
  spec = EmitElementwise(*Ok(ir::MakeBinary(Op::kAdd, head, rest)),
                         BufferRef{BufferRef::Kind::kOutput, 0}, inputs2, target);
  EXPECT_TRUE(Has(spec.summary, "a row per work-group, 2 column ranges)")) << spec.summary;
  ASSERT_EQ(spec.launches.size(), 2u);
  EXPECT_EQ(spec.launches[0].global, (std::vector<size_t>{16, 4}));
  EXPECT_EQ(spec.launches[1].global, (std::vector<size_t>{48, 4}));
  // Work-groups of several rows (up to 256 work-items; PoCL pays per group): all 4 here.
  EXPECT_EQ(spec.launches[1].local, (std::vector<size_t>{16, 4}));
  // A cat under a permute that keeps the last dim (the rotary embedding's gradient, stored as
  // [b, t, h, d]) is found through it: pieces again, 8 rows of 32 per group over 3 x 4096 rows,
  // and one row per group over an odd count (3 x 7).
  for (const int64_t rows : {int64_t{4096}, int64_t{7}}) {
    NodePtr z = ir::MakeBuffer(nullptr, DType::f32, {rows, 3, 64});
    InputMap z_inputs = {{z.get(), Param(0)}};
    NodePtr zh = Ok(ir::MakePad(Ok(ir::MakeSlice(z, {0, 0, 32}, {rows, 3, 32})), {0, 0, 0},
                                {rows, 3, 64}, -0.0));
    NodePtr zl = Ok(ir::MakePad(Ok(ir::MakeSlice(z, {0, 0, 0}, {rows, 3, 32})), {0, 0, 32},
                                {rows, 3, 64}, -0.0));
    NodePtr moved = Ok(ir::MakePermute(Ok(ir::MakeBinary(Op::kAdd, zh, zl)), {1, 0, 2}));
    spec = EmitElementwise(*moved, BufferRef{BufferRef::Kind::kOutput, 0}, z_inputs, target);
    EXPECT_TRUE(Has(spec.summary, "2 column ranges in one launch")) << spec.summary;
    ASSERT_EQ(spec.launches.size(), 1u);
    EXPECT_EQ(spec.launches[0].local,
              (std::vector<size_t>{32, rows == 4096 ? size_t{8} : size_t{1}}))
        << rows;
  }
  // Pieces that are not whole vectors keep one launch, with clamps.
  NodePtr y = ir::MakeBuffer(nullptr, DType::f32, {4, 48});
  InputMap y_inputs = {{y.get(), Param(0)}};
  NodePtr a = Ok(ir::MakePad(Ok(ir::MakeSlice(y, {0, 0}, {4, 24})), {0, 0}, {4, 48}, -0.0));
  NodePtr b = Ok(ir::MakePad(Ok(ir::MakeSlice(y, {0, 24}, {4, 24})), {0, 24}, {4, 48}, -0.0));
  spec = EmitElementwise(*Ok(ir::MakeBinary(Op::kAdd, a, b)),
                         BufferRef{BufferRef::Kind::kOutput, 0}, y_inputs, target);
  EXPECT_TRUE(Has(spec.summary, "a row per work-group)")) << spec.summary;
  EXPECT_EQ(spec.launches.size(), 1u);
  // The GPU strategy: one work-item per element.
  Target gpu;
  gpu.cpu = false;
  spec = EmitElementwise(*swapped, BufferRef{BufferRef::Kind::kOutput, 0}, inputs, gpu);
  EXPECT_FALSE(Has(spec.summary, "a row per work-group")) << spec.summary;
}

// An entry point's integers (sizes, divisors, offsets) reach the kernel as vectors of longs, one
// argument each (PoCL copies every argument of a launch apart); the entry declares them again
// under their names and types. Buffers and scalars stay arguments of their own, in order.
TEST(VectorCodegen, IntegerArgumentsArePackedIntoVectorsOfLongs) {
  auto integer = [](KernelArgSpec::Kind kind, int64_t value) {
    KernelArgSpec a;
    a.kind = kind;
    a.value = value;
    return a;
  };
  KernelArgSpec buffer;
  buffer.kind = KernelArgSpec::Kind::kBuffer;
  KernelArgSpec scalar;
  scalar.kind = KernelArgSpec::Kind::kScalar;
  scalar.scalar = 0;
  // One integer stays as it is.
  PackedParams one = PackIntegerParams({"__global float* restrict out0", "const int s0"},
                                       {buffer, integer(KernelArgSpec::Kind::kInt32, 7)});
  EXPECT_EQ(one.params, "__global float* restrict out0,\n    const int s0");
  EXPECT_EQ(one.unpack, "");
  ASSERT_EQ(one.args.size(), 2u);
  EXPECT_EQ(one.args[1].kind, KernelArgSpec::Kind::kInt32);
  // Three integers around a scalar: one long4, its last lane 0; narrow kinds become 64-bit.
  KernelArgSpec offset = integer(KernelArgSpec::Kind::kOffset, 5);
  PackedParams three =
      PackIntegerParams({"__global float* restrict out0", "const int s0", "const float sc0",
                         "const uint d1m", "const long out0_off"},
                        {buffer, integer(KernelArgSpec::Kind::kInt32, 7), scalar,
                         integer(KernelArgSpec::Kind::kInt32, -5), offset});
  EXPECT_EQ(three.params,
            "__global float* restrict out0,\n    const float sc0,\n    const long4 lc_i0");
  EXPECT_EQ(three.unpack,
            "  const int s0 = lc_i0.s0;\n  const uint d1m = lc_i0.s1;\n"
            "  const long out0_off = lc_i0.s2;\n");
  ASSERT_EQ(three.args.size(), 3u);
  EXPECT_EQ(three.args[1].kind, KernelArgSpec::Kind::kScalar);
  const KernelArgSpec& pack = three.args[2];
  ASSERT_EQ(pack.kind, KernelArgSpec::Kind::kPack);
  ASSERT_EQ(pack.fields.size(), 4u);
  EXPECT_EQ(pack.fields[0].kind, KernelArgSpec::Kind::kInt64);
  EXPECT_EQ(pack.fields[0].value, 7);
  EXPECT_EQ(pack.fields[1].kind, KernelArgSpec::Kind::kInt64);
  EXPECT_EQ(pack.fields[1].value, -5);
  EXPECT_EQ(pack.fields[2].kind, KernelArgSpec::Kind::kOffset);
  EXPECT_TRUE(pack.fields[2].wide);
  EXPECT_EQ(pack.fields[3].value, 0);
  // Seventeen: a long16 and a long2 (lanes .s0 to .sf, then the next vector).
  std::vector<std::string> decls;
  std::vector<KernelArgSpec> args;
  for (int i = 0; i < 17; ++i) {
    decls.push_back(absl::StrCat("const long s", i));
    args.push_back(integer(KernelArgSpec::Kind::kInt64, 100 + i));
  }
  PackedParams many = PackIntegerParams(decls, args);
  EXPECT_EQ(many.params, "const long16 lc_i0,\n    const long2 lc_i1");
  EXPECT_TRUE(Has(many.unpack, "const long s15 = lc_i0.sf;\n  const long s16 = lc_i1.s0;\n"))
      << many.unpack;
  ASSERT_EQ(many.args.size(), 2u);
  EXPECT_EQ(many.args[0].fields.size(), 16u);
  EXPECT_EQ(many.args[1].fields.size(), 2u);
  EXPECT_EQ(many.args[1].fields[0].value, 116);
  // What Emitter makes of it: an elementwise kernel over a broadcast of a transposed view
  // declares its sizes from one vector argument.
  NodePtr x = ir::MakeBuffer(nullptr, DType::f32, {3, 5, 7});
  NodePtr y = ir::MakeBuffer(nullptr, DType::f32, {7, 5, 3});
  InputMap inputs = {{x.get(), Param(0)}, {y.get(), Param(1)}};
  NodePtr sum = Ok(ir::MakeBinary(Op::kAdd, x, Ok(ir::MakePermute(y, {2, 1, 0}))));
  Target target;
  const KernelSpec spec =
      EmitElementwise(*sum, BufferRef{BufferRef::Kind::kOutput, 0}, inputs, target);
  EXPECT_TRUE(Has(spec.source, " lc_i0) {\n")) << spec.source;
  int packs = 0;
  for (const KernelArgSpec& a : spec.args) {
    EXPECT_NE(a.kind, KernelArgSpec::Kind::kInt32);
    EXPECT_NE(a.kind, KernelArgSpec::Kind::kInt64);
    packs += a.kind == KernelArgSpec::Kind::kPack ? 1 : 0;
  }
  EXPECT_EQ(packs, 1);
}

}  // namespace
}  // namespace lazycl::kernels
