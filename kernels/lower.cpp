#include "kernels/lower.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "kernels/codegen.h"
#include "kernels/index_reads.h"

namespace lazycl::kernels {
namespace {

using ir::Node;
using ir::Op;
using ir::Shape;

// A fused subexpression larger than this is materialized rather than recomputed when two
// kernels need it.
constexpr int kMaxRecomputedNodes = 32;
// A kernel's fused expression is at most this deep: code generation recurses once per level
// (and the stack frames are large under sanitizers), and very long kernels compile slowly.
constexpr int kMaxFusedDepth = 128;
// Leave room below the device's argument limit for the kernel's own bookkeeping.
constexpr int64_t kArgBytesMargin = 64;

std::vector<int64_t> ContiguousStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

struct Strided {
  const Node* base = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> strides;
};

class Lowering {
 public:
  Lowering(const Graph& graph, const Target& target) : g_(graph), target_(target) {
    target_.bind_offsets = graph.bind_offsets;
    for (size_t i = 0; i < g_.nodes.size(); ++i) index_[g_.nodes[i]] = static_cast<int>(i);
  }

  absl::StatusOr<Plan> Run() {
    root_.assign(g_.nodes.size(), false);
    for (int o : g_.outputs) root_[o] = true;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node* n = g_.nodes[i];
      if (ir::IsReduce(n->op) || n->op == Op::kMatmul) root_[i] = true;
    }
    for (const Node* n : g_.nodes) {
      if (n->op != Op::kMatmul) continue;
      for (const ir::NodePtr& operand : n->operands) {
        if (!MatmulOperand(*operand)) root_[index_.at(operand.get())] = true;
      }
    }
    MaterializeSharedExpensiveNodes();
    MaterializeDeepChains();
    if (target_.cpu) {
      FuseRowReductions();
      MaterializeDeepChains();
    }
    // Emit; while some kernel's arguments do not fit, materialize part of it and emit again.
    for (int attempt = 0;; ++attempt) {
      Plan plan;
      int too_big = -1;
      Emit(&plan, &too_big);
      if (too_big < 0) return plan;
      int victim = LargestFusedOperand(too_big);
      if (victim < 0 || attempt > static_cast<int>(g_.nodes.size())) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "a kernel for ", ir::NodeString(*g_.nodes[too_big]), " needs more than the device's ",
            target_.max_param_bytes, " bytes of kernel arguments and cannot be split further"));
      }
      root_[victim] = true;
    }
  }

 private:
  bool IsInput(int i) const { return root_[i] || g_.nodes[i]->op == Op::kBuffer; }
  bool IsParam(int i) const { return g_.nodes[i]->op == Op::kBuffer; }

  // Non-input nodes fused into the kernel of root `r`, the root included.
  std::vector<int> Region(int r) const {
    std::vector<int> region;
    absl::flat_hash_set<int> seen;
    std::vector<int> stack = {r};
    while (!stack.empty()) {
      int i = stack.back();
      stack.pop_back();
      if (!seen.insert(i).second) continue;
      region.push_back(i);
      for (const ir::NodePtr& o : g_.nodes[i]->operands) {
        int j = index_.at(o.get());
        if (!IsInput(j)) stack.push_back(j);
      }
    }
    return region;
  }

  void MaterializeSharedExpensiveNodes() {
    bool changed = true;
    while (changed) {
      changed = false;
      std::vector<int> kernels_using(g_.nodes.size(), 0);
      for (size_t r = 0; r < g_.nodes.size(); ++r) {
        if (!root_[r]) continue;
        for (int i : Region(static_cast<int>(r))) {
          if (i != static_cast<int>(r)) ++kernels_using[i];
        }
      }
      for (size_t i = 0; i < g_.nodes.size(); ++i) {
        if (kernels_using[i] >= 2 && !IsInput(static_cast<int>(i)) &&
            static_cast<int>(Region(static_cast<int>(i)).size()) > kMaxRecomputedNodes) {
          root_[i] = true;
          changed = true;
          break;
        }
      }
    }
  }

  // CPU: a reduction over the trailing dims of a value shaped like an elementwise root, read
  // only through broadcasts back into that root's kernel, is computed inside that kernel, one
  // work-item per row (EmitRowKernel): softmax's max, sum of exp and normalisation become one
  // pass over memory instead of three kernels. Nested reductions (the sum reads the max) are
  // taken in as they become reachable. Rows must be long enough for vectors and many enough
  // to spread over the device.
  void FuseRowReductions() {
    absl::flat_hash_set<int> outputs(g_.outputs.begin(), g_.outputs.end());
    for (size_t o = 0; o < g_.nodes.size(); ++o) {
      const Node& root = *g_.nodes[o];
      if (!root_[o] || !ir::IsElementwise(root.op) || root.dtype != DType::f32) continue;
      size_t reduced_dims = 0;
      bool changed = true;
      while (changed) {
        changed = false;
        for (int j : Region(static_cast<int>(o))) {
          for (const ir::NodePtr& operand : g_.nodes[j]->operands) {
            const int r = index_.at(operand.get());
            if (!root_[r] || outputs.contains(r) || !RowReduction(*operand, root, &reduced_dims))
              continue;
            root_[r] = false;  // tentatively part of o's kernel
            if (OnlyReadBy(r, static_cast<int>(o))) {
              changed = true;
            } else {
              root_[r] = true;
            }
          }
        }
      }
    }
  }

  // Whether `red` reduces trailing dims of a value shaped like `root`, all rows reducing the
  // same number of dims (`*reduced_dims`, 0 until the first), with rows worth a row kernel.
  static bool RowReduction(const Node& red, const Node& root, size_t* reduced_dims) {
    if ((red.op != Op::kSum && red.op != Op::kMax) || red.dtype != DType::f32) return false;
    const Node& x = *red.operands[0];
    if (x.shape != root.shape) return false;
    const size_t k = red.args.size();
    if (*reduced_dims != 0 && k != *reduced_dims) return false;
    for (size_t i = 0; i < k; ++i) {
      if (red.args[i] != static_cast<int64_t>(x.shape.size() - k + i)) return false;
    }
    int64_t row = 1;
    for (size_t d = x.shape.size() - k; d < x.shape.size(); ++d) row *= x.shape[d];
    const int64_t rows = ir::NumElements(x.shape) / std::max<int64_t>(row, 1);
    if (row < 16 || rows < 16) return false;
    *reduced_dims = k;
    return true;
  }

  // Whether node `r`, no longer a root, is read only inside root `o`'s kernel, and there only
  // as a value of the row being computed (OwnIndex::kRow).
  bool OnlyReadBy(int r, int o) const {
    for (size_t k = 0; k < g_.nodes.size(); ++k) {
      if (!root_[k] || static_cast<int>(k) == o) continue;
      for (int i : Region(static_cast<int>(k))) {
        if (i == r) return false;
      }
    }
    return ReadsOnlyAtOwnIndex(*g_.nodes[o], *g_.nodes[r], KernelInputs(), OwnIndex::kRow);
  }

  IsKernelInput KernelInputs() const {
    return [this](const Node& n) { return IsInput(index_.at(&n)); };
  }

  // Cuts fused chains deeper than kMaxFusedDepth by materializing the node at the limit.
  void MaterializeDeepChains() {
    std::vector<int> depth(g_.nodes.size(), 0);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (g_.nodes[i]->op == Op::kBuffer) continue;
      int d = 0;
      for (const ir::NodePtr& o : g_.nodes[i]->operands) {
        const int j = index_.at(o.get());
        if (!IsInput(j)) d = std::max(d, depth[j]);
      }
      depth[i] = d + 1;
      if (depth[i] >= kMaxFusedDepth && !root_[i]) root_[i] = true;
    }
  }

  // The biggest fused operand subtree inside the kernel of root `r`, or -1.
  int LargestFusedOperand(int r) const {
    int best = -1;
    size_t best_size = 0;
    for (int i : Region(r)) {
      if (i == r || ir::IsLeaf(g_.nodes[i]->op)) continue;
      size_t size = Region(i).size();
      if (size > best_size) {
        best = i;
        best_size = size;
      }
    }
    return best;
  }

  // How `n` reads memory when it is a chain of strided views over a materialized node.
  std::optional<Strided> StridedOf(const Node& n) const {
    int i = index_.at(&n);
    if (IsInput(i)) return Strided{&n, 0, ContiguousStrides(n.shape)};
    const Node& x = n.operands.empty() ? n : *n.operands[0];
    switch (n.op) {
      case Op::kPermute: {
        auto s = StridedOf(x);
        if (!s) return std::nullopt;
        std::vector<int64_t> strides(n.shape.size());
        for (size_t d = 0; d < strides.size(); ++d) strides[d] = s->strides[n.args[d]];
        s->strides = std::move(strides);
        return s;
      }
      case Op::kExpand: {
        auto s = StridedOf(x);
        if (!s) return std::nullopt;
        for (size_t d = 0; d < n.shape.size(); ++d) {
          if (x.shape[d] == 1) s->strides[d] = 0;
        }
        return s;
      }
      case Op::kSlice: {
        auto s = StridedOf(x);
        if (!s) return std::nullopt;
        for (size_t d = 0; d < n.shape.size(); ++d) s->offset += n.args[d] * s->strides[d];
        return s;
      }
      case Op::kReshape: {
        auto s = StridedOf(x);
        if (!s || s->strides != ContiguousStrides(x.shape)) return std::nullopt;
        s->strides = ContiguousStrides(n.shape);
        return s;
      }
      default:
        return std::nullopt;
    }
  }

  // A matmul operand as offset, one batch stride and row/col strides over `*base`; nullopt
  // when the batch dims are not one arithmetic sequence or the views are not strided.
  std::optional<StridedOperand> MatmulAccess(const Node& n, const Node** base) const {
    auto s = StridedOf(n);
    if (!s) return std::nullopt;
    const size_t r = n.shape.size();
    StridedOperand out;
    out.offset = s->offset;
    out.row_stride = s->strides[r - 2];
    out.col_stride = s->strides[r - 1];
    // Batch dims of size > 1 must satisfy stride[d] == batch_stride * (batch elements inside d).
    int64_t inner = 1;
    bool have = false;
    for (int d = static_cast<int>(r) - 3; d >= 0; --d) {
      if (n.shape[d] != 1) {
        if (!have) {
          out.batch_stride = s->strides[d] / inner;
          if (out.batch_stride * inner != s->strides[d]) return std::nullopt;
          have = true;
        } else if (s->strides[d] != out.batch_stride * inner) {
          return std::nullopt;
        }
      }
      inner *= std::max<int64_t>(n.shape[d], 1);
    }
    *base = s->base;
    return out;
  }

  bool MatmulOperand(const Node& n) const {
    const Node* base = nullptr;
    return MatmulAccess(n, &base).has_value();
  }

  StridedOperand StridedMatmulOperand(const Node& n) const {
    const Node* base = nullptr;
    auto access = MatmulAccess(n, &base);
    LAZYCL_CHECK(access.has_value(), "lowering: matmul operand is not strided");
    access->buffer = Ref(index_.at(base));
    return *access;
  }

  BufferRef Ref(int i) const {
    if (IsParam(i)) return {BufferRef::Kind::kParam, g_.param_of[i]};
    auto it = refs_.find(i);
    LAZYCL_CHECK(it != refs_.end(), "lowering: no buffer for node %d", i);
    return it->second;
  }

  InputMap Inputs(int r) const {
    InputMap inputs;
    // An output that is a parameter itself is a copy: the root reads its own parameter.
    if (IsParam(r)) inputs[g_.nodes[r]] = BufferRef{BufferRef::Kind::kParam, g_.param_of[r]};
    for (int i : Region(r)) {
      for (const ir::NodePtr& o : g_.nodes[i]->operands) {
        int j = index_.at(o.get());
        if (fused_matmul_[j]) continue;  // the epilogue's accumulator (EmitMatmul)
        if (IsInput(j)) inputs[o.get()] = Ref(j);
      }
    }
    return inputs;
  }

  int64_t ReduceSplit(const Node& root) const {
    const int64_t outputs = ir::NumElements(root.shape);
    const int64_t reduced =
        ir::NumElements(root.operands[0]->shape) / std::max<int64_t>(outputs, 1);
    if (outputs > 64 || reduced < 32768) return 1;
    return std::clamp<int64_t>(reduced / 8192, 2, 256);
  }

  // Outputs that are only a Reshape (or a chain of them) of another kernel's root hold the same
  // bytes as that root, so the root writes the output's buffer and the output needs no copy
  // kernel: sum(x) is a reduction with a Reshape to drop its kept dims. Maps root -> output.
  absl::flat_hash_map<int, int> ReshapedOutputs(
      const absl::flat_hash_map<int, int>& output_of) const {
    absl::flat_hash_map<int, int> alias;
    for (size_t k = 0; k < g_.outputs.size(); ++k) {
      const Node* n = g_.nodes[g_.outputs[k]];
      if (n->op != Op::kReshape) continue;
      int j = index_.at(n->operands[0].get());
      while (!root_[j] && g_.nodes[j]->op == Op::kReshape)
        j = index_.at(g_.nodes[j]->operands[0].get());
      if (!root_[j] || g_.nodes[j]->op == Op::kBuffer || output_of.contains(j) || alias.contains(j))
        continue;
      alias.emplace(j, static_cast<int>(k));
    }
    return alias;
  }

  // Matmuls whose result only an elementwise chain reads, at the result's own index, run that
  // chain as their epilogue: relu(h @ w + bias) is one kernel. Fills epilogue_of_ (root of the
  // chain -> matmul) and fused_matmul_ (matmuls that launch no kernel of their own).
  void FindEpilogues() {
    epilogue_of_.clear();
    fused_matmul_.assign(g_.nodes.size(), false);
    absl::flat_hash_set<int> outputs(g_.outputs.begin(), g_.outputs.end());
    // For every matmul, the roots whose kernels read it.
    absl::flat_hash_map<int, std::vector<int>> readers;
    for (size_t r = 0; r < g_.nodes.size(); ++r) {
      if (!root_[r]) continue;
      if (IsParam(static_cast<int>(r))) continue;
      absl::flat_hash_set<int> read;
      for (int i : Region(static_cast<int>(r))) {
        for (const ir::NodePtr& o : g_.nodes[i]->operands) {
          const int j = index_.at(o.get());
          if (g_.nodes[j]->op == Op::kMatmul && j != static_cast<int>(r) && read.insert(j).second)
            readers[j].push_back(static_cast<int>(r));
        }
      }
    }
    for (size_t mi = 0; mi < g_.nodes.size(); ++mi) {
      const Node& m = *g_.nodes[mi];
      if (m.op != Op::kMatmul || outputs.contains(static_cast<int>(mi))) continue;
      auto it = readers.find(static_cast<int>(mi));
      if (it == readers.end() || it->second.size() != 1) continue;
      const int r = it->second[0];
      const Node& root = *g_.nodes[r];
      if (epilogue_of_.contains(r) || !ir::IsElementwise(root.op) || root.shape != m.shape ||
          root.dtype != m.dtype) {
        continue;
      }
      if (EpilogueChain(r, static_cast<int>(mi))) {
        epilogue_of_[r] = static_cast<int>(mi);
        fused_matmul_[mi] = true;
      }
    }
  }

  // Whether root `r` reads matmul `m` only at r's own index, r not being a row kernel.
  bool EpilogueChain(int r, int m) const {
    // A row kernel (reductions taken in by FuseRowReductions) has no per-element epilogue.
    for (int i : Region(r)) {
      if (ir::IsReduce(g_.nodes[i]->op)) return false;
    }
    return ReadsOnlyAtOwnIndex(*g_.nodes[r], *g_.nodes[m], KernelInputs(), OwnIndex::kElement);
  }

  void Emit(Plan* plan, int* too_big) {
    refs_.clear();
    FindEpilogues();
    absl::flat_hash_map<int, int> output_of;
    for (size_t k = 0; k < g_.outputs.size(); ++k) {
      output_of.emplace(g_.outputs[k], static_cast<int>(k));
      const Node& n = *g_.nodes[g_.outputs[k]];
      plan->output_bytes.push_back(static_cast<size_t>(ir::NumElements(n.shape)) *
                                   dtype_size(n.dtype));
    }
    const absl::flat_hash_map<int, int> alias = ReshapedOutputs(output_of);
    absl::flat_hash_set<int> aliased_outputs;
    for (const auto& [root, k] : alias) aliased_outputs.insert(g_.outputs[k]);
    auto new_temp = [&](size_t bytes) {
      plan->temp_bytes.push_back(bytes);
      plan->temp_last_use.push_back(-1);
      return BufferRef{BufferRef::Kind::kTemp, static_cast<int>(plan->temp_bytes.size() - 1)};
    };
    for (size_t r = 0; r < g_.nodes.size(); ++r) {
      if (!root_[r] || fused_matmul_[r]) continue;  // a fused matmul runs in its reader's kernel
      const Node& root = *g_.nodes[r];
      const size_t bytes =
          static_cast<size_t>(ir::NumElements(root.shape)) * dtype_size(root.dtype);
      auto out = output_of.find(static_cast<int>(r));
      auto aliased = alias.find(static_cast<int>(r));
      BufferRef ref;
      if (out != output_of.end()) {
        ref = BufferRef{BufferRef::Kind::kOutput, out->second};
      } else if (aliased != alias.end()) {
        ref = BufferRef{BufferRef::Kind::kOutput, aliased->second};
      } else {
        ref = new_temp(bytes);
      }
      refs_[static_cast<int>(r)] = ref;
      if (bytes == 0) continue;                                     // nothing to compute
      if (aliased_outputs.contains(static_cast<int>(r))) continue;  // its root wrote it

      std::vector<KernelSpec> specs;
      if (auto epi = epilogue_of_.find(static_cast<int>(r)); epi != epilogue_of_.end()) {
        const Node& m = *g_.nodes[epi->second];
        InputMap inputs = Inputs(static_cast<int>(r));
        inputs.erase(&m);
        specs.push_back(EmitMatmul(m, ref, StridedMatmulOperand(*m.operands[0]),
                                   StridedMatmulOperand(*m.operands[1]), target_, &root, &inputs));
      } else if (root.op == Op::kMatmul) {
        specs.push_back(EmitMatmul(root, ref, StridedMatmulOperand(*root.operands[0]),
                                   StridedMatmulOperand(*root.operands[1]), target_));
      } else if (ir::IsReduce(root.op)) {
        const int64_t split = ReduceSplit(root);
        if (split == 1) {
          specs.push_back(EmitReduce(root, ref, Inputs(static_cast<int>(r)), 1, target_));
        } else {
          const int64_t outputs = ir::NumElements(root.shape);
          BufferRef partials =
              new_temp(static_cast<size_t>(outputs * split) * dtype_size(root.dtype));
          specs.push_back(EmitReduce(root, partials, Inputs(static_cast<int>(r)), split, target_));
          // The second stage reduces the [outputs, split] partials along their last dim.
          ir::NodePtr leaf = ir::MakeBuffer(nullptr, root.dtype, {outputs, split});
          ir::NodePtr stage2 = *ir::MakeReduce(root.op, leaf, {1});
          specs.push_back(EmitReduce(*stage2, ref, InputMap{{leaf.get(), partials}}, 1, target_));
        }
      } else {
        // Reductions left inside an elementwise kernel were taken in by FuseRowReductions.
        std::vector<int> region = Region(static_cast<int>(r));
        std::sort(region.begin(), region.end());
        std::vector<const Node*> reduces;
        for (int i : region) {
          if (ir::IsReduce(g_.nodes[i]->op)) reduces.push_back(g_.nodes[i]);
        }
        if (reduces.empty()) {
          specs.push_back(EmitElementwise(root, ref, Inputs(static_cast<int>(r)), target_));
        } else {
          specs.push_back(EmitRowKernel(root, ref, reduces, Inputs(static_cast<int>(r)), target_));
        }
      }
      for (KernelSpec& spec : specs) {
        if (ArgBytes(spec) > target_.max_param_bytes - kArgBytesMargin && *too_big < 0) {
          *too_big = static_cast<int>(r);
        }
        const int k = static_cast<int>(plan->kernels.size());
        for (const KernelArgSpec& a : spec.args) {
          if (a.kind == KernelArgSpec::Kind::kBuffer && a.buffer.kind == BufferRef::Kind::kTemp &&
              !a.written) {
            plan->temp_last_use[a.buffer.index] = k;
          }
        }
        plan->kernels.push_back(std::move(spec));
      }
    }
  }

  const Graph& g_;
  Target target_;
  absl::flat_hash_map<const Node*, int> index_;
  std::vector<bool> root_;
  absl::flat_hash_map<int, BufferRef> refs_;
  absl::flat_hash_map<int, int> epilogue_of_;
  std::vector<bool> fused_matmul_;
};

}  // namespace

absl::StatusOr<Plan> Lower(const Graph& graph, const Target& target) {
  return Lowering(graph, target).Run();
}

}  // namespace lazycl::kernels
