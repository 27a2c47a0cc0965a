#include "kernels/memory.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "base/check.h"
#include "kernels/codegen.h"

namespace lazycl::kernels {
namespace {

using ir::Node;
using ir::Op;

// Leave room below the device's argument limit for the kernel's own bookkeeping.
constexpr int64_t kArgBytesMargin = 64;

size_t Bytes(const Node& n) {
  return static_cast<size_t>(ir::NumElements(n.shape)) * dtype_size(n.dtype);
}

// Outputs that are only a Reshape (or a chain of them) of another kernel's root hold the same
// bytes as that root, so the root writes the output's buffer: sum(x) is a reduction with a
// Reshape to drop its kept dims. Maps root -> output index.
absl::flat_hash_map<int, int> ReshapedOutputs(const Partition& p,
                                              const absl::flat_hash_map<int, int>& output_of) {
  const Graph& g = p.graph();
  absl::flat_hash_map<int, int> alias;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const int j = RootBelowReshapes(p, g.outputs[k]);
    if (j < 0 || p.node(j).op == Op::kBuffer || output_of.contains(j) || alias.contains(j))
      continue;
    alias.emplace(j, static_cast<int>(k));
  }
  return alias;
}

}  // namespace

Memory::Memory(const Partition& p, Plan* plan) : p_(p), plan_(plan) {
  const Graph& g = p.graph();
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    output_of_.emplace(g.outputs[k], static_cast<int>(k));
    plan->output_bytes.push_back(Bytes(p.node(g.outputs[k])));
  }
  alias_ = ReshapedOutputs(p, output_of_);
  for (const auto& [root, k] : alias_) aliased_outputs_.insert(g.outputs[k]);
}

BufferRef Memory::Place(int r) {
  if (auto placed = refs_.find(r); placed != refs_.end()) return placed->second;
  BufferRef ref;
  if (auto out = output_of_.find(r); out != output_of_.end()) {
    ref = BufferRef{BufferRef::Kind::kOutput, out->second};
  } else if (auto aliased = alias_.find(r); aliased != alias_.end()) {
    ref = BufferRef{BufferRef::Kind::kOutput, aliased->second};
  } else {
    ref = NewTemp(Bytes(p_.node(r)));
  }
  refs_[r] = ref;
  return ref;
}

BufferRef Memory::NewTemp(size_t bytes) {
  plan_->temp_bytes.push_back(bytes);
  plan_->temp_last_use.push_back(-1);
  return BufferRef{BufferRef::Kind::kTemp, static_cast<int>(plan_->temp_bytes.size() - 1)};
}

BufferRef Memory::Ref(int i) const {
  if (p_.IsParam(i)) return {BufferRef::Kind::kParam, p_.graph().param_of[i]};
  auto it = refs_.find(i);
  LAZYCL_CHECK(it != refs_.end(), "lowering: no buffer for node %d", i);
  return it->second;
}

void Memory::Append(KernelSpec spec) {
  const int k = static_cast<int>(plan_->kernels.size());
  for (const KernelArgSpec& a : spec.args) {
    if (a.kind == KernelArgSpec::Kind::kBuffer && a.buffer.kind == BufferRef::Kind::kTemp &&
        !a.written) {
      plan_->temp_last_use[a.buffer.index] = k;
    }
  }
  plan_->kernels.push_back(std::move(spec));
}

int64_t ArgBytes(const KernelSpec& spec) {
  auto bytes = [](const std::vector<KernelArgSpec>& args) {
    int64_t sum = 0;
    for (const KernelArgSpec& a : args) {
      if (a.kind == KernelArgSpec::Kind::kPack) {
        sum += 8 * static_cast<int64_t>(a.fields.size());
        continue;
      }
      const bool narrow = a.kind == KernelArgSpec::Kind::kInt32 ||
                          (a.kind == KernelArgSpec::Kind::kOffset && !a.wide) ||
                          (a.kind == KernelArgSpec::Kind::kScalar && a.dtype != DType::i64);
      sum += narrow ? 4 : 8;
    }
    return sum;
  };
  int64_t extra = 0;
  for (const Launch& launch : spec.launches) extra = std::max(extra, bytes(launch.extra_args));
  return bytes(spec.args) + extra;
}

bool ArgsTooBig(const KernelSpec& spec, const Target& target) {
  return ArgBytes(spec) > target.max_param_bytes - kArgBytesMargin;
}

int LargestFusedOperand(const Partition& p, int r) {
  int best = -1;
  size_t best_size = 0;
  for (int i : p.Region(r)) {
    if (i == r || ir::IsLeaf(p.node(i).op)) continue;
    size_t size = p.Region(i).size();
    if (size > best_size) {
      best = i;
      best_size = size;
    }
  }
  return best;
}

}  // namespace lazycl::kernels
