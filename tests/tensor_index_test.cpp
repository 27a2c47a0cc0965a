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
  e = ErrorOf([&] { (void)x.index({gt(x, 3.0)}); });
  EXPECT_TRUE(has(e, "bool tensor")) << e;
  EXPECT_TRUE(has(e, "where()")) << e;
  e = ErrorOf([&] { (void)x.index({ones({1}, DType::f32), Slice()}); });
  EXPECT_TRUE(has(e, "f32 tensor; expected i32 or i64 ids")) << e;
  const Tensor ids = tensor(std::vector<int64_t>{0}, {1});
  e = ErrorOf([&] { (void)x.index({ids, ids}); });
  EXPECT_TRUE(has(e, "2 tensor entries")) << e;
  e = ErrorOf([&] { (void)narrow(x, 1, 2, 2); });
  EXPECT_TRUE(has(e, "start 2 and length 2 do not fit in dim 1 of size 3")) << e;
  e = ErrorOf([&] { (void)select(x.index({0, 0, 0}), 0, 0); });
  EXPECT_TRUE(has(e, "rank-0")) << e;
  // And the tensor still computes.
  EXPECT_EQ(x.index({1, 1, 1}).item<float>(), 17.0f);
}

}  // namespace
}  // namespace lazycl
