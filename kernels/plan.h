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
  std::string summary;        // one line for LAZYCL_DEBUG
};

struct Plan {
  std::vector<size_t> output_bytes;  // per output of the Graph, in order
  std::vector<size_t> temp_bytes;
  std::vector<int> temp_last_use;  // kernel index after which the temp is dead
  std::vector<KernelSpec> kernels;
};

}  // namespace lazycl::kernels
