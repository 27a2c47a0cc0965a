#pragma once

#include "kernels/codegen.h"
#include "kernels/plan.h"

// Horizontal fusion, as XLA's horizontal loop fusion: two consecutive row-form kernels
// (Emitter::FinishRows) of one program text, neither touching a buffer the other writes, run as
// one launch over the rows of both (the rotary embeddings of a layer's queries and keys: two
// launches of one kernel with other arguments). On PoCL each launch hands work to the worker
// threads and waits for them; a sampling step's small kernels cost about as much to start as
// to run.
namespace lazycl::kernels {

// Merges such pairs in `plan` (its kernels and their temps' last uses), unless the merged
// kernel's arguments would not fit `target`.
void MergeRowKernels(Plan* plan, const Target& target);

}  // namespace lazycl::kernels
