// Reading and writing tensors through the caller's memory: Tensor::copy_to_host,
// Tensor::copy_from_host, from_host_memory and PinnedBuffer (lazycl/memory.h), on an OpenCL
// device and on the host: values, what each costs in transfers and kernels, and what stays safe
// when an in-place write meets other readers of the old values.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/fault.h"
#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "test_util.h"

namespace lazycl {
namespace {

using test::C;
using test::ErrorOf;
using test::Has;

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

class HostMemoryIoTest : public ::testing::TestWithParam<Device> {};

// Every dtype's bytes (f16/bf16 as bit patterns, NaNs included; bools as 0/1) survive a round
// trip unchanged, for size-0, size-1 and odd sizes.
TEST_P(HostMemoryIoTest, BytesRoundTripForEveryDtype) {
  for (DType dtype :
       {DType::f32, DType::f64, DType::i32, DType::i64, DType::f16, DType::bf16, DType::boolean}) {
    for (std::vector<int64_t> shape :
         std::vector<std::vector<int64_t>>{{0}, {1}, {3, 0, 2}, {7, 13}}) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      const size_t bytes = static_cast<size_t>(n) * dtype_size(dtype);
      std::vector<uint8_t> in = RandomBytes(bytes, 7 + static_cast<uint32_t>(n));
      if (dtype == DType::boolean) {
        for (uint8_t& b : in) b &= 1;
      }
      const Tensor t = from_host_memory(in.data(), bytes, shape, dtype, GetParam());
      EXPECT_EQ(t.dtype(), dtype);
      EXPECT_EQ(t.shape(), shape);
      EXPECT_EQ(t.device(), GetParam());
      std::vector<uint8_t> out(bytes, 0xAB);
      t.copy_to_host(out.data(), bytes);
      EXPECT_EQ(out, in) << dtype_name(dtype) << " " << n;
    }
  }
}

// A pending value is computed first, and a non-contiguous view is read as the values it shows.
TEST_P(HostMemoryIoTest, ReadsPendingResultsAndViews) {
  const std::vector<float> a = RandomFloats(6 * 5, 1);
  const Tensor x = tensor(a, {6, 5}, GetParam());
  const Tensor y = permute(x * 2.0 + 1.0, {1, 0});  // [5, 6], pending
  std::vector<float> got(30);
  y.copy_to_host(got.data(), got.size() * sizeof(float));
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 6; ++j) {
      EXPECT_EQ(got[static_cast<size_t>(i * 6 + j)],
                a[static_cast<size_t>(j * 5 + i)] * 2.0f + 1.0f);
    }
  }
  // A contiguous slice of a computed buffer: its own bytes only.
  const Tensor rows = slice(x, 0, 2, 4);
  std::vector<float> two(10);
  rows.copy_to_host(two.data(), two.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(two.data(), a.data() + 10, 40), 0);
}

// copy_from_host writes in place: every handle sees it, and a later graph reads the new values.
TEST_P(HostMemoryIoTest, CopyFromHostIsSeenByEveryHandle) {
  Tensor t = tensor(RandomFloats(100, 2), {10, 10}, GetParam());
  sync({t});
  const Tensor alias = t;
  const std::vector<float> v = RandomFloats(100, 3);
  t.copy_from_host(v.data(), v.size() * sizeof(float));
  EXPECT_EQ(alias.to_vector<float>(), v);
  const std::vector<float> doubled = (alias * 2.0).to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(doubled[i], v[i] * 2.0f);
}

// The old values stay for whoever still reads them: a pending graph built before the write and
// a view see the values they were built on (the write goes to a new buffer).
TEST_P(HostMemoryIoTest, CopyFromHostLeavesOldValuesToTheirReaders) {
  const std::vector<float> old_values = RandomFloats(8, 4);
  const std::vector<float> new_values = RandomFloats(8, 5);
  Tensor w = tensor(old_values, {8}, GetParam());
  sync({w});
  const Tensor pending = w * 3.0;          // not computed yet
  const Tensor view = reshape(w, {2, 4});  // a view of the old buffer
  w.copy_from_host(new_values.data(), 32);
  const std::vector<float> p = pending.to_vector<float>();
  const std::vector<float> r = view.to_vector<float>();
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(p[i], old_values[i] * 3.0f);
    EXPECT_EQ(r[i], old_values[i]);
  }
  EXPECT_EQ(w.to_vector<float>(), new_values);
}

// What each call costs: one transfer of the tensor's own bytes each way, and no kernel.
TEST_P(HostMemoryIoTest, OneTransferEachWayAndNoKernel) {
  if (GetParam().is_host()) GTEST_SKIP() << "host tensors move no bytes between devices";
  Tensor t = tensor(RandomFloats(4096, 6), {64, 64}, GetParam());
  sync({t});
  std::vector<float> buf(4096);
  const int64_t launches = C("KernelLaunches");
  const int64_t down = C("TransferFromDeviceBytes"), down_n = C("TransferFromDeviceCount");
  const int64_t up = C("TransferToDeviceBytes"), up_n = C("TransferToDeviceCount");
  const int64_t allocs = C("DeviceAllocCount");
  t.copy_to_host(buf.data(), 4096 * 4);
  EXPECT_EQ(C("TransferFromDeviceBytes") - down, 4096 * 4);
  EXPECT_EQ(C("TransferFromDeviceCount") - down_n, 1);
  for (float& x : buf) x += 1;
  t.copy_from_host(buf.data(), 4096 * 4);
  EXPECT_EQ(C("TransferToDeviceBytes") - up, 4096 * 4);
  EXPECT_EQ(C("TransferToDeviceCount") - up_n, 1);
  EXPECT_EQ(C("KernelLaunches"), launches);
  EXPECT_EQ(C("DeviceAllocCount"), allocs) << "nothing else read the old values: in place";
  EXPECT_EQ(t.to_vector<float>(), buf);
}

TEST_P(HostMemoryIoTest, PinnedBufferStagesTransfers) {
  PinnedBuffer empty(0, GetParam());
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_NE(empty.data(), nullptr);
  const size_t n = 1 << 18;
  PinnedBuffer pinned(n * sizeof(float), GetParam());
  ASSERT_NE(pinned.data(), nullptr);
  EXPECT_EQ(pinned.size(), n * sizeof(float));
  EXPECT_EQ(pinned.device(), GetParam());
  const std::vector<float> v = RandomFloats(n, 8);
  std::memcpy(pinned.data(), v.data(), n * sizeof(float));
  const Tensor t =
      from_host_memory(pinned.data(), pinned.size(), {512, 512}, DType::f32, GetParam());
  const Tensor u = t + 1.0;
  u.copy_to_host(pinned.data(), pinned.size());
  const float* back = static_cast<const float*>(pinned.data());
  for (size_t i = 0; i < n; i += 997) EXPECT_EQ(back[i], v[i] + 1.0f);
  PinnedBuffer moved = std::move(pinned);
  EXPECT_EQ(pinned.data(), nullptr);  // NOLINT(bugprone-use-after-move): documented state
  EXPECT_EQ(moved.size(), n * sizeof(float));
  EXPECT_EQ(static_cast<const float*>(moved.data())[0], v[0] + 1.0f);
}

TEST_P(HostMemoryIoTest, BadInputsAreErrors) {
  const Device d = GetParam();
  Tensor t = zeros({2, 3}, DType::f32, d);
  std::vector<float> buf(6);
  EXPECT_TRUE(Has(ErrorOf([&] { t.copy_to_host(buf.data(), 20); }),
                  "copy_to_host: the destination holds 20 bytes but Tensor(f32[2,3]"))
      << ErrorOf([&] { t.copy_to_host(buf.data(), 20); });
  EXPECT_TRUE(Has(ErrorOf([&] { t.copy_to_host(nullptr, 24); }), "null"));
  EXPECT_TRUE(Has(ErrorOf([&] { t.copy_from_host(buf.data(), 28); }),
                  "copy_from_host: the source holds 28 bytes"));
  EXPECT_TRUE(Has(ErrorOf([&] { t.copy_from_host(nullptr, 24); }), "null"));
  EXPECT_TRUE(Has(ErrorOf([&] { from_host_memory(buf.data(), 24, {5}, DType::f32, d); }),
                  "from_host_memory: 24 bytes given for f32[5]"));
  EXPECT_TRUE(Has(ErrorOf([&] { from_host_memory(nullptr, 8, {2}, DType::f32, d); }), "null"));
  EXPECT_TRUE(Has(ErrorOf([&] { from_host_memory(buf.data(), 0, {-1}, DType::f32, d); }),
                  "from_host_memory"));
  const uint8_t two[2] = {1, 2};
  EXPECT_TRUE(Has(ErrorOf([&] { from_host_memory(two, 2, {2}, DType::boolean, d); }),
                  "byte 1 of a bool tensor is 2"));
  Tensor flags = tensor_bool({1, 0}, {2}, d);
  EXPECT_TRUE(Has(ErrorOf([&] { flags.copy_from_host(two, 2); }), "byte 1 of the source is 2"));
  EXPECT_EQ(flags.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0})) << "left unchanged";
  Tensor undefined;
  EXPECT_NE(ErrorOf([&] { undefined.copy_to_host(buf.data(), 0); }), "(no error)");
  EXPECT_NE(ErrorOf([&] { undefined.copy_from_host(buf.data(), 0); }), "(no error)");
  if (d.is_opencl()) {
    Tensor p = placeholder({2}, DType::f32, d);
    EXPECT_TRUE(Has(ErrorOf([&] { p.copy_to_host(buf.data(), 8); }), "placeholder"));
    EXPECT_TRUE(Has(ErrorOf([&] { p.copy_from_host(buf.data(), 8); }), "placeholder"));
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, HostMemoryIoTest,
                         ::testing::Values(Device::opencl(0), Device::host()),
                         [](const auto& info) { return info.param.is_host() ? "host" : "cl0"; });

// The driver refusing pinned memory is an Error naming the size and device; nothing is kept.
TEST(PinnedBufferTest, RefusedAllocationIsAnError) {
  sync({ones({1}, DType::f32, Device::opencl(0))});  // the device is open
  base::fault::FailNth(base::fault::Site::kAlloc, 1);
  const std::string message = ErrorOf([] { PinnedBuffer b(4096, Device::opencl(0)); });
  base::fault::Reset();
  EXPECT_TRUE(Has(message, "PinnedBuffer(4096, cl:0)")) << message;
  EXPECT_TRUE(Has(message, "pinned host memory")) << message;
  PinnedBuffer ok(4096, Device::opencl(0));
  EXPECT_NE(ok.data(), nullptr);
  // A size whose rounding to 64 bytes would wrap is refused, not a 64-byte buffer.
  const std::string huge = ErrorOf([] { PinnedBuffer b(SIZE_MAX - 10, Device::host()); });
  EXPECT_TRUE(Has(huge, "PinnedBuffer: 18446744073709551605 bytes")) << huge;
}

}  // namespace
}  // namespace lazycl
