#pragma once

// Helpers shared by the frontend tests.
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/executor.h"
#include "frontend/ir.h"
#include "frontend/tensor_impl.h"
#include "lazycl/lazycl.h"

namespace lazycl::test {

inline int64_t C(const char* name) { return metrics::counter(name); }

// start, start + step, ... (n values).
inline std::vector<float> Iota(int n, float start, float step) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + step * static_cast<float>(i);
  return v;
}

// The message of the lazycl::Error that `f` throws, or "(no error)".
template <class F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

inline bool Has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The number of parameters of the graph that computes `outputs`: Buffer leaves de-duplicated by
// buffer id, placeholders included.
inline int NumParams(const std::vector<Tensor>& outputs) {
  std::vector<const ir::Node*> nodes;
  for (const Tensor& t : outputs) nodes.push_back(t.impl()->node.get());
  return frontend::BuildGraph(nodes, /*bind_offsets=*/false).graph.num_params;
}

}  // namespace lazycl::test
