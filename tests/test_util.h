#pragma once

// Helpers shared by the frontend tests.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/tensor_impl.h"
#include "gtest/gtest.h"
#include "ir/ir.h"
#include "lazycl/lazycl.h"
#include "runtime/executor.h"

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
  return runtime::BuildGraph(nodes, /*bind_offsets=*/false).graph.num_params;
}

// The device of the default environment, expected to be an OpenCL one.
inline Device DefaultCl() {
  const Device d = default_env().device();
  EXPECT_TRUE(d.is_opencl()) << d.str();
  return d;
}

// `a` has `b`'s shape and each element is within `tol` relative (plus `tol` absolute) of b's.
inline void ExpectNear(const Tensor& a, const Tensor& b, double tol = 1e-5) {
  ASSERT_EQ(a.shape(), b.shape());
  std::vector<float> x = a.to_vector<float>();
  std::vector<float> y = b.to_vector<float>();
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], tol * (1 + std::fabs(y[i]))) << i;
}

}  // namespace lazycl::test
