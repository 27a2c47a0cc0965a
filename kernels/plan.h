#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

// A lowered graph: an ordered list of kernels with buffer bindings. Pure data; the executor
// runs it on a backend::Device. A plan depends on shapes (sizes are its argument values) but
// its kernels' sources do not, so plans of the same structure share compiled programs.
namespace lazycl::kernels {

struct BufferRef {
  enum class Kind { kParam, kOutput, kTemp };
  Kind kind = Kind::kParam;
  int index = 0;
};

struct KernelArgSpec {
  // kOffset is an integer argument: `value` plus the run-time element offset at which `buffer`
  // is bound (Graph::bind_offsets); `wide` says whether it is passed as 64 or 32 bits.
  enum class Kind { kBuffer, kInt32, kInt64, kOffset };
  Kind kind = Kind::kInt32;
  BufferRef buffer;
  bool written = false;
  bool wide = false;
  int64_t value = 0;
};

struct KernelSpec {
  std::string name;     // entry point in `source`
  std::string source;   // complete OpenCL C
  std::string options;  // build options
  std::vector<KernelArgSpec> args;
  std::vector<size_t> global;
  std::vector<size_t> local;  // empty: the runtime chooses
  // Elementwise and reduction kernels come with a second entry point in the same program,
  // `tail_name`: the same work behind a bounds check, for the work-items that `global` leaves
  // out. `global` is then a multiple of `local` and unchecked, which PoCL needs to vectorise
  // the loop over work-items. The tail takes `args` plus the index it starts at (`tail_base`,
  // an int or a long as `tail_base_wide` says) and runs over `tail_global` work-items of
  // `local`; no tail launch when tail_global is 0, no main launch when global is {0}.
  std::string tail_name;
  size_t tail_global = 0;
  int64_t tail_base = 0;
  bool tail_base_wide = false;
  std::string summary;  // one line for LAZYCL_DEBUG
};

struct Plan {
  std::vector<size_t> output_bytes;  // per output of the Graph, in order
  std::vector<size_t> temp_bytes;
  std::vector<int> temp_last_use;  // kernel index after which the temp is dead
  std::vector<KernelSpec> kernels;
};

}  // namespace lazycl::kernels
