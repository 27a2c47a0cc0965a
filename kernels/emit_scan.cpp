// Scan strategy (codegen.h, EmitScan): one work-item per row along the scanned dim, both
// strategies; the fused operand is evaluated inside the loop and every running value stored.
// Rows run serially, so a scan over one long row uses one work-item: fine for the sizes a
// model samples over (a 50k vocabulary is 50k additions), not a parallel prefix sum.

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "kernels/cl_text.h"
#include "kernels/codegen.h"
#include "kernels/emitter.h"

namespace lazycl::kernels {

using ir::Node;
using ir::Shape;

KernelSpec EmitScan(const Node& root, BufferRef out, const InputMap& inputs, const Target& target) {
  LAZYCL_CHECK(root.op == ir::Op::kCumsum, "EmitScan on %s", ir::OpName(root.op));
  const Node& x = *root.operands[0];
  const size_t axis = static_cast<size_t>(root.args[0]);
  const bool reverse = root.args[1] != 0;
  Shape rows_shape = x.shape;
  rows_shape[axis] = 1;
  const int64_t rows = ir::NumElements(rows_shape);
  const int64_t n = x.shape[axis];

  Emitter e(inputs, IndexType(root, inputs, target), target);
  e.UnifyDims(root);
  const DType t = root.dtype;
  const std::string out_name = e.Buffer(out, t, true);
  std::vector<std::string> keys = e.DimKeys(x);
  keys[axis] = "scan|row";  // size 1 in rows_shape: a literal, never an argument
  std::vector<std::string> dims = e.Multi(Index::Linear("gid"), rows_shape, keys);
  const std::string size = e.Sym(n, e.DimKey(&x, axis));
  e.Line(absl::StrCat(CType(t), " acc = ", Zero(t), ";"));
  e.Line(absl::StrCat("for (idx_t k = 0; k < ", size, "; ++k) {"));
  e.Indent();
  auto scope = e.SaveScope();
  e.Line(reverse ? absl::StrCat("const idx_t r = ", size, " - 1 - k;") : "const idx_t r = k;");
  dims[axis] = "r";
  const std::string v = e.Eval(x, Index::Multi(dims));
  if (is_floating(t)) {
    e.Line(absl::StrCat("acc += ", v, ";"));
  } else {
    const char* s = t == DType::i32 ? "int" : "long";
    const char* u = t == DType::i32 ? "uint" : "ulong";
    // Integer sums wrap (host_eval.h): unsigned arithmetic, reinterpreted.
    e.Line(absl::StrCat("acc = as_", s, "(as_", u, "(acc) + as_", u, "(", v, "));"));
  }
  e.Line(absl::StrCat(out_name, "[", e.Linear(Index::Multi(dims), root), "] = acc;"));
  e.RestoreScope(std::move(scope));
  e.Dedent();
  e.Line("}");
  KernelSpec spec = e.FinishIndexed("scan", rows);
  spec.summary = absl::StrCat("scan ", ir::NodeString(root), " of ", ir::NodeString(x));
  return spec;
}

}  // namespace lazycl::kernels
