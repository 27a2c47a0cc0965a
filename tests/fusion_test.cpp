// Fusion: how many kernels a computation on device inputs launches (tinygrad's
// check_schedule, counted here as KernelLaunches around one sync). Every case also checks the
// values, so that a "fused" kernel that computes the wrong thing cannot pass.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "frontend/assign.h"
#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "lazycl/profile.h"
#include "runtime/devices.h"
#include "runtime/executor.h"

namespace lazycl {
namespace {

const Device kCl = Device::opencl(0);

// Kernels launched while computing `t` (its inputs are already on the device).
int64_t KernelsFor(const Tensor& t) {
  const int64_t before = metrics::counter("KernelLaunches");
  sync({t});
  return metrics::counter("KernelLaunches") - before;
}

std::vector<float> Values(int64_t n, float scale, float offset) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>((i * 37) % 101);
  return v;
}

TEST(FusionTest, ElementwiseChainIsOneKernel) {
  const std::vector<float> av = Values(1000, 0.03f, -1.5f);
  const std::vector<float> bv = Values(1000, -0.02f, 1.0f);
  const std::vector<float> cv = Values(1000, 0.01f, -0.5f);
  Tensor a = tensor(av, {10, 100}, kCl);
  Tensor b = tensor(bv, {10, 100}, kCl);
  Tensor c = tensor(cv, {10, 100}, kCl);
  Tensor y = relu(a * b + c) * 0.5 + tanh(a);
  EXPECT_EQ(KernelsFor(y), 1);
  const std::vector<float> got = y.to_vector<float>();
  for (size_t i = 0; i < av.size(); ++i) {
    const float want = std::max(av[i] * bv[i] + cv[i], 0.0f) * 0.5f + std::tanh(av[i]);
    EXPECT_NEAR(got[i], want, 1e-5f) << i;
  }
}

// sum(exp(x - 1)) is one reduction kernel with its elementwise producer fused in; a large input
// takes the two-stage path (partials, then a second kernel), so at most 2 kernels either way.
void ExpectFusedSumOfExp(int64_t n) {
  const std::vector<float> xv = Values(n, 0.01f, 0.0f);
  Tensor x = tensor(xv, {n}, kCl);
  Tensor s = sum(exp(x - 1));
  const int64_t kernels = KernelsFor(s);
  EXPECT_GE(kernels, 1);
  EXPECT_LE(kernels, 2) << "n=" << n;
  double want = 0;
  for (float v : xv) want += std::exp(static_cast<double>(v) - 1.0);
  EXPECT_NEAR(s.item<float>(), want, 1e-4 * want) << "n=" << n;
}

TEST(FusionTest, SumOfExpOfSmallInputIsAtMostTwoKernels) { ExpectFusedSumOfExp(1000); }

TEST(FusionTest, SumOfExpOfLargeInputIsAtMostTwoKernels) { ExpectFusedSumOfExp(int64_t{1} << 20); }

// Regression: sum() without keepdim is a reduction followed by a Reshape that drops the kept
// dims; the Reshape was lowered as a copy kernel into a second buffer, so every sum(x) cost an
// extra launch (3 kernels for the two-stage path). The reduction now writes the output itself.
TEST(FusionTest, ReshapeOfReductionOutputLaunchesNoCopyKernel) {
  const std::vector<float> xv = Values(4 * 50, 1.0f, 0.0f);
  Tensor x = tensor(xv, {4, 50}, kCl);
  Tensor rows = sum(x, {1});
  EXPECT_EQ(KernelsFor(rows), 1);
  EXPECT_EQ(rows.shape(), (std::vector<int64_t>{4}));
  Tensor all = sum(x);
  EXPECT_EQ(KernelsFor(all), 1);
  Tensor flat = reshape(max(x, {0}, true), {5, 10});
  EXPECT_EQ(KernelsFor(flat), 1);
  const std::vector<float> got = rows.to_vector<float>();
  float total = 0;
  for (int r = 0; r < 4; ++r) {
    float want = 0;
    for (int j = 0; j < 50; ++j) want += xv[r * 50 + j];
    EXPECT_FLOAT_EQ(got[r], want) << r;
    total += want;
  }
  EXPECT_FLOAT_EQ(all.item<float>(), total);
  const std::vector<float> maxes = flat.to_vector<float>();
  for (int j = 0; j < 50; ++j) {
    float want = xv[j];
    for (int r = 1; r < 4; ++r) want = std::max(want, xv[r * 50 + j]);
    EXPECT_FLOAT_EQ(maxes[j], want) << j;
  }
}

// The same reduction as a kept-dim output and as a reshaped one, in one graph: both read right.
TEST(FusionTest, ReductionKeptAndReshapedInOneGraphBothCorrect) {
  Tensor x = tensor(Values(3 * 20, 1.0f, 0.0f), {3, 20}, kCl);
  Tensor kept = sum(x, {1}, true);
  Tensor dropped = reshape(kept, {3});
  Tensor twice = reshape(kept, {1, 3});
  sync({kept, dropped, twice});
  const std::vector<float> k = kept.to_vector<float>();
  EXPECT_EQ(dropped.to_vector<float>(), k);
  EXPECT_EQ(twice.to_vector<float>(), k);
  Tensor y = sum(x, {1});
  Tensor z = y * 2;  // a second output that reads the aliased one
  sync({y, z});
  const std::vector<float> yv = y.to_vector<float>();
  const std::vector<float> zv = z.to_vector<float>();
  EXPECT_EQ(yv, k);
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(zv[i], 2 * k[i]);
}

TEST(FusionTest, TransposeFeedingAddIsOneKernel) {
  const std::vector<float> av = Values(12 * 7, 1.0f, 0.0f);
  const std::vector<float> bv = Values(7 * 12, -1.0f, 5.0f);
  Tensor a = tensor(av, {12, 7}, kCl);
  Tensor b = tensor(bv, {7, 12}, kCl);
  Tensor y = transpose(a, 0, 1) + b;
  EXPECT_EQ(KernelsFor(y), 1);
  const std::vector<float> got = y.to_vector<float>();
  for (int i = 0; i < 7; ++i) {
    for (int j = 0; j < 12; ++j) EXPECT_FLOAT_EQ(got[i * 12 + j], av[j * 7 + i] + bv[i * 12 + j]);
  }
}

TEST(FusionTest, BroadcastCastWhereChainIsOneKernel) {
  std::vector<int32_t> iv(6 * 5);
  for (size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<int32_t>(i % 7) - 3;
  const std::vector<float> rowv = Values(5, 0.5f, -1.0f);
  Tensor ints = tensor(iv, {6, 5}, kCl);
  Tensor row = tensor(rowv, {5}, kCl);  // broadcast over the 6 rows
  Tensor f = cast(ints, DType::f32);
  Tensor y = where(gt(f, broadcast_to(row, {6, 5})), f * 2, row - f);
  EXPECT_EQ(KernelsFor(y), 1);
  const std::vector<float> got = y.to_vector<float>();
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 5; ++j) {
      const float fv = static_cast<float>(iv[i * 5 + j]);
      const float want = fv > rowv[j] ? fv * 2 : rowv[j] - fv;
      EXPECT_FLOAT_EQ(got[i * 5 + j], want) << i << "," << j;
    }
  }
}

// `got` is the softmax of each `cols`-long row of `xv`, computed here in double.
void ExpectSoftmaxOfRows(const std::vector<float>& got, const std::vector<float>& xv, size_t cols) {
  ASSERT_EQ(got.size(), xv.size());
  for (size_t r = 0; r < xv.size() / cols; ++r) {
    const float* row = &xv[r * cols];
    const float m = *std::max_element(row, row + cols);
    double total = 0;
    for (size_t j = 0; j < cols; ++j) total += std::exp(row[j] - m);
    for (size_t j = 0; j < cols; ++j)
      EXPECT_NEAR(got[r * cols + j], std::exp(row[j] - m) / total, 1e-6) << r << "," << j;
  }
}

// Whether the CPU kernel strategies run: on a CPU device unless LAZYCL_CODEGEN=gpu, on a GPU only
// with LAZYCL_CODEGEN=cpu (as the executor decides).
bool CpuStrategy() { return runtime::UsesCpuStrategy(runtime::OpenClDevice(0)); }

// On the CPU strategy softmax over long rows is one kernel: a work-item per row takes the max,
// the sum of exp (storing exp into the output) and the normalisation (EmitRowKernel); the GPU
// strategy keeps a kernel per reduction.
TEST(FusionTest, SoftmaxOverLongRowsIsOneKernelOnCpu) {
  const std::vector<float> xv = Values(64 * 300, 0.05f, -2.0f);
  Tensor x = tensor(xv, {64, 300}, kCl);
  Tensor y = softmax(x, -1);
  const int64_t kernels = KernelsFor(y);
  if (CpuStrategy()) {
    EXPECT_EQ(kernels, 1);
  } else {
    EXPECT_LE(kernels, 4);
  }
  ExpectSoftmaxOfRows(y.to_vector<float>(), xv, 300);
}

// An expensive table broadcast into a much larger kernel (rotary embedding's cos(pos * freq) of
// [T, D] read by [B, H, T, D]) is computed once at its own size, not once per element of the
// large kernel: two kernels. (It was one kernel, recomputing exp and cos 32x over.) The
// positions are data here: a table of iota alone is folded as `x *` takes it
// (constant_fold_test), before any kernel of this graph.
TEST(FusionTest, ExpensiveTableBroadcastIntoALargeKernelIsComputedOnce) {
  const int64_t b = 8, h = 4, t = 64, d = 32;
  const std::vector<float> xv = Values(b * h * t * d, 0.01f, -0.5f);
  Tensor x = tensor(xv, {b, h, t, d}, kCl);
  std::vector<float> positions(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) positions[static_cast<size_t>(i)] = static_cast<float>(i);
  Tensor pos = tensor(positions, {t, 1}, kCl);
  Tensor freq = reshape(exp(cast(arange(d, DType::i32, kCl), DType::f32) * -0.25), {1, d});
  Tensor y = x * cos(pos * freq);
  EXPECT_EQ(KernelsFor(y), 2);
  const std::vector<float> got = y.to_vector<float>();
  for (int64_t i = 0; i < b * h * t * d; ++i) {
    const int64_t ti = (i / d) % t, di = i % d;
    const double want = xv[i] * std::cos(ti * std::exp(di * -0.25));
    ASSERT_NEAR(got[i], want, 2e-5) << i;
  }
}

// A row's statistic broadcast back over the row (RMSNorm's rsqrt(mean(x^2) + eps)) is as
// expensive, but it stays in the row kernel: one kernel on the CPU strategy.
TEST(FusionTest, RowStatisticBroadcastStaysInTheRowKernel) {
  const std::vector<float> xv = Values(64 * 300, 0.05f, -2.0f);
  Tensor x = tensor(xv, {64, 300}, kCl);
  Tensor y = x * rsqrt(mean(x * x, {-1}, true) + 1e-5);
  const int64_t kernels = KernelsFor(y);
  if (CpuStrategy()) {
    EXPECT_EQ(kernels, 1);
  }
  const std::vector<float> got = y.to_vector<float>();
  for (int r = 0; r < 64; ++r) {
    double ss = 0;
    for (int j = 0; j < 300; ++j) ss += static_cast<double>(xv[r * 300 + j]) * xv[r * 300 + j];
    const double scale = 1 / std::sqrt(ss / 300 + 1e-5);
    for (int j = 0; j < 300; ++j)
      ASSERT_NEAR(got[r * 300 + j], xv[r * 300 + j] * scale,
                  1e-5 * (1 + std::abs(xv[r * 300 + j] * scale)));
  }
}

// Causal attention's softmax(where(col <= row, s, -inf)) over [B, H, T, T] is one row kernel on
// the CPU strategy whose vector loop compares positions 16 at a time; rows of 64 (the vector
// loop alone) and of 70 (with a scalar remainder) agree with softmax over each row's first
// row+1 entries.
TEST(FusionTest, CausalSoftmaxIsOneRowKernel) {
  for (int64_t t : {64, 70}) {
    const int64_t b = 2, h = 3;
    const std::vector<float> sv = Values(b * h * t * t, 0.07f, -3.0f);
    Tensor scores = tensor(sv, {b, h, t, t}, kCl);
    Tensor row = unsqueeze(arange(t, DType::i32, kCl), 1);
    Tensor col = unsqueeze(arange(t, DType::i32, kCl), 0);
    Tensor y = softmax(where(le(col, row), scores * 0.5, -INFINITY), -1);
    const int64_t kernels = KernelsFor(y);
    if (CpuStrategy()) {
      EXPECT_EQ(kernels, 1) << "t=" << t;
    }
    const std::vector<float> got = y.to_vector<float>();
    for (int64_t r = 0; r < b * h * t; ++r) {
      const int64_t i = r % t;  // the query's position: keys 0..i are visible
      const float* x = &sv[r * t];
      double m = -INFINITY, total = 0;
      for (int64_t j = 0; j <= i; ++j) m = std::max(m, 0.5 * x[j]);
      for (int64_t j = 0; j <= i; ++j) total += std::exp(0.5 * x[j] - m);
      for (int64_t j = 0; j < t; ++j) {
        const double want = j <= i ? std::exp(0.5 * x[j] - m) / total : 0.0;
        ASSERT_NEAR(got[r * t + j], want, 1e-6) << "t=" << t << " row " << r << " col " << j;
      }
    }
  }
}

// A matmul operand that is a transpose of a computed value (q @ rope(k)^T) reads the value in
// place through the transpose: the value's kernel writes it in its own layout (no kernel whose
// root is the Permute), and the product is right.
TEST(FusionTest, TransposedComputedOperandIsReadInPlace) {
  const int64_t b = 3, t = 24, d = 16;
  const std::vector<float> qv = Values(b * t * d, 0.02f, -0.3f),
                           kv = Values(b * t * d, -0.03f, 0.5f);
  Tensor q = tensor(qv, {b, t, d}, kCl), k = tensor(kv, {b, t, d}, kCl);
  Tensor s = matmul(q, transpose(k * 2.0 + 1.0, 1, 2));
  metrics::set_profiling(true);
  metrics::reset_profile();
  EXPECT_EQ(KernelsFor(s), 2);
  for (const metrics::KernelProfile& row : metrics::kernel_profile())
    EXPECT_EQ(row.kernel.find("Permute"), std::string::npos) << row.kernel;
  metrics::set_profiling(false);
  const std::vector<float> got = s.to_vector<float>();
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t r = 0; r < t; ++r) {
      for (int64_t c = 0; c < t; ++c) {
        double want = 0;
        for (int64_t e = 0; e < d; ++e)
          want +=
              static_cast<double>(qv[(i * t + r) * d + e]) * (kv[(i * t + c) * d + e] * 2.0 + 1.0);
        ASSERT_NEAR(got[(i * t + r) * t + c], want, 1e-4 * (1 + std::abs(want)));
      }
    }
  }
}

// A matmul read by a row kernel (softmax of the logits) stays its own kernel; so does one read
// elementwise by a row kernel whose reductions come from another tensor: neither is an
// epilogue, and both agree with the host.
TEST(FusionTest, MatmulReadByARowKernelIsNotAnEpilogue) {
  const std::vector<float> av = Values(32 * 20, 0.01f, -0.5f);
  const std::vector<float> bv = Values(20 * 48, 0.02f, -1.0f);
  const std::vector<float> xv = Values(32 * 48, 0.05f, -2.0f);
  for (bool through_reduce : {true, false}) {
    const Device host = Device::host();
    auto make = [&](Device d) {
      Tensor a = tensor(av, {32, 20}, d);
      Tensor b = tensor(bv, {20, 48}, d);
      Tensor x = tensor(xv, {32, 48}, d);
      Tensor logits = matmul(a, b);
      return through_reduce ? softmax(logits, -1) : logits + (x - max(x, {1}, true));
    };
    Tensor want = make(host);
    Tensor got = make(kCl);
    const int64_t kernels = KernelsFor(got);
    if (CpuStrategy()) {
      EXPECT_EQ(kernels, 2) << through_reduce;
    }
    const std::vector<float> w = want.to_vector<float>();
    const std::vector<float> g = got.to_vector<float>();
    ASSERT_EQ(w.size(), g.size());
    for (size_t i = 0; i < w.size(); ++i)
      EXPECT_NEAR(g[i], w[i], 1e-5) << through_reduce << " " << i;
  }
}

// A reduction that is also an output (or read by another kernel) stays a kernel of its own;
// the values agree either way.
TEST(FusionTest, RowReductionThatIsAlsoAnOutputStaysItsOwnKernel) {
  const std::vector<float> xv = Values(32 * 64, 0.1f, -3.0f);
  Tensor x = tensor(xv, {32, 64}, kCl);
  Tensor m = max(x, {1}, true);
  Tensor shifted = x - m;
  const int64_t before = metrics::counter("KernelLaunches");
  sync({m, shifted});
  EXPECT_EQ(metrics::counter("KernelLaunches") - before, 2);
  const std::vector<float> got_m = m.to_vector<float>();
  const std::vector<float> got = shifted.to_vector<float>();
  for (int r = 0; r < 32; ++r) {
    const float want_m = *std::max_element(&xv[r * 64], &xv[r * 64] + 64);
    EXPECT_EQ(got_m[r], want_m);
    for (int j = 0; j < 64; ++j) EXPECT_EQ(got[r * 64 + j], xv[r * 64 + j] - want_m);
  }
}

// softmax = max, then exp and sum, then the division: each reduction is a kernel and the
// division is the third. The count is printed so that a change shows up in the log.
TEST(FusionTest, SoftmaxIsAtMostFourKernels) {
  const std::vector<float> xv = Values(8 * 300, 0.05f, -2.0f);
  Tensor x = tensor(xv, {8, 300}, kCl);
  Tensor y = softmax(x, -1);
  const int64_t kernels = KernelsFor(y);
  std::printf("softmax over [8, 300]: %lld kernels\n", static_cast<long long>(kernels));
  EXPECT_LE(kernels, 4);
  ExpectSoftmaxOfRows(y.to_vector<float>(), xv, 300);
}

// Matmul epilogues: an elementwise chain that only reads a matmul's result, at the result's own
// index, is stored by the matmul kernel itself. tests/ops_test.cpp checks more shapes and layouts
// against the host; these cases pin the kernel counts (and check values with a plain loop).
std::vector<double> HostMatmul(const std::vector<float>& a, const std::vector<float>& b, int64_t m,
                               int64_t k, int64_t n) {
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t t = 0; t < k; ++t) s += static_cast<double>(a[i * k + t]) * b[t * n + j];
      c[i * n + j] = s;
    }
  }
  return c;
}

TEST(FusionTest, MlpLayerIsOneKernel) {
  // 70 x 300 @ 300 x 45: edges of the CPU kernel's 8 x 32 blocks, two passes over K.
  const int64_t m = 70, k = 300, n = 45;
  const std::vector<float> hv = Values(m * k, 0.01f, -0.5f);
  const std::vector<float> wv = Values(k * n, -0.013f, 0.6f);
  const std::vector<float> bv = Values(n, 0.3f, -15.0f);
  Tensor h = tensor(hv, {m, k}, kCl);
  Tensor w = tensor(wv, {k, n}, kCl);
  Tensor bias = tensor(bv, {n}, kCl);
  Tensor y = relu(matmul(h, w) + bias);
  EXPECT_EQ(KernelsFor(y), 1);
  const std::vector<double> c = HostMatmul(hv, wv, m, k, n);
  const std::vector<float> got = y.to_vector<float>();
  int positive = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const double want = std::max(c[i * n + j] + bv[j], 0.0);
      positive += want > 0;
      EXPECT_NEAR(got[i * n + j], want, 1e-3) << i << "," << j;
    }
  }
  EXPECT_GT(positive, 0);
  EXPECT_LT(positive, m * n);  // relu cuts something
  // Two layers from scratch: two kernels.
  Tensor w2 = tensor(Values(n * n, 0.02f, -1.0f), {n, n}, kCl);
  EXPECT_EQ(KernelsFor(relu(matmul(relu(matmul(h, w) + bias), w2) + bias)), 2);
}

// A [B, T, K] @ [K, N] product runs as [B * T, K] @ [K, N] and is read back as [B, T, N]: a
// residual added to it (a transformer layer's MLP output) is still the matmul's epilogue. Where
// the reshape does not split the product's rows, or the chain also reads the product another
// way, the matmul keeps its own kernel; the values are right either way.
TEST(FusionTest, ResidualOverARowSplitProductIsAnEpilogue) {
  const int64_t b = 2, t = 5, k = 20, n = 48;
  const std::vector<float> xv = Values(b * t * k, 0.01f, -0.5f);
  const std::vector<float> wv = Values(k * n, -0.013f, 0.6f);
  const std::vector<float> rv = Values(b * t * n, 0.02f, -2.0f);
  Tensor x = tensor(xv, {b, t, k}, kCl);
  Tensor w = tensor(wv, {k, n}, kCl);
  Tensor res = tensor(rv, {b, t, n}, kCl);
  const std::vector<double> c = HostMatmul(xv, wv, b * t, k, n);
  Tensor y = res + matmul(x, w);
  EXPECT_EQ(KernelsFor(y), 1);
  const std::vector<float> got = y.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], rv[i] + c[i], 1e-3) << i;
  // Not a row split: the product viewed as [B * T * N / 4, 4]; and the product read both through
  // the reshape and transposed.
  Tensor flat = reshape(res, {b * t * n / 4, 4}) + reshape(matmul(x, w), {b * t * n / 4, 4});
  EXPECT_EQ(KernelsFor(flat), 2);
  const std::vector<float> flat_got = flat.to_vector<float>();
  for (size_t i = 0; i < flat_got.size(); ++i) EXPECT_NEAR(flat_got[i], rv[i] + c[i], 1e-3) << i;
  Tensor p = matmul(reshape(x, {b * t, k}), w);
  Tensor twice =
      reshape(p, {b, t, n}) + reshape(transpose(reshape(p, {n, b * t}), 0, 1), {b, t, n});
  EXPECT_EQ(KernelsFor(twice), 2);
  const std::vector<float> twice_got = twice.to_vector<float>();
  for (int64_t i = 0; i < b * t; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t o = i * n + j, v = j * b * t + i;  // the transposed view's element
      EXPECT_NEAR(twice_got[static_cast<size_t>(o)],
                  c[static_cast<size_t>(o)] + c[static_cast<size_t>(v)], 1e-3)
          << i << "," << j;
    }
  }
}

// SwiGLU at inference, silu(y @ w1) * (y @ w3) with neither product kept: on the CPU strategy
// one dual-product kernel computes both products and the chain (it was the gate's kernel with
// the chain as epilogue after the up projection's own). Also over a [B, T, K] input (each product
// read through a row split) with K past one panel and N past a whole panel; where the second B is
// a transposed view, or one product is also an output, two kernels. Values against host loops.
TEST(FusionTest, TwoProductsOfOneInputReadByOneChainAreADualProduct) {
  const int64_t b = 2, t = 7, k = 300, n = 40;
  const std::vector<float> yv = Values(b * t * k, 0.003f, -0.5f);
  const std::vector<float> w1v = Values(k * n, -0.0011f, 0.4f);
  const std::vector<float> w3v = Values(k * n, 0.0007f, -0.3f);
  Tensor y = tensor(yv, {b, t, k}, kCl);
  Tensor w1 = tensor(w1v, {k, n}, kCl);
  Tensor w3 = tensor(w3v, {k, n}, kCl);
  const std::vector<double> g = HostMatmul(yv, w1v, b * t, k, n);
  const std::vector<double> u = HostMatmul(yv, w3v, b * t, k, n);
  auto swiglu = [&](size_t i) { return g[i] / (1 + std::exp(-g[i])) * u[i]; };
  auto expect_swiglu = [&](const Tensor& out) {
    const std::vector<float> got = out.to_vector<float>();
    ASSERT_EQ(got.size(), g.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], swiglu(i), 1e-3) << i;
  };
  Tensor y2 = reshape(y, {b * t, k});
  Tensor flat = silu(matmul(y2, w1)) * matmul(y2, w3);
  EXPECT_EQ(KernelsFor(flat), CpuStrategy() ? 1 : 2);
  expect_swiglu(flat);
  Tensor split = silu(matmul(y, w1)) * matmul(y, w3);  // [B, T, K] @ [K, N]: row splits
  EXPECT_EQ(KernelsFor(split), CpuStrategy() ? 1 : 2);
  expect_swiglu(split);
  // The second B read transposed: no dual product.
  Tensor w3t = tensor(w3v, {n, k}, kCl);  // other values, read as [k, n]
  std::vector<float> w3tv(static_cast<size_t>(k * n));
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < n; ++j) w3tv[i * n + j] = w3v[j * k + i];
  }
  const std::vector<double> ut = HostMatmul(yv, w3tv, b * t, k, n);
  Tensor transposed = silu(matmul(y2, w1)) * matmul(y2, transpose(w3t, 0, 1));
  EXPECT_EQ(KernelsFor(transposed), 2);
  const std::vector<float> tgot = transposed.to_vector<float>();
  for (size_t i = 0; i < tgot.size(); ++i)
    EXPECT_NEAR(tgot[i], g[i] / (1 + std::exp(-g[i])) * ut[i], 1e-3) << i;
  // The up projection kept as well (an output of the same graph): its own kernel.
  Tensor up = matmul(y2, w3);
  Tensor gated = silu(matmul(y2, w1)) * up;
  sync({gated, up});
  expect_swiglu(gated);
  const std::vector<float> up_got = up.to_vector<float>();
  for (size_t i = 0; i < up_got.size(); ++i) EXPECT_NEAR(up_got[i], u[i], 1e-3) << i;
}

// A dual product whose two panels fit the local panel side by side (2 K <= KB: the sampling
// step's [64, 128] x [128, 352]) reads them from there: full and partial panels, several row
// blocks per work-item, values against host loops.
TEST(FusionTest, ADualProductOfSmallKReadsBothPanelsFromLocalMemory) {
  for (int64_t m : {1, 37, 64}) {
    const int64_t k = 64, n = 40;
    const std::vector<float> yv = Values(m * k, 0.004f, -0.6f);
    const std::vector<float> w1v = Values(k * n, -0.0013f, 0.5f);
    const std::vector<float> w3v = Values(k * n, 0.0009f, -0.4f);
    Tensor y = tensor(yv, {m, k}, kCl), w1 = tensor(w1v, {k, n}, kCl),
           w3 = tensor(w3v, {k, n}, kCl);
    const std::vector<double> g = HostMatmul(yv, w1v, m, k, n);
    const std::vector<double> u = HostMatmul(yv, w3v, m, k, n);
    Tensor out = silu(matmul(y, w1)) * matmul(y, w3);
    EXPECT_EQ(KernelsFor(out), CpuStrategy() ? 1 : 2) << m;
    const std::vector<float> got = out.to_vector<float>();
    ASSERT_EQ(got.size(), g.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], g[i] / (1 + std::exp(-g[i])) * u[i], 1e-3) << "m " << m << " at " << i;
  }
}

// Two row-form kernels of one program text over other rows and buffers (a layer's rotary
// embeddings of queries and keys) run as one launch on the CPU strategy (kernels/merge_rows.h);
// rows of another width keep their own launch. Values against host loops.
TEST(FusionTest, IndependentRowKernelsOfOneTextShareALaunch) {
  const std::vector<float> x1v = Values(6 * 32, 0.01f, -0.3f), x2v = Values(3 * 32, -0.02f, 0.7f);
  const std::vector<float> x3v = Values(5 * 48, 0.03f, 0.1f);
  const std::vector<float> bv = Values(48, 0.5f, -1.0f);
  Tensor b = tensor(bv, {48}, kCl);
  Tensor y1 = tensor(x1v, {6, 32}, kCl) * 2.0 + slice(b, 0, 0, 32);
  Tensor y2 = tensor(x2v, {3, 32}, kCl) * 2.0 + slice(b, 0, 0, 32);
  Tensor y3 = tensor(x3v, {5, 48}, kCl) * 2.0 + b;
  sync({b});
  const int64_t before = metrics::counter("KernelLaunches");
  sync({y1, y2, y3});
  EXPECT_EQ(metrics::counter("KernelLaunches") - before, CpuStrategy() ? 2 : 3);
  auto expect = [&](const Tensor& y, const std::vector<float>& xv, int64_t cols) {
    const std::vector<float> got = y.to_vector<float>();
    ASSERT_EQ(got.size(), xv.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], xv[i] * 2.0f + bv[i % static_cast<size_t>(cols)], 1e-6) << i;
  };
  expect(y1, x1v, 32);
  expect(y2, x2v, 32);
  expect(y3, x3v, 48);
}

TEST(FusionTest, BatchedMatmulWithTransposedOperandAndSecondBufferIsOneKernel) {
  const int64_t bt = 3, m = 9, k = 40, n = 33;
  const std::vector<float> av = Values(bt * k * m, 0.02f, -1.0f);  // stored [bt, k, m]
  const std::vector<float> bv = Values(bt * k * n, -0.03f, 1.0f);
  const std::vector<float> cv = Values(bt * m * n, 0.01f, 0.25f);
  Tensor a = transpose(tensor(av, {bt, k, m}, kCl), 1, 2);
  Tensor b = tensor(bv, {bt, k, n}, kCl);
  Tensor c = tensor(cv, {bt, m, n}, kCl);
  Tensor y = maximum(matmul(a, b) * c, c - 0.5);
  EXPECT_EQ(KernelsFor(y), 1);
  const std::vector<float> got = y.to_vector<float>();
  for (int64_t s = 0; s < bt; ++s) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double p = 0;
        for (int64_t t = 0; t < k; ++t)
          p += static_cast<double>(av[(s * k + t) * m + i]) * bv[(s * k + t) * n + j];
        const size_t o = static_cast<size_t>((s * m + i) * n + j);
        EXPECT_NEAR(got[o], std::max(p * cv[o], cv[o] - 0.5), 1e-4) << s << "," << i << "," << j;
      }
    }
  }
}

// Where the chain does not read the result at its own index, or the result is needed elsewhere,
// the matmul keeps its own kernel and the values stay right.
TEST(FusionTest, MatmulWithoutFusableEpilogueKeepsItsKernel) {
  const int64_t m = 6, k = 5, n = 6;
  const std::vector<float> av = Values(m * k, 0.1f, -1.0f);
  const std::vector<float> bv = Values(k * n, -0.07f, 2.0f);
  Tensor a = tensor(av, {m, k}, kCl);
  Tensor b = tensor(bv, {k, n}, kCl);
  const std::vector<double> c = HostMatmul(av, bv, m, k, n);
  // A transpose of the result reads it at another index.
  Tensor t = transpose(matmul(a, b), 0, 1) + 1;
  EXPECT_EQ(KernelsFor(t), 2);
  const std::vector<float> tv = t.to_vector<float>();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) EXPECT_NEAR(tv[j * m + i], c[i * n + j] + 1, 1e-4);
  }
  // The result feeds two kernels (an elementwise one and a reduction).
  Tensor p = matmul(a, b);
  Tensor e = relu(p);
  Tensor s = sum(p, {1});
  const int64_t before = metrics::counter("KernelLaunches");
  sync({e, s});
  EXPECT_EQ(metrics::counter("KernelLaunches") - before, 3);
  const std::vector<float> ev = e.to_vector<float>();
  const std::vector<float> sv = s.to_vector<float>();
  for (int64_t i = 0; i < m; ++i) {
    double row = 0;
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_NEAR(ev[i * n + j], std::max(c[i * n + j], 0.0), 1e-4);
      row += c[i * n + j];
    }
    EXPECT_NEAR(sv[i], row, 1e-3);
  }
  // The result is itself an output beside the chain.
  Tensor q = matmul(a, b);
  Tensor r = q * 2;
  const int64_t before2 = metrics::counter("KernelLaunches");
  sync({q, r});
  EXPECT_EQ(metrics::counter("KernelLaunches") - before2, 2);
  const std::vector<float> qv = q.to_vector<float>();
  const std::vector<float> rv = r.to_vector<float>();
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_NEAR(qv[i], c[i], 1e-4);
    EXPECT_NEAR(rv[i], 2 * c[i], 2e-4);
  }
}

// `updated` is w - 0.5 * x^T g for w [k, n], x [m, k] and g [m, n], against a double-precision
// host product.
void ExpectSgdUpdate(const Tensor& updated, const std::vector<float>& wv,
                     const std::vector<float>& xv, const std::vector<float>& gv, int64_t m,
                     int64_t k, int64_t n) {
  const std::vector<float> got_w = updated.to_vector<float>();
  ASSERT_EQ(got_w.size(), static_cast<size_t>(k * n));
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double d = 0;
      for (int64_t r = 0; r < m; ++r) d += static_cast<double>(xv[r * k + i]) * gv[r * n + j];
      EXPECT_NEAR(got_w[i * n + j], wv[i * n + j] - 0.5 * d, 1e-4) << i << "," << j;
    }
  }
}

// The chains of a training step's backward pass fuse too: relu's gradient (a comparison of the
// stored activation at the element's index) and SGD's update of a detached gradient (detach()
// is an identity reshape of the pending product) are each stored by their matmul's kernel.
TEST(FusionTest, ReluGradientAndSgdUpdateAreMatmulEpilogues) {
  const int64_t m = 40, k = 50, n = 36;
  const std::vector<float> xv = Values(m * k, 0.01f, -0.5f);
  const std::vector<float> wv = Values(k * n, -0.013f, 0.6f);
  const std::vector<float> hv = Values(m * n, 0.02f, -1.0f);
  const std::vector<float> gv = Values(m * n, -0.03f, 1.5f);
  Tensor x = tensor(xv, {m, k}, kCl);
  Tensor w = tensor(wv, {k, n}, kCl);
  Tensor h = tensor(hv, {m, n}, kCl);
  Tensor g = tensor(gv, {m, n}, kCl);
  Tensor dh = where(gt(h, 0.0), matmul(x, w), 0.0);
  EXPECT_EQ(KernelsFor(dh), 1);
  Tensor updated = w - matmul(transpose(x, 0, 1), g).detach() * 0.5;
  EXPECT_EQ(KernelsFor(updated), 1);
  const std::vector<double> xw = HostMatmul(xv, wv, m, k, n);
  const std::vector<float> got_dh = dh.to_vector<float>();
  int masked = 0;
  for (int64_t i = 0; i < m * n; ++i) {
    masked += hv[i] <= 0;
    EXPECT_NEAR(got_dh[i], hv[i] > 0 ? xw[i] : 0.0, 1e-4) << i;
  }
  EXPECT_GT(masked, 0);
  EXPECT_LT(masked, m * n);
  ExpectSgdUpdate(updated, wv, xv, gv, m, k, n);
}

// The update written as an optimizer writes it, `(w - lr * grad).detach()`, where the output is
// a detach() of the whole chain (an identity reshape of the Add, not of the product): the chain
// is still the matmul's epilogue. Only a detach() of the product itself is the matmul's own
// output (AMatmulReadThroughAnOutputDetachIsComputed).
TEST(FusionTest, ADetachedSgdUpdateIsItsGradientsEpilogue) {
  const int64_t m = 40, k = 50, n = 36;
  const std::vector<float> xv = Values(m * k, 0.01f, -0.5f);
  const std::vector<float> wv = Values(k * n, -0.013f, 0.6f);
  const std::vector<float> gv = Values(m * n, -0.03f, 1.5f);
  Tensor x = tensor(xv, {m, k}, kCl);
  Tensor w = tensor(wv, {k, n}, kCl);
  Tensor g = tensor(gv, {m, n}, kCl);
  Tensor updated = (w - matmul(transpose(x, 0, 1), g) * 0.5).detach();
  EXPECT_EQ(KernelsFor(updated), 1);
  ExpectSgdUpdate(updated, wv, xv, gv, m, k, n);
}

// The gradient of an operand that is a transpose (x @ w^T in a linear layer, q @ k^T in
// attention) is computed as the product in w's own layout, g^T x: one kernel, where the
// transpose of x^T g took a matmul and a copy (or made its readers gather through the
// transpose: the grouped-query key gradient's head sum ran at 2.6 GB/s).
TEST(FusionTest, TheGradientOfATransposedOperandIsOneProductInItsLayout) {
  const int64_t b = 3, m = 20, k = 12, n = 17;
  const std::vector<float> xv = Values(b * m * k, 0.013f, -0.6f);
  const std::vector<float> wv = Values(b * n * k, -0.011f, 0.5f);
  const std::vector<float> gv = Values(b * m * n, 0.02f, -1.0f);
  Tensor x = tensor(xv, {b, m, k}, kCl).requires_grad_();
  Tensor w = tensor(wv, {b, n, k}, kCl).requires_grad_();
  Tensor g = tensor(gv, {b, m, n}, kCl);
  sync({g});
  std::vector<Tensor> grads = grad(matmul(x, transpose(w, 1, 2)), {x, w}, g);
  EXPECT_EQ(KernelsFor(grads[1]), 1);
  const std::vector<float> dx = grads[0].to_vector<float>();
  const std::vector<float> dw = grads[1].to_vector<float>();
  for (int64_t p = 0; p < b; ++p) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t c = 0; c < k; ++c) {  // dw[j, c] = sum_i g[i, j] x[i, c]
        double want = 0;
        for (int64_t i = 0; i < m; ++i)
          want += static_cast<double>(gv[(p * m + i) * n + j]) * xv[(p * m + i) * k + c];
        EXPECT_NEAR(dw[(p * n + j) * k + c], want, 1e-4 * (1 + std::fabs(want))) << p << j << c;
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t c = 0; c < k; ++c) {  // dx[i, c] = sum_j g[i, j] w[j, c]
        double want = 0;
        for (int64_t j = 0; j < n; ++j)
          want += static_cast<double>(gv[(p * m + i) * n + j]) * wv[(p * n + j) * k + c];
        EXPECT_NEAR(dx[(p * m + i) * k + c], want, 1e-4 * (1 + std::fabs(want))) << p << i << c;
      }
    }
  }
  // Both operands transposed (a^T @ c^T): their gradients are products in their layouts too.
  Tensor a = tensor(Values(k * m, 0.01f, -0.3f), {k, m}, kCl).requires_grad_();
  Tensor c = tensor(Values(n * k, -0.02f, 0.4f), {n, k}, kCl).requires_grad_();
  Tensor both = sum(matmul(transpose(a, 0, 1), transpose(c, 0, 1)), {}, false);
  std::vector<Tensor> g2 = grad(both, {a, c});
  const std::vector<float> cv = c.to_vector<float>(), av = a.to_vector<float>();
  const std::vector<float> da = g2[0].to_vector<float>(), dc = g2[1].to_vector<float>();
  for (int64_t r = 0; r < k; ++r) {
    double col_sum = 0;  // d/da[r, i] = sum_j c[j, r]; d/dc[j, r] = sum_i a[r, i]
    double row_sum = 0;
    for (int64_t j = 0; j < n; ++j) col_sum += cv[j * k + r];
    for (int64_t i = 0; i < m; ++i) row_sum += av[r * m + i];
    for (int64_t i = 0; i < m; ++i) EXPECT_NEAR(da[r * m + i], col_sum, 1e-4) << r << "," << i;
    for (int64_t j = 0; j < n; ++j) EXPECT_NEAR(dc[j * k + r], row_sum, 1e-4) << j << "," << r;
  }
}

// softmax's shift by the row max is a constant to autograd (JAX's stop_gradient): the gradient
// is y (g - sum(g y)), with no pass that compares x with its max to route a gradient that sums
// to zero: four kernels (the max, the sum of exp, the sum of g y, the result) where the
// differentiated shift took six. (Rows too few to share out as a row kernel and too long for a
// small one, which would take all four in one kernel.)
TEST(FusionTest, SoftmaxGradientDoesNotDifferentiateTheShift) {
  const int64_t rows = 6, cols = 3000;
  std::vector<float> xv = Values(rows * cols, 0.05f, -2.0f);
  xv[3] = xv[5] = 9.0f;  // a tie at the max
  const std::vector<float> gv = Values(rows * cols, -0.07f, 1.0f);
  Tensor x = tensor(xv, {rows, cols}, kCl).requires_grad_();
  Tensor y = softmax(x, 1);
  Tensor loss = sum(y * tensor(gv, {rows, cols}, kCl), {}, false);
  Tensor dx = grad(loss, {x})[0];
  EXPECT_EQ(KernelsFor(dx), 4);
  const std::vector<float> got = dx.to_vector<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -1e30, z = 0, gy = 0;
    for (int64_t c = 0; c < cols; ++c) mx = std::max<double>(mx, xv[r * cols + c]);
    for (int64_t c = 0; c < cols; ++c) z += std::exp(xv[r * cols + c] - mx);
    for (int64_t c = 0; c < cols; ++c) gy += gv[r * cols + c] * std::exp(xv[r * cols + c] - mx) / z;
    for (int64_t c = 0; c < cols; ++c) {
      const double yv = std::exp(xv[r * cols + c] - mx) / z;
      EXPECT_NEAR(got[r * cols + c], yv * (gv[r * cols + c] - gy), 1e-6) << r << "," << c;
    }
  }
}

// Grouped-query attention's repeat (unsqueeze, broadcast, merge the head dims) is read by the
// matmul in place, as two levels of batch strides: q k^T over the repeated keys is one kernel,
// where the repeat took a copy of every key for every head.
TEST(FusionTest, RepeatedKeysAreReadInPlace) {
  const int64_t kv = 2, rep = 3, t = 16, d = 8;
  Tensor q = tensor(Values(kv * rep * t * d, 0.01f, -0.4f), {1, kv * rep, t, d}, kCl);
  Tensor k = tensor(Values(kv * t * d, -0.02f, 0.7f), {1, kv, t, d}, kCl);
  Tensor repeated = reshape(broadcast_to(unsqueeze(k, 2), {1, kv, rep, t, d}), {1, kv * rep, t, d});
  Tensor scores = matmul(q, transpose(repeated, -1, -2));
  EXPECT_EQ(KernelsFor(scores), 1);
  const std::vector<float> qv = q.to_vector<float>(), kv_ = k.to_vector<float>();
  const std::vector<float> got = scores.to_vector<float>();
  for (int64_t head = 0; head < kv * rep; ++head) {
    const int64_t g = head / rep;  // the key head this query head reads
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < t; ++j) {
        double want = 0;
        for (int64_t e = 0; e < d; ++e)
          want += static_cast<double>(qv[(head * t + i) * d + e]) * kv_[(g * t + j) * d + e];
        EXPECT_NEAR(got[(head * t + i) * t + j], want, 1e-4) << head << "," << i << "," << j;
      }
    }
  }
}

// Attention's output, p @ v transposed to [b, t, h, d] for the output projection: the product
// is stored by its matmul straight into the transposed layout, one kernel with no copy.
TEST(FusionTest, AProductReadOnlyThroughAPermuteIsStoredInItsLayout) {
  const int64_t b = 2, h = 3, t = 9, k = 9, d = 16;
  const std::vector<float> pv = Values(b * h * t * k, 0.01f, -0.3f);
  const std::vector<float> vv = Values(b * h * k * d, -0.02f, 0.6f);
  Tensor p = tensor(pv, {b, h, t, k}, kCl), v = tensor(vv, {b, h, k, d}, kCl);
  Tensor heads = permute(matmul(p, v), {0, 2, 1, 3});
  EXPECT_EQ(KernelsFor(heads), 1);
  const std::vector<float> got = heads.to_vector<float>();
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t hi = 0; hi < h; ++hi) {
      for (int64_t ti = 0; ti < t; ++ti) {
        for (int64_t di = 0; di < d; ++di) {
          double want = 0;
          for (int64_t j = 0; j < k; ++j)
            want += static_cast<double>(pv[((bi * h + hi) * t + ti) * k + j]) *
                    vv[((bi * h + hi) * k + j) * d + di];
          EXPECT_NEAR(got[((bi * t + ti) * h + hi) * d + di], want, 1e-4)
              << bi << "," << hi << "," << ti << "," << di;
        }
      }
    }
  }
}

// softmax's gradient, y (g - sum(g y)) (ir::Backprop's rule, JAX's formula; backprop_rules_test
// checks the IR it builds), at top level (softmax is one recorded expression) and inside a
// traced body: against the host's formula, and over rows of 64 one row kernel.
TEST(FusionTest, SoftmaxGradientIsOneRowKernelOverY) {
  const int64_t rows = 32, cols = 64;
  const std::vector<float> xv = Values(rows * cols, 0.03f, -1.5f);
  const std::vector<float> gv = Values(rows * cols, -0.05f, 2.0f);
  Tensor x = tensor(xv, {rows, cols}, kCl).requires_grad_();
  Tensor g = tensor(gv, {rows, cols}, kCl);
  sync({g});
  Tensor dx = grad(softmax(x, 1), {x}, g)[0];
  EXPECT_EQ(KernelsFor(dx), 1);
  Function traced =
      trace([](const std::vector<Tensor>& in) { return std::vector<Tensor>{softmax(in[0], -1)}; },
            {{{rows, cols}, DType::f32}}, kCl);
  Tensor dx_traced = grad(traced({x})[0], {x}, g)[0];
  EXPECT_EQ(KernelsFor(dx_traced), 1);
  const std::vector<float> got = dx.to_vector<float>(), got_traced = dx_traced.to_vector<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -1e30, z = 0, gy = 0;
    for (int64_t c = 0; c < cols; ++c) mx = std::max<double>(mx, xv[r * cols + c]);
    for (int64_t c = 0; c < cols; ++c) z += std::exp(xv[r * cols + c] - mx);
    for (int64_t c = 0; c < cols; ++c) gy += gv[r * cols + c] * std::exp(xv[r * cols + c] - mx) / z;
    for (int64_t c = 0; c < cols; ++c) {
      const double want = std::exp(xv[r * cols + c] - mx) / z * (gv[r * cols + c] - gy);
      EXPECT_NEAR(got[r * cols + c], want, 1e-6) << r << "," << c;
      EXPECT_NEAR(got_traced[r * cols + c], want, 1e-6) << r << "," << c;
    }
  }
}

// q, k and v of one x (products sharing their A operand) run as one grouped matmul kernel on
// the CPU strategy, each product written to its own output.
TEST(FusionTest, ProductsSharingAnOperandAreOneKernel) {
  const int64_t m = 20, k = 24;
  const int64_t widths[] = {32, 16, 16};
  const std::vector<float> xv = Values(m * k, 0.01f, -0.5f);
  Tensor x = tensor(xv, {m, k}, kCl);
  std::vector<std::vector<float>> wv;
  std::vector<Tensor> w, products;
  for (int64_t n : widths) {
    wv.push_back(Values(k * n, -0.02f, 0.3f + 0.1f * static_cast<float>(n)));
    w.push_back(tensor(wv.back(), {k, n}, kCl));
    products.push_back(matmul(x, w.back()));
  }
  const int64_t before = metrics::counter("KernelLaunches");
  sync(products);
  EXPECT_EQ(metrics::counter("KernelLaunches") - before, 1);
  for (size_t p = 0; p < products.size(); ++p) {
    const int64_t n = widths[p];
    const std::vector<double> want = HostMatmul(xv, wv[p], m, k, n);
    const std::vector<float> got = products[p].to_vector<float>();
    for (int64_t i = 0; i < m * n; ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << p << "," << i;
  }
}

// A matmul whose only reader is the output's identity reshape (`detach()`) is written by the
// matmul itself into the output: it is not an epilogue of that output's kernel, which does not
// run (lazycl-fuzz found "result holds no data" through a gradient: seed 2026, graph 9220).
TEST(FusionTest, AMatmulReadThroughAnOutputDetachIsComputed) {
  const int64_t m = 5, k = 4, n = 3;
  const std::vector<float> av = Values(m * k, 0.1f, -0.7f);
  const std::vector<float> bv = Values(k * n, -0.2f, 0.9f);
  const std::vector<double> want = HostMatmul(av, bv, m, k, n);
  const std::vector<float> got =
      matmul(tensor(av, {m, k}, kCl), tensor(bv, {k, n}, kCl)).detach().to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << i;
  // The gradient that found it: matmul(broadcast_to(x, its own shape), w).
  Tensor x = tensor(av, {m, k}, kCl).requires_grad_();
  Tensor loss = sum(matmul(broadcast_to(x, {m, k}), tensor(bv, {k, n}, kCl)), {}, false);
  const std::vector<float> dx = grad(loss, {x})[0].to_vector<float>();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      double row = 0;
      for (int64_t c = 0; c < n; ++c) row += bv[j * n + c];
      EXPECT_NEAR(dx[i * k + j], row, 1e-5 * (1 + std::fabs(row))) << i << "," << j;
    }
  }
}

// A value computed in two kernels, or in a kernel's 16-wide body and its scalar tail, is the
// same bits in each: max's gradient compares x / -3 with max(x / -3) computed in another
// kernel, and a division done as a multiply by the reciprocal in one of them (1 ulp off) once
// lost the gradient of 5 of 17 columns (lazycl-fuzz seed 2026, graph 62391).
TEST(FusionTest, ADivisionIsTheSameBitsInEveryKernelThatComputesIt) {
  const int64_t rows = 3, cols = 17;
  std::vector<float> xv(rows * cols), wv(cols);
  for (int64_t i = 0; i < rows * cols; ++i)
    xv[i] = std::sin(0.37f * static_cast<float>(i) + 0.1f) * 1.7f;
  for (int64_t c = 0; c < cols; ++c) wv[c] = 0.25f + 0.1f * static_cast<float>(c);
  Tensor x = tensor(xv, {rows, 1, 1, cols}, kCl).requires_grad_();
  Tensor y = x / -3.0;
  Tensor m = max(y, {0, 1, 2}, true);
  const std::vector<float> got_y = y.detach().to_vector<float>();
  const std::vector<float> got_m = m.detach().to_vector<float>();
  for (int64_t i = 0; i < rows * cols; ++i) EXPECT_EQ(got_y[i], xv[i] / -3.0f) << i;
  Tensor loss = sum(m * tensor(wv, {1, 1, 1, cols}, kCl), {}, false);
  const std::vector<float> dx = grad(loss, {x})[0].to_vector<float>();
  for (int64_t c = 0; c < cols; ++c) {
    float want_m = -INFINITY;
    int64_t arg = 0;
    for (int64_t r = 0; r < rows; ++r) {
      if (xv[r * cols + c] / -3.0f > want_m) want_m = xv[r * cols + c] / -3.0f, arg = r;
    }
    EXPECT_EQ(got_m[c], want_m) << c;
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_FLOAT_EQ(dx[r * cols + c], r == arg ? wv[c] / -3.0f : 0.0f) << r << "," << c;
    }
  }
}

// Reduction epilogues: an elementwise chain that only reads a reduction's result, at the result's
// own linear index, is stored by the reduction's kernel (a mean's scale, a norm's sqrt, an
// argmax's index fix-up). Random inputs against double-precision host loops. These run again
// under the GPU strategy (fusion_gpu_codegen_test), whose reductions are work-group trees.
std::vector<float> RandomValues(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

TEST(FusionTest, ReductionEpilogueMeanAndNormAreOneKernel) {
  const int64_t r = 5, c = 37;  // rows of 37: two vectors of 16 and a tail of 5
  const std::vector<float> xv = RandomValues(r * c, 1);
  const Tensor x = tensor(xv, {r, c}, kCl);
  auto at = [&](int64_t i, int64_t j) { return static_cast<double>(xv[i * c + j]); };

  const Tensor all = mean(x);
  EXPECT_EQ(KernelsFor(all), 1);
  double total = 0;
  for (float v : xv) total += v;
  EXPECT_NEAR(all.item<float>(), total / (r * c), 1e-5);

  const Tensor rows = mean(x, {1});
  const Tensor norms = sqrt(sum(x * x, {1}));
  const std::vector<float> counts = {1, 2, 3, 4, 5};
  const Tensor scaled = sum(x, {1}, true) / tensor(counts, {r, 1}, kCl);  // another input, too
  // Over a transposed view: the reduced dim is not the last of the buffer.
  const Tensor cols = mean(transpose(x, 0, 1), {1});
  for (const Tensor* t : {&rows, &norms, &scaled, &cols}) EXPECT_EQ(KernelsFor(*t), 1);
  const std::vector<float> rv = rows.to_vector<float>(), nv = norms.to_vector<float>(),
                           sv = scaled.to_vector<float>(), cv = cols.to_vector<float>();
  for (int64_t i = 0; i < r; ++i) {
    double s = 0, sq = 0;
    for (int64_t j = 0; j < c; ++j) {
      s += at(i, j);
      sq += at(i, j) * at(i, j);
    }
    EXPECT_NEAR(rv[i], s / c, 1e-5) << i;
    EXPECT_NEAR(nv[i], std::sqrt(sq), 1e-5) << i;
    EXPECT_NEAR(sv[i], s / counts[i], 1e-5) << i;
  }
  for (int64_t j = 0; j < c; ++j) {
    double s = 0;
    for (int64_t i = 0; i < r; ++i) s += at(i, j);
    EXPECT_NEAR(cv[j], s / r, 1e-5) << j;
  }

  // Size-1 and size-0 dims: one row; sums over nothing (0 + 1 each); nothing to store.
  const Tensor one = mean(tensor(std::vector<float>(xv.begin(), xv.begin() + c), {1, c}, kCl), {1});
  EXPECT_EQ(KernelsFor(one), 1);
  EXPECT_NEAR(
      one.item<float>(),
      [&] {
        double s = 0;
        for (int64_t j = 0; j < c; ++j) s += at(0, j);
        return s / c;
      }(),
      1e-5);
  const Tensor over_nothing = sum(zeros({4, 0}, DType::f32, kCl), {1}) + 1.0;
  EXPECT_EQ(over_nothing.to_vector<float>(), std::vector<float>(4, 1.0f));
  // An output that is only reshapes of the reduction (unsqueeze of a keepdim sum): the reduction
  // writes it, in one kernel.
  const Tensor unsqueezed = unsqueeze(reshape(sum(x, {1}, true), {r}), 0);
  EXPECT_EQ(KernelsFor(unsqueezed), 1);
  EXPECT_EQ(unsqueezed.shape(), (std::vector<int64_t>{1, r}));
  const std::vector<float> uv = unsqueezed.to_vector<float>();
  for (int64_t i = 0; i < r; ++i) EXPECT_NEAR(uv[i], rv[i] * c, 1e-4) << i;
  const Tensor empty = sum(zeros({0, 3}, DType::f32, kCl), {1}) * 2.0;
  EXPECT_EQ(empty.shape(), std::vector<int64_t>{0});
  EXPECT_TRUE(empty.to_vector<float>().empty());
}

// A long sum runs in two stages (partials, then their sum): the scale goes with the second.
TEST(FusionTest, ReductionEpilogueOfATwoStageReduction) {
  const int64_t n = int64_t{1} << 20;
  const std::vector<float> xv = RandomValues(n, 2);
  const Tensor m = mean(tensor(xv, {n}, kCl) + 0.5);
  EXPECT_EQ(KernelsFor(m), 2);
  double s = 0;
  for (float v : xv) s += v + 0.5;
  EXPECT_NEAR(m.item<float>(), s / static_cast<double>(n), 1e-4);
}

// A bias's SGD update from its gradient's column sums (the CPU's 16-columns-per-work-item
// reduction, with a tail of 8 columns) is one kernel.
TEST(FusionTest, ReductionEpilogueOfColumnSumsIsTheBiasUpdate) {
  const int64_t rows = 37, cols = 40;
  const std::vector<float> gv = RandomValues(rows * cols, 3), bv = RandomValues(cols, 4);
  const Tensor g = tensor(gv, {rows, cols}, kCl), b = tensor(bv, {cols}, kCl);
  const Tensor updated = b - sum(g, {0}) * 0.1;
  // As an optimizer writes it: the new value detached (a Reshape root), and a detached mean.
  const Tensor detached = (b - sum(g, {0}) * 0.1).detach();
  const Tensor loss = mean(g * g).detach();
  for (const Tensor* t : {&updated, &detached, &loss}) EXPECT_EQ(KernelsFor(*t), 1);
  const std::vector<float> got = updated.to_vector<float>(),
                           got_detached = detached.to_vector<float>();
  double squares = 0;
  for (int64_t j = 0; j < cols; ++j) {
    double s = 0;
    for (int64_t i = 0; i < rows; ++i) {
      s += gv[i * cols + j];
      squares += static_cast<double>(gv[i * cols + j]) * gv[i * cols + j];
    }
    EXPECT_NEAR(got[j], bv[j] - 0.1 * s, 1e-5) << j;
    EXPECT_NEAR(got_detached[j], bv[j] - 0.1 * s, 1e-5) << j;
  }
  EXPECT_NEAR(loss.item<float>(), squares / (rows * cols), 1e-5);
}

// argmax and argmin: the extremum's reduction, then the first index holding it with the NaN fix-up
// stored by the second reduction's kernel. Ties and NaNs included.
TEST(FusionTest, ReductionEpilogueMakesArgmaxTwoKernels) {
  const int64_t r = 6, c = 33;
  std::vector<float> xv = RandomValues(r * c, 5);
  xv[2 * c + 20] = std::nanf("");  // row 2: a NaN after its max wins
  xv[2 * c + 30] = std::nanf("");
  xv[4 * c + 3] = xv[4 * c + 17] = 9.0f;  // row 4: a tie for the max, the first wins
  xv[5 * c + 7] = xv[5 * c + 8] = -9.0f;  // row 5: a tie for the min
  const Tensor x = tensor(xv, {r, c}, kCl);
  auto want = [&](int64_t i, bool max_wanted) {
    int64_t best = 0;
    for (int64_t j = 0; j < c; ++j) {
      const float v = xv[i * c + j], b = xv[i * c + best];
      if (std::isnan(v)) return j;
      if (max_wanted ? v > b : v < b) best = j;
    }
    return best;
  };
  for (bool max_wanted : {true, false}) {
    const Tensor idx = max_wanted ? argmax(x, 1) : argmin(x, 1);
    const Tensor kept = max_wanted ? argmax(x, 1, true) : argmin(x, 1, true);
    EXPECT_EQ(KernelsFor(idx), 2);
    EXPECT_EQ(kept.shape(), (std::vector<int64_t>{r, 1}));
    const std::vector<int64_t> got = idx.to_vector<int64_t>(), got_kept = kept.to_vector<int64_t>();
    for (int64_t i = 0; i < r; ++i) {
      EXPECT_EQ(got[i], want(i, max_wanted)) << "row " << i << (max_wanted ? " argmax" : " argmin");
      EXPECT_EQ(got_kept[i], got[i]) << i;
    }
  }
  // The whole tensor as one row (sampling's argmax of the last logits).
  const Tensor flat = argmax(reshape(slice(x, 0, 4, 5), {c}), 0);
  EXPECT_EQ(KernelsFor(flat), 2);
  EXPECT_EQ(flat.item<int64_t>(), want(4, true));
}

// Where the reduction's value is also read by another kernel, or is an output itself, it is
// stored and read as before.
TEST(FusionTest, ReductionEpilogueNotTakenWhereTheResultIsReadElsewhere) {
  const std::vector<float> xv = RandomValues(4 * 21, 6);
  const Tensor x = tensor(xv, {4, 21}, kCl);
  const Tensor s = sum(x, {1});
  const Tensor doubled = s * 2.0;
  const Tensor shifted = s + 1.0;
  sync({doubled, shifted});
  const Tensor s2 = sum(x, {1});
  const Tensor tripled = s2 * 3.0;
  sync({s2, tripled});
  const std::vector<float> dv = doubled.to_vector<float>(), hv = shifted.to_vector<float>(),
                           s2v = s2.to_vector<float>(), tv = tripled.to_vector<float>();
  for (int64_t i = 0; i < 4; ++i) {
    double want = 0;
    for (int64_t j = 0; j < 21; ++j) want += xv[i * 21 + j];
    EXPECT_NEAR(dv[i], 2 * want, 1e-5) << i;
    EXPECT_NEAR(hv[i], want + 1, 1e-5) << i;
    EXPECT_NEAR(s2v[i], want, 1e-5) << i;
    EXPECT_NEAR(tv[i], 3 * want, 1e-5) << i;
  }
}

// Other dtypes: an f16 mean (reduced in f32, its cast back stored by the kernel) and an i32 sum
// (an i64 result) scaled.
TEST(FusionTest, ReductionEpilogueInOtherDtypes) {
  const std::vector<float> xv = RandomValues(3 * 50, 7);
  const Tensor h = cast(tensor(xv, {3, 50}, kCl), DType::f16);
  sync({h});
  const Tensor hm = mean(h, {1});
  EXPECT_EQ(KernelsFor(hm), 1);
  EXPECT_EQ(hm.dtype(), DType::f16);
  const std::vector<float> hv = h.to_vector<float>(), got = hm.to_vector<float>();
  for (int64_t i = 0; i < 3; ++i) {
    double s = 0;
    for (int64_t j = 0; j < 50; ++j) s += hv[i * 50 + j];
    EXPECT_NEAR(got[i], s / 50, 2e-3) << i;
  }
  std::vector<int32_t> iv(3 * 50);
  for (size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<int32_t>(i * 7919 % 201) - 100;
  const Tensor xi = tensor(iv, {3, 50}, kCl);
  const Tensor si = sum(xi, {1}) * 3;
  EXPECT_EQ(KernelsFor(si), 1);
  const std::vector<int64_t> sv = si.to_vector<int64_t>();
  for (int64_t i = 0; i < 3; ++i) {
    int64_t want = 0;
    for (int64_t j = 0; j < 50; ++j) want += iv[i * 50 + j];
    EXPECT_EQ(sv[i], 3 * want) << i;
  }
}

// Multi-output fusion: elementwise outputs of one shape that read one another or the same
// inputs, each at its own index, are one kernel (an optimizer's moments and the parameter they
// update). Against double-precision host loops.
TEST(FusionTest, MultiOutputAdamUpdateIsOneKernel) {
  const int64_t n = 33 * 17;
  const std::vector<float> pv = RandomValues(n, 11), gv = RandomValues(n, 12),
                           mv = RandomValues(n, 13);
  std::vector<float> vv = RandomValues(n, 14);
  for (float& x : vv) x = x * x;
  const Tensor p = tensor(pv, {33, 17}, kCl), g = tensor(gv, {33, 17}, kCl),
               m = tensor(mv, {33, 17}, kCl), v = tensor(vv, {33, 17}, kCl);
  const double b1 = 0.9, b2 = 0.99, lr = 0.01, eps = 1e-8;
  for (bool detached : {false, true}) {
    Tensor m2 = m * b1 + g * (1 - b1);
    Tensor v2 = v * b2 + g * g * (1 - b2);
    Tensor p2 = p - m2 * (lr / (1 - b1)) / (sqrt(v2 * (1 / (1 - b2))) + eps);
    if (detached) {  // as an optimizer writes its new state
      m2 = m2.detach();
      v2 = v2.detach();
      p2 = p2.detach();
    }
    const int64_t before = metrics::counter("KernelLaunches");
    sync({p2, m2, v2});
    EXPECT_EQ(metrics::counter("KernelLaunches") - before, 1) << "detached " << detached;
    const std::vector<float> pg = p2.to_vector<float>(), mg = m2.to_vector<float>(),
                             vg = v2.to_vector<float>();
    for (int64_t i = 0; i < n; ++i) {
      const double m_want = mv[i] * b1 + gv[i] * (1 - b1);
      const double v_want = vv[i] * b2 + static_cast<double>(gv[i]) * gv[i] * (1 - b2);
      const double p_want = pv[i] - m_want * (lr / (1 - b1)) / (std::sqrt(v_want / (1 - b2)) + eps);
      EXPECT_NEAR(mg[i], m_want, 1e-5) << i;
      EXPECT_NEAR(vg[i], v_want, 1e-5) << i;
      EXPECT_NEAR(pg[i], p_want, 1e-5) << i;
    }
  }
}

// Not one kernel: an output read by another at a different index (its transpose), or outputs
// with nothing in common. Both still right.
TEST(FusionTest, MultiOutputNotTakenAcrossIndicesOrUnrelatedOutputs) {
  const std::vector<float> xv = RandomValues(16 * 16, 15), yv = RandomValues(16 * 16, 16);
  const Tensor x = tensor(xv, {16, 16}, kCl), y = tensor(yv, {16, 16}, kCl);
  const Tensor a = x + 1.0;
  const Tensor b = transpose(a, 0, 1) * 2.0;
  int64_t before = metrics::counter("KernelLaunches");
  sync({a, b});
  EXPECT_EQ(metrics::counter("KernelLaunches") - before, 2);
  const Tensor c = x * 3.0, d = y - 1.0;
  before = metrics::counter("KernelLaunches");
  sync({c, d});
  EXPECT_EQ(metrics::counter("KernelLaunches") - before, 2);
  const std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>(),
                           cv = c.to_vector<float>(), dv = d.to_vector<float>();
  for (int64_t i = 0; i < 16; ++i) {
    for (int64_t j = 0; j < 16; ++j) {
      EXPECT_FLOAT_EQ(av[i * 16 + j], xv[i * 16 + j] + 1.0f);
      EXPECT_FLOAT_EQ(bv[i * 16 + j], (xv[j * 16 + i] + 1.0f) * 2.0f);
      EXPECT_FLOAT_EQ(cv[i * 16 + j], xv[i * 16 + j] * 3.0f);
      EXPECT_FLOAT_EQ(dv[i * 16 + j], yv[i * 16 + j] - 1.0f);
    }
  }
}

// The optimizers' steps with their buffers donated (each new value written over the old one in
// place) stay right when their updates are one kernel: AdamW over three steps against the same
// steps on the host.
TEST(FusionTest, MultiOutputAdamWStepsMatchTheHost) {
  auto run = [](Device device) {
    Tensor w = tensor(RandomValues(40 * 24, 17), {40, 24}, device).requires_grad_();
    Tensor b = tensor(RandomValues(24, 18), {24}, device).requires_grad_();
    const Tensor x = tensor(RandomValues(8 * 40, 19), {8, 40}, device);
    optim::AdamW opt({w, b}, {0.01, 0.9, 0.99, 1e-8, 0.1});
    for (int step = 0; step < 3; ++step) {
      const Tensor y = matmul(x, w) + b;
      Tensor loss = mean(y * y);
      loss.backward();
      opt.step();
      opt.zero_grad();
    }
    std::vector<float> out = w.to_vector<float>();
    const std::vector<float> bv = b.to_vector<float>();
    out.insert(out.end(), bv.begin(), bv.end());
    return out;
  };
  const std::vector<float> got = run(kCl), want = run(Device::host());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

// Two tensors updated in place, each new value written over its old one (donated), where each
// new value reads the other's old one (and a shared z): in one kernel, which loads every value
// it reads before it stores any.
TEST(FusionTest, MultiOutputInPlaceSwapReadsOnlyOldValues) {
  const int64_t n = 300;
  const std::vector<float> xv = RandomValues(n, 20), yv = RandomValues(n, 21),
                           zv = RandomValues(n, 22);
  Tensor x = tensor(xv, {n}, kCl), y = tensor(yv, {n}, kCl);
  const Tensor z = tensor(zv, {n}, kCl);
  const int64_t donated = metrics::counter("DonatedBytes");
  const int64_t before = metrics::counter("KernelLaunches");
  frontend::AssignInPlace({x.impl().get(), y.impl().get()}, {y * 2.0 + z, x * 3.0 + z});
  EXPECT_EQ(metrics::counter("KernelLaunches") - before, 1);
  EXPECT_EQ(metrics::counter("DonatedBytes") - donated, 2 * n * 4);  // both written in place
  const std::vector<float> xg = x.to_vector<float>(), yg = y.to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_FLOAT_EQ(xg[i], yv[i] * 2.0f + zv[i]) << i;
    EXPECT_FLOAT_EQ(yg[i], xv[i] * 3.0f + zv[i]) << i;
  }
}

// Outputs of several dtypes from one input: a mask, a float and an integer, in one kernel.
TEST(FusionTest, MultiOutputOfMixedDtypes) {
  const std::vector<float> xv = RandomValues(7 * 9, 23);
  const Tensor x = tensor(xv, {7, 9}, kCl);
  const Tensor mask = gt(x, 0.0), scaled = relu(x) * 2.0, rounded = cast(x * 10.0, DType::i32);
  const int64_t before = metrics::counter("KernelLaunches");
  sync({mask, scaled, rounded});
  EXPECT_EQ(metrics::counter("KernelLaunches") - before, 1);
  const std::vector<uint8_t> mv = mask.to_vector<uint8_t>();
  const std::vector<float> sv = scaled.to_vector<float>();
  const std::vector<int32_t> rv = rounded.to_vector<int32_t>();
  for (size_t i = 0; i < xv.size(); ++i) {
    EXPECT_EQ(mv[i] != 0, xv[i] > 0) << i;
    EXPECT_FLOAT_EQ(sv[i], std::max(xv[i], 0.0f) * 2.0f) << i;
    EXPECT_EQ(rv[i], static_cast<int32_t>(xv[i] * 10.0f)) << i;
  }
}

// Uses of each fused op `op` summed over the kernels profiled: "Add x3, Matmul" counts 3.
int64_t FusedOpCount(const std::string& op) {
  int64_t total = 0;
  for (const metrics::KernelProfile& row : metrics::kernel_profile()) {
    for (size_t at = row.ops.find(op); at != std::string::npos; at = row.ops.find(op, at + 1)) {
      const size_t end = at + op.size();
      if ((at > 0 && row.ops[at - 1] != ' ') ||
          (end < row.ops.size() && row.ops[end] != ',' && row.ops[end] != ' '))
        continue;  // part of another op's name
      int64_t count = 1;
      if (row.ops.compare(end, 2, " x") == 0) count = std::stoll(row.ops.substr(end + 2));
      total += count * row.runs;
    }
  }
  return total;
}

// A residual stream written as a loop over layers, h = h + f(h), starting from an embedding
// lookup: each h is read by the next layer's operand and by the next residual add. It is not
// recomputed by its readers down the whole chain (each layer's operand re-adding every earlier
// layer's output, the work growing with the square of the depth: a for-loop Llama's norms
// re-read up to 8 products a layer), and the gather runs once, not in both its readers.
TEST(FusionTest, AResidualStreamOverALoopOfLayersIsNotRecomputed) {
  const int64_t layers = 8, rows = 12, d = 32, vocab = 20;
  const std::vector<float> tv = RandomValues(vocab * d, 71);
  std::vector<int32_t> ids(rows);
  for (int64_t r = 0; r < rows; ++r) ids[r] = static_cast<int32_t>((r * 7) % vocab);
  std::vector<std::vector<float>> wv, sv;
  for (int64_t l = 0; l < layers; ++l) {
    wv.push_back(RandomValues(d * d, 100 + l));
    for (float& w : wv.back()) w *= 0.2f;
    sv.push_back(RandomValues(d, 200 + l));
  }
  const Tensor table = tensor(tv, {vocab, d}, kCl), idx = tensor(ids, {rows}, kCl);
  std::vector<Tensor> w, s;
  for (int64_t l = 0; l < layers; ++l) {
    w.push_back(tensor(wv[l], {d, d}, kCl));
    s.push_back(tensor(sv[l], {d}, kCl));
  }
  Tensor h = nn::embedding(table, idx);
  for (int64_t l = 0; l < layers; ++l) h = h + matmul(h * s[l], w[l]);
  metrics::set_profiling(true);
  metrics::reset_profile();
  sync({h});
  const int64_t adds = FusedOpCount("Add"), gathers = FusedOpCount("Gather");
  metrics::set_profiling(false);
  // Each residual add computed by at most its two readers' kernels (the first layers', whose
  // stream is short, are recomputed; every later one is stored by its product's kernel).
  EXPECT_LE(adds, 2 * layers);
  EXPECT_GE(adds, layers);
  EXPECT_EQ(gathers, 1);
  std::vector<double> hv(rows * d);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < d; ++c) hv[r * d + c] = tv[ids[r] * d + c];
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<double> next = hv;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < d; ++c) {
        double acc = 0;
        for (int64_t k = 0; k < d; ++k) acc += hv[r * d + k] * sv[l][k] * wv[l][k * d + c];
        next[r * d + c] += acc;
      }
    }
    hv = next;
  }
  const std::vector<float> got = h.to_vector<float>();
  for (size_t i = 0; i < hv.size(); ++i)
    ASSERT_NEAR(got[i], hv[i], 1e-4 * (1 + std::abs(hv[i]))) << i;
}

}  // namespace
}  // namespace lazycl
