// The driver of lowering: cuts the graph into kernels (partition.h, moved by fusion_rules.h),
// then emits one kernel per root in node order, choosing the kernel's shape by its root, with
// buffers from memory.h. When some kernel's arguments do not fit the device, part of it is
// materialized and the whole plan is emitted again.
#include "kernels/lower.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "kernels/codegen.h"
#include "kernels/fusion_rules.h"
#include "kernels/index_reads.h"
#include "kernels/memory.h"
#include "kernels/merge_rows.h"
#include "kernels/partition.h"
#include "kernels/views.h"

namespace lazycl::kernels {
namespace {

using ir::Node;
using ir::Op;

// One emission of a plan over a fixed cut.
class Emission {
 public:
  Emission(const Partition& p, const Target& target, Plan* plan)
      : p_(p), target_(target), epilogues_(FindEpilogues(p, target.cpu)), memory_(p, plan) {}

  // Emits every kernel; returns the first root whose kernel has too many arguments, or -1.
  int Run() {
    int too_big = -1;
    std::vector<bool> grouped(p_.size(), false);  // launched in an earlier matmul's group
    for (int r = 0; r < p_.size(); ++r) {
      if (!p_.IsRoot(r) || epilogues_.fused[r] || grouped[r]) continue;
      const BufferRef out = memory_.Place(r);
      if (ir::NumElements(p_.node(r).shape) == 0) continue;  // nothing to compute
      if (memory_.WrittenByReshapedRoot(r)) continue;
      std::vector<KernelSpec> specs;
      std::vector<int> described = {r};  // the roots that `specs` compute
      if (const std::vector<int> group = MatmulGroup(r); group.size() > 1) {
        std::vector<const Node*> roots;
        std::vector<BufferRef> outs;
        std::vector<StridedOperand> bs;
        for (int g : group) {
          roots.push_back(&p_.node(g));
          outs.push_back(g == r ? out : memory_.Place(g));
          bs.push_back(Operand(*p_.node(g).operands[1]));
          grouped[g] = true;
        }
        specs = {EmitMatmulGroup(roots, outs, Operand(*p_.node(r).operands[0]), bs, target_)};
      } else if (std::optional<KernelSpec> spec = GroupKernel(r, out, grouped, &described)) {
        specs = {*std::move(spec)};
      } else {
        specs = EmitRoot(r, out);
      }
      Describe(described, specs);
      for (KernelSpec& spec : specs) {
        if (ArgsTooBig(spec, target_) && too_big < 0) too_big = r;
        memory_.Append(std::move(spec));
      }
    }
    return too_big;
  }

 private:
  // Root `r` and the later plain matmul roots that read the same A (the same view, M, K and
  // batch dims) and whose B is in memory before r's kernel runs: one grouped launch (q, k and
  // v of one normed x; SwiGLU's two products). Just {r} when there are none, and off the CPU
  // f32 strategy.
  std::vector<int> MatmulGroup(int r) const {
    const Node& first = p_.node(r);
    if (!PlainMatmul(r) || !target_.cpu || first.dtype != DType::f32) return {r};
    const auto a =
        MatmulAccess(*first.operands[0], [this](const Node& x) { return p_.IsInput(x); });
    if (!a) return {r};
    std::vector<int> group = {r};
    for (int g = r + 1; g < p_.size() && group.size() < kMaxMatmulGroup; ++g) {
      if (!PlainMatmul(g)) continue;
      const Node& n = p_.node(g);
      if (n.dtype != first.dtype || n.operands[0]->shape != first.operands[0]->shape ||
          !std::equal(n.shape.begin(), n.shape.end() - 1, first.shape.begin()) ||
          ir::NumElements(n.shape) == 0 || memory_.WrittenByReshapedRoot(g)) {
        continue;
      }
      const auto ga = MatmulAccess(*n.operands[0], [this](const Node& x) { return p_.IsInput(x); });
      if (!ga || ga->base != a->base || !(ga->access == a->access)) continue;
      const auto b = MatmulAccess(*n.operands[1], [this](const Node& x) { return p_.IsInput(x); });
      if (!b) continue;
      const int base = p_.IndexOf(*b->base);
      if (!p_.IsParam(base) && base >= r) continue;  // B not computed yet when r runs
      group.push_back(g);
    }
    return group;
  }

  // The kernel of root r's elementwise group (ElementwiseGroup), its members marked `grouped`
  // and listed in `described`; nullopt where r has no group. A group whose kernel arguments
  // would not fit the device loses its last members until they do: the group bounds its
  // buffers, not its scalars, and the pieces of a long chain cut by the depth cap
  // (MaterializeDeepChains: 128 ops, a scalar each in `t * s + c`) group back into one kernel
  // (four of them made 346 arguments, past PoCL's 1024 bytes, and Lower's split, which looks
  // only inside r's region, found nothing to split).
  std::optional<KernelSpec> GroupKernel(int r, BufferRef out, std::vector<bool>& grouped,
                                        std::vector<int>* described) {
    std::vector<int> ew = ElementwiseGroup(r, grouped);
    for (; ew.size() > 1; ew.pop_back()) {
      std::vector<const Node*> roots;
      std::vector<BufferRef> outs;
      InputMap inputs;
      for (int g : ew) {
        roots.push_back(&p_.node(g));
        outs.push_back(g == r ? out : memory_.Place(g));
        inputs.merge(Inputs(g));
      }
      for (const Node* root : roots) inputs.erase(root);
      KernelSpec spec = EmitElementwiseGroup(roots, outs, inputs, target_);
      if (ArgsTooBig(spec, target_)) continue;
      for (int g : ew) grouped[g] = true;
      *described = ew;
      return spec;
    }
    return std::nullopt;
  }

  // Root `r` and the later elementwise roots of its shape that one kernel computes with it
  // (multi-output fusion, as XLA's): each reads the group's earlier members or one of its inputs
  // (an optimizer's new moments and the parameter they update, from the same gradient), every
  // value it reads from memory or from a member only at its own index, and nothing computed
  // after r. The kernel runs at r's place, which only moves the later members earlier. Just {r}
  // when there are none. Roots already `grouped` into an earlier kernel are not taken again.
  std::vector<int> ElementwiseGroup(int r, const std::vector<bool>& grouped) const {
    const std::optional<std::vector<int>> first_reads = MemberReads(r);
    if (!first_reads) return {r};
    const Node& first = p_.node(r);
    std::vector<int> group = {r};
    std::vector<int> read = *first_reads;
    // Only the next few roots are looked at (an optimizer's updates of one parameter are
    // neighbours), so that lowering stays linear in the graph's size.
    int looked = 0;
    for (int g = r + 1;
         g < p_.size() && group.size() < kMaxElementwiseGroup && looked < kElementwiseGroupWindow;
         ++g) {
      if (!p_.IsRoot(g)) continue;
      ++looked;
      if (grouped[g] || p_.node(g).shape != first.shape) continue;
      const std::optional<std::vector<int>> g_reads = MemberReads(g);
      if (!g_reads) continue;
      bool related = false, ready = true;
      for (int j : *g_reads) {
        const bool member = std::find(group.begin(), group.end(), j) != group.end();
        related = related || member || std::find(read.begin(), read.end(), j) != read.end();
        ready = ready && (member || p_.IsParam(j) || j < r);
      }
      if (!related || !ready) continue;
      std::vector<int> all = read;
      for (int j : *g_reads) {
        if (std::find(all.begin(), all.end(), j) == all.end()) all.push_back(j);
      }
      // Few enough buffers that the kernel's arguments fit any device (16 bytes each at most).
      if (all.size() + group.size() + 1 > kMaxElementwiseGroupBuffers) break;
      group.push_back(g);
      read = std::move(all);
    }
    return group;
  }

  // The buffers (kernel inputs) that root r's kernel reads, where r can be a member of an
  // elementwise group: an elementwise root that launches a kernel of its own in the index form
  // (no reduction, matmul, scan or scatter in it, so not a row kernel; no epilogue's carrier, not
  // a copy of a parameter, not an output that its operand's kernel writes), reading every buffer
  // at its own index only. nullopt otherwise.
  std::optional<std::vector<int>> MemberReads(int r) const {
    const Node& n = p_.node(r);
    if (!p_.IsRoot(r) || p_.IsParam(r) || epilogues_.fused[r] ||
        !(ir::IsElementwise(n.op) || IsIdentityReshape(n)) || ir::NumElements(n.shape) == 0 ||
        memory_.WrittenByReshapedRoot(r) || epilogues_.matmul_of.contains(r) ||
        epilogues_.reduce_of.contains(r)) {
      return std::nullopt;
    }
    const auto is_input = [this](const Node& x) { return p_.IsInput(x); };
    std::vector<int> out;
    for (int i : p_.Region(r)) {
      const Op op = p_.node(i).op;
      if (ir::IsReduce(op) || op == Op::kMatmul || ir::IsScan(op) || op == Op::kScatterAdd)
        return std::nullopt;
      for (const ir::NodePtr& o : p_.node(i).operands) {
        const int j = p_.IndexOf(*o);
        if (!p_.IsInput(j) || std::find(out.begin(), out.end(), j) != out.end()) continue;
        if (!ReadsOnlyAtOwnIndex(n, *o, is_input, OwnIndex::kElement)) return std::nullopt;
        out.push_back(j);
      }
    }
    return out;
  }

  // A matmul root that launches its own kernel: no epilogue reads it in, it carries none, and
  // it is not stored through a permute.
  bool PlainMatmul(int r) const {
    return p_.IsRoot(r) && p_.node(r).op == Op::kMatmul && !epilogues_.fused[r] &&
           !epilogues_.matmul_of.contains(r) && !epilogues_.permuted.contains(r);
  }

  // The kernels that compute root `r` into `out`, in launch order.
  std::vector<KernelSpec> EmitRoot(int r, BufferRef out) {
    const Node& root = p_.node(r);
    if (auto epi = epilogues_.matmul_of.find(r); epi != epilogues_.matmul_of.end()) {
      const Node& m = p_.node(epi->second);
      InputMap inputs = Inputs(r);
      inputs.erase(&m);
      std::optional<SecondProduct> second;
      if (auto dual = epilogues_.second_of.find(r); dual != epilogues_.second_of.end()) {
        const Node& m2 = p_.node(dual->second);
        inputs.erase(&m2);
        second = SecondProduct{&m2, Operand(*m2.operands[1])};
      }
      return {EmitMatmul(m, out, Operand(*m.operands[0]), Operand(*m.operands[1]), target_, &root,
                         &inputs, nullptr, second ? &*second : nullptr)};
    }
    if (auto st = epilogues_.permuted.find(r); st != epilogues_.permuted.end()) {
      const Node& m = p_.node(st->second);
      const std::optional<StridedOperand> stored = PermutedStore(root);
      LAZYCL_CHECK(stored.has_value(), "lowering: %s is not a permuted store",
                   ir::NodeString(root).c_str());
      KernelSpec spec = EmitMatmul(m, out, Operand(*m.operands[0]), Operand(*m.operands[1]),
                                   target_, nullptr, nullptr, &*stored);
      absl::StrAppend(&spec.summary, " stored as ", ir::NodeString(root));
      return {std::move(spec)};
    }
    if (root.op == Op::kMatmul) {
      return {
          EmitMatmul(root, out, Operand(*root.operands[0]), Operand(*root.operands[1]), target_)};
    }
    if (auto red = epilogues_.reduce_of.find(r); red != epilogues_.reduce_of.end()) {
      const ReduceEpilogue epilogue{&root, &p_.node(red->second)};
      return EmitReduction(red->second, out, &epilogue, Inputs(r));
    }
    if (ir::IsReduce(root.op)) return EmitReduction(r, out);
    if (root.op == Op::kScatterAdd) return EmitScatterAdd(root, out, Inputs(r), target_);
    if (ir::IsScan(root.op)) return {EmitScan(root, out, Inputs(r), target_)};
    // Reductions left inside an elementwise kernel were taken in by FuseRowReductions.
    std::vector<int> region = p_.Region(r);
    std::sort(region.begin(), region.end());
    std::vector<const Node*> reduces;
    for (int i : region) {
      if (ir::IsReduce(p_.node(i).op)) reduces.push_back(&p_.node(i));
    }
    if (reduces.empty()) return {EmitElementwise(root, out, Inputs(r), target_)};
    return {EmitRowKernel(root, out, reduces, Inputs(r), target_)};
  }

  static int64_t Bytes(const Node& n) {
    return ir::NumElements(n.shape) * static_cast<int64_t>(dtype_size(n.dtype));
  }

  // What the kernels of `roots` (one, or an elementwise group) do, for the profiler: the ops
  // fused into them, in order of first appearance with a count where one repeats, and the bytes
  // of the inputs and the outputs.
  void Describe(const std::vector<int>& roots, std::vector<KernelSpec>& specs) const {
    if (specs.empty()) return;
    std::vector<int> region;
    InputMap inputs;
    int64_t written = 0;
    for (int r : roots) {
      const std::vector<int> own = p_.Region(r);
      region.insert(region.end(), own.begin(), own.end());
      inputs.merge(Inputs(r));
      written += Bytes(p_.node(r));
      for (const auto* fused : {&epilogues_.matmul_of, &epilogues_.second_of, &epilogues_.permuted,
                                &epilogues_.reduce_of}) {
        if (auto epi = fused->find(r); epi != fused->end()) {
          const std::vector<int> m = p_.Region(epi->second);
          region.insert(region.end(), m.begin(), m.end());
          inputs.merge(Inputs(epi->second));
        }
      }
    }
    for (int r : roots) inputs.erase(&p_.node(r));  // a member read by another: not from memory
    std::sort(region.begin(), region.end());
    std::vector<std::pair<ir::Op, int>> counts;
    for (int i : region) {
      const Op op = p_.node(i).op;
      if (ir::IsLeaf(op) || ir::IsView(op)) continue;
      auto it =
          std::find_if(counts.begin(), counts.end(), [op](const auto& c) { return c.first == op; });
      if (it == counts.end()) {
        counts.emplace_back(op, 1);
      } else {
        ++it->second;
      }
    }
    std::string ops;
    for (const auto& [op, count] : counts) {
      absl::StrAppend(&ops, ops.empty() ? "" : ", ", ir::OpName(op));
      if (count > 1) absl::StrAppend(&ops, " x", count);
    }
    int64_t total = written;
    for (const auto& [node, ref] : inputs) total += Bytes(*node);
    for (KernelSpec& spec : specs) spec.fused_ops = ops.empty() ? "copy" : ops;
    specs.front().bytes = total;
  }

  // A reduction with few outputs and a long reduced extent runs in two stages: `split` partial
  // reductions per output into a temp, then a reduction of the partials. An epilogue (reading
  // `epilogue_inputs`) goes with the last stage.
  std::vector<KernelSpec> EmitReduction(int r, BufferRef out,
                                        const ReduceEpilogue* epilogue = nullptr,
                                        const InputMap& epilogue_inputs = {}) {
    const Node& root = p_.node(r);
    const int64_t outputs = ir::NumElements(root.shape);
    const int64_t reduced =
        ir::NumElements(root.operands[0]->shape) / std::max<int64_t>(outputs, 1);
    if (outputs > 64 || reduced < 32768) {
      InputMap inputs = Inputs(r);
      inputs.insert(epilogue_inputs.begin(), epilogue_inputs.end());
      return {EmitReduce(root, out, inputs, 1, target_, epilogue)};
    }
    const int64_t split = std::clamp<int64_t>(reduced / 8192, 2, 256);
    std::vector<KernelSpec> specs;
    BufferRef partials =
        memory_.NewTemp(static_cast<size_t>(outputs * split) * dtype_size(root.dtype));
    specs.push_back(EmitReduce(root, partials, Inputs(r), split, target_));
    // The second stage reduces the [outputs, split] partials along their last dim.
    ir::NodePtr leaf = ir::MakeBuffer(nullptr, root.dtype, {outputs, split});
    ir::NodePtr stage2 = *ir::MakeReduce(root.op, leaf, {1});
    InputMap inputs = epilogue_inputs;
    inputs[leaf.get()] = partials;
    specs.push_back(EmitReduce(*stage2, out, inputs, 1, target_, epilogue));
    return specs;
  }

  // What root `r`'s kernel reads from memory.
  InputMap Inputs(int r) const {
    InputMap inputs;
    // An output that is a parameter itself is a copy: the root reads its own parameter.
    if (p_.IsParam(r)) inputs[&p_.node(r)] = memory_.Ref(r);
    for (int i : p_.Region(r)) {
      for (const ir::NodePtr& o : p_.node(i).operands) {
        const int j = p_.IndexOf(*o);
        if (epilogues_.fused[j]) continue;  // the epilogue's accumulator (EmitMatmul)
        if (p_.IsInput(j)) inputs[o.get()] = memory_.Ref(j);
      }
    }
    return inputs;
  }

  // A matmul operand, read in place through its views.
  StridedOperand Operand(const Node& n) const {
    auto view = MatmulAccess(n, [this](const Node& x) { return p_.IsInput(x); });
    LAZYCL_CHECK(view.has_value(), "lowering: matmul operand is not strided");
    view->access.buffer = memory_.Ref(p_.IndexOf(*view->base));
    return view->access;
  }

  const Partition& p_;
  const Target& target_;
  const Epilogues epilogues_;
  Memory memory_;
};

}  // namespace

absl::StatusOr<Plan> Lower(const Graph& graph, const Target& target_in) {
  Target target = target_in;
  target.bind_offsets = graph.bind_offsets;
  absl::flat_hash_map<const Node*, int> scalar_of;
  for (size_t i = 0; i < graph.scalar_of.size(); ++i) {
    if (graph.scalar_of[i] >= 0) scalar_of[graph.nodes[i]] = graph.scalar_of[i];
  }
  target.scalar_of = &scalar_of;
  Partition p(graph);
  MaterializeSharedExpensiveNodes(&p);
  MaterializeBroadcastExpensiveNodes(&p);
  MaterializeDeepChains(&p);
  if (target.cpu) {
    FuseRowReductions(&p);
    MaterializeDeepChains(&p);
  }
  for (int attempt = 0;; ++attempt) {
    Plan plan;
    const int too_big = Emission(p, target, &plan).Run();
    if (too_big < 0) {
      if (target.cpu) MergeRowKernels(&plan, target);
      return plan;
    }
    const int victim = LargestFusedOperand(p, too_big);
    if (victim < 0 || attempt > p.size()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "a kernel for ", ir::NodeString(p.node(too_big)), " needs more than the device's ",
          target.max_param_bytes, " bytes of kernel arguments and cannot be split further"));
    }
    p.SetRoot(victim, true);
  }
}

}  // namespace lazycl::kernels
