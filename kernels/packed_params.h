#pragma once

#include <string>
#include <vector>

#include "kernels/plan.h"

// An entry point's integer arguments (sizes, divisors' magic numbers, buffer offsets: kInt32,
// kInt64, kOffset) passed as vectors of longs (long2 .. long16) instead of one argument each.
// PoCL copies every argument of a launch apart, an aligned allocation each: an elementwise
// kernel of the char-LM sampling step took ~15 arguments, most of them integers. The entry's
// body declares each packed parameter again from its vector, under its old name and type, so
// the code it calls is unchanged.
namespace lazycl::kernels {

struct PackedParams {
  std::string params;  // the entry point's parameter list, joined with ",\n    "
  std::string unpack;  // statements declaring the packed parameters, for the entry's body
  std::vector<KernelArgSpec> args;  // the arguments in the order of `params`
};

// `decls` ("const int s0", "__global const float* restrict in0") are the parameters of `args`,
// one each, in order. Fewer than two integers are left as they are.
PackedParams PackIntegerParams(const std::vector<std::string>& decls,
                               const std::vector<KernelArgSpec>& args);

}  // namespace lazycl::kernels
