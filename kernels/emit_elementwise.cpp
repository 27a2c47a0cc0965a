// Elementwise strategy (codegen.h, EmitElementwise): one work-item per element of the root.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "kernels/cl_text.h"
#include "kernels/codegen.h"
#include "kernels/emitter.h"

namespace lazycl::kernels {

using ir::Node;

namespace {

// The column ranges of a row-form kernel: 0, cols and the edges of every Pad along the last dim
// that root reads at its own column (through elementwise ops and broadcasts: a cat's pieces),
// where each range is whole vectors; {0, cols} otherwise. In each range every such Pad is its
// operand or its pad value (Emitter::SetColumnRange).
std::vector<int64_t> ColumnCuts(const Node& root, const InputMap& inputs) {
  const int64_t cols = root.shape.back();
  std::vector<int64_t> cuts = {0, cols};
  std::vector<const Node*> stack = {&root};
  absl::flat_hash_set<const Node*> seen;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second || inputs.contains(n) || n->shape.empty() ||
        n->shape.back() != cols) {
      continue;
    }
    if (n->op == ir::Op::kPad) {
      const int64_t lo = n->args.back(), hi = lo + n->operands[0]->shape.back();
      for (int64_t c : {lo, hi}) {
        if (c > 0 && c < cols) cuts.push_back(c);
      }
      continue;
    }
    // Elementwise ops, and Expands, Reshapes and Permutes that keep the last dim (grouped-query
    // attention's repeated keys; the rotary embedding's gradient stored as [b, t, h, d]) read
    // their operands at the same column (Emitter::Pad checks that the column it is read at is
    // `col` itself).
    const bool keeps_col =
        ((n->op == ir::Op::kExpand || n->op == ir::Op::kReshape) &&
         n->operands[0]->shape.back() == cols) ||
        (n->op == ir::Op::kPermute && n->args.back() == static_cast<int64_t>(n->shape.size()) - 1);
    if (!ir::IsElementwise(n->op) && !keeps_col) continue;
    for (const ir::NodePtr& o : n->operands) stack.push_back(o.get());
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    if ((cuts[i + 1] - cuts[i]) % 16 != 0) return {0, cols};
  }
  return cuts;
}

}  // namespace

KernelSpec EmitElementwise(const Node& root, BufferRef out, const InputMap& inputs,
                           const Target& target) {
  const int64_t n = ir::NumElements(root.shape);
  {
    Emitter e(inputs, IndexType(root, inputs, target), target);
    e.UnifyDims(root);
    std::string out_name = e.Buffer(out, root.dtype, true);
    e.SetOwnIndex("gid");
    std::string v = e.Eval(root, Index::Linear("gid"));
    e.Line(absl::StrCat(out_name, "[gid] = ", v, ";"));
    // CPU: where memory is read at another index than the element's (a view of another
    // layout: a transpose, a slice, a broadcast bias) and the last dim is whole vectors, one row
    // of the last dim per work-group instead (FinishRows): the index is taken apart once per
    // row, and reads along the row are vector loads: x + bias over [2048, 2048] 1.3-1.7 ->
    // 0.46 ms, a transposed copy of [1, 4, 64, 32] 8.1 -> 2.7 us.
    const size_t r = root.shape.size();
    const int64_t cols = r >= 2 ? root.shape.back() : 0;
    if (!target.cpu || e.other_index_reads() == 0 || cols < 16 || cols % 16 != 0 || n == 0) {
      KernelSpec spec = e.FinishIndexed("ew", n);
      spec.summary = absl::StrCat("elementwise ", ir::NodeString(root));
      return spec;
    }
  }
  Emitter e(inputs, IndexType(root, inputs, target), target);
  e.UnifyDims(root);
  const int64_t cols = root.shape.back();
  std::string out_name = e.Buffer(out, root.dtype, true);
  std::vector<std::string> keys = e.DimKeys(root);
  const std::string col_sym = e.Sym(cols, keys.back());
  keys.pop_back();
  const ir::Shape leading(root.shape.begin(), root.shape.end() - 1);
  std::vector<Emitter::RowPiece> pieces;
  const std::vector<int64_t> cuts = ColumnCuts(root, inputs);
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const auto scope = e.SaveScope();
    if (cuts.size() > 2) e.SetColumnRange(cuts[i], cuts[i + 1]);
    std::vector<std::string> dims = e.Multi(Index::Linear("row"), leading, keys);
    dims.push_back("col");
    std::string v = e.Eval(root, Index::Multi(std::move(dims)));
    e.Line(absl::StrCat(out_name, "[row * ", col_sym, " + col] = ", v, ";"));
    pieces.push_back({cuts[i], cuts[i + 1], e.TakeBody()});
    e.RestoreScope(scope);
  }
  KernelSpec spec = e.FinishRows("ew_rows", n / cols, pieces);
  spec.summary =
      absl::StrCat("elementwise ", ir::NodeString(root), " (a row per work-group",
                   pieces.size() > 1 ? absl::StrCat(", ", pieces.size(), " column ranges") : "",
                   spec.launches.size() == 1 && pieces.size() > 1 ? " in one launch" : "", ")");
  return spec;
}

KernelSpec EmitElementwiseGroup(const std::vector<const Node*>& roots,
                                const std::vector<BufferRef>& outs, const InputMap& inputs,
                                const Target& target) {
  LAZYCL_CHECK(!roots.empty() && roots.size() == outs.size(),
               "codegen: an elementwise group of %d roots and %d outputs",
               static_cast<int>(roots.size()), static_cast<int>(outs.size()));
  const Node& first = *roots[0];
  const int64_t n = ir::NumElements(first.shape);
  Emitter e(inputs, IndexType(first, inputs, target), target);
  e.SetOwnIndex("gid");
  std::vector<std::string> names, values;
  for (size_t k = 0; k < roots.size(); ++k) {
    const Node& root = *roots[k];
    LAZYCL_CHECK(root.shape == first.shape, "codegen: elementwise group member %s is not of %s",
                 ir::NodeString(root).c_str(), ir::ShapeString(first.shape).c_str());
    e.UnifyDims(root);
    names.push_back(e.Buffer(outs[k], root.dtype, true));
    const std::string v = e.Eval(root, Index::Linear("gid"));
    values.push_back(absl::StrCat("lc_out", k));
    e.Line(absl::StrCat("const ", CType(root.dtype), " ", values.back(), " = ", v, ";"));
    e.SetValue(&root, values.back());  // what later members read
  }
  for (size_t k = 0; k < roots.size(); ++k)
    e.Line(absl::StrCat(names[k], "[gid] = ", values[k], ";"));
  KernelSpec spec = e.FinishIndexed("ew_multi", n);
  std::vector<std::string> summaries;
  for (const Node* root : roots) summaries.push_back(ir::NodeString(*root));
  spec.summary = absl::StrCat("elementwise ", absl::StrJoin(summaries, ", "), " in one kernel");
  return spec;
}

}  // namespace lazycl::kernels
