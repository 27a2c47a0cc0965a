#pragma once

#include <vector>

#include "lazycl/tensor.h"

// Data-parallel collectives over MPI (Open MPI from Debian's libopenmpi-dev), as torch.distributed
// and JAX's psum: target lazycl::dist, built when CMake finds MPI.
//
// Tensors are staged through pinned host memory (lazycl/memory.h's PinnedBuffer, kept between
// calls: OpenCL buffers cannot be handed to MPI) and packed by dtype into as few contiguous
// buckets of at most 25 MiB as fit, so that a step does one MPI call per bucket: each tensor is
// read straight into its place in the bucket and written back from it into its own buffer (one
// copy each way, no kernel; Tensor::copy_to_host / copy_from_host).
// Before any data moves, every call checks that all ranks pass the same number of tensors with
// the same shapes and dtypes (an Error naming what differs, on every rank, otherwise). With one
// process every collective is the identity and moves nothing. Counters: CollectiveCount (MPI
// calls that move data), CollectiveBytes (bytes of the buffers handed to them; a ring all-reduce
// sends and receives 2 (N - 1) / N times that per rank), CollectiveTime (a timer).
namespace lazycl::dist {

enum class ReduceOp { sum, mean, max };

// Initializes MPI (MPI_Init_thread, funnelled) unless it already is; idempotent. Every other
// call needs it. MPI is finalized at exit, or by finalize().
void init();
void finalize();
bool is_initialized();
int rank();
int world_size();

// Replaces each tensor's values, in place (every handle of it sees them), by their reduction
// over all ranks. f32, f16 and bf16 reduce in f32; i32 and i64 with sum and max (mean of an
// integer tensor is an Error).
void all_reduce(std::vector<Tensor>& tensors, ReduceOp op = ReduceOp::sum);
// Replaces each tensor's values, in place, by root's.
void broadcast(std::vector<Tensor>& tensors, int root = 0);
void barrier();
// Ends every rank of the job with `code` (MPI_Abort): what a rank that cannot go on calls, so that
// the others do not wait for it in a collective forever.
[[noreturn]] void abort(int code);

}  // namespace lazycl::dist
