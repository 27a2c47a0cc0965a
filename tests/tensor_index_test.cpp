// x[i], x.index({...}), select and narrow (lazycl/tensor.h, lazycl/indexing.h): values on the
// host and the device against NumPy's answers for x = arange(24).reshape(2, 3, 4) (written out
// below), gradients, and errors that name the entry.
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "test_util.h"

namespace lazycl {
namespace {

using test::ErrorOf;

std::vector<Device> Devices() { return {Device::host(), test::DefaultCl()}; }

Tensor X(Device d) { return reshape(arange(24, DType::f32, d), {2, 3, 4}); }

void Expect(const Tensor& got, const std::vector<int64_t>& shape, const std::vector<float>& want) {
  EXPECT_EQ(got.shape(), shape);
  EXPECT_EQ(got.to_vector<float>(), want);
}

TEST(TensorIndexTest, IntegersSlicesEllipsisAndNewaxisMatchNumPy) {
  for (Device d : Devices()) {
    SCOPED_TRACE(d.str());
    const Tensor x = X(d);
    // x[1]
    Expect(x[1], {3, 4}, {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
    // x[-1, 2]
    Expect(x[-1][2], {4}, {20, 21, 22, 23});
    Expect(x.index({-1, 2}), {4}, {20, 21, 22, 23});
    // x[:, 1:, ::2]
    Expect(x.index({Slice(), Slice(1), Slice({}, {}, 2)}), {2, 2, 2},
           {4, 6, 8, 10, 16, 18, 20, 22});
    // x[..., -1]
    Expect(x.index({ellipsis, -1}), {2, 3}, {3, 7, 11, 15, 19, 23});
    // x[0, ..., 1:3]
    Expect(x.index({0, ellipsis, Slice(1, 3)}), {3, 2}, {1, 2, 5, 6, 9, 10});
    // x[None, 1, :, None, 3]
    Expect(x.index({newaxis, 1, Slice(), newaxis, 3}), {1, 3, 1}, {15, 19, 23});
    // x[:, -2:100, 1:-1:2]  (out-of-range stop clamps)
    Expect(x.index({Slice(), Slice(-2, 100), Slice(1, -1, 2)}), {2, 2, 1}, {5, 9, 17, 21});
    // x[1, 3:1] (empty) and x[:, :, 4:]
    Expect(x.index({1, Slice(3, 1)}), {0, 4}, {});
    Expect(x.index({Slice(), Slice(), Slice(4)}), {2, 3, 0}, {});
    // x[1, 2, 3]: a rank-0 result
    Expect(x.index({1, 2, 3}), {}, {23});
    // select and narrow
    Expect(select(x, -1, 0), {2, 3}, {0, 4, 8, 12, 16, 20});
    Expect(narrow(x, 2, -3, 2), {2, 3, 2}, {1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22});
  }
}

TEST(TensorIndexTest, TensorEntriesPickAlongTheirDim) {
  for (Device d : Devices()) {
    SCOPED_TRACE(d.str());
    const Tensor x = X(d);
    // x[:, [2, 0, -1]] : negative ids count from the end, as Python's
    const Tensor ids = tensor(std::vector<int64_t>{2, 0, -1}, {3}, d);
    Expect(x.index({Slice(), ids}), {2, 3, 4}, {8,  9,  10, 11, 0,  1,  2,  3,  8,  9,  10, 11,
                                                20, 21, 22, 23, 12, 13, 14, 15, 20, 21, 22, 23});
    // x[1][:, [[3], [0]]] : the ids' shape [2, 1] replaces the dim
    const Tensor ids2 = tensor(std::vector<int32_t>{3, 0}, {2, 1}, d);
    Expect(x[1].index({Slice(), ids2}), {3, 2, 1}, {15, 12, 19, 16, 23, 20});
    // x[1, :, [[3], [0]]] : an integer and the tensor apart, so the tensor's dims go first
    Expect(x.index({1, Slice(), ids2}), {2, 1, 3}, {15, 19, 23, 12, 16, 20});
    // x[[1, 0], :, 2] : already first
    const Tensor ids3 = tensor(std::vector<int64_t>{1, 0}, {2}, d);
    Expect(x.index({ids3, Slice(), 2}), {2, 3}, {14, 18, 22, 2, 6, 10});
  }
}

// Several tensor entries broadcast together (NumPy's advanced indexing; the answers are NumPy
// 2.4's for x = arange(24).reshape(2, 3, 4), i = [1, 0], j = [[2], [0]], k = [3, -1, 0]).
TEST(TensorIndexTest, SeveralTensorEntriesBroadcastTogether) {
  for (Device d : Devices()) {
    SCOPED_TRACE(d.str());
    const Tensor x = X(d);
    const Tensor i = tensor(std::vector<int64_t>{1, 0}, {2}, d);
    const Tensor j = tensor(std::vector<int32_t>{2, 0}, {2, 1}, d);
    const Tensor k = tensor(std::vector<int64_t>{3, -1, 0}, {3}, d);
    const Tensor k2 = tensor(std::vector<int64_t>{3, -1}, {2}, d);
    const Tensor j1 = tensor(std::vector<int64_t>{2, 0}, {2}, d);
    // x[i, j]: S = [2, 2], then x's last dim
    Expect(x.index({i, j}), {2, 2, 4}, {20, 21, 22, 23, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3});
    // x[:, j, k]: side by side, so S = [2, 3] stays where they were
    Expect(x.index({Slice(), j, k}), {2, 2, 3}, {11, 11, 8, 3, 3, 0, 23, 23, 20, 15, 15, 12});
    // x[i, :, k[:2]]: apart, so S goes first
    Expect(x.index({i, Slice(), k2}), {2, 3}, {15, 19, 23, 3, 7, 11});
    // x[1, j, k]: an integer is an advanced entry too
    Expect(x.index({1, j, k}), {2, 3}, {23, 23, 20, 15, 15, 12});
    Expect(x.index({i, 1, k2}), {2}, {19, 7});
    // x[None, i, ..., j[:, 0]]
    Expect(x.index({newaxis, i, ellipsis, j1}), {2, 1, 3}, {14, 18, 22, 0, 4, 8});
  }
}

// Bool masks select their true elements (NumPy's rule: a k-dim mask is the k coordinate arrays
// of its true elements); the answers are NumPy 2.4's.
TEST(TensorIndexTest, BoolMasksSelectTheirTrueElements) {
  for (Device d : Devices()) {
    SCOPED_TRACE(d.str());
    const Tensor x = X(d);
    // x[x > 20]: a lazy mask, computed before its elements are counted
    Expect(x.index({gt(x, 20.0)}), {3}, {21, 22, 23});
    const Tensor m2 = tensor(std::vector<int32_t>{1, 0, 1, 0, 0, 1}, {2, 3}, d);
    const Tensor mask2 = cast(m2, DType::boolean);
    Expect(x.index({mask2}), {3, 4}, {0, 1, 2, 3, 8, 9, 10, 11, 20, 21, 22, 23});
    Expect(x.index({mask2, Slice(1, 3)}), {3, 2}, {1, 2, 9, 10, 21, 22});
    const Tensor m3 = cast(tensor(std::vector<int32_t>{1, 0, 1, 1}, {4}, d), DType::boolean);
    Expect(x.index({Slice(), Slice(), m3}), {2, 3, 3},
           {0, 2, 3, 4, 6, 7, 8, 10, 11, 12, 14, 15, 16, 18, 19, 20, 22, 23});
    const Tensor m1 = cast(tensor(std::vector<int32_t>{0, 1, 1}, {3}, d), DType::boolean);
    Expect(x.index({1, m1}), {2, 4}, {16, 17, 18, 19, 20, 21, 22, 23});
    Expect(x.index({ellipsis, lt(arange(4, DType::f32, d), 0.0)}), {2, 3, 0}, {});
    // The gradient reaches the selected elements only.
    Tensor w = X(d).detach().requires_grad_();
    const std::vector<float> g = grad(sum(w.index({mask2}) * 3.0), {w})[0].to_vector<float>();
    for (int e = 0; e < 24; ++e) {
      const int row = e / 4;  // the mask's element for x's element e
      EXPECT_EQ(g[static_cast<size_t>(e)], (row == 0 || row == 2 || row == 5) ? 3.0f : 0.0f) << e;
    }
  }
}

// index_put against NumPy 2.4's in-place assignment (np.add.at for accumulate), x as above.
TEST(TensorIndexTest, IndexPutMatchesNumPysAssignment) {
  for (Device d : Devices()) {
    SCOPED_TRACE(d.str());
    const Tensor x = X(d);
    auto numpy = [](std::vector<std::pair<int, float>> changed) {
      std::vector<float> v(24);
      for (int i = 0; i < 24; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
      for (const auto& [i, value] : changed) v[static_cast<size_t>(i)] = value;
      return v;
    };
    // a[a > 20] = -1: a where(), nothing read
    Expect(index_put(x, {gt(x, 20.0)}, -1.0), {2, 3, 4}, numpy({{21, -1}, {22, -1}, {23, -1}}));
    // a[1, :, 1:3] = [100, 200]
    const Tensor pair = tensor(std::vector<float>{100, 200}, {2}, d);
    Expect(index_put(x, {1, Slice(), Slice(1, 3)}, pair), {2, 3, 4},
           numpy({{13, 100}, {14, 200}, {17, 100}, {18, 200}, {21, 100}, {22, 200}}));
    // a[[1, 0], 2, [3, -1]] = [7, 8]
    const Tensor i = tensor(std::vector<int64_t>{1, 0}, {2}, d);
    const Tensor k = tensor(std::vector<int32_t>{3, -1}, {2}, d);
    Expect(index_put(x, {i, 2, k}, tensor(std::vector<float>{7, 8}, {2}, d)), {2, 3, 4},
           numpy({{23, 7}, {11, 8}}));
    // a[:, [2, 0]] = [-5]
    const Tensor rows = tensor(std::vector<int64_t>{2, 0}, {2}, d);
    std::vector<std::pair<int, float>> minus5;
    for (int e : {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 20, 21, 22, 23})
      minus5.push_back({e, -5});
    Expect(index_put(x, {Slice(), rows}, tensor(std::vector<float>{-5}, {1}, d)), {2, 3, 4},
           numpy(minus5));
    // np.add.at(a, ([0, 0, 1], 1, 2), [1, 2, 3]): repeated ids add up
    const Tensor dup = tensor(std::vector<int64_t>{0, 0, 1}, {3}, d);
    Expect(index_put(x, {dup, 1, 2}, tensor(std::vector<float>{1, 2, 3}, {3}, d), true), {2, 3, 4},
           numpy({{6, 9}, {18, 21}}));
    // a[m2] = [[1, 2, 3, 4]] * [[1], [10], [100]]: a 2-d mask over the first two dims
    const Tensor m2 =
        cast(tensor(std::vector<int32_t>{1, 0, 1, 0, 0, 1}, {2, 3}, d), DType::boolean);
    const Tensor block = tensor(std::vector<float>{1, 2, 3, 4}, {1, 4}, d) *
                         tensor(std::vector<float>{1, 10, 100}, {3, 1}, d);
    Expect(index_put(x, {m2}, block), {2, 3, 4},
           numpy({{0, 1},
                  {1, 2},
                  {2, 3},
                  {3, 4},
                  {8, 10},
                  {9, 20},
                  {10, 30},
                  {11, 40},
                  {20, 100},
                  {21, 200},
                  {22, 300},
                  {23, 400}}));
    // a[..., ::2] += 0.5
    std::vector<std::pair<int, float>> halves;
    for (int e = 0; e < 24; e += 2) halves.push_back({e, static_cast<float>(e) + 0.5f});
    Expect(index_put(x, {ellipsis, Slice({}, {}, 2)}, 0.5, true), {2, 3, 4}, numpy(halves));
    // Out-of-range ids drop their update (JAX's default), never writing elsewhere.
    const Tensor far = tensor(std::vector<int64_t>{5, -4, 1}, {3}, d);
    Expect(index_put(x, {0, far, 0}, 99.0), {2, 3, 4}, numpy({{4, 99}}));
    // Integer and bool tensors.
    const Tensor xi = cast(x, DType::i32);
    EXPECT_EQ(index_put(xi, {1, 0, 0}, 7.0).to_vector<int32_t>()[12], 7);
    const Tensor xb = gt(x, 11.0);
    const std::vector<uint8_t> b = index_put(xb, {0}, 1.0).to_vector<uint8_t>();
    EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.begin() + 12), std::vector<uint8_t>(12, 1));
    EXPECT_EQ(b[12], 1);
  }
}

TEST(TensorIndexTest, IndexPutGradientsAndErrors) {
  for (Device d : Devices()) {
    SCOPED_TRACE(d.str());
    Tensor x = X(d).detach().requires_grad_();
    Tensor v = tensor(std::vector<float>{1, 2}, {2}, d).detach().requires_grad_();
    const Tensor w = tensor(std::vector<float>{0, 1, 2, 3}, {4}, d);
    // y = x with x[0, 1, 1:3] set to v; loss = sum(y * w) over the last dim
    const Tensor y = index_put(x, {0, 1, Slice(1, 3)}, v);
    const std::vector<Tensor> g = grad(sum(y * w), {x, v});
    std::vector<float> gx(24);
    for (int e = 0; e < 24; ++e) gx[static_cast<size_t>(e)] = static_cast<float>(e % 4);
    gx[5] = gx[6] = 0;  // overwritten
    EXPECT_EQ(g[0].to_vector<float>(), gx);
    EXPECT_EQ(g[1].to_vector<float>(), (std::vector<float>{1, 2}));
  }
  const Tensor x = X(test::DefaultCl());
  // A mask filled with one value reads nothing: it works inside a traced body.
  const std::vector<Tensor> r = call(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{index_put(in[0], {gt(in[0], 20.0)}, -1.0)};
      },
      {x});
  EXPECT_EQ(r[0].to_vector<float>()[23], -1.0f);
  EXPECT_EQ(r[0].to_vector<float>()[20], 20.0f);
  std::string e = ErrorOf([&] { (void)index_put(x, {0}, ones({2}, DType::i32, x.device())); });
  EXPECT_TRUE(test::Has(e, "values are i32 but x is f32; cast them first")) << e;
  e = ErrorOf([&] { (void)index_put(x, {0}, ones({2}, DType::f32, x.device())); });
  EXPECT_TRUE(test::Has(e, "values of shape [2] do not broadcast to the selected shape [3,4]"))
      << e;
  e = ErrorOf([&] { (void)index_put(gt(x, 1.0), {0}, 1.0, true); });
  EXPECT_TRUE(test::Has(e, "accumulate needs a numeric dtype")) << e;
}

// masked_fill (np.where(mask, value, x)) and the in-place forms PyTorch users write.
TEST(TensorIndexTest, MaskedFillAndInPlaceAssignment) {
  for (Device d : Devices()) {
    SCOPED_TRACE(d.str());
    const Tensor x = X(d);
    // a row mask [3, 1] broadcast over x [2, 3, 4]: rows 0 and 2 of every block
    const Tensor rows = cast(tensor(std::vector<int32_t>{1, 0, 1}, {3, 1}, d), DType::boolean);
    std::vector<float> want(24);
    for (int e = 0; e < 24; ++e) {
      const int row = (e / 4) % 3;
      want[static_cast<size_t>(e)] = row == 1 ? static_cast<float>(e) : -9.0f;
    }
    Expect(masked_fill(x, rows, -9.0), {2, 3, 4}, want);
    // In place: every handle sees it.
    Tensor a = X(d);
    const Tensor alias = a;
    a.masked_fill_(rows, -9.0);
    Expect(alias, {2, 3, 4}, want);
    Tensor b = X(d);
    b.index_put_({1, 2}, tensor(std::vector<float>{5, 6, 7, 8}, {4}, d));
    b.index_put_({0, 0, 0}, 1.0, /*accumulate=*/true);
    std::vector<float> bw(24);
    for (int e = 0; e < 24; ++e) bw[static_cast<size_t>(e)] = static_cast<float>(e);
    bw[20] = 5, bw[21] = 6, bw[22] = 7, bw[23] = 8, bw[0] = 1;
    Expect(b, {2, 3, 4}, bw);
  }
  const Tensor x = X(test::DefaultCl());
  std::string e = ErrorOf([&] { (void)masked_fill(x, x, 0.0); });
  EXPECT_TRUE(test::Has(e, "the mask is f32; expected a bool tensor")) << e;
  e = ErrorOf([&] { (void)masked_fill(x, gt(x.index({Slice(), Slice(0, 2)}), 1.0), 0.0); });
  EXPECT_TRUE(test::Has(e, "the mask's shape [2,2,4] does not broadcast to x's [2,3,4]")) << e;
  // In place on a tensor that requires grad would lose its gradient: an Error, unless grad mode
  // is off.
  Tensor w = X(x.device()).detach().requires_grad_();
  e = ErrorOf([&] { w.masked_fill_(gt(w, 3.0), 0.0); });
  EXPECT_TRUE(test::Has(e, "records no gradient: write x = masked_fill(x, ...) instead")) << e;
  e = ErrorOf([&] { w.index_put_({0}, 1.0); });
  EXPECT_TRUE(test::Has(e, "write x = index_put(x, ...) instead")) << e;
  {
    NoGradGuard no_grad;
    w.index_put_({0, 0, 0}, 42.0);
  }
  EXPECT_EQ(w.to_vector<float>()[0], 42.0f);
}

TEST(TensorIndexTest, GradientsFlowToTheIndexedElements) {
  for (Device d : Devices()) {
    SCOPED_TRACE(d.str());
    Tensor x = X(d).detach().requires_grad_();
    const Tensor y = x.index({1, Slice(0, 3, 2), newaxis, -1}) * 2.0 + x[0].index({2, 0});
    const std::vector<float> g = grad(sum(y), {x})[0].to_vector<float>();
    std::vector<float> want(24, 0.0f);
    want[15] = 2;  // x[1, 0, 3]
    want[23] = 2;  // x[1, 2, 3]
    want[8] = 2;   // x[0, 2, 0], added once per element of y (2 of them)
    EXPECT_EQ(g, want);
  }
}

TEST(TensorIndexTest, BadEntriesAreErrorsNamingThem) {
  const Tensor x = X(test::DefaultCl());
  auto has = [](const std::string& e, const std::string& part) {
    return e.find(part) != std::string::npos;
  };
  std::string e = ErrorOf([&] { (void)x[2]; });
  EXPECT_TRUE(has(e, "index 2 is out of range for dim 0 of size 2")) << e;
  e = ErrorOf([&] { (void)x.index({0, -4}); });
  EXPECT_TRUE(has(e, "entry 1 (-4) is out of range for a dim of size 3")) << e;
  e = ErrorOf([&] { (void)x.index({0, 0, 0, 0}); });
  EXPECT_TRUE(has(e, "4 indices for a tensor of rank 3")) << e;
  e = ErrorOf([&] { (void)x.index({ellipsis, 0, ellipsis}); });
  EXPECT_TRUE(has(e, "at most one ellipsis")) << e;
  e = ErrorOf([&] { (void)x.index({Slice(0, 2, 0)}); });
  EXPECT_TRUE(has(e, "entry 0 (Slice(0, 2, 0)): the step must be >= 1")) << e;
  e = ErrorOf([&] { (void)x.index({gt(x[0], 3.0)}); });
  EXPECT_TRUE(has(e,
                  "entry 0 (a bool mask of shape [3,4]) does not match x (shape [2,3,4]) "
                  "along dim 0: 3 vs 2"))
      << e;
  e = ErrorOf([&] { (void)x.index({Slice(), gt(x, 3.0)}); });
  EXPECT_TRUE(has(e, "indexes past the last dim")) << e;
  e = ErrorOf([&] { (void)x.index({full({}, 1, DType::boolean)}); });
  EXPECT_TRUE(has(e, "a 0-d mask is not supported")) << e;
  e = ErrorOf([&] { (void)x.index({ones({1}, DType::f32), Slice()}); });
  EXPECT_TRUE(has(e, "f32 tensor; expected i32 or i64 ids, or a bool mask")) << e;
  const Tensor ids = tensor(std::vector<int64_t>{0, 1}, {2}, x.device());
  const Tensor ids3 = tensor(std::vector<int64_t>{0, 1, 2}, {3}, x.device());
  e = ErrorOf([&] { (void)x.index({ids, ids3}); });
  EXPECT_TRUE(has(e, "shapes [2] and [3] cannot be broadcast together")) << e;
  e = ErrorOf([&] { (void)x.index({ids, ones({2}, DType::f32)}); });
  EXPECT_TRUE(has(e, "entry 1 (a f32 tensor) is a f32 tensor")) << e;
  // A mask inside a traced body: its values would decide the shape.
  e = ErrorOf([&] {
    (void)call(
        [](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{in[0].index({gt(in[0], 3.0)})};
        },
        {x});
  });
  EXPECT_TRUE(has(e, "a mask's values decide the result's shape")) << e;
  e = ErrorOf([&] { (void)narrow(x, 1, 2, 2); });
  EXPECT_TRUE(has(e, "start 2 and length 2 do not fit in dim 1 of size 3")) << e;
  e = ErrorOf([&] { (void)select(x.index({0, 0, 0}), 0, 0); });
  EXPECT_TRUE(has(e, "rank-0")) << e;
  // And the tensor still computes.
  EXPECT_EQ(x.index({1, 1, 1}).item<float>(), 17.0f);
}

}  // namespace
}  // namespace lazycl
