// Elementwise strategy (codegen.h, EmitElementwise): one work-item per element of the root.

#include "absl/strings/str_cat.h"
#include "kernels/codegen.h"
#include "kernels/emitter.h"

namespace lazycl::kernels {

using ir::Node;

KernelSpec EmitElementwise(const Node& root, BufferRef out, const InputMap& inputs,
                           const Target& target) {
  Emitter e(inputs, IndexType(root, inputs, target), target);
  const int64_t n = ir::NumElements(root.shape);
  e.UnifyDims(root);
  std::string out_name = e.Buffer(out, root.dtype, true);
  std::string v = e.Eval(root, Index::Linear("gid"));
  e.Line(absl::StrCat(out_name, "[gid] = ", v, ";"));
  KernelSpec spec = e.FinishIndexed("ew", n);
  spec.summary = absl::StrCat("elementwise ", ir::NodeString(root));
  return spec;
}

}  // namespace lazycl::kernels
