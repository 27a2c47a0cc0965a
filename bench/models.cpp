// lazycl-bench models: the model-shaped workloads built on matmul (issue 13): an MLP training
// step and its forward pass, square matmuls with either operand transposed, and the batched
// matmuls of attention. bench/peers/models.py computes the same rows in JAX and numpy with the
// same JSON schema, and scripts/compare.sh joins the two.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backend/device.h"
#include "bench/args.h"
#include "bench/commands.h"
#include "bench/cpu_flags.h"
#include "bench/timing.h"
#include "examples/llama/model.h"
#include "lazycl/lazycl.h"
#include "runtime/devices.h"
#include "runtime/tiering.h"

namespace lazycl::bench {
namespace {

// One row: `ms` is the median time of one step; `value` is that time (unit "ms") or the
// GFLOP/s it gives (unit "GFLOP/s"). kernels: launches per step (metrics "KernelLaunches").
// host_ms: the CPU time of the thread that runs the steps, per timed step (getrusage): building
// graphs, looking up plans, enqueueing and waiting on the driver; the device's work runs on
// other threads (PoCL's) or the device itself.
struct ModelRow {
  std::string name;
  double ms = 0;
  double value = 0;
  std::string unit;
  int64_t kernels = -1;
  double host_ms = 0;
};

double ThreadCpuMs() {
  rusage r{};
  getrusage(RUSAGE_THREAD, &r);
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3;
}

Tensor Randn(std::vector<int64_t> shape, uint64_t seed, double scale = 1.0) {
  Tensor t = randn(std::move(shape), seed, DType::f32, Device::opencl()) * scale;
  sync({t});
  return t.detach();
}

// Runs `step` (which builds a graph and syncs it) `warmup` times and for at least 0.3 s (the
// first row of a run measured ~half speed after two runs alone: 241 against 446 GFLOP/s for
// matmul_nt_1024), counts the launches of one more run, then returns the median of `repeat`
// timed runs.
double TimeStep(int warmup, int repeat, int64_t* kernels, double* host_ms,
                const std::function<void()>& step) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < warmup || MsSince(start) < 300; ++i) step();
  const int64_t before = metrics::counter("KernelLaunches");
  step();
  *kernels = metrics::counter("KernelLaunches") - before;
  const double cpu = ThreadCpuMs();
  const double ms = MedianMs(0, repeat, step);
  *host_ms = (ThreadCpuMs() - cpu) / repeat;
  return ms;
}

constexpr int kLayers = 8;
constexpr int64_t kHidden = 1024;
constexpr int64_t kBatch = 256;
constexpr double kLearningRate = 1e-3;

// relu(h @ w[l] + b[l]) for each layer.
Tensor MlpForward(const Tensor& x, const std::vector<Tensor>& w, const std::vector<Tensor>& b) {
  Tensor h = x;
  for (size_t l = 0; l < w.size(); ++l) h = relu(matmul(h, w[l]) + b[l]);
  return h;
}

}  // namespace

int Models(const std::vector<std::string>& argv) {
  Args args(argv, {}, {"json", "repeat", "only"});
  const int repeat = static_cast<int>(args.positive("repeat", 5));
  if (!args.error().empty()) {
    std::fprintf(stderr,
                 "lazycl-bench models: %s\nusage: lazycl-bench models [--json FILE] [--repeat N] "
                 "[--only NAME_PREFIX]\n",
                 args.error().c_str());
    return 2;
  }
  // The timed rows measure the fused programs a steady loop runs: under tiered execution the
  // warm-up runs could still be on the generic kernels while the fused program builds (on an
  // H200 all of W1's timed runs were, 2.5 ms where its program takes 0.19). The first-result
  // rows of `ops` time tiering itself, in fresh processes with their own LAZYCL_COMPILE.
  runtime::SetCompileMode(base::CompileMode::kSync);
  const std::string only = args.option("only").value_or("");
  // A row (or a group of rows, by the prefix of their names) that --only selects.
  auto wanted = [&](const std::string& name) {
    return name.starts_with(only) || only.starts_with(name);
  };
  try {
    const backend::DeviceInfo& info = runtime::OpenClDevice(0).info();
    const std::string device =
        absl::StrCat(info.device_name, " (", info.platform_name, ", ", info.driver_version, ")");
    const std::string flags = CpuFlags();
    std::printf(
        "lazycl-bench models on %s\ncpu: %s, %d compute units; median of %d after warm-up\n",
        device.c_str(), flags.c_str(), info.compute_units, repeat);
    std::printf("  %-30s %10s %-8s %10s %8s %8s\n", "row", "value", "unit", "ms", "kernels",
                "host_ms");
    std::vector<ModelRow> rows;
    auto add = [&](ModelRow row) {
      std::printf("  %-30s %10.4g %-8s %10.4g %8lld %8.3g\n", row.name.c_str(), row.value,
                  row.unit.c_str(), row.ms, static_cast<long long>(row.kernels), row.host_ms);
      std::fflush(stdout);
      rows.push_back(std::move(row));
    };
    auto ms_row = [&](const std::string& name, int warmup, const std::function<void()>& step) {
      ModelRow r{name, 0, 0, "ms", -1};
      r.ms = TimeStep(warmup, repeat, &r.kernels, &r.host_ms, step);
      r.value = r.ms;
      add(r);
    };
    auto flops_row = [&](const std::string& name, double flops, const std::function<void()>& step) {
      ModelRow r{name, 0, 0, "GFLOP/s", -1};
      r.ms = TimeStep(2, repeat, &r.kernels, &r.host_ms, step);
      r.value = flops / r.ms / 1e6;
      add(r);
    };
    // A row per call of `call`, timed `calls` calls a step: its time (flops 0) or GFLOP/s, and
    // kernels and host time per call.
    auto per_call_row = [&](const std::string& name, int calls, double flops,
                            const std::function<void()>& call) {
      ModelRow r{name, 0, 0, flops > 0 ? "GFLOP/s" : "ms", -1};
      r.ms = TimeStep(2, repeat, &r.kernels, &r.host_ms,
                      [&] {
                        for (int i = 0; i < calls; ++i) call();
                      }) /
             calls;
      r.kernels /= calls;
      r.host_ms /= calls;
      r.value = flops > 0 ? flops / r.ms / 1e6 : r.ms;
      add(r);
    };

    if (wanted("mlp")) {
      std::vector<Tensor> w, b;
      for (int l = 0; l < kLayers; ++l) {
        w.push_back(Randn({kHidden, kHidden}, 10 + l, 1.0 / 32));
        b.push_back(Randn({kHidden}, 20 + l, 0.1));
      }
      const Tensor x = Randn({kBatch, kHidden}, 30);
      const Tensor target = Randn({kBatch, kHidden}, 31);
      if (wanted("mlp_train_step_ms")) {
        // Forward, backward (lazycl::grad) and the SGD update of every weight and bias.
        ms_row("mlp_train_step_ms", 2, [&] {
          std::vector<Tensor> params;
          for (Tensor& t : w) params.push_back(t.detach().requires_grad_());
          for (Tensor& t : b) params.push_back(t.detach().requires_grad_());
          const std::vector<Tensor> pw(params.begin(), params.begin() + kLayers);
          const std::vector<Tensor> pb(params.begin() + kLayers, params.end());
          const Tensor diff = MlpForward(x, pw, pb) - target;
          const Tensor loss = mean(diff * diff);
          const std::vector<Tensor> g = grad(loss, params);
          std::vector<Tensor> updated{loss.detach()};
          for (int l = 0; l < kLayers; ++l) {
            w[l] = (pw[l].detach() - g[l] * kLearningRate).detach();
            b[l] = (pb[l].detach() - g[kLayers + l] * kLearningRate).detach();
            updated.push_back(w[l]);
            updated.push_back(b[l]);
          }
          sync(updated);
        });
      }
      if (wanted("mlp_infer_ms")) ms_row("mlp_infer_ms", 2, [&] { sync({MlpForward(x, w, b)}); });
    }
    if (wanted("charlm")) {
      // examples/char_lm.cpp's model: a training step (forward, backward, AdamW) on a [16, 64]
      // batch, and one sampling step (the logits of a [1, 64] window, argmax of the last).
      const examples::LlamaConfig c = examples::CharLmConfig();
      const Device cl = Device::opencl(0);
      examples::LlamaParams params = examples::InitLlama(c, 1, cl);
      params.requires_grad_();
      optim::AdamW adamw(params.list(), {3e-3, 0.9, 0.99, 1e-8, 0.1});
      const Tensor ids = cast(clamp(Randn({16, c.seq}, 50, 40.0) + 128.0, 0, 255), DType::i32);
      const Tensor targets = cast(clamp(Randn({16, c.seq}, 51, 40.0) + 128.0, 0, 255), DType::i32);
      sync({ids, targets});
      if (wanted("charlm_train_step_ms")) {
        ms_row("charlm_train_step_ms", 2, [&] {
          Tensor loss = examples::LlamaLoss(c, params, ids, targets);
          loss.backward();
          adamw.step();
          adamw.zero_grad();
          std::vector<Tensor> all = params.list();
          all.push_back(loss);
          sync(all);
        });
      }
      // The sampling step's result: the argmax of the last position's logits.
      auto next_id = [&](const Tensor& logits) {
        return argmax(reshape(slice(logits, 1, c.seq - 1, c.seq), {c.vocab}), 0);
      };
      if (wanted("charlm_sample_token_ms")) {
        const Tensor window = slice(ids, 0, 0, 1);
        ms_row("charlm_sample_token_ms", 2, [&] {
          NoGradGuard no_grad;
          const Tensor logits = examples::LlamaForward(c, params, window);
          (void)next_id(logits).item<int64_t>();
        });
      }
      if (wanted("charlm_sample_traced_token_ms")) {
        // The same step traced once (as JAX's jit), then called per token with the window.
        NoGradGuard no_grad;
        const Function step = trace(
            [&](const std::vector<Tensor>& a) {
              const Tensor logits = examples::LlamaForward(c, params, a[0]);
              return std::vector<Tensor>{next_id(logits)};
            },
            {{{1, c.seq}, DType::i32}}, cl);
        const Tensor window = slice(ids, 0, 0, 1);
        ms_row("charlm_sample_traced_token_ms", 2,
               [&] { (void)step({window})[0].item<int64_t>(); });
      }
      if (wanted("charlm_sample_for_loop_token_ms")) {
        // The same step with a plain loop over the layers (LayerLoop::kForLoop), as a PyTorch
        // user writes it: the whole forward is one lazy graph (~600 nodes, under the automatic
        // cut's 1024: LAZYCL_MAX_PENDING_NODES).
        const Tensor window = slice(ids, 0, 0, 1);
        ms_row("charlm_sample_for_loop_token_ms", 2, [&] {
          NoGradGuard no_grad;
          const Tensor logits =
              examples::LlamaForward(c, params, window, examples::LayerLoop::kForLoop);
          (void)next_id(logits).item<int64_t>();
        });
      }
    }
    if (wanted("scalar_read_ms")) {
      // A training loop's `loss.item()`: a cached one-kernel graph (the sum of x * s, x
      // [64, 64], s new at every call: a kernel argument, nothing recompiles) computed and its
      // 4 bytes read back, the host waiting for them. Per read, over kReads reads a step.
      constexpr int kReads = 100;
      const Tensor x = Randn({64, 64}, 40);
      sync({x});
      int64_t calls = 0;
      per_call_row("scalar_read_ms", kReads, 0, [&] {
        const double s = static_cast<double>(++calls % 7);
        (void)sum(x * s).item<float>();
      });
    }
    for (int64_t n : {1024, 2048}) {
      // The inputs below are computed as they are made: only for a size whose rows are wanted
      // (`--only matmul_small` made and computed both sizes' inputs: minutes under Callgrind).
      const std::string size = absl::StrCat("_", n);
      if (!wanted("matmul_nn" + size) && !wanted("matmul_tn" + size) &&
          !wanted("matmul_nt" + size)) {
        continue;
      }
      const double flops = 2.0 * static_cast<double>(n * n * n);
      const Tensor a = Randn({n, n}, 5), c = Randn({n, n}, 6);
      if (wanted("matmul_nn" + size))
        flops_row("matmul_nn" + size, flops, [&] { sync({matmul(a, c)}); });
      // A^T B and A B^T: the transposed operand is a view, read in place.
      if (wanted("matmul_tn" + size))
        flops_row("matmul_tn" + size, flops, [&] { sync({matmul(transpose(a, 0, 1), c)}); });
      if (wanted("matmul_nt" + size))
        flops_row("matmul_nt" + size, flops, [&] { sync({matmul(a, transpose(c, 0, 1))}); });
    }
    if (wanted("bmm")) {
      const Tensor q = Randn({128, 64, 32}, 40), kt = Randn({128, 32, 64}, 41);
      const Tensor p = Randn({128, 64, 64}, 42), v = Randn({128, 64, 32}, 43);
      if (wanted("bmm_qk"))
        flops_row("bmm_qk", 2.0 * 128 * 64 * 64 * 32, [&] { sync({matmul(q, kt)}); });
      if (wanted("bmm_pv"))
        flops_row("bmm_pv", 2.0 * 128 * 64 * 32 * 64, [&] { sync({matmul(p, v)}); });
    }
    if (wanted("matmul_small") || wanted("swiglu_small")) {
      // The char-LM sampling step's FFN products ([64, 128] x [128, 352]: its 64-token window,
      // D 128, hidden 352; swiglu_small both of them with silu(y @ w1) * (y @ w3)), each call
      // synchronised as an eager loop runs it, per call over kCalls calls a step: a product this
      // small is where per-call costs (host, driver, waking the second core) show.
      constexpr int kCalls = 50;
      const Tensor y = Randn({64, 128}, 44), w1 = Randn({128, 352}, 45, 1.0 / 16);
      const Tensor w3 = Randn({128, 352}, 46, 1.0 / 16);
      sync({y, w1, w3});
      const double flops = 2.0 * 64 * 128 * 352;
      if (wanted("matmul_small"))
        per_call_row("matmul_small", kCalls, flops, [&] { sync({matmul(y, w1)}); });
      if (wanted("swiglu_small")) {
        per_call_row("swiglu_small", kCalls, 2 * flops,
                     [&] { sync({silu(matmul(y, w1)) * matmul(y, w3)}); });
      }
    }

    if (auto path = args.option("json")) {
      std::vector<std::string> items;
      for (const ModelRow& r : rows) {
        items.push_back(absl::StrFormat(
            "    {\"name\": \"%s\", \"value\": %.6g, \"unit\": \"%s\", \"ms\": %.6g, "
            "\"kernels\": %d, \"host_ms\": %.6g}",
            r.name, r.value, r.unit, r.ms, r.kernels, r.host_ms));
      }
      std::ofstream file(*path);
      file << absl::StrFormat(
          "{\"side\": \"lazycl\", \"device\": \"%s\", \"cpu_flags\": \"%s\", \"repeat\": %d,\n "
          "\"results\": [\n%s\n]}\n",
          device, flags, repeat, absl::StrJoin(items, ",\n"));
      if (!file) {
        std::fprintf(stderr, "lazycl-bench models: cannot write %s\n", path->c_str());
        return 1;
      }
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "lazycl-bench models: %s\n", e.what());
    return 1;
  }
}

}  // namespace lazycl::bench
