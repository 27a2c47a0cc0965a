// Placeholder tensors (MISSION.md section 1, SPEC "Placeholders"): a shape, a dtype, a device,
// a requires_grad flag and no memory. Modelled on PyTorch/XLA's placeholder tests.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/tensor_impl.h"
#include "gtest/gtest.h"
#include "ir/ir.h"
#include "lazycl/lazycl.h"
#include "runtime/executor.h"
#include "test_util.h"

namespace lazycl {
namespace {

using test::C;
using test::ErrorOf;
using test::Has;
using test::Iota;
using test::NumParams;

const Device kCl = Device::opencl(0);

// Runs `read` and expects a lazycl::Error naming a placeholder, `shape` and `dtype`.
template <class F>
void ExpectPlaceholderError(F read, const std::string& shape, const std::string& dtype) {
  SCOPED_TRACE(shape + " " + dtype);
  try {
    read();
    ADD_FAILURE() << "reading a placeholder did not throw";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("placeholder"), std::string::npos) << what;
    EXPECT_NE(what.find(shape), std::string::npos) << what;
    EXPECT_NE(what.find(dtype), std::string::npos) << what;
  }
}

class PlaceholderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Opens the device (and its allocations of its own) before any baseline is taken.
    sync({ones({1}, DType::f32, kCl) + 1});
    metrics::reset();
    live_ = C("DeviceLiveBytes");
  }
  int64_t live_ = 0;
};

TEST_F(PlaceholderTest, CreatesSeveralShapesAndDtypesWithoutMemory) {
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {7}, {2, 3}, {4, 1, 5}, {2, 3, 4, 5}};
  const std::vector<DType> dtypes = {DType::f32, DType::i32, DType::i64, DType::boolean};
  std::vector<Tensor> keep;
  for (const auto& shape : shapes) {
    for (DType dtype : dtypes) {
      Tensor p = placeholder(shape, dtype, kCl);
      EXPECT_TRUE(p.is_placeholder());
      EXPECT_EQ(p.shape(), shape);
      EXPECT_EQ(p.dtype(), dtype);
      EXPECT_EQ(p.device(), kCl);
      EXPECT_FALSE(p.requires_grad());
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      EXPECT_EQ(p.numel(), n);
      EXPECT_NE(p.str().find("placeholder"), std::string::npos) << p.str();
      keep.push_back(p);
    }
  }
  EXPECT_EQ(C("DeviceAllocBytes"), 0);
  EXPECT_EQ(C("DeviceAllocCount"), 0);
  EXPECT_EQ(C("DeviceLiveBytes"), live_);
  EXPECT_EQ(C("TransferToDeviceBytes"), 0);
  EXPECT_EQ(C("KernelLaunches"), 0);
}

TEST_F(PlaceholderTest, HugePlaceholderCostsNothing) {
  // 16 GiB: far more than the device could hold, so any allocation would show (or fail).
  Tensor p = placeholder({1 << 20, 1 << 12}, DType::f32, kCl);
  Tensor q = sin(p) * 2 + p;  // lazy ops over it are fine too
  EXPECT_TRUE(p.is_placeholder());
  EXPECT_FALSE(q.is_placeholder());
  EXPECT_EQ(C("DeviceAllocBytes"), 0);
  EXPECT_EQ(C("DeviceLiveBytes"), live_);
  EXPECT_EQ(C("DevicePeakBytes"), live_);
}

TEST_F(PlaceholderTest, RequiresGradIsKept) {
  Tensor p = placeholder({3}, DType::f32, kCl, /*requires_grad=*/true);
  EXPECT_TRUE(p.requires_grad());
  EXPECT_TRUE(p.is_placeholder());
  Tensor q = placeholder({3}, DType::f32, kCl);
  EXPECT_FALSE(q.requires_grad());
  q.requires_grad_();
  EXPECT_TRUE(q.requires_grad());
  EXPECT_TRUE(q.is_placeholder());
  EXPECT_THROW(placeholder({3}, DType::i32, kCl, true), Error);
}

TEST_F(PlaceholderTest, ReadingFailsWithShapeAndDtype) {
  Tensor p = placeholder({2, 3}, DType::f32, kCl);
  ExpectPlaceholderError([&] { (void)p.to_vector<float>(); }, "[2,3]", "f32");
  ExpectPlaceholderError([&] { (void)p.to(Device::host()); }, "[2,3]", "f32");
  // sync() of the bare placeholder has no pending work and needs no data: a no-op.
  EXPECT_NO_THROW(sync({p}));
  EXPECT_TRUE(p.is_placeholder());
  // A view of it is work that needs the data.
  ExpectPlaceholderError([&] { sync({reshape(p, {3, 2})}); }, "[2,3]", "f32");
  // A computation that needs its data fails the same way, whatever the read.
  Tensor q = exp(p) + 1;
  ExpectPlaceholderError([&] { sync({q}); }, "[2,3]", "f32");
  ExpectPlaceholderError([&] { (void)q.to_vector<float>(); }, "[2,3]", "f32");
  ExpectPlaceholderError([&] { (void)sum(q).item<float>(); }, "[2,3]", "f32");

  Tensor one = placeholder({1}, DType::i32, kCl);
  ExpectPlaceholderError([&] { (void)one.item<int32_t>(); }, "[1]", "i32");
  Tensor b = placeholder({4, 5}, DType::boolean, kCl);
  ExpectPlaceholderError([&] { (void)b.to_vector<uint8_t>(); }, "[4,5]", "bool");
  Tensor l = placeholder({6}, DType::i64, kCl);
  ExpectPlaceholderError([&] { (void)(l * 2).to_vector<int64_t>(); }, "[6]", "i64");

  EXPECT_EQ(C("TransferFromDeviceBytes"), 0);
  EXPECT_EQ(C("TransferToDeviceBytes"), 0);
  EXPECT_EQ(C("KernelLaunches"), 0);
  EXPECT_EQ(C("DeviceLiveBytes"), live_);
}

// Regression: a long chain of ops on a placeholder outside a trace hit the automatic graph cut,
// and the arithmetic line threw the placeholder error without saying why anything ran there.
TEST_F(PlaceholderTest, AutomaticCutOfAPlaceholderGraphSaysWhyItRan) {
  Tensor p = placeholder({4}, DType::f32, kCl);
  Tensor y = p;
  int ops = 0;
  try {
    for (; ops < 10000; ++ops) y = y * 1.0001f + 0.5f;
    ADD_FAILURE() << "no automatic cut in 10000 ops";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("placeholder"), std::string::npos) << what;
    EXPECT_NE(what.find("[4]"), std::string::npos) << what;
    EXPECT_NE(what.find("automatic cut"), std::string::npos) << what;
    EXPECT_NE(what.find(absl::StrCat(ir::MaxPendingNodes())), std::string::npos) << what;
  }
  EXPECT_GT(ops, 50);  // the cut comes after ~MaxPendingNodes() / 6 of these steps (~170)
  EXPECT_TRUE(p.is_placeholder());
  EXPECT_EQ(C("KernelLaunches"), 0);
  EXPECT_EQ(C("DeviceLiveBytes"), live_);
}

TEST_F(PlaceholderTest, HostPlaceholderFailsToReadOrUpload) {
  Tensor p = placeholder({3, 2}, DType::f32, Device::host());
  EXPECT_TRUE(p.is_placeholder());
  EXPECT_EQ(p.device(), Device::host());
  ExpectPlaceholderError([&] { (void)p.to_vector<float>(); }, "[3,2]", "f32");
  ExpectPlaceholderError([&] { (void)p.to(kCl); }, "[3,2]", "f32");
  ExpectPlaceholderError([&] { (void)(p + 1); }, "[3,2]", "f32");  // host ops are eager
  EXPECT_EQ(C("TransferToDeviceBytes"), 0);
  EXPECT_EQ(C("DeviceLiveBytes"), live_);
}

TEST_F(PlaceholderTest, FailedReadDisturbsNothingElse) {
  Tensor x = tensor(std::vector<float>{1, 2, 3}, {3}, kCl);
  Tensor pending = x * 10 + 1;  // not computed yet
  Tensor p = placeholder({3}, DType::f32, kCl);
  Tensor mixed = x + p;
  metrics::reset();
  ExpectPlaceholderError([&] { sync({pending, mixed}); }, "[3]", "f32");
  // Nothing ran, nothing moved, nothing was allocated.
  EXPECT_EQ(C("KernelLaunches"), 0);
  EXPECT_EQ(C("GraphCompiles"), 0);
  EXPECT_EQ(C("DeviceAllocBytes"), 0);
  EXPECT_EQ(C("TransferFromDeviceBytes"), 0);
  EXPECT_NE(pending.str().find("pending"), std::string::npos) << pending.str();
  EXPECT_TRUE(p.is_placeholder());
  // The other tensors still work, and so does the placeholder as a graph input.
  EXPECT_EQ(pending.to_vector<float>(), (std::vector<float>{11, 21, 31}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Function f = trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] * 3}; },
                     {{{3}, DType::f32}}, kCl);
  EXPECT_EQ(f({x})[0].to_vector<float>(), (std::vector<float>{3, 6, 9}));
  ExpectPlaceholderError([&] { (void)mixed.to_vector<float>(); }, "[3]", "f32");
}

TEST_F(PlaceholderTest, SameShapePlaceholdersAreDifferentParameters) {
  Tensor p1 = placeholder({2, 2}, DType::f32, kCl);
  Tensor p2 = placeholder({2, 2}, DType::f32, kCl);
  EXPECT_NE(p1.impl()->node->storage->id(), p2.impl()->node->storage->id());
  EXPECT_EQ(NumParams({p1 + p2}), 2);
  EXPECT_EQ(NumParams({p1 + p1}), 1);
  EXPECT_EQ(NumParams({p1 * p2 + p1 - p2}), 2);
  EXPECT_EQ(NumParams({sin(p1), cos(p1)}), 1);
  // A copy of the handle is the same placeholder.
  Tensor alias = p1;
  EXPECT_EQ(NumParams({p1 + alias}), 1);
  EXPECT_EQ(C("DeviceAllocBytes"), 0);
}

TEST_F(PlaceholderTest, TracedSinMatmulHasTwoParametersAndMovesNothing) {
  auto fn = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{matmul(matmul(sin(a[0]), a[1]), transpose(a[1], 0, 1))};
  };
  // Directly on placeholders.
  Tensor p1 = placeholder({3, 4}, DType::f32, kCl);
  Tensor p2 = placeholder({4, 5}, DType::f32, kCl);
  EXPECT_EQ(NumParams(fn({p1, p2})), 2);
  // And through trace.
  Function f = trace(fn, {{{3, 4}, DType::f32}, {{4, 5}, DType::f32}}, kCl);
  EXPECT_EQ(f.num_parameters(), 2);
  EXPECT_EQ(f.used_arguments(), (std::vector<int>{0, 1}));
  EXPECT_EQ(C("TraceTransferBytes"), 0);
  EXPECT_EQ(C("TransferToDeviceBytes"), 0);
  EXPECT_EQ(C("DeviceAllocBytes"), 0);
  EXPECT_EQ(C("DeviceLiveBytes"), live_);

  // Called on data, it computes sin(A) @ B @ B^T.
  std::vector<float> a(12), b(20);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 0.1f * static_cast<float>(i) - 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
  std::vector<float> got =
      f({tensor(a, {3, 4}, kCl), tensor(b, {4, 5}, kCl)})[0].to_vector<float>();
  ASSERT_EQ(got.size(), 12u);  // [3,4] @ [4,5] @ [5,4]
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      double want = 0;
      for (int k = 0; k < 5; ++k) {
        double sab = 0;
        for (int m = 0; m < 4; ++m) sab += std::sin(a[i * 4 + m]) * b[m * 5 + k];
        want += sab * b[j * 5 + k];
      }
      EXPECT_NEAR(got[i * 4 + j], want, 1e-5) << i << "," << j;
    }
  }
}

TEST_F(PlaceholderTest, TracedSumOfTwoSameShapePlaceholders) {
  Function add =
      trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] + a[1]}; },
            {{{3}, DType::f32}, {{3}, DType::f32}}, kCl);
  EXPECT_EQ(add.num_parameters(), 2);
  Tensor x = tensor(std::vector<float>{1, 2, 3}, {3}, kCl);
  Tensor y = tensor(std::vector<float>{10, 20, 30}, {3}, kCl);
  EXPECT_EQ(add({x, y})[0].to_vector<float>(), (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(add({y, x})[0].to_vector<float>(), (std::vector<float>{11, 22, 33}));

  Function twice =
      trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] + a[0]}; },
            {{{3}, DType::f32}}, kCl);
  EXPECT_EQ(twice.num_parameters(), 1);
  EXPECT_EQ(twice({y})[0].to_vector<float>(), (std::vector<float>{20, 40, 60}));
  EXPECT_EQ(C("TraceTransferBytes"), 0);
}

TEST_F(PlaceholderTest, ScanTracingMovesNothing) {
  Tensor init = tensor(std::vector<float>{0.5f, 1.0f}, {2}, kCl);
  Tensor xs = tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2}, kCl);
  sync({init, xs});
  metrics::reset();
  // fn1: sin of both.
  ScanResult r1 = scan(
      [](const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        return std::pair{std::vector<Tensor>{sin(c[0])}, std::vector<Tensor>{sin(x[0])}};
      },
      {init}, {xs});
  // Identity.
  ScanResult r2 = scan(
      [](const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
        return std::pair{c, x};
      },
      {init}, {xs});
  EXPECT_EQ(C("TraceTransferBytes"), 0);
  EXPECT_EQ(C("TransferToDeviceBytes"), 0);
  EXPECT_EQ(C("TransferFromDeviceBytes"), 0);
  const std::vector<float> c1 = r1.carry[0].to_vector<float>();
  EXPECT_NEAR(c1[0], std::sin(std::sin(std::sin(0.5f))), 1e-6);
  EXPECT_EQ(r2.carry[0].to_vector<float>(), (std::vector<float>{0.5f, 1.0f}));
  EXPECT_EQ(r2.ys[0].to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

}  // namespace
}  // namespace lazycl
