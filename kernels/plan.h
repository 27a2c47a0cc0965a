#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lazycl/dtype.h"

// A lowered graph: an ordered list of kernels with buffer bindings. Pure data; the executor
// runs it on a backend::Device. A plan depends on shapes (sizes are its argument values) but
// its kernels' sources do not, so plans of the same structure share compiled programs.
namespace lazycl::kernels {

struct BufferRef {
  enum class Kind { kParam, kOutput, kTemp };
  Kind kind = Kind::kParam;
  int index = 0;
  bool operator==(const BufferRef&) const = default;
};

struct KernelArgSpec {
  // kOffset is an integer argument: `value` plus the run-time element offset at which `buffer`
  // is bound (Graph::bind_offsets); `wide` says whether it is passed as 64 or 32 bits.
  // kScalar is the value of Scalar leaf `scalar` (Graph::scalar_of), given at run time, passed
  // as `dtype` is (bool as an int). kNumber is `number` passed the same way (the generic tier's
  // constants, kernels/lower_generic.h). kPack is one argument of a struct of 64-bit integers,
  // `fields` (each kInt64, or a wide kOffset) in order: a driver that copies every argument of a
  // launch apart (PoCL: an aligned allocation each) copies it once.
  enum class Kind { kBuffer, kInt32, kInt64, kOffset, kScalar, kNumber, kPack };
  Kind kind = Kind::kInt32;
  BufferRef buffer;
  bool written = false;
  bool wide = false;
  int64_t value = 0;
  int scalar = -1;
  double number = 0;
  DType dtype = DType::f32;
  std::vector<KernelArgSpec> fields;  // kPack
};

// One run of an entry point of a kernel's program, with the kernel's arguments.
struct Launch {
  std::string name;            // entry point in KernelSpec::source
  std::vector<size_t> global;  // a dim of 0: not launched, and its entry point never created
  std::vector<size_t> local;   // empty: the runtime chooses
  // Integer arguments (kInt32 or kInt64) after KernelSpec::args: a tail's first index.
  std::vector<KernelArgSpec> extra_args;
};

// One program and its launches, run in order. Kernels of a work-item per element or row
// (Emitter::FinishIndexed: elementwise, row and CPU reduction kernels) launch two entry points:
// the work unchecked over whole work-groups, which PoCL needs to vectorise the loop over
// work-items, then the same work behind a bounds check over the rest; either may be empty.
struct KernelSpec {
  std::string source;  // complete OpenCL C (empty where `shared_source` is set)
  // The generic tier's kernels all run one library program (generic_library.h), which outlives
  // every plan: they point at it rather than each holding a copy of its ~100 KB.
  const std::string* shared_source = nullptr;
  const std::string& text() const { return shared_source != nullptr ? *shared_source : source; }
  std::string options;              // build options
  std::vector<KernelArgSpec> args;  // every launch's leading arguments
  std::vector<Launch> launches;
  std::string summary;  // one line for LAZYCL_DEBUG
  // For the profiler (LAZYCL_PROFILE): the IR ops fused into the kernel ("matmul, add, relu"),
  // the bytes of its inputs and output counted once each (0 where another kernel of the same
  // root carries them), and its floating-point operations (matmuls; 0 otherwise).
  std::string fused_ops;
  int64_t bytes = 0;
  int64_t flops = 0;
  // A row-form kernel of one launch (Emitter::FinishRows) names the function its entry point
  // calls, `rows_fn(params..., row, c)` for the work-item at (c, row), with the declarations and
  // names of those parameters (the kernel's arguments, then its launch's extra ones) and whether
  // its index type is 64-bit; empty otherwise. kernels/merge_rows.h runs two such kernels in
  // one launch.
  std::string rows_fn;
  std::vector<std::string> rows_decls, rows_names;
  // The arguments of rows_decls before their launch's extra ones, as Emitter collected them (in
  // `args` its integers are packed: kernels/packed_params.h).
  std::vector<KernelArgSpec> rows_args;
  bool rows_wide = false;
};

struct Plan {
  std::vector<size_t> output_bytes;  // per output of the Graph, in order
  std::vector<size_t> temp_bytes;
  std::vector<int> temp_last_use;  // kernel index after which the temp is dead
  std::vector<KernelSpec> kernels;
};

}  // namespace lazycl::kernels
