// Matmul strategy (codegen.h, EmitMatmul): a hand-written template (templates/matmul*.cl), with
// an elementwise epilogue that Emitter writes as a function the template calls.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "kernels/cl_text.h"
#include "kernels/codegen.h"
#include "kernels/emitter.h"
#include "kernels/index_reads.h"
#include "kernels/templates.h"

namespace lazycl::kernels {

using ir::Node;
using ir::Shape;

namespace {

// The CPU matmul splits its rows finer while it would have fewer work-items than this, or than
// kMatmulItemsPerUnit per compute unit.
constexpr int64_t kMatmulMinWorkItems = 16;
constexpr int64_t kMatmulItemsPerUnit = 4;
// Columns of C per work-item (matmul_cpu.cl's LC_PANELS: np panels of NR) at most: 8 panels of
// 32, 16 of 16 (a packed A^T shared by as many columns as with 32: under AVX2 code, 8 x 16
// blocks, 2048^3 A^T B 135-150 -> 170-176 GFLOP/s in four of six rounds alternating, the
// same in two; A B unchanged); a packed A^T (LC_APACK) and the B panel take at most
// kMatmulPackBytes of local memory.
constexpr int64_t kMatmulMaxPanelColumns = 256;
constexpr int64_t kMatmulPackBytes = 256 * 1024;
// A B^T takes all of M per work-item while a pass's rows of A fill at most 1/kMatmulWholeMShare
// of the device's cache.
constexpr int64_t kMatmulWholeMShare = 4;

// matmul_cpu.cl's unrolling macros for `b` (the rest of its blocking comes as -D options):
// LC_ROWS(X) = X(0) .. X(MR - 1), LC_VECS(X, i) = X(i, 0) .. X(i, NR / LC_VW - 1).
std::string UnrollMacros(const MatmulBlocking& b) {
  std::string rows, vecs;
  for (int i = 0; i < b.mr; ++i) absl::StrAppend(&rows, " X(", i, ")");
  for (int v = 0; v < b.nr / b.vw; ++v) absl::StrAppend(&vecs, " X(i, ", v, ")");
  return absl::StrCat("#define LC_ROWS(X)", rows, "\n#define LC_VECS(X, i)", vecs, "\n");
}

}  // namespace

bool ValidBlocking(const MatmulBlocking& b) {
  return (b.vw == 4 || b.vw == 8 || b.vw == 16) && (b.nr == 16 || b.nr == 32 || b.nr == 64) &&
         b.nr % b.vw == 0 && b.mr >= 1 && b.mr <= 16 && b.kb >= 16 && b.kb <= 2048 &&
         b.rows >= b.mr && b.rows <= 1024 && b.rows % b.mr == 0;
}

int VectorRegisters(int vw) { return vw >= 16 ? 32 : 16; }

int RowsInRegisters(int vw, int nr, int products) {
  const int vectors = products * (nr / vw);
  return (VectorRegisters(vw) - vectors - 1) / vectors;
}

// Under AVX2 code the former rule (half of 6 rows) held 12 accumulators, 4 B vectors and a
// broadcast in 16 registers: two accumulators lived on the stack, each FMA on them waiting on a
// store and a load, and the char-LM sampling step's FFN product ([64, 128] x two [128, 352])
// took 171-210 us a run at 55-68 GFLOP/s, 42% of the step's device time (`LAZYCL_PROFILE=1`, the
// traced form, POCL_LLVM_CPU_NAME=haswell on a Zen 4), against 88 us with AVX-512 code.
int DualRows(const MatmulBlocking& b) {
  return std::max(1, std::min(b.mr / 2, RowsInRegisters(b.vw, b.nr, 2)));
}

namespace {

// EmitMatmul; `share_panels` false keeps one panel per work-item (a group's panels are its
// products').
KernelSpec Emit(const Node& root, BufferRef out, const StridedOperand& a, const StridedOperand& b,
                const Target& target, const Node* epilogue, const InputMap* inputs,
                const StridedOperand* stored, const SecondProduct* second, bool share_panels) {
  const size_t r = root.shape.size();
  const int64_t m = root.shape[r - 2];
  const int64_t n = root.shape[r - 1];
  const int64_t k = root.operands[0]->shape[r - 1];
  int64_t batches = 1;
  for (size_t d = 0; d + 2 < r; ++d) batches *= root.shape[d];

  // CPU and f32: MR x NR register blocks over a copied B panel (matmul_cpu.cl, blocked as
  // target.matmul says); otherwise 16 x 16 local-memory tiles.
  const bool blocked = target.cpu && root.dtype == DType::f32;
  LAZYCL_CHECK(
      second == nullptr || (blocked && epilogue != nullptr && stored == nullptr &&
                            second->node->shape == root.shape &&
                            second->node->dtype == root.dtype && second->b.col_stride == 1),
      "codegen: invalid dual product %s", ir::NodeString(root).c_str());
  // A dual product holds two sets of accumulators and B vectors: fewer rows per block keep them
  // in the vector registers (DualRows), and a work-item's rows stay a multiple of them.
  MatmulBlocking bl = target.matmul;
  if (second != nullptr) {
    bl.mr = DualRows(bl);
    bl.rows = std::max(bl.mr, bl.rows / bl.mr * bl.mr);
  }
  LAZYCL_CHECK(!blocked || ValidBlocking(bl),
               "codegen: invalid matmul blocking vw=%d mr=%d nr=%d kb=%d rows=%d", bl.vw, bl.mr,
               bl.nr, bl.kb, bl.rows);
  KernelSpec spec;
  spec.source = blocked ? UnrollMacros(bl) + std::string(Template("matmul_cpu.cl"))
                        : std::string(Template("matmul.cl"));
  const std::string t = CType(root.dtype);
  // Off the CPU: 16 x 16 work-items, each computing rb x rb elements of C (matmul.cl's RB) where
  // that still leaves two work-groups per compute unit; 4 x 4 does a quarter of the local-memory
  // reads per multiply-add.
  const int64_t groups_of_64 = (m + 63) / 64 * ((n + 63) / 64) * batches;
  const int rb = !blocked && !target.one_matmul_program &&
                         groups_of_64 >= 2 * std::max(target.compute_units, 4)
                     ? 4
                     : 1;
  if (!blocked) spec.options = absl::StrCat("-DT=", t, " -DTS=16", rb > 1 ? " -DRB=4" : "");
  auto buffer = [](BufferRef ref, bool written) {
    KernelArgSpec s;
    s.kind = KernelArgSpec::Kind::kBuffer;
    s.buffer = ref;
    s.written = written;
    return s;
  };
  auto i64 = [](int64_t v) {
    KernelArgSpec s;
    s.kind = KernelArgSpec::Kind::kInt64;
    s.value = v;
    return s;
  };
  // Offsets of parameters and outputs may move at run time (Graph::bind_offsets).
  auto offset = [&](BufferRef ref, int64_t v) {
    KernelArgSpec s = i64(v);
    if (target.bind_offsets && ref.kind != BufferRef::Kind::kTemp) {
      s.kind = KernelArgSpec::Kind::kOffset;
      s.buffer = ref;
      s.wide = true;
    }
    return s;
  };
  // The templates read batch b of an operand at (b / inner) * group + (b % inner) * stride.
  auto inner = [&](const StridedOperand& s) {
    return i64(s.batch_inner > 0 ? s.batch_inner : std::max<int64_t>(batches, 1));
  };
  spec.args = {buffer(a.buffer, false),
               offset(a.buffer, a.offset),
               i64(a.batch_stride),
               inner(a),
               i64(a.group_stride),
               i64(a.row_stride),
               i64(a.col_stride),
               buffer(b.buffer, false),
               offset(b.buffer, b.offset),
               i64(b.batch_stride),
               inner(b),
               i64(b.group_stride),
               i64(b.row_stride),
               i64(b.col_stride),
               buffer(out, true),
               offset(out, 0),
               i64(stored != nullptr ? stored->batch_stride : m * n),
               i64(stored != nullptr && stored->batch_inner > 0 ? stored->batch_inner
                                                                : std::max<int64_t>(batches, 1)),
               i64(stored != nullptr ? stored->group_stride : 0),
               i64(stored != nullptr ? stored->row_stride : n),
               i64(m),
               i64(n),
               i64(k)};
  if (blocked) {
    // Rows per work-item (matmul_cpu.cl's `mb`, a multiple of MR): many rows share one copy of
    // a B panel, but keep enough work-items for every core.
    const int64_t mr = bl.mr, nr = bl.nr;
    // A B^T (B read in place, transposed): each work-item transposes its panels of B into
    // local memory, so it takes all of M while that leaves enough work-items and a pass's rows
    // of A fit a quarter of the device's cache (kMatmulWholeMShare), which then serves them to
    // every panel. Past that, every panel streamed all of A from memory (2048^3 A B^T: 16 MiB
    // of A a pass over a 16 MiB L3, 127-147 GFLOP/s), and the work-items take the tuned rows
    // over several panels, as A B does: 140 -> 172 GFLOP/s (1.24x, 4 rounds alternating; AVX2
    // code on a 2-core Zen 2 EPYC VM); at 1024^3 (4 MiB a pass) all of M stays (182 against
    // 168).
    const bool b_transposed = b.col_stride != 1 && b.row_stride == 1;
    const int64_t all_rows = (m + mr - 1) / mr * mr;
    const bool whole_m =
        b_transposed &&
        (target.cache_bytes <= 0 ||
         all_rows * std::min<int64_t>(k, bl.kb) * 4 * kMatmulWholeMShare <= target.cache_bytes);
    int64_t rows = whole_m ? all_rows : std::min<int64_t>(bl.rows, all_rows);
    auto work_items = [&](int64_t r) { return (m + r - 1) / r * ((n + nr - 1) / nr) * batches; };
    const int64_t min_items =
        std::max<int64_t>(kMatmulMinWorkItems, kMatmulItemsPerUnit * target.compute_units);
    while (rows > mr && work_items(rows) < min_items) rows = std::max(mr, rows / 2 / mr * mr);
    spec.args.push_back(i64(rows));
    // Several panels per work-item where that leaves enough work-items, and A^T (its rows
    // contiguous, its k apart) packed per pass for them (matmul_cpu.cl's LC_PANELS, LC_APACK).
    const int64_t panels = (n + nr - 1) / nr;
    const int64_t row_groups = (m + rows - 1) / rows;
    int64_t np = std::min<int64_t>(panels, std::max<int64_t>(1, kMatmulMaxPanelColumns / nr));
    while (np > 1 && row_groups * ((panels + np - 1) / np) * batches < 2 * min_items) np /= 2;
    const bool a_transposed = a.row_stride == 1 && a.col_stride != 1 && k > 1;
    const bool several = share_panels && second == nullptr && np >= 2 &&
                         (b.col_stride == 1 || a_transposed || (b_transposed && !whole_m));
    // The pack (KB rows of A^T and the B panel) must fit kMatmulPackBytes and local memory: for
    // A^T the pass depth halves until it does, down to 64. A tuned deeper panel or more rows per
    // work-item (the tuner times A B only) would otherwise read A^T in place: 2048^3 A^T B at
    // 8 x 16, kb 512, 126 rows, 118 GFLOP/s against 150 packed at kb 256 (AVX2 code on a Zen 4).
    // With 252 rows that leaves kb 128; a cap letting it be 256 (320 KiB) made 1024^3 A^T B
    // 10% slower, one leaving 64 (128 KiB) 7% (medians of 10 rounds alternating, AVX2 code on a
    // 2-core Zen 4 EPYC VM).
    auto pack_fits = [&](int64_t depth) {
      const int64_t bytes = depth * (rows + nr) * 4 + (rows + mr - 1) / mr * 64;  // + padding
      return bytes <= kMatmulPackBytes &&
             (target.local_mem_bytes <= 0 || bytes <= target.local_mem_bytes);
    };
    int64_t kb = bl.kb;
    if (several && a_transposed) {
      while (kb > 64 && !pack_fits(kb)) kb /= 2;
      if (!pack_fits(kb)) kb = bl.kb;  // no pack: the tuned depth
    }
    const bool pack = several && a_transposed && pack_fits(kb);
    spec.options = absl::StrCat("-DLC_VW=", bl.vw, " -DMR=", bl.mr, " -DNR=", bl.nr, " -DKB=", kb);
    if (several) {
      absl::StrAppend(&spec.options, " -DLC_PANELS");
      spec.args.push_back(i64(np));
    }
    if (pack) absl::StrAppend(&spec.options, " -DLC_APACK=", rows);
    if (second != nullptr) {  // matmul_cpu.cl's LC_DUAL_BUFFERS and LC_DUAL_FIELDS
      const StridedOperand& b2 = second->b;
      for (const KernelArgSpec& arg :
           {buffer(b2.buffer, false), offset(b2.buffer, b2.offset), i64(b2.batch_stride), inner(b2),
            i64(b2.group_stride), i64(b2.row_stride)}) {
        spec.args.push_back(arg);
      }
    }
    // matmul_cpu.cl takes its buffers in this order, then every integer in this order as one
    // struct (lc_matmul_args).
    KernelArgSpec integers;
    integers.kind = KernelArgSpec::Kind::kPack;
    std::vector<KernelArgSpec> buffers;
    for (KernelArgSpec& arg : spec.args) {
      (arg.kind == KernelArgSpec::Kind::kBuffer ? buffers : integers.fields)
          .push_back(std::move(arg));
    }
    spec.args = std::move(buffers);
    spec.args.push_back(std::move(integers));
    spec.launches.push_back(Launch{"matmul_cpu",
                                   {static_cast<size_t>(row_groups),
                                    static_cast<size_t>(several ? (panels + np - 1) / np : panels),
                                    static_cast<size_t>(batches)},
                                   {1, 1, 1},
                                   {}});
  } else {
    spec.launches.push_back(
        Launch{"matmul",
               {RoundUp(static_cast<size_t>(n), static_cast<size_t>(16 * rb)) / rb,
                RoundUp(static_cast<size_t>(m), static_cast<size_t>(16 * rb)) / rb,
                static_cast<size_t>(batches)},
               {16, 16, 1},
               {}});
  }
  if (epilogue != nullptr) {
    // lc_epilogue(acc, batch, row, col): the chain at the element's index, with the batch dims
    // recovered from the folded batch index. Where the chain has a vector form (VectorFriendly
    // with the accumulator as an input), also lc_epilogue16 for the 16 columns from `col` of
    // one row, which the blocked template calls on whole panels (LC_EPILOGUE16).
    // The chain is of the product's shape, or (fusion_rules.h) of [..., n] over a 2-D product
    // whose rows it splits.
    const bool split_rows =
        epilogue->shape != root.shape && SplitsRows(root.shape, epilogue->shape);
    LAZYCL_CHECK(inputs != nullptr && (epilogue->shape == root.shape || split_rows) &&
                     epilogue->dtype == root.dtype,
                 "codegen: matmul epilogue %s does not fit", ir::NodeString(*epilogue).c_str());
    Emitter e(*inputs, "long", target);
    e.SetValue(&root, "acc");
    if (second != nullptr) e.SetValue(second->node, "acc2");
    e.UnifyDims(*epilogue);
    auto at = [&] {
      std::vector<std::string> dims;
      if (split_rows) {
        const Shape rows(epilogue->shape.begin(), epilogue->shape.end() - 1);
        std::vector<std::string> keys = e.DimKeys(*epilogue);
        keys.resize(rows.size());
        dims = e.Multi(Index::Linear("row"), rows, keys);
      } else if (r > 2) {
        const Shape batch_shape(epilogue->shape.begin(), epilogue->shape.end() - 2);
        std::vector<std::string> keys = e.DimKeys(*epilogue);
        keys.resize(r - 2);
        dims = e.Multi(Index::Linear("batch"), batch_shape, keys);
      }
      if (!split_rows) dims.push_back("row");
      dims.push_back("col");
      return Index::Multi(std::move(dims));
    };
    const auto scope = e.SaveScope();
    e.Line(absl::StrCat("return ", e.Eval(*epilogue, at()), ";"));
    InputMap with_acc = *inputs;
    with_acc[&root] = out;
    if (second != nullptr) with_acc[second->node] = out;
    const bool vector = blocked && VectorFriendly(*epilogue, with_acc, epilogue->shape, 0);
    const std::string leading = "const long batch, const long row, const long col";
    // The accumulators: acc, and with a dual product acc2.
    auto accs = [&](const std::string& type) {
      return absl::StrCat("const ", type, " acc, ",
                          second != nullptr ? absl::StrCat("const ", type, " acc2, ") : "");
    };
    std::string functions;
    if (vector) {
      // lc_epilogue first, then lc_prefetch16 (the loads of lc_epilogue16, prefetched, for the
      // template to call a block ahead: the epilogue's inputs are not in cache otherwise, and
      // waiting for them cost the matmul a fifth of its time); lc_epilogue16 is finished last.
      functions = absl::StrCat("static inline ", t, " lc_epilogue(", accs(t), leading,
                               " LC_EPI_PARAMS) {\n", e.TakeBody(), "}\n");
      for (const bool prefetch : {true, false}) {
        e.RestoreScope(scope);
        const Index vat = at();
        e.SetValue(&root, prefetch ? "(float16)(0.0f)" : "acc");
        if (second != nullptr) e.SetValue(second->node, prefetch ? "(float16)(0.0f)" : "acc2");
        e.SetVector(true, "0", 0);
        e.SetPrefetch(prefetch);
        const std::string v = e.Eval(*epilogue, vat);
        e.SetPrefetch(false);
        e.SetVector(false);
        if (!prefetch) {
          e.Line(absl::StrCat("return ", v, ";"));
          break;
        }
        absl::StrAppend(&functions, "static inline void lc_prefetch16(", leading,
                        " LC_EPI_PARAMS) {\n", e.TakeBody(), "}\n");
      }
    }
    std::vector<KernelArgSpec> extra;
    spec.source = absl::StrCat(
        "#define LC_EPILOGUE 1\n", vector ? "#define LC_EPILOGUE16 1\n" : "",
        second != nullptr ? "#define LC_DUAL 1\n" : "",
        e.FinishFunction(vector ? "float16" : t, vector ? "lc_epilogue16" : "lc_epilogue",
                         absl::StrCat(accs(vector ? "float16" : t), leading), &extra, functions),
        spec.source);
    spec.args.insert(spec.args.end(), extra.begin(), extra.end());
  }
  if (blocked) spec.source = absl::StrCat(std::string(Template("prefetch.cl")), spec.source);
  spec.summary = absl::StrCat("matmul ", second != nullptr ? "dual " : "", ir::NodeString(root),
                              " (K=", k, ")");
  spec.flops = 2 * m * n * k * batches * (second != nullptr ? 2 : 1);
  if (epilogue != nullptr) absl::StrAppend(&spec.summary, " -> ", ir::NodeString(*epilogue));
  return spec;
}

}  // namespace

KernelSpec EmitMatmul(const Node& root, BufferRef out, const StridedOperand& a,
                      const StridedOperand& b, const Target& target, const Node* epilogue,
                      const InputMap* inputs, const StridedOperand* stored,
                      const SecondProduct* second) {
  return Emit(root, out, a, b, target, epilogue, inputs, stored, second, /*share_panels=*/true);
}

KernelSpec EmitMatmulGroup(const std::vector<const Node*>& roots,
                           const std::vector<BufferRef>& outs, const StridedOperand& a,
                           const std::vector<StridedOperand>& bs, const Target& target) {
  LAZYCL_CHECK(!roots.empty() && roots.size() <= kMaxMatmulGroup && outs.size() == roots.size() &&
                   bs.size() == roots.size() && target.cpu && roots[0]->dtype == DType::f32,
               "codegen: invalid matmul group of %zu", roots.size());
  if (roots.size() == 1) return EmitMatmul(*roots[0], outs[0], a, bs[0], target);
  KernelSpec spec = Emit(*roots[0], outs[0], a, bs[0], target, nullptr, nullptr, nullptr, nullptr,
                         /*share_panels=*/false);
  const Node& first = *roots[0];
  const size_t r = first.shape.size();
  const int64_t m = first.shape[r - 2], k = first.operands[0]->shape[r - 1];
  int64_t batches = 1;
  for (size_t d = 0; d + 2 < r; ++d) batches *= first.shape[d];
  const int64_t nr = target.matmul.nr;
  auto panels = [&](const Node& n) { return (n.shape[r - 1] + nr - 1) / nr; };
  // The buffers of products 1.. after C, and their integers at the end of the struct, in the
  // order LC_GROUP_BUFFERS and LC_GROUP_FIELDS below declare them.
  std::string buffers, fields, select;
  std::vector<KernelArgSpec> more_buffers;
  LAZYCL_CHECK(spec.args.size() == 4 && spec.args[3].kind == KernelArgSpec::Kind::kPack,
               "codegen: a group's first product has %zu arguments", spec.args.size());
  std::vector<KernelArgSpec>& packed = spec.args[3].fields;
  int64_t total_panels = panels(first);
  for (size_t g = 1; g < roots.size(); ++g) {
    const Node& n = *roots[g];
    LAZYCL_CHECK(n.dtype == first.dtype && n.operands[0]->shape == first.operands[0]->shape &&
                     std::equal(n.shape.begin(), n.shape.end() - 1, first.shape.begin()),
                 "codegen: %s does not share %s's A", ir::NodeString(n).c_str(),
                 ir::NodeString(first).c_str());
    // The product's own arguments, made as EmitMatmul makes them.
    const KernelSpec own = Emit(n, outs[g], a, bs[g], target, nullptr, nullptr, nullptr, nullptr,
                                /*share_panels=*/false);
    // EmitMatmul's order: buffers A, B, C; integers A's view (6), B's (6), C's (5), M, N, K, mb.
    LAZYCL_CHECK(own.args.size() == 4 && own.args[3].fields.size() == 21,
                 "codegen: a grouped product has %zu arguments", own.args.size());
    more_buffers.push_back(own.args[1]);
    more_buffers.push_back(own.args[2]);
    for (size_t i = 6; i < 17; ++i) packed.push_back(own.args[3].fields[i]);
    packed.push_back(own.args[3].fields[18]);  // N
    const std::string s = absl::StrCat("_g", g);
    absl::StrAppend(&buffers, ", __global const float* restrict B", s,
                    ", __global float* restrict C", s);
    absl::StrAppend(&fields, ", b_off", s, ", b_sb", s, ", b_bi", s, ", b_sg", s, ", b_sk", s,
                    ", b_sn", s, ", c_off", s, ", c_sb", s, ", c_bi", s, ", c_sg", s, ", c_sm", s,
                    ", N", s);
    absl::StrAppend(&select, " if (panel_index >= (N + NR - 1) / NR) {",
                    " panel_index -= (N + NR - 1) / NR;", " B = B", s, "; C = C", s);
    for (const char* f : {"b_off", "b_sb", "b_bi", "b_sg", "b_sk", "b_sn", "c_off", "c_sb", "c_bi",
                          "c_sg", "c_sm", "N"}) {
      absl::StrAppend(&select, "; ", f, " = lc_p.", f, s);
    }
    select += ";";
    total_panels += panels(n);
  }
  spec.args.insert(spec.args.begin() + 3, more_buffers.begin(), more_buffers.end());
  for (size_t g = 1; g < roots.size(); ++g) select += " }";
  spec.source = absl::StrCat("#define LC_GROUP_BUFFERS", buffers, "\n#define LC_GROUP_FIELDS",
                             fields, "\n#define LC_GROUP_SELECT", select, "\n", spec.source);
  spec.launches[0].global[1] = static_cast<size_t>(total_panels);
  spec.flops = 0;
  std::vector<std::string> names;
  for (const Node* n : roots) {
    spec.flops += 2 * m * n->shape[r - 1] * k * batches;
    names.push_back(ir::NodeString(*n));
  }
  spec.summary = absl::StrCat("matmul group of ", roots.size(), ": ", absl::StrJoin(names, ", "),
                              " (K=", k, ")");
  return spec;
}

}  // namespace lazycl::kernels
