#pragma once

// The harness of ops_more_test.cpp: the same values on the host (the reference interpreter) and
// on the OpenCL device, in several layouts, and a comparison of the results.
#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl::more {

using Shape = std::vector<int64_t>;
using Fn = std::function<std::vector<Tensor>(const Tensor&)>;

inline Device Cl() { return Device::opencl(); }
inline Device Host() { return Device::host(); }

inline std::string ShapeStr(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

enum class Layout { kContiguous, kTransposed, kLazy };
enum class Domain { kAny, kPositive, kSmallInt, kSpecial };

inline const char* LayoutName(Layout l) {
  return l == Layout::kContiguous ? "contiguous" : l == Layout::kTransposed ? "transposed" : "lazy";
}

inline std::vector<float> Specials() {
  const float inf = INFINITY;
  return {0.0f,   -0.0f, 1.0f,   -1.0f, inf,  -inf, NAN,  2.5f,  -2.5f,
          1e-30f, 88.0f, -90.0f, 1e30f, 0.5f, 7.0f, 3.0f, -3.0f, 1.0f};
}

// Host values: f32 standard normal (kAny), [0.25, 4) (kPositive), integers in [-3, 3] so that
// ties are common (kSmallInt), or special values (kSpecial); ints in [-50, 50); bool coins.
inline Tensor HostValues(const Shape& shape, DType dtype, Domain domain, uint64_t seed) {
  if (domain == Domain::kSpecial) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v;
    const std::vector<float> s = Specials();
    for (int64_t i = 0; i < n; ++i) v.push_back(s[(i * 7 + seed) % s.size()]);
    return cast(tensor(v, shape, Host()), dtype);
  }
  if (dtype == DType::boolean) return lt(rand(shape, seed, 0, 1, DType::f32, Host()), 0.5);
  switch (domain) {
    case Domain::kPositive:
      return cast(rand(shape, seed, 0.25, 4.0, DType::f32, Host()), dtype);
    case Domain::kSmallInt:
      return cast(cast(rand(shape, seed, -3.99, 3.99, DType::f32, Host()), DType::i32), dtype);
    default:
      if (dtype == DType::f32) return randn(shape, seed, DType::f32, Host());
      return cast(rand(shape, seed, -50, 50, DType::f32, Host()), dtype);
  }
}

struct Operand {
  Tensor host;
  Tensor device;
};

// kTransposed: the values are uploaded with the last two dims swapped and transposed back on
// the device (a non-contiguous view); kLazy: an identity op on the device, so that it fuses.
inline Operand MakeOperand(const Shape& s, DType dtype, Layout layout, Domain domain,
                           uint64_t seed) {
  if (layout == Layout::kTransposed && s.size() >= 2) {
    Shape t = s;
    std::swap(t[t.size() - 2], t[t.size() - 1]);
    Tensor base = HostValues(t, dtype, domain, seed);
    return {transpose(base, -1, -2), transpose(base.to(Cl()), -1, -2)};
  }
  Tensor h = HostValues(s, dtype, domain, seed);
  Tensor d = h.to(Cl());
  if (layout == Layout::kLazy) {
    d = dtype == DType::boolean ? ne(d, 0.0) : maximum(d, d);
  }
  return {h, d};
}

inline std::vector<double> AsDoubles(const Tensor& t) {
  switch (t.dtype()) {
    case DType::f32:
    case DType::f16:
    case DType::bf16: {
      std::vector<float> v = t.to_vector<float>();
      return {v.begin(), v.end()};
    }
    case DType::i32: {
      std::vector<int32_t> v = t.to_vector<int32_t>();
      return {v.begin(), v.end()};
    }
    case DType::i64: {
      std::vector<int64_t> v = t.to_vector<int64_t>();
      return {v.begin(), v.end()};
    }
    case DType::boolean: {
      std::vector<uint8_t> v = t.to_vector<uint8_t>();
      return {v.begin(), v.end()};
    }
    case DType::f64:
      return t.to_vector<double>();
  }
  return {};
}

// |got - want| <= rel |want| + abs (f32); integers and bools exactly; NaN matches NaN.
inline ::testing::AssertionResult Near(const Tensor& want, const Tensor& got, double rel,
                                       double abs) {
  if (want.shape() != got.shape() || want.dtype() != got.dtype()) {
    return ::testing::AssertionFailure()
           << "want " << dtype_name(want.dtype()) << ShapeStr(want.shape()) << ", got "
           << dtype_name(got.dtype()) << ShapeStr(got.shape());
  }
  const std::vector<double> w = AsDoubles(want);
  const std::vector<double> g = AsDoubles(got);
  const bool exact = want.dtype() != DType::f32;
  std::ostringstream bad;
  int mismatches = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    bool ok = w[i] == g[i] || (std::isnan(w[i]) && std::isnan(g[i]));
    if (!ok && !exact && std::isfinite(w[i]) && std::isfinite(g[i])) {
      ok = std::fabs(w[i] - g[i]) <= rel * std::fabs(w[i]) + abs;
    }
    if (!ok && mismatches++ < 5) bad << "\n  [" << i << "] want " << w[i] << " got " << g[i];
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << mismatches << " of " << w.size() << " differ" << bad.str();
}

// fn on the host operand and on the device operand made of the same values: each device result
// is on the device and matches the host's.
inline void Check(const std::string& op, const Fn& fn, const Shape& shape, DType dtype,
                  Layout layout, uint64_t seed, double rel = 1e-5, double abs = 1e-6,
                  Domain domain = Domain::kAny) {
  const std::string what = op + " of " + std::string(dtype_name(dtype)) + ShapeStr(shape) + " " +
                           LayoutName(layout) + " seed " + std::to_string(seed);
  SCOPED_TRACE(what);
  Operand x = MakeOperand(shape, dtype, layout, domain, seed);
  std::vector<Tensor> want;
  std::vector<Tensor> got;
  try {
    want = fn(x.host);
    got = fn(x.device);
  } catch (const Error& e) {
    ADD_FAILURE() << what << " threw " << e.what();
    return;
  }
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(got[i].device().is_opencl()) << what;
    EXPECT_TRUE(Near(want[i], got[i], rel, abs)) << what << " result " << i;
  }
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

}  // namespace lazycl::more
