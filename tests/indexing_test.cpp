// gather, take_along_dim, index_select, scatter_add, one_hot and nn::embedding (lazycl/indexing.h,
// lazycl/nn.h): the host against small loops written here, the device against the host (exact:
// gathers copy values, and scatter_add adds in the same order on both), gradients by finite
// differences, and the errors. CTest runs this binary twice: with the device's own codegen
// strategy and with LAZYCL_CODEGEN=gpu (tests/CMakeLists.txt).
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

using Shape = std::vector<int64_t>;

Device Cl() { return Device::opencl(); }

// A small deterministic generator (splitmix64).
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float Float() { return static_cast<float>(Next() >> 40) / static_cast<float>(1 << 24) * 4 - 2; }
  int64_t Int(int64_t lo, int64_t hi) {  // [lo, hi)
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo));
  }
};

int64_t Numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::vector<float> Floats(int64_t n, uint64_t seed) {
  Rng r{seed};
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = r.Float();
  return v;
}

// Ids in [lo, hi): tests pass ranges wider than the dim to cover clamping and dropping.
std::vector<int64_t> Ids(int64_t n, int64_t lo, int64_t hi, uint64_t seed) {
  Rng r{seed};
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t& x : v) x = hi > lo ? r.Int(lo, hi) : 0;
  return v;
}

Tensor IdTensor(const std::vector<int64_t>& ids, const Shape& shape, DType dtype, Device device) {
  if (dtype == DType::i64) return tensor(ids, shape, device);
  std::vector<int32_t> narrow(ids.begin(), ids.end());
  return tensor(narrow, shape, device);
}

// Row-major strides.
Shape Strides(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// The multi-index of linear position `i` in `s`.
Shape Unravel(int64_t i, const Shape& s) {
  Shape at(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    at[d] = i % s[d];
    i /= s[d];
  }
  return at;
}

int64_t Ravel(const Shape& at, const Shape& s) {
  const Shape st = Strides(s);
  int64_t p = 0;
  for (size_t d = 0; d < s.size(); ++d) p += at[d] * st[d];
  return p;
}

// The reference gather (PyTorch's definition, with JAX's clamping).
std::vector<float> RefGather(const std::vector<float>& x, const Shape& xs, int64_t dim,
                             const std::vector<int64_t>& index, const Shape& is) {
  std::vector<float> out(index.size());
  for (size_t j = 0; j < index.size(); ++j) {
    Shape at = Unravel(static_cast<int64_t>(j), is);
    at[dim] = std::min(std::max<int64_t>(index[j], 0), xs[dim] - 1);
    out[j] = x[Ravel(at, xs)];
  }
  return out;
}

// The reference scatter_add: src's elements in row-major order, out-of-range ones dropped.
std::vector<float> RefScatterAdd(std::vector<float> x, const Shape& xs, int64_t dim,
                                 const std::vector<int64_t>& index, const Shape& is,
                                 const std::vector<float>& src, const Shape& ss) {
  for (size_t j = 0; j < index.size(); ++j) {
    Shape at = Unravel(static_cast<int64_t>(j), is);
    const float v = src[Ravel(at, ss)];
    if (index[j] < 0 || index[j] >= xs[dim]) continue;
    at[dim] = index[j];
    x[Ravel(at, xs)] += v;
  }
  return x;
}

template <typename T>
void ExpectSame(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(T)), 0)
        << what << " element " << i << ": got " << got[i] << ", want " << want[i];
  }
}

// x uploaded transposed (last two dims swapped) and transposed back on the device: a view.
Tensor Transposed(const std::vector<float>& v, const Shape& s, Device d) {
  if (s.size() < 2) return tensor(v, s, d);
  const size_t r = s.size();
  Shape t = s;
  std::swap(t[r - 1], t[r - 2]);
  std::vector<float> tv(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    Shape at = Unravel(static_cast<int64_t>(i), s);
    std::swap(at[r - 1], at[r - 2]);
    tv[Ravel(at, t)] = v[i];
  }
  return transpose(tensor(tv, t, d), -1, -2);
}

void ExpectNearAll(const std::vector<float>& got, const std::vector<float>& want, double tol,
                   const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " element " << i;
  }
}

struct GatherCase {
  Shape xs;
  int64_t dim;
  Shape is;
};

const GatherCase kGatherCases[] = {
    {{5, 7}, 0, {9, 7}},
    {{5, 7}, 1, {5, 3}},
    {{4, 6, 3}, 1, {4, 10, 3}},
    {{4, 6, 3}, 2, {2, 6, 5}},  // index smaller than x outside dim: PyTorch's rule
    {{4, 6, 3}, 0, {1, 6, 3}},
    {{1, 1}, 1, {1, 4}},
    {{3, 0}, 0, {2, 0}},
    {{3, 4}, 1, {3, 0}},
    {{0, 4}, 1, {0, 2}},
    {{6}, 0, {11}},
    {{2, 3, 4, 5}, 3, {2, 3, 4, 7}},
};

TEST(IndexingTest, GatherMatchesTheReferenceOnHostAndDevice) {
  uint64_t seed = 1;
  for (const GatherCase& c : kGatherCases) {
    for (DType idt : {DType::i32, DType::i64}) {
      const std::string what = ::testing::PrintToString(c.xs) + " dim " + std::to_string(c.dim) +
                               " index " + ::testing::PrintToString(c.is) + " " + dtype_name(idt);
      const std::vector<float> xv = Floats(Numel(c.xs), ++seed);
      const int64_t n = c.xs[c.dim];
      const std::vector<int64_t> iv = Ids(Numel(c.is), -2, n + 2, ++seed);
      const std::vector<float> want = RefGather(xv, c.xs, c.dim, iv, c.is);
      Tensor host = gather(tensor(xv, c.xs), c.dim, IdTensor(iv, c.is, idt, Device::host()));
      ASSERT_EQ(host.shape(), c.is) << what;
      ExpectSame(host.to_vector<float>(), want, what + " host");
      Tensor dev = gather(tensor(xv, c.xs, Cl()), c.dim, IdTensor(iv, c.is, idt, Cl()));
      ExpectSame(dev.to_vector<float>(), want, what + " device");
      // Non-contiguous x, negative dim, and the result fused into later elementwise ops.
      Tensor fused = gather(Transposed(xv, c.xs, Cl()), c.dim - static_cast<int64_t>(c.xs.size()),
                            IdTensor(iv, c.is, idt, Cl())) *
                         2.0f +
                     1.0f;
      Tensor fused_host =
          gather(tensor(xv, c.xs), c.dim, IdTensor(iv, c.is, idt, Device::host())) * 2.0f + 1.0f;
      ExpectSame(fused.to_vector<float>(), fused_host.to_vector<float>(), what + " fused");
      EXPECT_EQ(take_along_dim(tensor(xv, c.xs), IdTensor(iv, c.is, idt, Device::host()), c.dim)
                    .to_vector<float>(),
                want)
          << what;
    }
  }
}

TEST(IndexingTest, GatherOfComputedAndIntegerValuesWithTransposedIndex) {
  // x computed on the device (exp of a sum), the index a transposed view of an upload.
  const Shape xs = {6, 5};
  const std::vector<float> xv = Floats(30, 7);
  const std::vector<int64_t> iv = Ids(5 * 4, -1, 7, 8);  // uploaded [5, 4], read as [4, 5]
  Tensor x_host = exp(tensor(xv, xs) + 0.5f);
  Tensor x_dev = exp(tensor(xv, xs, Cl()) + 0.5f);
  Tensor idx_host = transpose(tensor(iv, {5, 4}), 0, 1);
  Tensor idx_dev = transpose(tensor(iv, {5, 4}, Cl()), 0, 1);
  Tensor want = gather(x_host, 0, idx_host);
  std::vector<float> got = gather(x_dev, 0, idx_dev).to_vector<float>();
  std::vector<float> ref = want.to_vector<float>();
  ASSERT_EQ(got.size(), ref.size());
  // The device's exp may differ from <cmath>'s by a few ulp.
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-5 * std::fabs(ref[i]));
  // Integer and bool x: copied exactly.
  std::vector<int64_t> big = Ids(30, -5000000000ll, 5000000000ll, 9);
  Tensor xi_host = tensor(big, xs);
  Tensor xi_dev = tensor(big, xs, Cl());
  EXPECT_EQ(gather(xi_dev, 0, idx_dev).to_vector<int64_t>(),
            gather(xi_host, 0, idx_host).to_vector<int64_t>());
  EXPECT_EQ(gather(cast(xi_dev, DType::i32), 0, idx_dev).to_vector<int32_t>(),
            gather(cast(xi_host, DType::i32), 0, idx_host).to_vector<int32_t>());
  EXPECT_EQ(gather(cast(xi_dev, DType::boolean), 0, idx_dev).to_vector<uint8_t>(),
            gather(cast(xi_host, DType::boolean), 0, idx_host).to_vector<uint8_t>());
}

TEST(IndexingTest, GatheredRowsFeedReductionsAndRowKernels) {
  // softmax over gathered rows (the CPU strategy's row kernel takes the reductions in) and a
  // sum over the gathered dim.
  const std::vector<float> xv = Floats(40 * 32, 11);
  const std::vector<int64_t> iv = Ids(24 * 32, -3, 43, 12);
  for (DType idt : {DType::i32, DType::i64}) {
    Tensor xh = tensor(xv, {40, 32});
    Tensor xd = tensor(xv, {40, 32}, Cl());
    Tensor ih = IdTensor(iv, {24, 32}, idt, Device::host());
    Tensor id = IdTensor(iv, {24, 32}, idt, Cl());
    ExpectNearAll(softmax(gather(xd, 0, id), 1).to_vector<float>(),
                  softmax(gather(xh, 0, ih), 1).to_vector<float>(), 1e-5, "softmax");
    ExpectNearAll(sum(gather(xd, 0, id) * 2.0f, {0}).to_vector<float>(),
                  sum(gather(xh, 0, ih) * 2.0f, {0}).to_vector<float>(), 1e-5, "sum");
  }
}

TEST(IndexingTest, IndexSelectAndEmbeddingMatchTheReference) {
  struct Case {
    Shape xs;
    int64_t dim;
    int64_t n;
  };
  const Case cases[] = {{{7, 3}, 0, 12}, {{7, 3}, 1, 5}, {{2, 5, 4}, 1, 9}, {{3, 4}, 0, 0},
                        {{1, 1}, 0, 3},  {{4, 0}, 0, 6}, {{9}, 0, 4},       {{3, 5}, -1, 2}};
  uint64_t seed = 100;
  for (const Case& c : cases) {
    const int64_t dim = c.dim < 0 ? c.dim + static_cast<int64_t>(c.xs.size()) : c.dim;
    const std::vector<float> xv = Floats(Numel(c.xs), ++seed);
    const std::vector<int64_t> iv = Ids(c.n, -3, c.xs[dim] + 3, ++seed);
    Shape os = c.xs;
    os[dim] = c.n;
    // index_select is gather with the ids repeated over the other dims.
    std::vector<int64_t> full(static_cast<size_t>(Numel(os)));
    for (size_t j = 0; j < full.size(); ++j)
      full[j] = iv[Unravel(static_cast<int64_t>(j), os)[dim]];
    const std::vector<float> want = RefGather(xv, c.xs, dim, full, os);
    for (DType idt : {DType::i32, DType::i64}) {
      const std::string what = ::testing::PrintToString(c.xs) + " dim " + std::to_string(c.dim);
      Tensor host = index_select(tensor(xv, c.xs), c.dim, IdTensor(iv, {c.n}, idt, Device::host()));
      ASSERT_EQ(host.shape(), os) << what;
      ExpectSame(host.to_vector<float>(), want, what + " host");
      Tensor dev = index_select(Transposed(xv, c.xs, Cl()), c.dim, IdTensor(iv, {c.n}, idt, Cl()));
      ExpectSame(dev.to_vector<float>(), want, what + " device");
    }
  }
  // embedding: ids of any shape; rows of the table.
  const std::vector<float> wv = Floats(10 * 4, 5);
  const std::vector<int64_t> iv = Ids(2 * 3, -1, 12, 6);
  Tensor e_host = nn::embedding(tensor(wv, {10, 4}), tensor(iv, {2, 3}));
  ASSERT_EQ(e_host.shape(), (Shape{2, 3, 4}));
  std::vector<float> want;
  for (int64_t id : iv) {
    const int64_t row = std::min<int64_t>(std::max<int64_t>(id, 0), 9);
    for (int64_t d = 0; d < 4; ++d) want.push_back(wv[row * 4 + d]);
  }
  ExpectSame(e_host.to_vector<float>(), want, "embedding host");
  Tensor e_dev = nn::embedding(tensor(wv, {10, 4}, Cl()), IdTensor(iv, {2, 3}, DType::i32, Cl()));
  ExpectSame(e_dev.to_vector<float>(), want, "embedding device");
  EXPECT_EQ(nn::embedding(tensor(wv, {10, 4}), tensor(std::vector<int64_t>{}, {0, 2})).shape(),
            (Shape{0, 2, 4}));
}

struct ScatterCase {
  Shape xs;
  int64_t dim;
  Shape is;
  Shape ss;
};

const ScatterCase kScatterCases[] = {
    {{5, 4}, 0, {9, 4}, {9, 4}},
    {{5, 4}, 1, {5, 11}, {5, 11}},
    {{4, 6, 3}, 1, {3, 8, 2}, {4, 9, 3}},  // index smaller than x and src: PyTorch's rule
    {{4, 6, 3}, 2, {4, 6, 7}, {4, 6, 7}},
    {{1, 1}, 0, {5, 1}, {5, 1}},
    {{3, 0}, 0, {2, 0}, {2, 0}},
    {{3, 4}, 0, {0, 4}, {0, 4}},
    {{0, 4}, 0, {3, 4}, {3, 4}},  // every update dropped: nothing to add to
    {{8}, 0, {30}, {30}},
};

TEST(IndexingTest, ScatterAddMatchesTheReferenceOnHostAndDevice) {
  uint64_t seed = 200;
  for (const ScatterCase& c : kScatterCases) {
    for (DType idt : {DType::i32, DType::i64}) {
      const std::string what = ::testing::PrintToString(c.xs) + " dim " + std::to_string(c.dim) +
                               " index " + ::testing::PrintToString(c.is) + " " + dtype_name(idt);
      const std::vector<float> xv = Floats(Numel(c.xs), ++seed);
      const std::vector<float> sv = Floats(Numel(c.ss), ++seed);
      const std::vector<int64_t> iv = Ids(Numel(c.is), -2, c.xs[c.dim] + 2, ++seed);
      const std::vector<float> want = RefScatterAdd(xv, c.xs, c.dim, iv, c.is, sv, c.ss);
      Tensor host = scatter_add(tensor(xv, c.xs), c.dim, IdTensor(iv, c.is, idt, Device::host()),
                                tensor(sv, c.ss));
      ASSERT_EQ(host.shape(), c.xs) << what;
      ExpectSame(host.to_vector<float>(), want, what + " host");
      Tensor dev = scatter_add(tensor(xv, c.xs, Cl()), c.dim, IdTensor(iv, c.is, idt, Cl()),
                               tensor(sv, c.ss, Cl()));
      ExpectSame(dev.to_vector<float>(), want, what + " device");
      // Transposed x and src, computed src, and a consumer after it.
      Tensor dev2 = scatter_add(Transposed(xv, c.xs, Cl()), c.dim, IdTensor(iv, c.is, idt, Cl()),
                                Transposed(sv, c.ss, Cl()) * 3.0f) -
                    1.0f;
      Tensor host2 = scatter_add(tensor(xv, c.xs), c.dim, IdTensor(iv, c.is, idt, Device::host()),
                                 tensor(sv, c.ss) * 3.0f) -
                     1.0f;
      ExpectSame(dev2.to_vector<float>(), host2.to_vector<float>(), what + " views");
      if (c.is.size() == 2) {
        // The index a transposed view too.
        std::vector<int64_t> it(iv.size());
        for (size_t j = 0; j < iv.size(); ++j) {
          const Shape at = Unravel(static_cast<int64_t>(j), c.is);
          it[static_cast<size_t>(at[1] * c.is[0] + at[0])] = iv[j];
        }
        Tensor idx_t = transpose(IdTensor(it, {c.is[1], c.is[0]}, idt, Cl()), 0, 1);
        Tensor dev3 = scatter_add(tensor(xv, c.xs, Cl()), c.dim, idx_t, tensor(sv, c.ss, Cl()));
        ExpectSame(dev3.to_vector<float>(), want, what + " transposed index");
      }
    }
  }
}

TEST(IndexingTest, ScatterAddOfIntegersWrapsAndIsDeterministic) {
  // Integer sums wrap; many duplicates of few targets.
  const std::vector<int64_t> iv = Ids(64 * 3, -1, 5, 31);
  std::vector<int32_t> sv(64 * 3);
  for (size_t i = 0; i < sv.size(); ++i) sv[i] = static_cast<int32_t>(i * 123456789u);
  std::vector<int32_t> xv(4 * 3, 2147483000);
  auto run = [&](Device d) {
    return scatter_add(tensor(xv, {4, 3}, d), 0, tensor(iv, {64, 3}, d), tensor(sv, {64, 3}, d))
        .to_vector<int32_t>();
  };
  std::vector<int32_t> want(xv);
  for (size_t j = 0; j < iv.size(); ++j) {
    if (iv[j] < 0 || iv[j] >= 4) continue;
    const size_t at = static_cast<size_t>(iv[j]) * 3 + j % 3;
    want[at] = static_cast<int32_t>(static_cast<uint32_t>(want[at]) + static_cast<uint32_t>(sv[j]));
  }
  EXPECT_EQ(run(Device::host()), want);
  EXPECT_EQ(run(Cl()), want);
  // i64 alike (large values, wrapping in 64 bits).
  std::vector<int64_t> sv64(sv.size());
  for (size_t i = 0; i < sv.size(); ++i) sv64[i] = static_cast<int64_t>(sv[i]) * 3000000000ll;
  std::vector<int64_t> xv64(4 * 3, 9223372036854775000ll);
  std::vector<int64_t> want64(xv64);
  for (size_t j = 0; j < iv.size(); ++j) {
    if (iv[j] < 0 || iv[j] >= 4) continue;
    const size_t at = static_cast<size_t>(iv[j]) * 3 + j % 3;
    want64[at] =
        static_cast<int64_t>(static_cast<uint64_t>(want64[at]) + static_cast<uint64_t>(sv64[j]));
  }
  for (Device d : {Device::host(), Cl()}) {
    EXPECT_EQ(scatter_add(tensor(xv64, {4, 3}, d), 0, IdTensor(iv, {64, 3}, DType::i32, d),
                          tensor(sv64, {64, 3}, d))
                  .to_vector<int64_t>(),
              want64)
        << d.str();
  }
  // f32 with heavy duplication: the same bits on every run, and the host's.
  const std::vector<float> big = Floats(4096 * 8, 32);
  const std::vector<int64_t> few = Ids(4096, 0, 3, 33);
  auto f32 = [&](Device d) {
    return scatter_add(zeros({3, 8}, DType::f32, d), 0,
                       broadcast_to(reshape(tensor(few, {4096}, d), {4096, 1}), {4096, 8}),
                       tensor(big, {4096, 8}, d))
        .to_vector<float>();
  };
  const std::vector<float> first = f32(Cl());
  ExpectSame(f32(Cl()), first, "second run");
  ExpectSame(f32(Device::host()), first, "host");
}

TEST(IndexingTest, ScatterAddOfABroadcastIndexTakesEachKernel) {
  // A broadcast index (one id per row of src): fewer ids than rows (a copy of x, then a
  // work-item per first occurrence), more ids than rows (a work-item per row), and few rows
  // of long slices (a work-item per element). Duplicates and out-of-range ids throughout.
  struct Case {
    int64_t rows, cols, ids;
  };
  for (const Case& c : {Case{40, 6, 25}, Case{9, 5, 60}, Case{3, 200, 7}}) {
    const std::string what = std::to_string(c.rows) + " rows, " + std::to_string(c.ids) + " ids";
    const std::vector<float> xv = Floats(c.rows * c.cols, 50 + c.rows);
    const std::vector<float> sv = Floats(c.ids * c.cols, 60 + c.rows);
    std::vector<int64_t> iv = Ids(c.ids, -2, c.rows + 2, 70 + c.rows);
    iv[c.ids - 1] = iv[0];  // at least one duplicate
    std::vector<int64_t> full(static_cast<size_t>(c.ids * c.cols));
    for (size_t j = 0; j < full.size(); ++j) full[j] = iv[j / static_cast<size_t>(c.cols)];
    const std::vector<float> want =
        RefScatterAdd(xv, {c.rows, c.cols}, 0, full, {c.ids, c.cols}, sv, {c.ids, c.cols});
    for (DType idt : {DType::i32, DType::i64}) {
      auto run = [&](Device d, bool transposed_x) {
        Tensor x =
            transposed_x ? Transposed(xv, {c.rows, c.cols}, d) : tensor(xv, {c.rows, c.cols}, d);
        Tensor index =
            broadcast_to(reshape(IdTensor(iv, {c.ids}, idt, d), {c.ids, 1}), {c.ids, c.cols});
        return scatter_add(x, 0, index, tensor(sv, {c.ids, c.cols}, d)).to_vector<float>();
      };
      ExpectSame(run(Device::host(), false), want, what + " host");
      ExpectSame(run(Cl(), false), want, what + " device");
      ExpectSame(run(Cl(), true), want, what + " device, transposed x");
    }
  }
}

TEST(IndexingTest, IndexSelectGradientAlongAShortDim) {
  // 3 positions along dim 1 of [2000, 3]: the broadcast index takes the per-element kernel.
  const std::vector<float> xv = Floats(2000 * 3, 40);
  const std::vector<int64_t> iv = {2, 0, 2, 2, 7};
  const std::vector<float> gv = Floats(2000 * 5, 41);
  auto run = [&](Device d) {
    Tensor x = tensor(xv, {2000, 3}, d).requires_grad_();
    Tensor y = index_select(x, 1, tensor(iv, {5}, d));
    return grad(sum(y * tensor(gv, {2000, 5}, d)), {x})[0].to_vector<float>();
  };
  std::vector<float> want(2000 * 3, 0.0f);
  for (int64_t r = 0; r < 2000; ++r) {
    for (size_t j = 0; j < iv.size(); ++j) {
      want[r * 3 + std::min<int64_t>(iv[j], 2)] += gv[r * 5 + static_cast<int64_t>(j)];
    }
  }
  ExpectSame(run(Device::host()), want, "host");
  ExpectSame(run(Cl()), want, "device");
}

TEST(IndexingTest, OneHotFollowsPyTorch) {
  const std::vector<int64_t> iv = {0, 3, 2, -1, 4, 1};
  for (Device d : {Device::host(), Cl()}) {
    for (DType idt : {DType::i32, DType::i64}) {
      Tensor h = one_hot(IdTensor(iv, {2, 3}, idt, d), 4);
      ASSERT_EQ(h.dtype(), DType::i64);
      ASSERT_EQ(h.shape(), (Shape{2, 3, 4}));
      std::vector<int64_t> want;
      for (int64_t id : iv) {
        for (int64_t c = 0; c < 4; ++c) want.push_back(id == c ? 1 : 0);
      }
      EXPECT_EQ(h.to_vector<int64_t>(), want) << d.str();
    }
  }
  EXPECT_EQ(one_hot(tensor(std::vector<int64_t>{1}, {1}), 0).shape(), (Shape{1, 0}));
}

// d(sum(f(x) * w))/dx by central differences on the host, for f linear in x (so the differences
// are exact up to rounding).
std::vector<float> NumericGrad(const std::function<Tensor(const Tensor&)>& f,
                               const std::vector<float>& x, const Shape& xs,
                               const std::vector<float>& w) {
  auto loss = [&](const std::vector<float>& v) {
    std::vector<float> y = f(tensor(v, xs)).to_vector<float>();
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * w[i];
    return s;
  };
  std::vector<float> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<float> p = x;
    std::vector<float> m = x;
    p[i] += 0.5f;
    m[i] -= 0.5f;
    g[i] = static_cast<float>(loss(p) - loss(m));
  }
  return g;
}

// The gradient of sum(f(x) * w) w.r.t. x, by autograd on `d`.
std::vector<float> AutoGrad(const std::function<Tensor(const Tensor&)>& f,
                            const std::vector<float>& x, const Shape& xs,
                            const std::vector<float>& w, const Shape& ws, Device d) {
  Tensor xt = tensor(x, xs, d).requires_grad_();
  Tensor loss = sum(f(xt) * tensor(w, ws, d));
  return grad(loss, {xt})[0].to_vector<float>();
}

TEST(IndexingTest, GradientsMatchFiniteDifferencesAndTheDevice) {
  uint64_t seed = 300;
  struct Op {
    std::string name;
    Shape xs;
    Shape out;
    std::function<Tensor(const Tensor&, Device)> f;
  };
  const std::vector<int64_t> gi = Ids(4 * 9, -2, 8, ++seed);      // gather index [4, 9] into [4, 6]
  const std::vector<int64_t> si = Ids(7, -1, 6, ++seed);          // index_select ids
  const std::vector<int64_t> ei = Ids(2 * 5, 0, 6, ++seed);       // embedding ids [2, 5]
  const std::vector<int64_t> ci = Ids(3 * 5 * 2, -1, 5, ++seed);  // scatter index [3, 5, 2]
  const std::vector<float> base = Floats(4 * 5 * 3, ++seed);
  const std::vector<float> srcv = Floats(3 * 5 * 2, ++seed);
  const std::vector<Op> ops = {
      {"gather",
       {4, 6},
       {4, 9},
       [&](const Tensor& x, Device d) {
         return gather(x, 1, tensor(gi, {4, 9}, d));
       }},
      {"index_select",
       {6, 3},
       {7, 3},
       [&](const Tensor& x, Device d) { return index_select(x, 0, tensor(si, {7}, d)); }},
      {"embedding",
       {6, 4},
       {2, 5, 4},
       [&](const Tensor& x, Device d) {
         return nn::embedding(x, tensor(ei, {2, 5}, d));
       }},
      {"scatter_add x",
       {4, 5, 3},
       {4, 5, 3},
       [&](const Tensor& x, Device d) {
         return scatter_add(x, 0, tensor(ci, {3, 5, 2}, d), tensor(srcv, {3, 5, 2}, d));
       }},
      {"scatter_add src",
       {3, 5, 2},
       {4, 5, 3},
       [&](const Tensor& s, Device d) {
         return scatter_add(tensor(base, {4, 5, 3}, d), 0, tensor(ci, {3, 5, 2}, d), s);
       }},
      {"scatter_add larger src",
       {3, 6, 2},
       {4, 5, 3},
       [&](const Tensor& s, Device d) {
         return scatter_add(tensor(base, {4, 5, 3}, d), 0, tensor(ci, {3, 5, 2}, d), s);
       }},
  };
  for (const Op& op : ops) {
    const std::vector<float> x = Floats(Numel(op.xs), ++seed);
    const std::vector<float> w = Floats(Numel(op.out), ++seed);
    auto host_f = [&](const Tensor& t) { return op.f(t, Device::host()); };
    auto dev_f = [&](const Tensor& t) { return op.f(t, Cl()); };
    const std::vector<float> numeric = NumericGrad(host_f, x, op.xs, w);
    const std::vector<float> host = AutoGrad(host_f, x, op.xs, w, op.out, Device::host());
    ExpectNearAll(host, numeric, 1e-4, op.name + " host vs finite differences");
    const std::vector<float> dev = AutoGrad(dev_f, x, op.xs, w, op.out, Cl());
    ExpectNearAll(dev, host, 1e-6, op.name + " device vs host");
  }
}

TEST(IndexingTest, EmbeddingGradientIsAScatterNotAMatmul) {
  // The gradient of a [6, 8] batch into a [50, 16] table: a deterministic scatter, and no
  // matmul anywhere in the program (LAZYCL_DEBUG would name it; here: the same bits as the
  // host's ordered loop).
  const std::vector<float> wv = Floats(50 * 16, 400);
  const std::vector<int64_t> iv = Ids(6 * 8, 0, 50, 401);
  const std::vector<float> gv = Floats(6 * 8 * 16, 402);
  auto run = [&](Device d) {
    Tensor w = tensor(wv, {50, 16}, d).requires_grad_();
    Tensor y = nn::embedding(w, tensor(iv, {6, 8}, d));
    return grad(sum(y * tensor(gv, {6, 8, 16}, d)), {w})[0].to_vector<float>();
  };
  std::vector<float> want(50 * 16, 0.0f);
  for (size_t j = 0; j < iv.size(); ++j) {
    for (size_t d = 0; d < 16; ++d) want[iv[j] * 16 + d] += gv[j * 16 + d];
  }
  ExpectSame(run(Device::host()), want, "host");
  ExpectSame(run(Cl()), want, "device");
}

TEST(IndexingTest, BadArgumentsAreClearErrors) {
  auto message = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  auto has = [](const std::string& s, const std::vector<std::string>& words) {
    for (const std::string& w : words) {
      if (s.find(w) == std::string::npos) return false;
    }
    return true;
  };
  Tensor x = tensor(Floats(12, 1), {3, 4});
  Tensor fid = tensor(std::vector<float>{0, 1}, {1, 2});
  Tensor id2 = tensor(std::vector<int64_t>{0, 1}, {1, 2});
  Tensor id1 = tensor(std::vector<int64_t>{0, 1}, {2});
  std::string m = message([&] { gather(x, 1, fid); });
  EXPECT_TRUE(has(m, {"gather", "index", "integer", "f32[1,2]"})) << m;
  m = message([&] { gather(x, 1, id1); });
  EXPECT_TRUE(has(m, {"gather", "rank", "[2]", "[3,4]"})) << m;
  m = message([&] { gather(x, 2, id2); });
  EXPECT_TRUE(has(m, {"gather", "dim 2", "out of range", "rank 2"})) << m;
  m = message([&] { gather(x, 1, tensor(std::vector<int64_t>(5, 0), {5, 1})); });
  EXPECT_TRUE(has(m, {"gather", "larger", "[5,1]", "dim 0"})) << m;
  m = message([&] { gather(tensor(std::vector<float>{}, {2, 0}), 1, id2); });
  EXPECT_TRUE(has(m, {"gather", "empty dim"})) << m;
  m = message([&] { index_select(x, 0, id2); });
  EXPECT_TRUE(has(m, {"index_select", "1-D", "[1,2]"})) << m;
  m = message([&] { index_select(x, 0, cast(id1, DType::f32)); });
  EXPECT_TRUE(has(m, {"index_select", "integer", "f32"})) << m;
  m = message([&] { index_select(x, -3, id1); });
  EXPECT_TRUE(has(m, {"index_select", "dim -3", "out of range"})) << m;
  m = message([&] { scatter_add(x, 0, fid, x); });
  EXPECT_TRUE(has(m, {"scatter_add", "integer", "f32"})) << m;
  m = message([&] { scatter_add(x, 0, id2, cast(x, DType::i32)); });
  EXPECT_TRUE(has(m, {"scatter_add", "dtype", "f32[3,4]", "i32[3,4]"})) << m;
  m = message([&] { scatter_add(x, 0, id1, x); });
  EXPECT_TRUE(has(m, {"scatter_add", "rank"})) << m;
  m = message([&] { scatter_add(x, 5, id2, x); });
  EXPECT_TRUE(has(m, {"scatter_add", "dim 5", "out of range"})) << m;
  m = message([&] { scatter_add(x, 0, tensor(std::vector<int64_t>(5, 0), {1, 5}), x); });
  EXPECT_TRUE(has(m, {"scatter_add", "larger", "[1,5]"})) << m;
  m = message([&] { nn::embedding(x, fid); });
  EXPECT_TRUE(has(m, {"embedding", "ids", "integer", "f32[1,2]"})) << m;
  m = message([&] { nn::embedding(tensor(Floats(4, 1), {4}), id2); });
  EXPECT_TRUE(has(m, {"embedding", "2-D", "[4]"})) << m;
  m = message([&] { one_hot(fid, 3); });
  EXPECT_TRUE(has(m, {"one_hot", "integer", "f32"})) << m;
  m = message([&] { one_hot(id1, -1); });
  EXPECT_TRUE(has(m, {"one_hot", "classes", "-1"})) << m;
}

// Not run by default: embedding forward + backward of a [32, 64] batch of ids into a
// [V, 128] table, against the one-hot matmul formulation. Run with
//   indexing_test --gtest_also_run_disabled_tests --gtest_filter='*Measure*'
TEST(IndexingTest, DISABLED_MeasureEmbeddingAgainstOneHotMatmul) {
  for (int64_t vocab : {256, 32000}) {
    const std::vector<float> wv = Floats(vocab * 128, 500);
    const std::vector<int64_t> iv = Ids(32 * 64, 0, vocab, 501);
    const std::vector<float> gv = Floats(32 * 64 * 128, 502);
    Tensor w = tensor(wv, {vocab, 128}, Cl());
    Tensor ids = tensor(iv, {32, 64}, Cl());
    Tensor g = tensor(gv, {32, 64, 128}, Cl());
    auto step = [&](bool one_hot_matmul) {
      Tensor wt = w;
      wt.requires_grad_();
      Tensor y =
          one_hot_matmul
              ? reshape(matmul(cast(one_hot(reshape(ids, {32 * 64}), vocab), DType::f32), wt),
                        {32, 64, 128})
              : nn::embedding(wt, ids);
      std::vector<Tensor> dw = grad(sum(y * g), {wt});
      sync({y, dw[0]});
      return std::vector<Tensor>{y, dw[0]};
    };
    for (bool oh : {false, true}) {
      step(oh);  // compile
      const int reps = 5;
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<Tensor> last;
      for (int r = 0; r < reps; ++r) last = step(oh);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
          reps;
      std::printf("vocab %6lld  %-16s forward+backward %9.3f ms\n", static_cast<long long>(vocab),
                  oh ? "one-hot matmul" : "embedding", ms);
    }
    std::vector<float> a = step(false)[1].to_vector<float>();
    std::vector<float> b = step(true)[1].to_vector<float>();
    ExpectNearAll(a, b, 1e-4, "embedding vs one-hot gradient");
  }
}

}  // namespace
}  // namespace lazycl
