#include "backend/event_wait.h"

#include <chrono>
#include <thread>
#include <vector>

#include "backend/cl.h"
#include "gtest/gtest.h"

namespace lazycl::backend {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A context on the first device of the first platform that has one (PoCL in CI).
cl::Context AnyContext() {
  std::vector<cl::Platform> platforms;
  cl::Platform::get(&platforms);
  for (const cl::Platform& platform : platforms) {
    std::vector<cl::Device> devices;
    if (platform.getDevices(CL_DEVICE_TYPE_ALL, &devices) == CL_SUCCESS && !devices.empty()) {
      return cl::Context(devices[0]);
    }
  }
  ADD_FAILURE() << "no OpenCL device";
  return cl::Context();
}

// A user event that another thread ends with `status` after `delay`.
struct LateEvent {
  cl::UserEvent event;
  std::thread setter;
  LateEvent(const cl::Context& context, std::chrono::milliseconds delay, cl_int status)
      : event(context) {
    setter = std::thread([this, delay, status] {
      std::this_thread::sleep_for(delay);
      event.setStatus(status);
    });
  }
  ~LateEvent() { setter.join(); }
};

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

TEST(EventWaitTest, AnEndedEventReturnsWithoutSpendingTheSpin) {
  const cl::Context context = AnyContext();
  cl::UserEvent done(context);
  ASSERT_EQ(done.setStatus(CL_COMPLETE), CL_SUCCESS);
  const auto start = Clock::now();
  EXPECT_EQ(WaitForEvent(done(), /*spin_ns=*/int64_t{60'000'000'000}), CL_SUCCESS);
  EXPECT_LT(Seconds(start), 30.0);  // the 60 s poll saw the end at once
}

TEST(EventWaitTest, APollSeesAnEndThatComesWhileItSpins) {
  const cl::Context context = AnyContext();
  LateEvent late(context, 20ms, CL_COMPLETE);
  const auto start = Clock::now();
  EXPECT_EQ(WaitForEvent(late.event(), int64_t{60'000'000'000}), CL_SUCCESS);
  EXPECT_GE(Seconds(start), 0.015);  // it waited for the end
  EXPECT_LT(Seconds(start), 30.0);   // and saw it before the spin ran out
}

TEST(EventWaitTest, PastTheSpinOrWithoutOneItSleepsUntilTheEnd) {
  const cl::Context context = AnyContext();
  for (int64_t spin_ns : {int64_t{0}, int64_t{1'000'000}}) {
    LateEvent late(context, 100ms, CL_COMPLETE);
    const auto start = Clock::now();
    EXPECT_EQ(WaitForEvent(late.event(), spin_ns), CL_SUCCESS) << spin_ns;
    EXPECT_GE(Seconds(start), 0.09) << spin_ns;
  }
}

TEST(EventWaitTest, AFailedCommandIsAnError) {
  const cl::Context context = AnyContext();
  for (int64_t spin_ns : {int64_t{0}, int64_t{60'000'000'000}}) {
    const auto start = Clock::now();
    cl::UserEvent failed(context);
    ASSERT_EQ(failed.setStatus(-1), CL_SUCCESS);
    EXPECT_NE(WaitForEvent(failed(), spin_ns), CL_SUCCESS) << spin_ns;
    LateEvent late(context, 20ms, -1);
    EXPECT_NE(WaitForEvent(late.event(), spin_ns), CL_SUCCESS) << spin_ns;
    // A failure ends the 60 s poll too, though PoCL 3.1 runs no CL_COMPLETE callback for it.
    EXPECT_LT(Seconds(start), 30.0) << spin_ns;
  }
}

TEST(EventWaitTest, MoreWaitersThanFlagsAllSeeTheirEnds) {
  // 100 threads at once: more than the 64 callback flags, so some poll instead, and each flag
  // serves several waits in turn; every wait returns CL_SUCCESS once its own event has ended.
  const cl::Context context = AnyContext();
  constexpr int kThreads = 100;
  std::vector<std::thread> waiters;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    waiters.emplace_back([&context, &failures, t] {
      for (int round = 0; round < 5; ++round) {
        LateEvent late(context, std::chrono::milliseconds((t * 7 + round * 3) % 11), CL_COMPLETE);
        if (WaitForEvent(late.event(), /*spin_ns=*/int64_t{60'000'000'000}) != CL_SUCCESS) {
          ++failures[t];
        }
        cl_int status = CL_QUEUED;
        late.event.getInfo(CL_EVENT_COMMAND_EXECUTION_STATUS, &status);
        if (status != CL_COMPLETE) ++failures[t];  // returned before the end
      }
    });
  }
  for (std::thread& waiter : waiters) waiter.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace lazycl::backend
