#pragma once

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "kernels/graph.h"
#include "kernels/plan.h"

namespace lazycl::kernels {

// What lowering needs to know about the device; filled by the executor from backend::DeviceInfo.
// The blocking of the f32 CPU matmul (templates/matmul_cpu.cl), chosen per device by
// runtime/matmul_tuner.h from what the device reports; the defaults suit AVX-512.
struct MatmulBlocking {
  int vw = 16;     // floats per vector: 4, 8 or 16
  int mr = 8;      // rows of C per register block: 1..16
  int nr = 32;     // columns of C per work-item: 16, 32 or 64, a multiple of vw
  int kb = 256;    // rows of B per panel copy (kb * nr floats of local memory): 16..2048
  int rows = 128;  // most rows of C per work-item: a multiple of mr, at most 1024
  bool operator==(const MatmulBlocking&) const = default;
};

// Whether `b` satisfies the ranges above (the template assumes them).
bool ValidBlocking(const MatmulBlocking& b);

// Vector registers assumed for vectors of `vw` floats: 32 with 16 (AVX-512), 16 otherwise (SSE,
// AVX2; NEON's 32 is not assumed).
int VectorRegisters(int vw);

// The most rows of a register block whose accumulators (`products` x nr / vw vectors a row), the
// B vectors of every product and one broadcast fit VectorRegisters(vw); may be 0.
int RowsInRegisters(int vw, int nr, int products);

// The rows per register block of a dual product (SwiGLU's two products of one A, computed
// together) under blocking `b`: its two sets of accumulators, its two B's vectors and one
// broadcast fit the registers, at most half of `b`'s rows, at least 1.
int DualRows(const MatmulBlocking& b);

struct Target {
  bool cpu = true;                 // CPU strategies (PoCL) vs GPU strategies
  MatmulBlocking matmul;           // f32 CPU matmul blocking
  int64_t max_param_bytes = 1024;  // CL_DEVICE_MAX_PARAMETER_SIZE
  int compute_units = 0;           // CL_DEVICE_MAX_COMPUTE_UNITS (0: not known)
  int64_t local_mem_bytes = 0;     // CL_DEVICE_LOCAL_MEM_SIZE (0: not known)
  // CL_DEVICE_GLOBAL_MEM_CACHE_SIZE (0: not known); on PoCL the host's last-level cache.
  int64_t cache_bytes = 0;
  bool fp64 = false;          // the device computes f64 (cl_khr_fp64)
  bool bind_offsets = false;  // copied from Graph::bind_offsets by Lower
  // The generic tier's target: one matmul.cl program serves every shape (no register blocking
  // chosen per shape, which would be another program to build).
  bool one_matmul_program = false;
  // The scalar index of each Scalar leaf (Graph::scalar_of), set by Lower for the emitters.
  const absl::flat_hash_map<const ir::Node*, int>* scalar_of = nullptr;
};

// Partitions `graph` into kernels and generates their OpenCL C.
// - Every output, Reduce and Matmul node ends a kernel ("root"); elementwise ops, views,
//   Constants, Scalars and Iotas fuse into the kernel of the root that consumes them, recomputed
//   where two kernels share a cheap subexpression.
// - A kernel whose arguments would exceed target.max_param_bytes is split by materializing its
//   largest fused operand.
// - A reduction with few outputs and a long reduced extent runs in two stages.
absl::StatusOr<Plan> Lower(const Graph& graph, const Target& target);

}  // namespace lazycl::kernels
