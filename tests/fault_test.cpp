// Fault injection (base/fault.h) walked over one training step of a small MLP: every program
// build, device allocation, kernel launch and transfer the step makes is made to fail in turn.
// Each failure must be a lazycl::Error (or be recovered, with the right result), and afterwards
// the user's parameters still hold their old values, the same step's outputs compute correctly
// once the fault is gone, and the device memory returns to its level.
//
// The build walk comes first: it needs programs this process has not built yet.
#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "base/fault.h"
#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

using base::fault::Site;

const Device kCl = Device::opencl(0);

struct Params {
  Tensor w1, b1, w2;
};

Params Init(Device d) {
  return {randn({6, 8}, 11, DType::f32, d) * 0.5, randn({8}, 12, DType::f32, d) * 0.1,
          randn({8, 3}, 13, DType::f32, d) * 0.5};
}

// loss, then the updated parameters: one SGD step.
std::vector<Tensor> Step(const Params& p, const Tensor& x, const Tensor& y) {
  Params q{p.w1.detach().requires_grad_(), p.b1.detach().requires_grad_(),
           p.w2.detach().requires_grad_()};
  Tensor h = tanh(matmul(x, q.w1) + q.b1);
  Tensor loss = mean(pow(matmul(h, q.w2) - y, 2.0));
  std::vector<Tensor> g = grad(loss, {q.w1, q.b1, q.w2});
  return {loss.detach(), (q.w1 - g[0] * 0.1).detach(), (q.b1 - g[1] * 0.1).detach(),
          (q.w2 - g[2] * 0.1).detach()};
}

void ExpectClose(const std::vector<Tensor>& got, const std::vector<std::vector<float>>& want,
                 const std::string& when) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const std::vector<float> v = got[i].to_vector<float>();
    ASSERT_EQ(v.size(), want[i].size()) << when;
    for (size_t j = 0; j < v.size(); ++j) {
      EXPECT_NEAR(v[j], want[i][j], 1e-5 * (1 + std::fabs(want[i][j]))) << when << ", output " << i;
    }
  }
}

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base::fault::Reset();
    const Device host = Device::host();
    Params p = Init(host);
    x_host_ = randn({5, 6}, 21, DType::f32, host);
    y_host_ = randn({5, 3}, 22, DType::f32, host);
    for (const Tensor& t : Step(p, x_host_, y_host_)) want_.push_back(t.to_vector<float>());
  }
  void TearDown() override { base::fault::Reset(); }

  // One step on the device as a training loop runs it: upload the batch, compute, sync the loss
  // and the new parameters, read the loss.
  std::vector<Tensor> RunStep(const Params& p) {
    const Tensor x = x_host_.to(kCl);
    const Tensor y = y_host_.to(kCl);
    std::vector<Tensor> out = Step(p, x, y);
    sync(out);
    out[0].item<float>();
    return out;
  }

  // The calls one step makes at `site` (programs built, pools emptied first).
  int64_t CallsPerStep(Site site) {
    empty_cache();
    Params p = Init(kCl);
    sync({p.w1, p.b1, p.w2});
    base::fault::FailNth(site, 0);
    RunStep(p);
    return base::fault::Count(site);
  }

  // One attempt of the step with `site`'s n-th call failing; checks everything the header says
  // (with `recover` false, a failed step is not run again: the build walk must not build the
  // programs it has yet to fail). Returns whether the attempt failed.
  bool Attempt(Site site, int64_t n, bool recover = true, bool sticky = false) {
    const std::string when = std::string(base::fault::SiteName(site)) + " #" + std::to_string(n);
    empty_cache();
    const int64_t live = metrics::counter("DeviceLiveBytes");
    Params p = Init(kCl);
    sync({p.w1, p.b1, p.w2});
    const std::vector<float> w1 = p.w1.to_vector<float>();
    bool failed = false;
    std::vector<Tensor> out;
    if (sticky) {
      base::fault::FailFrom(site, n);
    } else {
      base::fault::FailNth(site, n);
    }
    try {
      out = RunStep(p);
    } catch (const Error& e) {
      failed = true;
      EXPECT_NE(std::string(e.what()).find("injected fault"), std::string::npos)
          << when << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(site == Site::kBuild    ? "clBuildProgram"
                                           : site == Site::kAlloc  ? "clCreateBuffer"
                                           : site == Site::kLaunch ? "clEnqueueNDRangeKernel"
                                                                   : "clEnqueue"),
                std::string::npos)
          << when << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << when << ": a non-lazycl exception escaped: " << e.what();
      failed = true;
    }
    base::fault::FailNth(site, 0);
    // The parameters are untouched, and the step computes the right values once the fault is
    // gone.
    EXPECT_EQ(p.w1.to_vector<float>(), w1) << when;
    if (failed && recover) out = RunStep(p);
    if (!out.empty()) ExpectClose(out, want_, when);
    out.clear();
    p = Params{};
    empty_cache();
    EXPECT_EQ(metrics::counter("DeviceLiveBytes"), live) << when;
    return failed;
  }

  Tensor x_host_, y_host_;
  std::vector<std::vector<float>> want_;
};

// Build k fails after k - 1 new programs were built (and kept): failing the 1st, then the 2nd of
// what is left, and so on, fails every program of the step once. A graph's new kernels build as
// one program (ProgramCache::Prepare), so the step (one graph) has one build to fail.
TEST_F(FaultTest, EveryProgramBuildOfAStepFailsCleanly) {
  int failures = 0;
  EXPECT_TRUE(Attempt(Site::kBuild, 1, /*recover=*/false))
      << "the first run of the step built no program";
  ++failures;
  while (Attempt(Site::kBuild, 2, /*recover=*/false)) {
    ++failures;
    ASSERT_LT(failures, 100) << "the walk does not end";
  }
  EXPECT_GE(failures, 1);
  std::cout << "build faults walked: " << failures << "\n";
}

TEST_F(FaultTest, EveryAllocationLaunchAndTransferOfAStepFailsCleanly) {
  for (Site site : {Site::kAlloc, Site::kLaunch, Site::kTransfer}) {
    const int64_t calls = CallsPerStep(site);
    ASSERT_GT(calls, 0) << base::fault::SiteName(site);
    int failed = 0;
    for (int64_t n = 1; n <= calls; ++n) failed += Attempt(site, n) ? 1 : 0;
    std::cout << base::fault::SiteName(site) << ": " << calls << " calls per step, " << failed
              << " failed the step, " << calls - failed << " were recovered\n";
    // A failed allocation, or an upload that fails for want of resources, is retried once
    // after the pool is trimmed (backend/buffer_manager.cpp); a launch is not.
    if (site == Site::kLaunch) {
      EXPECT_EQ(failed, calls);
    }
    // A resource that stays exhausted fails the step at every call.
    int sticky_failed = 0;
    for (int64_t n = 1; n <= calls; ++n) {
      sticky_failed += Attempt(site, n, /*recover=*/true, /*sticky=*/true) ? 1 : 0;
    }
    EXPECT_EQ(sticky_failed, calls) << base::fault::SiteName(site);
    std::cout << base::fault::SiteName(site) << ": failing from call n on failed the step for "
              << sticky_failed << " of " << calls << " n\n";
  }
}

}  // namespace
}  // namespace lazycl
