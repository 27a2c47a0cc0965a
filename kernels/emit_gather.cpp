// Data-dependent indexing. Gather is evaluated inside any fused kernel: its index is read at the
// element's own position and clamped into range, then x is read there (x itself may be fused).
// ScatterAdd is a kernel of its own (codegen.h, EmitScatterAdd); every output element adds its
// contributions in ascending order along the dim, so results are the same bits on every run
// (no atomics) and the same as the host's (runtime/host_indexing.h), which adds in that order.

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
#include "kernels/op_expr.h"

namespace lazycl::kernels {

using ir::Node;
using ir::Op;
using ir::Shape;

void Emitter::UnifyIndexing(const Node& n) {
  const size_t k = static_cast<size_t>(n.args[0]);
  const Node& x = *n.operands[0];
  const Node& index = *n.operands[1];
  if (n.op == Op::kGather) {
    for (size_t d = 0; d < n.shape.size(); ++d) {
      Union({&n, d}, {&index, d});
      if (d != k) Union({&n, d}, {&x, d});
    }
    return;
  }
  const Node& src = *n.operands[2];
  for (size_t d = 0; d < n.shape.size(); ++d) {
    Union({&n, d}, {&x, d});
    Union({&index, d}, {&src, d});
    if (d != k && index.shape[d] == n.shape[d]) Union({&n, d}, {&index, d});
  }
}

std::string Emitter::Gather(const Node& n, const Index& idx) {
  const size_t k = static_cast<size_t>(n.args[0]);
  const Node& x = *n.operands[0];
  std::vector<std::string> in = Multi(idx, n);
  const std::string v = Eval(*n.operands[1], idx);
  const std::string size = Sym(x.shape[k], DimKey(&x, k));
  const std::string c = Var();
  Line(absl::StrCat("const ", idx_, " ", c, " = (", idx_, ")(", v, " < 0 ? 0 : (", v, " >= ", size,
                    " ? ", size, " - 1 : ", v, "));"));
  in[k] = c;
  return Eval(x, Index::Multi(std::move(in)));
}

namespace {

// `acc = acc + v` in dtype t (integers wrap, as Add does).
std::string AddTo(const std::string& acc, const std::string& v, DType t) {
  ExprArgs args;
  args.dtype = t;
  args.from = t;
  args.x = {acc, v};
  std::vector<CpuMath> calls;
  return absl::StrCat(acc, " = ", OpExpr(Op::kAdd, args, &calls), ";");
}

// The vector that a broadcast index repeats over every dim but k: index = Expand(y) with y of
// size 1 outside k and index as large as the result there. Null when the index is not that.
const Node* BroadcastIndex(const Node& root, const InputMap& inputs) {
  const size_t k = static_cast<size_t>(root.args[0]);
  const Node& index = *root.operands[1];
  if (index.op != Op::kExpand || inputs.contains(&index)) return nullptr;
  const Node& y = *index.operands[0];
  for (size_t d = 0; d < root.shape.size(); ++d) {
    if (d == k) continue;
    if (y.shape[d] != 1 || index.shape[d] != root.shape[d]) return nullptr;
  }
  // Few positions along k over long slices (index_select's gradient along a short last dim)
  // would leave the device idle with a few long loops: then one work-item per element.
  const int64_t positions = root.shape[k];
  const int64_t slice = ir::NumElements(root.shape) / std::max<int64_t>(positions, 1);
  if (positions < 256 && positions * 16 < slice) return nullptr;
  return &y;
}

// Loops over the output slice at position `at` along k (the loop variable r), calling
// body(c) with the output coordinates of element r; `rest` is the slice's size argument.
template <typename Body>
void ForRest(Emitter& e, const Node& root, size_t k, const std::string& rest, const std::string& at,
             Body&& body) {
  Shape rest_shape = root.shape;
  rest_shape[k] = 1;
  auto scope = e.SaveScope();
  e.Line(absl::StrCat("for (idx_t r = 0; r < ", rest, "; ++r) {"));
  e.Indent();
  std::vector<std::string> c = e.Multi(Index::Linear("r"), rest_shape, e.DimKeys(root));
  c[k] = at;
  body(std::move(c));
  e.Dedent();
  e.Line("}");
  e.RestoreScope(std::move(scope));
}

// The size argument of the output slice along k (every dim but k).
std::string RestSym(Emitter& e, const Node& root, size_t k) {
  Shape rest_shape = root.shape;
  rest_shape[k] = 1;
  return e.Sym(ir::NumElements(rest_shape), "rest");
}

// One work-item per position p along k: the output's slice at p is x's, then for each index
// i (ascending) equal to p, src's slice at i is added to it. Reads the index once per item.
KernelSpec EmitBroadcastScatter(const Node& root, const Node& y, BufferRef out,
                                const InputMap& inputs, const Target& target) {
  const size_t k = static_cast<size_t>(root.args[0]);
  const Node& x = *root.operands[0];
  const Node& src = *root.operands[2];
  Emitter e(inputs, IndexType(root, inputs, target), target);
  e.UnifyDims(root);
  const DType t = root.dtype;
  const std::string out_name = e.Buffer(out, t, true);
  const std::string rest = RestSym(e, root, k);
  auto for_rest = [&](const std::string& at, auto&& body) { ForRest(e, root, k, rest, at, body); };
  for_rest("gid", [&](std::vector<std::string> c) {
    const std::string lin = e.Linear(Index::Multi(c), root);
    e.Line(absl::StrCat(out_name, "[", lin, "] = ", e.Eval(x, Index::Multi(c)), ";"));
  });
  auto scope = e.SaveScope();
  const std::string n_index = e.Sym(y.shape[k], e.DimKey(&y, k));
  e.Line(absl::StrCat("for (idx_t i = 0; i < ", n_index, "; ++i) {"));
  e.Indent();
  std::vector<std::string> yi(root.shape.size(), "0");
  yi[k] = "i";
  e.Line(absl::StrCat("if (", e.Eval(y, Index::Multi(yi)), " != gid) continue;"));
  for_rest("gid", [&](std::vector<std::string> c) {
    const std::string lin = e.Linear(Index::Multi(c), root);
    c[k] = "i";
    const std::string v = e.Eval(src, Index::Multi(c));
    e.Line(AddTo(absl::StrCat(out_name, "[", lin, "]"), v, t));
  });
  e.Dedent();
  e.Line("}");
  e.RestoreScope(std::move(scope));
  KernelSpec spec = e.FinishIndexed("scatter_rows", root.shape[k]);
  spec.summary = absl::StrCat("scatter_add rows ", ir::NodeString(root));
  return spec;
}

// Fewer indices than positions (embedding's gradient: 2048 ids into 32000 rows): after a copy
// of x, one work-item per index i whose value v is in range and appears first at i adds, for
// every j >= i with the same value (ascending), src's slice at j to the output's slice at v.
// Each output slice is written by one work-item, in the order of the other kernels.
std::vector<KernelSpec> EmitFirstOccurrenceScatter(const Node& root, const Node& y, BufferRef out,
                                                   const InputMap& inputs, const Target& target) {
  const size_t k = static_cast<size_t>(root.args[0]);
  const Node& src = *root.operands[2];
  std::vector<KernelSpec> specs;
  specs.push_back(EmitElementwise(*root.operands[0], out, inputs, target));
  Emitter e(inputs, IndexType(root, inputs, target), target);
  e.UnifyDims(root);
  const DType t = root.dtype;
  const std::string out_name = e.Buffer(out, t, true);
  const std::string rest = RestSym(e, root, k);
  const std::string positions = e.Sym(root.shape[k], e.DimKey(&root, k));
  const std::string n_index = e.Sym(y.shape[k], e.DimKey(&y, k));
  auto y_at = [&](const std::string& i) {
    std::vector<std::string> at(root.shape.size(), "0");
    at[k] = i;
    return e.Eval(y, Index::Multi(std::move(at)));
  };
  const std::string v = y_at("gid");
  e.Line(absl::StrCat("if (", v, " < 0 || ", v, " >= ", positions, ") return;"));
  e.Line(absl::StrCat("const idx_t p = (idx_t)", v, ";"));
  auto scope = e.SaveScope();
  e.Line("for (idx_t j = 0; j < gid; ++j) {");
  e.Indent();
  e.Line(absl::StrCat("if (", y_at("j"), " == ", v, ") return;"));
  e.Dedent();
  e.Line("}");
  e.RestoreScope(scope);
  e.Line(absl::StrCat("for (idx_t j = gid; j < ", n_index, "; ++j) {"));
  e.Indent();
  e.Line(absl::StrCat("if (", y_at("j"), " != ", v, ") continue;"));
  ForRest(e, root, k, rest, "p", [&](std::vector<std::string> c) {
    const std::string lin = e.Linear(Index::Multi(c), root);
    c[k] = "j";
    e.Line(AddTo(absl::StrCat(out_name, "[", lin, "]"), e.Eval(src, Index::Multi(c)), t));
  });
  e.Dedent();
  e.Line("}");
  e.RestoreScope(std::move(scope));
  specs.push_back(e.FinishIndexed("scatter_ids", y.shape[k]));
  specs.back().summary = absl::StrCat("scatter_add by first occurrence ", ir::NodeString(root));
  return specs;
}

}  // namespace

std::vector<KernelSpec> EmitScatterAdd(const Node& root, BufferRef out, const InputMap& inputs,
                                       const Target& target) {
  LAZYCL_CHECK(root.op == Op::kScatterAdd, "EmitScatterAdd on %s", ir::OpName(root.op));
  const size_t k = static_cast<size_t>(root.args[0]);
  if (const Node* y = BroadcastIndex(root, inputs)) {
    // Scans of the index: positions x indices by position, indices x indices by index.
    if (y->shape[k] < root.shape[k])
      return EmitFirstOccurrenceScatter(root, *y, out, inputs, target);
    return {EmitBroadcastScatter(root, *y, out, inputs, target)};
  }
  const Node& x = *root.operands[0];
  const Node& index = *root.operands[1];
  const Node& src = *root.operands[2];
  Emitter e(inputs, IndexType(root, inputs, target), target);
  e.UnifyDims(root);
  const DType t = root.dtype;
  const std::string out_name = e.Buffer(out, t, true);
  const std::vector<std::string> c = e.Multi(Index::Linear("gid"), root);
  const std::string acc = e.Var();
  e.Line(absl::StrCat(CType(t), " ", acc, " = ", e.Eval(x, Index::Linear("gid")), ";"));
  // Output elements beyond the index's extent in another dim receive nothing.
  std::vector<std::string> inside;
  for (size_t d = 0; d < root.shape.size(); ++d) {
    if (d == k || index.shape[d] == root.shape[d]) continue;
    inside.push_back(absl::StrCat(c[d], " < ", e.Sym(index.shape[d], e.DimKey(&index, d))));
  }
  auto scope = e.SaveScope();
  const std::string n_index = e.Sym(index.shape[k], e.DimKey(&index, k));
  if (!inside.empty()) e.Line(absl::StrCat("if (", absl::StrJoin(inside, " && "), ")"));
  e.Line(absl::StrCat("for (idx_t i = 0; i < ", n_index, "; ++i) {"));
  e.Indent();
  std::vector<std::string> at = c;
  at[k] = "i";
  e.Line(absl::StrCat("if (", e.Eval(index, Index::Multi(at)), " != ", c[k], ") continue;"));
  e.Line(AddTo(acc, e.Eval(src, Index::Multi(at)), t));
  e.Dedent();
  e.Line("}");
  e.RestoreScope(std::move(scope));
  e.Line(absl::StrCat(out_name, "[gid] = ", acc, ";"));
  KernelSpec spec = e.FinishIndexed("scatter", ir::NumElements(root.shape));
  spec.summary = absl::StrCat("scatter_add ", ir::NodeString(root));
  return {spec};
}

}  // namespace lazycl::kernels
