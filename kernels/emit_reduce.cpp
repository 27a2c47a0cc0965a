// Reduction strategy (codegen.h, EmitReduce): one work-item per output element (CPU), or one
// work-group per output element with a tree in local memory (GPU); the fused operand is
// evaluated inside the loop. The combiner and identity are op_expr.h's.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "kernels/cl_text.h"
#include "kernels/codegen.h"
#include "kernels/emitter.h"
#include "kernels/op_expr.h"

namespace lazycl::kernels {

using ir::Node;
using ir::Shape;

namespace {

// Work-group size of the GPU strategy's tree reductions (one that every GPU we know of takes).
constexpr size_t kGroupSize = 128;

// Makes `epilogue`'s chain evaluable in `e`: its reduction stands for the reduced value, and its
// dims join the kernel's. Call after UnifyDims(root).
void PrepareEpilogue(Emitter& e, const ReduceEpilogue* epilogue) {
  if (epilogue == nullptr) return;
  e.SetValue(epilogue->value, "acc");
  e.UnifyDims(*epilogue->root);
}

// Stores `acc`, the reduced value of output element `at` (a linear index): as it is, or as
// `epilogue`'s value there. One statement either way.
void Store(Emitter& e, const std::string& out_name, const std::string& at, const std::string& acc,
           const ReduceEpilogue* epilogue) {
  if (epilogue == nullptr) {
    e.Line(absl::StrCat(out_name, "[", at, "] = ", acc, ";"));
    return;
  }
  e.Line("{");
  e.Indent();
  auto scope = e.SaveScope();
  e.SetValue(epilogue->value, acc);
  const std::string v = e.Eval(*epilogue->root, Index::Linear(at));
  e.Line(absl::StrCat(out_name, "[", at, "] = ", v, ";"));
  e.RestoreScope(std::move(scope));
  e.Dedent();
  e.Line("}");
}

std::string EpilogueSummary(const ReduceEpilogue* epilogue) {
  return epilogue == nullptr ? "" : absl::StrCat(" -> ", ir::NodeString(*epilogue->root));
}

// CPU, f32, the last dim kept (a bias's gradient: a sum over the rows of [rows, N]): a
// work-item takes 16 neighbouring outputs along the last dim, whose operands lie side by side
// at every reduced index, and reduces them as one float16 (PoCL runs the reduced loop of a
// work-item as written, so one output per work-item walks memory N floats apart, scalar). The
// outputs past the last whole 16 of a row are reduced one at a time. Each output's values are
// combined in the same order as the scalar kernel's.
KernelSpec EmitColumns(const Node& root, BufferRef out, const InputMap& inputs,
                       const Target& target, const ReduceEpilogue* epilogue) {
  const Node& x = *root.operands[0];
  const std::vector<int64_t>& axes = root.args;
  Shape reduced_shape;
  for (int64_t a : axes) reduced_shape.push_back(x.shape[a]);
  const int64_t reduced = ir::NumElements(reduced_shape);
  const int64_t last = x.shape.back();
  const int64_t chunks = (last + 15) / 16;  // per row of the last dim
  const int64_t items = ir::NumElements(root.shape) / last * chunks;

  Emitter e(inputs, IndexType(root, inputs, target), target);
  e.UnifyDims(root);
  PrepareEpilogue(e, epilogue);
  const DType t = root.dtype;
  const std::string out_name = e.Buffer(out, epilogue != nullptr ? epilogue->root->dtype : t, true);
  const std::string n = e.Sym(last, e.DimKey(&root, root.shape.size() - 1));
  const std::string c = e.Sym(chunks, "chunks");
  e.Line(absl::StrCat("const idx_t row = gid / ", c, ";"));
  e.Line(absl::StrCat("const idx_t c0 = (gid - row * ", c, ") * 16;"));
  e.Line(absl::StrCat("const idx_t o = row * ", n, " + c0;"));
  std::vector<std::string> dims = e.Multi(Index::Linear("o"), root);
  std::vector<std::string> r_keys;
  for (int64_t a : axes) r_keys.push_back(e.DimKey(&x, static_cast<size_t>(a)));
  const std::string identity = ReduceIdentity(root.op, t);
  // The loop over the reduced elements, x read at `dims` with the last one at `col`.
  auto loop = [&](const std::string& acc, const std::string& col) {
    e.Line(absl::StrCat("for (idx_t r = 0; r < ", e.Sym(reduced, "reduced"), "; ++r) {"));
    e.Indent();
    auto scope = e.SaveScope();
    std::vector<std::string> at = dims;
    at.back() = col;
    std::vector<std::string> r_dims = e.Multi(Index::Linear("r"), reduced_shape, r_keys);
    for (size_t i = 0; i < axes.size(); ++i) at[axes[i]] = r_dims[i];
    e.Line(ReduceAccumulate(root.op, t, acc, e.Eval(x, Index::Multi(std::move(at)))));
    e.RestoreScope(std::move(scope));
    e.Dedent();
    e.Line("}");
  };
  e.Line(absl::StrCat("if (c0 + 16 <= ", n, ") {"));
  e.Indent();
  e.Line(absl::StrCat("float16 acc16 = (float16)(", identity, ");"));
  e.SetVector(true, "0", 0);
  loop("acc16", "c0");
  e.SetVector(false);
  if (epilogue == nullptr) {
    e.Line(absl::StrCat("vstore16(acc16, 0, ", out_name, " + o);"));
  } else {
    e.Line("float lc_t[16];");
    e.Line("vstore16(acc16, 0, lc_t);");
    e.Line("for (int jj = 0; jj < 16; ++jj)");
    Store(e, out_name, "(o + jj)", "lc_t[jj]", epilogue);
  }
  e.Dedent();
  e.Line("} else {");
  e.Indent();
  e.Line(absl::StrCat("for (idx_t j = c0; j < ", n, "; ++j) {"));
  e.Indent();
  e.Line(absl::StrCat(CType(t), " acc = ", identity, ";"));
  loop("acc", "j");
  Store(e, out_name, "o - c0 + j", "acc", epilogue);
  e.Dedent();
  e.Line("}");
  e.Dedent();
  e.Line("}");
  KernelSpec spec = e.FinishIndexed("red_cols", items);
  spec.summary = absl::StrCat("reduce ", ir::NodeString(root), " of ", ir::NodeString(x),
                              EpilogueSummary(epilogue), " (16 columns per work-item)");
  return spec;
}

}  // namespace

KernelSpec EmitReduce(const Node& root, BufferRef out, const InputMap& inputs, int64_t split,
                      const Target& target, const ReduceEpilogue* epilogue) {
  LAZYCL_CHECK(ir::IsReduce(root.op), "EmitReduce on %s", ir::OpName(root.op));
  LAZYCL_CHECK(epilogue == nullptr ||
                   (split == 1 && epilogue->root != nullptr && epilogue->value != nullptr &&
                    ir::NumElements(epilogue->root->shape) == ir::NumElements(root.shape)),
               "codegen: reduction epilogue %s does not fit %s",
               epilogue != nullptr && epilogue->root != nullptr
                   ? ir::NodeString(*epilogue->root).c_str()
                   : "(none)",
               ir::NodeString(root).c_str());
  const Node& x = *root.operands[0];
  const std::vector<int64_t>& axes = root.args;
  Shape reduced_shape;
  for (int64_t a : axes) reduced_shape.push_back(x.shape[a]);
  const int64_t reduced = ir::NumElements(reduced_shape);
  const int64_t outputs = ir::NumElements(root.shape);
  const int64_t chunk = split > 1 ? (reduced + split - 1) / split : reduced;
  const bool last_kept =
      !x.shape.empty() &&
      std::find(axes.begin(), axes.end(), static_cast<int64_t>(x.shape.size() - 1)) == axes.end();
  if (target.cpu && split == 1 && root.dtype == DType::f32 && last_kept && x.shape.back() >= 16 &&
      VectorFriendly(x, inputs, x.shape, 0)) {
    return EmitColumns(root, out, inputs, target, epilogue);
  }

  Emitter e(inputs, IndexType(root, inputs, target), target);
  e.UnifyDims(root);
  PrepareEpilogue(e, epilogue);
  const DType t = root.dtype;
  std::string out_name = e.Buffer(out, epilogue != nullptr ? epilogue->root->dtype : t, true);
  std::string o = "gid";
  if (split > 1) {
    e.Line(absl::StrCat("const idx_t o = gid / ", e.Sym(split, "split"), ";"));
    e.Line(absl::StrCat("const idx_t r0 = (gid % ", e.Sym(split, "split"), ") * ",
                        e.Sym(chunk, "chunk"), ";"));
    e.Line(absl::StrCat("const idx_t r1 = min(r0 + ", e.Sym(chunk, "chunk"), ", (idx_t)",
                        e.Sym(reduced, "reduced"), ");"));
    o = "o";
  } else {
    e.Line("const idx_t r0 = 0;");
    e.Line(absl::StrCat("const idx_t r1 = ", e.Sym(reduced, "reduced"), ";"));
  }
  // Reducing the trailing dims reads one contiguous run per output: a linear index suffices.
  bool trailing = true;
  for (size_t i = 0; i < axes.size(); ++i) {
    trailing = trailing && axes[i] == static_cast<int64_t>(x.shape.size() - axes.size() + i);
  }
  std::vector<std::string> kept;
  if (!trailing) kept = e.Multi(Index::Linear(o), root);

  const std::string identity = ReduceIdentity(root.op, t);
  auto accumulate = [&](const std::string& a, const std::string& v) {
    return ReduceAccumulate(root.op, t, a, v);
  };
  // CPU: trailing contiguous rows are read 16 floats at a time into float16 accumulators (PoCL
  // runs a loop inside a work-item scalar unless it is written with vectors), then the rest
  // of the row one at a time.
  const bool vector_rows = target.cpu && trailing && t == DType::f32 && reduced >= 16 &&
                           VectorFriendly(x, inputs, x.shape, axes.size());
  if (vector_rows) {
    e.Line(absl::StrCat("float16 acc16 = (float16)(", identity, ");"));
    e.Line("idx_t r = r0;");
    e.Line("for (; r < r1 - 15; r += 16) {");
    e.Indent();
    auto vscope = e.SaveScope();
    e.SetVector(true, o, axes.size());
    std::string vv =
        e.Eval(x, Index::Linear(absl::StrCat("(", o, " * ", e.Sym(reduced, "reduced"), " + r)")));
    e.Line(accumulate("acc16", vv));
    e.SetVector(false);
    e.RestoreScope(std::move(vscope));
    e.Dedent();
    e.Line("}");
    auto combine = [&](const std::string& a, const std::string& b, bool grouped = false) {
      return ReduceCombine(root.op, t, a, b, grouped);
    };
    e.Line(absl::StrCat("const float8 acc8 = ", combine("acc16.lo", "acc16.hi"), ";"));
    e.Line(absl::StrCat("const float4 acc4 = ", combine("acc8.lo", "acc8.hi"), ";"));
    e.Line(absl::StrCat(
        "float acc = ",
        combine(combine("acc4.x", "acc4.y", true), combine("acc4.z", "acc4.w", true)), ";"));
  } else {
    e.Line(absl::StrCat(CType(t), " acc = ", identity, ";"));
  }
  // GPU: a work-group of kGroupSize items per output; lanes take strided elements (coalesced
  // for trailing reductions), then a tree in local memory.
  const bool groups = !target.cpu;
  if (groups) {
    e.Line(absl::StrCat("for (idx_t r = r0 + lane; r < r1; r += ", kGroupSize, ") {"));
  } else {
    e.Line(vector_rows ? "for (; r < r1; ++r) {" : "for (idx_t r = r0; r < r1; ++r) {");
  }
  e.Indent();
  auto scope = e.SaveScope();
  Index idx;
  if (trailing) {
    idx = Index::Linear(
        reduced == 1 ? o : absl::StrCat("(", o, " * ", e.Sym(reduced, "reduced"), " + r)"));
  } else {
    std::vector<std::string> r_keys;
    for (int64_t a : axes) r_keys.push_back(e.DimKey(&x, static_cast<size_t>(a)));
    std::vector<std::string> r_dims = e.Multi(Index::Linear("r"), reduced_shape, r_keys);
    std::vector<std::string> dims = kept;
    for (size_t i = 0; i < axes.size(); ++i) dims[axes[i]] = r_dims[i];
    idx = Index::Multi(std::move(dims));
  }
  std::string v = e.Eval(x, idx);
  e.Line(accumulate("acc", v));
  e.RestoreScope(std::move(scope));
  e.Dedent();
  e.Line("}");
  KernelSpec spec;
  if (groups) {
    e.Line(absl::StrCat("__local ", CType(t), " scratch[", kGroupSize, "];"));
    e.Line("scratch[lane] = acc;");
    e.Line("barrier(CLK_LOCAL_MEM_FENCE);");
    e.Line(absl::StrCat("for (int s = ", kGroupSize / 2, "; s > 0; s >>= 1) {"));
    e.Indent();
    e.Line(absl::StrCat("if (lane < s) ", accumulate("scratch[lane]", "scratch[lane + s]")));
    e.Line("barrier(CLK_LOCAL_MEM_FENCE);");
    e.Dedent();
    e.Line("}");
    if (epilogue == nullptr) {
      e.Line(absl::StrCat("if (lane == 0) ", out_name, "[gid] = scratch[0];"));
    } else {
      e.Line("if (lane == 0)");
      Store(e, out_name, "gid", "scratch[0]", epilogue);
    }
    spec = e.FinishGroups(split > 1 ? "gred_part" : "gred", outputs * split, kGroupSize);
  } else {
    Store(e, out_name, "gid", "acc", epilogue);
    spec = e.FinishIndexed(split > 1 ? "red_part" : "red", outputs * split);
  }
  spec.summary = absl::StrCat(split > 1 ? "partial " : "", "reduce ", ir::NodeString(root), " of ",
                              ir::NodeString(x), EpilogueSummary(epilogue),
                              split > 1 ? absl::StrCat(" in ", split, " parts") : "");
  return spec;
}

}  // namespace lazycl::kernels
