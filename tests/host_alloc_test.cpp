// Every failure is a lazycl::Error (issue 15, point 3): host allocations that cannot be met,
// exceptions thrown by a user's traced or scanned body, and scalars outside an integer dtype's
// range. Under ASan CTest sets allocator_may_return_null=1 (a failed nothrow allocation returns
// null rather than aborting), and the bad_alloc cases are skipped (see kThrowingNewAborts).
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "test_util.h"

namespace lazycl {
namespace {

using test::ErrorOf;
using test::Has;

// 2^40 elements: a valid shape (8 bytes each fit in 63 bits) that no host here can hold.
constexpr int64_t kHuge = int64_t{1} << 40;

// Under AddressSanitizer a throwing operator new that cannot allocate reports out-of-memory and
// ends the process whatever allocator_may_return_null says (only nothrow new returns null), so
// the std::bad_alloc these tests turn into errors never comes: they run in Release only.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kThrowingNewAborts = true;
#else
constexpr bool kThrowingNewAborts = false;
#endif

TEST(HostAlloc, HugeHostFactoriesAreResourceExhausted) {
  if (kThrowingNewAborts) GTEST_SKIP() << "ASan aborts on a failed throwing new";
  const Device host = Device::host();
  struct Case {
    const char* name;
    std::function<void()> make;
    int64_t bytes;
  };
  const std::vector<Case> cases = {
      {"zeros", [&] { zeros({kHuge}, DType::f32, host); }, kHuge * 4},
      {"full", [&] { full({kHuge}, 2.5, DType::i64, host); }, kHuge * 8},
      // rand and randn make their i64 counters first (an iota).
      {"randn", [&] { randn({kHuge}, 1, DType::f32, host); }, kHuge * 8},
      {"rand", [&] { rand({kHuge}, 1, 0, 1, DType::f32, host); }, kHuge * 8},
      {"arange", [&] { arange(kHuge, DType::i32, host); }, kHuge * 4},
  };
  for (const Case& c : cases) {
    std::string message;
    try {
      c.make();
      message = "(no error)";
    } catch (const Error& e) {
      message = e.what();
    } catch (const std::exception& e) {
      message = std::string("std exception escaped: ") + e.what();
    }
    EXPECT_TRUE(Has(message, "out of memory")) << c.name << ": " << message;
    EXPECT_TRUE(Has(message, std::to_string(c.bytes))) << c.name << ": " << message;
  }
}

TEST(HostAlloc, HugeHostOpResultIsResourceExhausted) {
  if (kThrowingNewAborts) GTEST_SKIP() << "ASan aborts on a failed throwing new";
  // A small tensor broadcast to a huge one: the result is what cannot be allocated.
  Tensor one = ones({1}, DType::f32, Device::host());
  std::string message;
  try {
    broadcast_to(one, {kHuge}) + 1.0;
    message = "(no error)";
  } catch (const Error& e) {
    message = e.what();
  } catch (const std::exception& e) {
    message = std::string("std exception escaped: ") + e.what();
  }
  EXPECT_TRUE(Has(message, "out of memory")) << message;
  EXPECT_TRUE(Has(message, std::to_string(kHuge * 4))) << message;
}

// The body's own exception, whatever its type, comes out as a lazycl::Error that names where.
template <class F>
std::string WhatEscapes(F f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string("Error: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("std exception escaped: ") + e.what();
  }
  return "(no error)";
}

TEST(UserBodies, ExceptionsFromTracedBodiesAreErrors) {
  const Device cl = test::DefaultCl();
  Fn past_end = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{a.at(5) + 1.0}; };
  Tensor x = ones({3}, DType::f32, cl);
  std::string m = WhatEscapes([&] { trace(past_end, {{{3}, DType::f32}}, cl); });
  EXPECT_TRUE(Has(m, "Error: trace:")) << m;
  EXPECT_TRUE(Has(m, "std::out_of_range")) << m;
  m = WhatEscapes([&] { call(past_end, {x}); });
  EXPECT_TRUE(Has(m, "Error: ")) << m;
  EXPECT_TRUE(Has(m, "std::out_of_range")) << m;
  Fn throws_runtime = [](const std::vector<Tensor>&) -> std::vector<Tensor> {
    throw std::runtime_error("my own failure");
  };
  m = WhatEscapes([&] { call(throws_runtime, {x}); });
  EXPECT_TRUE(Has(m, "Error: ")) << m;
  EXPECT_TRUE(Has(m, "my own failure")) << m;
  // A lazycl::Error from inside the body stays what it was.
  Fn bad_op = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{reshape(a[0], {7})}; };
  m = WhatEscapes([&] { call(bad_op, {x}); });
  EXPECT_TRUE(Has(m, "Error: ")) << m;
  EXPECT_TRUE(Has(m, "reshape")) << m;
}

TEST(UserBodies, ExceptionsFromScanBodiesNameTheStep) {
  auto body = [](const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
    using Result = std::pair<std::vector<Tensor>, std::vector<Tensor>>;
    // On the host, scan runs the body per step: it fails at step 2 (where x is 2.0).
    if (x.at(0).device().is_host()) {
      if (x[0].item<float>() == 2.0f) throw std::out_of_range("step!");
      return Result{{c.at(0) + x[0]}, {}};
    }
    // On a device it is traced once, and fails there: x has one element.
    return Result{{c.at(0) + x.at(1)}, {}};
  };
  Tensor xs = arange(4, DType::f32, Device::host());
  std::string m = WhatEscapes([&] { scan(body, {zeros({}, DType::f32, Device::host())}, {xs}); });
  EXPECT_TRUE(Has(m, "Error: scan:")) << m;
  EXPECT_TRUE(Has(m, "step 2")) << m;
  EXPECT_TRUE(Has(m, "std::out_of_range")) << m;
  const Device cl = test::DefaultCl();
  m = WhatEscapes([&] { scan(body, {zeros({}, DType::f32, cl)}, {arange(4, DType::f32, cl)}); });
  EXPECT_TRUE(Has(m, "Error: scan:")) << m;
  EXPECT_TRUE(Has(m, "std::out_of_range")) << m;
}

TEST(Scalars, IntegralScalarOutOfRangeIsAnError) {
  for (const Device d : {Device::host(), test::DefaultCl()}) {
    Tensor i32 = ones({2}, DType::i32, d);
    std::string m = ErrorOf([&] { i32 + 3e9; });
    EXPECT_TRUE(Has(m, "3000000000")) << m;
    EXPECT_TRUE(Has(m, "i32")) << m;
    EXPECT_TRUE(Has(m, "overflow")) << m;
    m = ErrorOf([&] { i32 * -2147483649.0; });
    EXPECT_TRUE(Has(m, "-2147483649")) << m;
    m = ErrorOf([&] { 1e19 - ones({2}, DType::i64, d); });
    EXPECT_TRUE(Has(m, "i64")) << m;
    // In range: exact, as before.
    EXPECT_EQ((i32 + 2147483646.0).to_vector<int32_t>(),
              (std::vector<int32_t>{2147483647, 2147483647}));
    EXPECT_EQ((i32 * -2147483648.0).to_vector<int32_t>(),
              (std::vector<int32_t>{-2147483648, -2147483648}));
    // A fractional scalar promotes to f32 (PyTorch's rule), so it is not an overflow.
    EXPECT_EQ((i32 + 0.5).dtype(), DType::f32);
  }
}

}  // namespace
}  // namespace lazycl
