#pragma once

#include <cstddef>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "kernels/lower.h"
#include "kernels/partition.h"
#include "kernels/plan.h"

// Where values live while a plan runs. Memory owns the plan's buffer bookkeeping (output_bytes,
// temp_bytes, temp_last_use): the driver (lower.cpp) places each root as it emits it and hands
// the kernels over in launch order, so every temp is dead after its last reader. The argument-
// size split lives here too: a kernel with too many buffers to pass gets fewer by materializing
// part of it.
namespace lazycl::kernels {

class Memory {
 public:
  // Fills plan->output_bytes. `p`'s cut must not move while Memory is in use.
  Memory(const Partition& p, Plan* plan);

  // Gives root `r` its buffer: its output, the output that is only a Reshape of it (it writes
  // that output's bytes, and the output needs no copy kernel), or a new temp; the same buffer
  // when asked again.
  BufferRef Place(int r);
  // Whether output `r` is such a Reshape, already written by the root below it.
  bool WrittenByReshapedRoot(int r) const { return aliased_outputs_.contains(r); }
  // A temp of `bytes` that no node owns (a two-stage reduction's partials).
  BufferRef NewTemp(size_t bytes);
  // Where Buffer leaf or placed root `i` lives.
  BufferRef Ref(int i) const;
  // Appends `spec` to the plan; it is the last kernel so far to read the temps it reads.
  void Append(KernelSpec spec);

 private:
  const Partition& p_;
  Plan* plan_;
  absl::flat_hash_map<int, int> output_of_;  // output node -> output index
  absl::flat_hash_map<int, int> alias_;      // root -> output that is a Reshape of it
  absl::flat_hash_set<int> aliased_outputs_;
  absl::flat_hash_map<int, BufferRef> refs_;
};

// Whether `spec`'s arguments come too close to target.max_param_bytes.
bool ArgsTooBig(const KernelSpec& spec, const Target& target);

// What to materialize when root `r`'s kernel has too many arguments: its biggest fused operand
// subtree, or -1 when nothing is left to split off.
int LargestFusedOperand(const Partition& p, int r);

}  // namespace lazycl::kernels
