#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ir/ir.h"
#include "kernels/lower.h"
#include "kernels/plan.h"

// OpenCL C generation for one kernel. Sizes, strides and offsets are kernel arguments, so a
// kernel's source depends on the graph's structure (ops, dtypes, ranks, which dims are 1) and
// not on its sizes.
namespace lazycl::kernels {

// Nodes that a kernel reads from memory (Buffer leaves and other kernels' results), each a
// contiguous row-major buffer in the node's shape.
using InputMap = absl::flat_hash_map<const ir::Node*, BufferRef>;

// One work-item per element of `root`: evaluates the fused expression and stores it.
KernelSpec EmitElementwise(const ir::Node& root, BufferRef out, const InputMap& inputs,
                           const Target& target);

// Several elementwise roots of one shape in one kernel (multi-output fusion), `roots[k]` stored
// to `outs[k]`: a later root reads an earlier one's value, not its buffer (so `inputs` holds none
// of them), and only at its own index; every other read is at the element's own index too. All
// values are computed before any is stored, so a root may write the buffer another one reads (a
// donated parameter).
// At most kMaxElementwiseGroup roots, reading and writing at most kMaxElementwiseGroupBuffers
// buffers (lower.cpp keeps to both).
constexpr size_t kMaxElementwiseGroup = 4;
constexpr size_t kMaxElementwiseGroupBuffers = 16;
// The roots after the first that lowering considers for its group.
constexpr int kElementwiseGroupWindow = 16;
KernelSpec EmitElementwiseGroup(const std::vector<const ir::Node*>& roots,
                                const std::vector<BufferRef>& outs, const InputMap& inputs,
                                const Target& target);

// An elementwise chain stored in place of a reduction's result (fusion_rules.h): `root`, of as
// many elements as the reduction, reads `value` (the reduction it is fused with) only at its own
// linear index; the kernel stores root's value, in root's dtype, at each output element.
struct ReduceEpilogue {
  const ir::Node* root = nullptr;
  const ir::Node* value = nullptr;
};

// `root` is a reduction (Sum, Max, ...); its operand's expression is fused into the loop. With
// split > 1 each output element is reduced in `split` contiguous parts, written as
// [outputs, split] partials for a second reduction. With `epilogue` (split 1 only; `inputs`
// then holds the chain's inputs too) each result is stored as the chain's value.
KernelSpec EmitReduce(const ir::Node& root, BufferRef out, const InputMap& inputs, int64_t split,
                      const Target& target, const ReduceEpilogue* epilogue = nullptr);

// `root` is a Scan (Cumsum): one work-item per row along the scanned dim, its operand's
// expression fused into the loop.
KernelSpec EmitScan(const ir::Node& root, BufferRef out, const InputMap& inputs,
                    const Target& target);

// CPU: one work-item per row of `root` (elementwise, f32), where a row is the trailing dims
// that `reduces` reduce. Each reduction (Sum or Max over those dims of an operand of root's
// shape, in dependency order) is computed over the row first and read by later ones and by
// root through broadcasts; then root's row is computed and stored. Softmax in one kernel.
KernelSpec EmitRowKernel(const ir::Node& root, BufferRef out,
                         const std::vector<const ir::Node*>& reduces, const InputMap& inputs,
                         const Target& target);

// `root` is ScatterAdd (emit_gather.cpp): one work-item per output element, adding the src
// elements whose index names it in ascending order along the dim (deterministic). When the
// index is one vector broadcast over the other dims (index_select's and embedding's gradient):
// one work-item per position along the dim, or, with fewer indices than positions, a copy of x
// and one work-item per first occurrence of each index value, reading the index once per item.
std::vector<KernelSpec> EmitScatterAdd(const ir::Node& root, BufferRef out, const InputMap& inputs,
                                       const Target& target);

// Where a matmul operand lives: a buffer read at offset + sum(index * stride), with the batch
// dims folded into one stride, or into two levels: with `batch_inner` > 0, batch b is read at
// (b / batch_inner) * group_stride + (b % batch_inner) * batch_stride (grouped-query attention's
// keys, each repeated for several heads: [kv, rep] batch dims of strides [s, 0]).
struct StridedOperand {
  BufferRef buffer;
  int64_t offset = 0;
  int64_t batch_stride = 0;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
  int64_t batch_inner = 0;  // 0: one level
  int64_t group_stride = 0;
  bool operator==(const StridedOperand&) const = default;
};

// The second product of a dual matmul: `node` has root's A view, shape and dtype, and its B
// (`b`, col stride 1) is read in place; the epilogue reads both products (matmul_cpu.cl's
// LC_DUAL). CPU f32 only.
struct SecondProduct {
  const ir::Node* node = nullptr;
  StridedOperand b;
};

// With `epilogue`: an elementwise chain over `root`'s value at the same index, of root's shape
// and dtype (Lower checks which); the kernel stores the chain's value instead of the product,
// evaluating the chain's other operands from `inputs`. With `stored`: where the product's
// elements go in `out` (batch and row strides, col stride 1; views.h PermutedStore) instead of
// contiguously. With `second` (and an epilogue, which reads it too): a dual product.
KernelSpec EmitMatmul(const ir::Node& root, BufferRef out, const StridedOperand& a,
                      const StridedOperand& b, const Target& target,
                      const ir::Node* epilogue = nullptr, const InputMap* inputs = nullptr,
                      const StridedOperand* stored = nullptr,
                      const SecondProduct* second = nullptr);

// Products that share their A operand (same view, M, K and batch dims), each with its own B
// and output, in one CPU f32 kernel (matmul_cpu.cl's groups): `roots[0]`'s kernel with the
// panels of the others after its own. At most kMaxMatmulGroup products, no epilogues.
constexpr size_t kMaxMatmulGroup = 4;
KernelSpec EmitMatmulGroup(const std::vector<const ir::Node*>& roots,
                           const std::vector<BufferRef>& outs, const StridedOperand& a,
                           const std::vector<StridedOperand>& bs, const Target& target);

// Total bytes of a kernel's arguments, compared with Target::max_param_bytes.
int64_t ArgBytes(const KernelSpec& spec);

}  // namespace lazycl::kernels
