#pragma once

#include <fstream>
#include <set>
#include <sstream>
#include <string>

// The host CPU's SIMD flags that matter to the matmul kernels, read from /proc/cpuinfo (the
// first processor's "flags" line): e.g. "avx2 fma avx512f", "none" when none is present, "?"
// when the file cannot be read.
namespace lazycl::bench {

inline std::string CpuFlags() {
  std::ifstream in("/proc/cpuinfo");
  if (!in) return "?";
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("flags")) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> have;
    for (std::string w; words >> w;) have.insert(w);
    std::string out;
    for (const char* f : {"avx", "avx2", "fma", "avx512f", "avx512vl", "neon", "asimd"}) {
      if (have.contains(f)) out += out.empty() ? f : std::string(" ") + f;
    }
    return out.empty() ? "none" : out;
  }
  return "?";
}

}  // namespace lazycl::bench
