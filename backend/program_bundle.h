#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

// Several kernels' OpenCL C programs as one program, so that one compiler run builds them all
// (internal to backend/). On PoCL every program build pays ~75 ms of fixed cost (the compiler
// parses the OpenCL headers again), where the kernels themselves take a few ms each.
//
// Each member's text becomes a chunk of the bundle that cannot see the others:
//   - its -D options become #defines at the chunk's start;
//   - every function and typedef it defines at file scope is renamed by a #define to
//     `name` + the member's suffix (so two members may both define `matmul_cpu` or `idx_t`);
//   - at its end, every macro it defined (options, renames and its own #defines) is #undef'd.
// What a source must follow for this (the lowering's sources do): definitions at file scope
// start at column 0 with their type (a `__kernel` or `__attribute__((...))` line may come first);
// code inside functions is indented or does not start with a type and a name before `(`.
namespace lazycl::backend {

struct ProgramSource {
  std::string_view source;
  std::string_view options;
};

// The names of the functions and typedefs `source` defines at file scope, in order.
std::vector<std::string> DefinedNames(std::string_view source);

// `options` without its -D definitions: what all members of one bundle must share.
std::string SharedOptions(std::string_view options);

// The chunk of `member` in a bundle, its names renamed with `suffix`. An option that is neither
// a -D definition nor shared is not the chunk's concern (SharedOptions keeps it).
std::string BundleChunk(const ProgramSource& member, std::string_view suffix);

}  // namespace lazycl::backend
