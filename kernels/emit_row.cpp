// Row-kernel strategy (codegen.h, EmitRowKernel), CPU only: one work-item per row computes the
// row's reductions and then the row (softmax in one kernel).

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "kernels/codegen.h"
#include "kernels/emitter.h"
#include "kernels/index_reads.h"
#include "kernels/op_expr.h"

namespace lazycl::kernels {

using ir::Node;

KernelSpec EmitRowKernel(const Node& root, BufferRef out, const std::vector<const Node*>& reduces,
                         const InputMap& inputs, const Target& target) {
  LAZYCL_CHECK(!reduces.empty(), "EmitRowKernel without reductions");
  const size_t reduced_dims = reduces[0]->args.size();
  int64_t row = 1;
  for (size_t d = root.shape.size() - reduced_dims; d < root.shape.size(); ++d)
    row *= root.shape[d];
  const int64_t rows = ir::NumElements(root.shape) / std::max<int64_t>(row, 1);

  Emitter e(inputs, IndexType(root, inputs, target), target);
  e.UnifyDims(root);
  std::string out_name = e.Buffer(out, root.dtype, true);
  // Every loop below walks the trailing dims of one row; the row's elements are contiguous.
  const std::string n = e.Sym(row, "row");
  const std::string base = absl::StrCat("(gid * ", n, " + r)");
  // Vector loops over the row, 16 elements a step; with `unroll` > 1 first `unroll` vectors a
  // step (independent accumulators hide the latency of fmax and add), then one. `body` gets
  // the value, its index and which of the unrolled vectors it is.
  using VectorBody = std::function<void(const std::string&, const std::string&, int)>;
  auto vector_loop = [&](const Node& x, int unroll, const VectorBody& body) {
    e.Line("idx_t r = 0;");
    if (!VectorFriendly(x, inputs, root.shape, reduced_dims)) return;
    for (int u : {unroll, 1}) {
      e.Line(absl::StrCat("for (; r < ", n, " - ", 16 * u - 1, "; r += ", 16 * u, ") {"));
      e.Indent();
      auto scope = e.SaveScope();
      e.SetVector(true, "gid", reduced_dims);
      for (int k = 0; k < u; ++k) {
        const std::string at = k == 0 ? base : absl::StrCat("(gid * ", n, " + r + ", 16 * k, ")");
        e.SetLaneBase(k == 0 ? "r" : absl::StrCat("(r + ", 16 * k, ")"));
        body(e.Eval(x, Index::Linear(at)), at, k);
      }
      e.SetVector(false);
      e.RestoreScope(std::move(scope));
      e.Dedent();
      e.Line("}");
      if (unroll == 1) break;
    }
  };
  auto scalar_loop = [&](const Node& x, const std::function<void(const std::string&)>& body) {
    e.Line(absl::StrCat("for (; r < ", n, "; ++r) {"));
    e.Indent();
    auto scope = e.SaveScope();
    body(e.Eval(x, Index::Linear(base)));
    e.RestoreScope(std::move(scope));
    e.Dedent();
    e.Line("}");
  };
  // The last reduction's operand, when root reads it at root's own index and it costs more
  // than a load (softmax: exp(x - max)), is stored into root's row as it is reduced and read
  // back from there (in cache) instead of being computed again.
  const Node& last = *reduces.back()->operands[0];
  const bool store_last =
      !inputs.contains(&last) && !ir::IsLeaf(last.op) && last.dtype == root.dtype &&
      ReadsOnlyAtOwnIndex(root, last, [&](const Node& n) { return inputs.contains(&n); });
  for (size_t j = 0; j < reduces.size(); ++j) {
    const Node& red = *reduces[j];
    const Node& x = *red.operands[0];
    const bool store = store_last && j + 1 == reduces.size();
    const std::string acc = absl::StrCat("acc", j);
    auto accumulate = [&](const std::string& a, const std::string& v) {
      return ReduceAccumulate(red.op, DType::f32, a, v);
    };
    auto fold = [&](const std::string& a, const std::string& b) {
      return ReduceCombine(red.op, DType::f32, a, b, /*grouped=*/true);
    };
    e.Line("{");
    e.Indent();
    e.Line(
        absl::StrCat("float16 ", acc, "v = (float16)(", ReduceIdentity(red.op, DType::f32), ");"));
    e.Line(absl::StrCat("float16 ", acc, "w = ", acc, "v;"));
    vector_loop(x, 2, [&](const std::string& v, const std::string& at, int k) {
      if (store) e.Line(absl::StrCat("vstore16(", v, ", 0, ", out_name, " + ", at, ");"));
      e.Line(accumulate(absl::StrCat(acc, k == 0 ? "v" : "w"), v));
    });
    e.Line(accumulate(acc + "v", acc + "w"));
    e.Line(absl::StrCat("const float8 ", acc, "h = ", fold(acc + "v.lo", acc + "v.hi"), ";"));
    e.Line(absl::StrCat("const float4 ", acc, "q = ", fold(acc + "h.lo", acc + "h.hi"), ";"));
    e.Line(absl::StrCat("float ", acc, " = ",
                        fold(fold(acc + "q.x", acc + "q.y"), fold(acc + "q.z", acc + "q.w")), ";"));
    scalar_loop(x, [&](const std::string& v) {
      if (store) e.Line(absl::StrCat(out_name, "[", base, "] = ", v, ";"));
      e.Line(accumulate(acc, v));
    });
    e.Line(absl::StrCat("red", j, " = ", acc, ";"));
    e.Dedent();
    e.Line("}");
    e.SetValue(&red, absl::StrCat("red", j));
    if (store) e.ReadBack(x, out);
  }
  e.Line("{");
  e.Indent();
  vector_loop(root, 1, [&](const std::string& v, const std::string& at, int) {
    e.Line(absl::StrCat("vstore16(", v, ", 0, ", out_name, " + ", at, ");"));
  });
  scalar_loop(root, [&](const std::string& v) {
    e.Line(absl::StrCat(out_name, "[", base, "] = ", v, ";"));
  });
  e.Dedent();
  e.Line("}");
  e.Prepend(absl::StrCat(
      "float ",
      [&] {
        std::vector<std::string> names;
        for (size_t j = 0; j < reduces.size(); ++j) names.push_back(absl::StrCat("red", j));
        return absl::StrJoin(names, ", ");
      }(),
      ";"));
  KernelSpec spec = e.FinishIndexed("row", rows);
  std::vector<std::string> what;
  for (const Node* r : reduces) what.push_back(ir::NodeString(*r));
  spec.summary = absl::StrCat("row kernel ", ir::NodeString(root), " with ",
                              absl::StrJoin(what, ", "), " (one work-item per row)");
  return spec;
}

}  // namespace lazycl::kernels
