#include "runtime/tiering.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

namespace lazycl::runtime {
namespace {

class BackgroundBuilder {
 public:
  void Submit(std::function<void()> job) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    jobs_.push_back(std::move(job));
    ++submitted_;
    if (!thread_.joinable()) {
      thread_ = std::thread([this] { Loop(); });
      // Registered after the device was opened (the first job comes from a graph run), so it
      // runs before the OpenCL implementation's own exit handlers.
      std::atexit([] { Get().Stop(); });
    }
    wake_.notify_all();
  }

  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = submitted_;
    done_cv_.wait(lock, [&] { return finished_ >= target || stopping_; });
  }

  static BackgroundBuilder& Get() {
    static auto* builder = new BackgroundBuilder();  // never destroyed: Stop joins the thread
    return *builder;
  }

 private:
  void Loop() {
    // Below the threads that run kernels: on a CPU device the compiler shares the cores with the
    // generic kernels whose results are waited for. (Linux: a thread's own nice value.)
    errno = 0;
    if (setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10) != 0) errno = 0;
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
      // A driver may register exit handlers of its own during a build (NVIDIA's compiler set up
      // more at its first real compile than LoadCompiler's kernel made it): registered again
      // after the first build, Stop runs ahead of those too. Stop may run twice; the second
      // finds nothing to do.
      if (finished_ == 0) std::atexit([] { Get().Stop(); });
      ++finished_;
      done_cv_.notify_all();
    }
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      jobs_.clear();
      wake_.notify_all();
      done_cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  uint64_t submitted_ = 0;                  // guarded by mu_
  uint64_t finished_ = 0;                   // guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  std::thread thread_;
};

}  // namespace

void SubmitBackgroundBuild(std::function<void()> job) {
  BackgroundBuilder::Get().Submit(std::move(job));
}

void WaitForBackgroundBuilds() { BackgroundBuilder::Get().Wait(); }

namespace {
std::atomic<int> mode_override{-1};
}  // namespace

base::CompileMode CurrentCompileMode() {
  const int mode = mode_override.load();
  return mode < 0 ? base::CurrentSettings().compile : static_cast<base::CompileMode>(mode);
}

void SetCompileMode(std::optional<base::CompileMode> mode) {
  mode_override.store(mode.has_value() ? static_cast<int>(*mode) : -1);
}

}  // namespace lazycl::runtime
