// Data-parallel training of the char-LM example model (examples/llama/model.h) over MPI
// (lazycl/dist.h): parameters broadcast from rank 0, each rank computes the gradient of its slice
// of the global batch, gradients are averaged with all_reduce before the AdamW step.
//
//   mpirun --allow-run-as-root --oversubscribe -np 2 data_parallel [--steps N] [--batch B]
//          [--check] [--fail-rank R] [--mismatch]
//
// Prints per-rank step time, collective time and its share, and bytes all-reduced per step.
// --check: rank 0 then trains the same model on the whole global batch in one process from the
// same initial parameters, and exits 1 unless every parameter agrees within 1e-5 relative.
// --fail-rank R: rank R passes a bad tensor at its second step (a lazycl::Error), which must
// end the whole job with that error, not hang the others. --mismatch: rank 1 all-reduces one
// tensor more than the others (an Error on every rank, before any data moves).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "examples/llama/model.h"
#include "lazycl/dist.h"
#include "lazycl/lazycl.h"

namespace lc = lazycl;
namespace ex = lazycl::examples;

namespace {

struct Options {
  int64_t steps = 10, batch = 8;
  bool check = false, mismatch = false;
  int fail_rank = -1;
};

std::string Text() {
  std::ifstream in("/usr/share/common-licenses/GPL-3", std::ios::binary);
  if (!in) throw lc::Error("data_parallel: cannot read /usr/share/common-licenses/GPL-3");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Rows [begin, end) of step `step`'s global batch (the same on every rank).
std::pair<lc::Tensor, lc::Tensor> Batch(const std::string& text, int64_t step, int64_t batch,
                                        int64_t begin, int64_t end, int64_t seq) {
  std::mt19937_64 rng(static_cast<uint64_t>(step) + 100);
  std::vector<int32_t> ids, targets;
  for (int64_t b = 0; b < batch; ++b) {
    const size_t start = static_cast<size_t>(rng() % (text.size() - static_cast<size_t>(seq) - 1));
    if (b < begin || b >= end) continue;
    for (int64_t t = 0; t < seq; ++t) {
      ids.push_back(static_cast<unsigned char>(text[start + static_cast<size_t>(t)]));
      targets.push_back(static_cast<unsigned char>(text[start + static_cast<size_t>(t) + 1]));
    }
  }
  const lc::Device d = lc::default_env().device();
  return {lc::tensor(ids, {end - begin, seq}, d), lc::tensor(targets, {end - begin, seq}, d)};
}

// eps 1e-6 rather than 1e-8: AdamW divides each gradient by its own running magnitude, so at
// 1e-8 a gradient that is zero up to rounding (|g| ~ 1e-10, its sign decided by the order of a
// sum) still moves its weight by ~lr / 100, differently on 2 ranks than on one; the check's 1e-5
// would then measure summation order, not data parallelism.
lc::optim::AdamWOptions Adam() { return {3e-3, 0.9, 0.99, 1e-6, 0.1}; }

// Trains from `params` on rows [begin, end) of each global batch; with `reduce`, averages the
// gradients over the ranks first. Returns the mean step time and collective time in ms, over
// the steps after the first (which compiles the programs) when there are several.
std::pair<double, double> Train(const Options& o, const ex::LlamaConfig& c, ex::LlamaParams& params,
                                const std::string& text, int64_t begin, int64_t end, bool reduce) {
  params.requires_grad_();
  std::vector<lc::Tensor> list = params.list();
  lc::optim::AdamW adamw(list, Adam());
  double step_ms = 0, collective_ms = 0;
  for (int64_t step = 0; step < o.steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    auto [ids, targets] = Batch(text, step, o.batch, begin, end, c.seq);
    if (reduce && o.fail_rank == lc::dist::rank() && step == 1) {
      ids = lc::tensor(std::vector<float>{1, 2, 3}, {2, 2});  // bad input: 3 values for [2, 2]
    }
    lc::Tensor loss = ex::LlamaLoss(c, params, ids, targets);
    loss.backward();
    if (reduce) {
      std::vector<lc::Tensor> grads;
      for (const lc::Tensor& p : list) grads.push_back(p.grad());
      if (o.mismatch && lc::dist::rank() == 1) grads.push_back(lc::zeros({3}));
      const auto c0 = std::chrono::steady_clock::now();
      lc::dist::all_reduce(grads, lc::dist::ReduceOp::mean);
      collective_ms +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
    }
    adamw.step();
    adamw.zero_grad();
    if (step == 0 && o.steps > 1) {
      collective_ms = 0;  // the first step's times are not counted
      continue;
    }
    step_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  const double counted = static_cast<double>(o.steps > 1 ? o.steps - 1 : 1);
  return {step_ms / counted, collective_ms / counted};
}

int Run(const Options& o) {
  lc::dist::init();
  const int rank = lc::dist::rank(), world = lc::dist::world_size();
  const ex::LlamaConfig c = ex::CharLmConfig();
  if (o.batch % world != 0) {
    throw lc::Error("data_parallel: --batch " + std::to_string(o.batch) +
                    " is not a multiple of the " + std::to_string(world) + " ranks");
  }
  const std::string text = Text();
  const lc::Device device = lc::default_env().device();
  // Each rank starts from its own weights; the broadcast makes them rank 0's.
  ex::LlamaParams params = ex::InitLlama(c, 1 + static_cast<uint64_t>(rank), device);
  std::vector<lc::Tensor> list = params.list();
  lc::dist::broadcast(list, 0);
  const int64_t per_rank = o.batch / world;
  const int64_t bytes0 = lc::metrics::counter("CollectiveBytes");
  const auto [step_ms, collective_ms] =
      Train(o, c, params, text, rank * per_rank, (rank + 1) * per_rank, /*reduce=*/true);
  const double bytes_per_step =
      static_cast<double>(lc::metrics::counter("CollectiveBytes") - bytes0) /
      static_cast<double>(o.steps);
  std::printf(
      "rank %d of %d: %lld steps of a %lld-sequence slice (global batch %lld): %.1f ms/step, "
      "all_reduce %.1f ms/step (%.0f%%), %.2f MiB all-reduced per step in %lld calls (times "
      "after the first step)\n",
      rank, world, static_cast<long long>(o.steps), static_cast<long long>(per_rank),
      static_cast<long long>(o.batch), step_ms, collective_ms,
      step_ms > 0 ? 100.0 * collective_ms / step_ms : 0.0, bytes_per_step / 1048576.0,
      static_cast<long long>(lc::metrics::counter("CollectiveCount")));
  std::fflush(stdout);
  if (!o.check || rank != 0) return 0;

  // The one-process reference: rank 0's initial weights, the whole global batch.
  ex::LlamaParams reference = ex::InitLlama(c, 1, device);
  Train(o, c, reference, text, 0, o.batch, /*reduce=*/false);
  const std::vector<lc::Tensor> got = params.list(), want = reference.list();
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const std::vector<float> g = got[i].to_vector<float>(), w = want[i].to_vector<float>();
    for (size_t j = 0; j < g.size(); ++j) {
      worst =
          std::max(worst, std::fabs(double(g[j]) - w[j]) / std::max(1.0, std::fabs(double(w[j]))));
    }
  }
  const bool ok = worst <= 1e-5;
  std::printf(
      "check: %d ranks vs one process on the full batch after %lld steps: max relative "
      "parameter difference %.3g (%s 1e-5)\n",
      world, static_cast<long long>(o.steps), worst, ok ? "within" : "NOT within");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw lc::Error("data_parallel: " + a + " needs a value");
        return argv[++i];
      };
      if (a == "--steps")
        o.steps = std::stoll(value());
      else if (a == "--batch")
        o.batch = std::stoll(value());
      else if (a == "--check")
        o.check = true;
      else if (a == "--mismatch")
        o.mismatch = true;
      else if (a == "--fail-rank")
        o.fail_rank = std::stoi(value());
      else
        throw lc::Error("data_parallel: unknown argument '" + a + "' (see data_parallel.cpp)");
    }
    if (o.steps < 1 || o.batch < 1)
      throw lc::Error("data_parallel: --steps and --batch must be >= 1");
    return Run(o);
  } catch (const std::exception& e) {
    // One rank cannot go on: say why, and end the whole job rather than leave the others
    // waiting in a collective.
    const int rank = lc::dist::is_initialized() ? lc::dist::rank() : -1;
    std::fprintf(stderr, "data_parallel: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    lc::dist::abort(2);
  }
}
