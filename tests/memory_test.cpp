// Device memory through the public API: the pool bound, empty_cache(), and allocations past the
// device's global memory. CTest runs this binary twice: with the default pool bound, and as
// memory_small_pool_test with LAZYCL_DEVICE_POOL_LIMIT=8MiB (tests/CMakeLists.txt).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/buffer_manager.h"
#include "base/settings.h"
#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "runtime/devices.h"

namespace lazycl {
namespace {

int64_t C(std::string_view name) { return metrics::counter(name); }

// The bound README documents: LAZYCL_DEVICE_POOL_LIMIT, else an eighth of the device's global
// memory and at most 512 MiB.
int64_t PoolBound() {
  const int64_t global = runtime::OpenClDevice(0).info().global_mem_bytes;
  return base::CurrentSettings().device_pool_limit.value_or(backend::DefaultPoolLimit(global));
}

// Regression (the point 3): one tensor at a time from 256 KiB to 64 MiB, each dropped
// before the next, left 836 MB pooled with nothing live.
TEST(MemoryTest, SweepEndsUnderPoolBoundAndEmptyCacheReturnsIt) {
  const Device cl = Device::opencl(0);
  Tensor keep = full({1000}, 2.0, DType::f32, cl);  // live throughout: empty_cache keeps it
  sync({keep});
  empty_cache();
  const int64_t live = C("DeviceLiveBytes");
  int64_t peak_pool = 0;
  for (double bytes = 256 << 10; bytes <= (64 << 20); bytes *= 1.1) {
    {
      Tensor t = full({static_cast<int64_t>(bytes) / 4}, 1.0, DType::f32, cl);
      sync({t});
    }
    EXPECT_EQ(C("DeviceLiveBytes"), live);
    peak_pool = std::max(peak_pool, C("DevicePoolBytes"));
  }
  EXPECT_LE(peak_pool, PoolBound());
  EXPECT_GT(C("DevicePoolBytes"), 0);
  empty_cache();
  EXPECT_EQ(C("DevicePoolBytes"), 0);
  EXPECT_EQ(C("DeviceLiveBytes"), live);
  EXPECT_EQ(keep.to_vector<float>()[999], 2.0f);
}

TEST(MemoryTest, EmptyCacheWithNothingPooledIsHarmless) {
  empty_cache();
  empty_cache();
  EXPECT_EQ(C("DevicePoolBytes"), 0);
}

// Regression: device allocations were never checked against CL_DEVICE_GLOBAL_MEM_SIZE. The
// results of one sync that cannot all fit fail before any kernel runs, so nothing is written.
TEST(MemoryTest, ResultsPastGlobalMemoryAreAnErrorAndNothingLeaks) {
  const Device cl = Device::opencl(0);
  const backend::DeviceInfo& info = runtime::OpenClDevice(0).info();
  const int64_t each = std::min(info.max_alloc_bytes, info.global_mem_bytes / 2) / 2;
  const int64_t count = info.global_mem_bytes / each + 1;
  const int64_t live = C("DeviceLiveBytes");
  const int64_t launches = C("KernelLaunches");
  std::vector<Tensor> big;
  for (int64_t i = 0; i < count; ++i) big.push_back(full({each / 4}, 1.0, DType::f32, cl));
  try {
    sync(big);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("out of memory"), std::string::npos) << message;
    EXPECT_NE(message.find("requested "), std::string::npos) << message;
    EXPECT_NE(message.find("live "), std::string::npos) << message;
    EXPECT_NE(message.find("global memory of " + std::to_string(info.global_mem_bytes)),
              std::string::npos)
        << message;
  }
  EXPECT_EQ(C("KernelLaunches"), launches);
  big.clear();
  EXPECT_EQ(C("DeviceLiveBytes"), live);

  {
    Tensor a = full({4}, 3.0, DType::f32, cl);
    EXPECT_EQ((a * 2.0).to_vector<float>(), (std::vector<float>{6, 6, 6, 6}));
  }
  EXPECT_EQ(C("DeviceLiveBytes"), live);
}

}  // namespace
}  // namespace lazycl
