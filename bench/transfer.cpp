// lazycl-bench transfer: the bytes that each way of running a stacked-layer model moves between
// host and device (MISSION.md, section 1; SPEC.md, "Benchmarks").
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/args.h"
#include "bench/commands.h"
#include "bench/svg_chart.h"
#include "bench/transfer.h"
#include "lazycl/lazycl.h"
#include "runtime/devices.h"

namespace lazycl::bench {
namespace {

// The model's output: a loop over the layers, or one scan over the stacked layers.
Tensor Forward(const std::string& strategy, const Tensor& h, const Tensor& weights,
               const Tensor& biases, const Model& m) {
  if (strategy == "for_loop") {
    Tensor out = h;
    for (int64_t l = 0; l < m.layers; ++l) {
      Tensor w = squeeze(slice(weights, 0, l, l + 1), 0);
      Tensor b = squeeze(slice(biases, 0, l, l + 1), 0);
      out = tanh(matmul(out, w) + b);
    }
    return out;
  }
  ScanOptions options;
  options.trace_on_materialized_inputs = strategy == "scan_materialized";
  auto layer = [](const std::vector<Tensor>& carry, const std::vector<Tensor>& x) {
    return std::make_pair(std::vector<Tensor>{tanh(matmul(carry[0], x[0]) + x[1])},
                          std::vector<Tensor>{});
  };
  return scan(layer, {h}, {weights, biases}, options).carry[0];
}

// One step: a fresh host batch in; back on the host, the model's output (inference) or the loss
// after an SGD step on the device (training).
class TanhWorkload : public Workload {
 public:
  explicit TanhWorkload(const Model& m) : m_(m) {}

  void Setup(Device device) override {
    const double scale = 1.0 / std::sqrt(static_cast<double>(m_.hidden));
    weights_ = (randn({m_.layers, m_.hidden, m_.hidden}, 1, DType::f32, Device::host()) * scale)
                   .to(device);
    biases_ = (randn({m_.layers, m_.hidden}, 2, DType::f32, Device::host()) * 0.1).to(device);
    if (m_.train) {
      weights_.requires_grad_();
      biases_.requires_grad_();
    }
  }

  std::vector<float> Step(const std::string& strategy, int64_t step) override {
    const Device device = weights_.device();
    Tensor h = (randn({m_.batch, m_.hidden}, 1000 + static_cast<uint64_t>(step), DType::f32,
                      Device::host()))
                   .to(device);
    Tensor out = Forward(strategy, h, weights_, biases_, m_);
    if (!m_.train) return out.to_vector<float>();
    Tensor loss = mean(out * out);
    std::vector<Tensor> g = grad(loss, {weights_, biases_});
    constexpr double kLearningRate = 0.05;
    weights_ = (weights_.detach() - g[0] * kLearningRate).requires_grad_();
    biases_ = (biases_.detach() - g[1] * kLearningRate).requires_grad_();
    sync({weights_, biases_, loss});
    return {loss.item<float>()};
  }

 private:
  Model m_;
  Tensor weights_, biases_;
};

struct Snapshot {
  int64_t h2d, h2d_n, d2h, d2h_n, trace, alloc, kernels, compiles;
  static Snapshot Take() {
    using metrics::counter;
    return {counter("TransferToDeviceBytes"),   counter("TransferToDeviceCount"),
            counter("TransferFromDeviceBytes"), counter("TransferFromDeviceCount"),
            counter("TraceTransferBytes"),      counter("DeviceAllocBytes"),
            counter("KernelLaunches"),          counter("GraphCompiles")};
  }
};

Result Run(const std::string& strategy, const Model& m,
           const std::vector<std::vector<float>>* reference,
           std::vector<std::vector<float>>* outputs) {
  Result r;
  r.strategy = strategy;
  r.model = m;
  const Device device = Device::opencl();
  const Snapshot setup = Snapshot::Take();
  std::unique_ptr<Workload> workload =
      m.arch == "llama" ? MakeLlamaWorkload(m) : MakeTanhWorkload(m);
  workload->Setup(device);
  r.setup_h2d_bytes = Snapshot::Take().h2d - setup.h2d;

  // A warm-up step compiles what the strategy needs; graph_compiles counts it, the rest of the
  // figures cover the measured steps only.
  const Snapshot before_warmup = Snapshot::Take();
  workload->Step(strategy, -1);
  const int64_t warmup_compiles = metrics::counter("GraphCompiles") - before_warmup.compiles;
  metrics::reset();  // DevicePeakBytes now restarts from what the setup holds
  const Snapshot start = Snapshot::Take();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < m.steps; ++s) {
    std::vector<float> out = workload->Step(strategy, s);
    if (reference != nullptr) {
      for (size_t i = 0; i < out.size(); ++i) {
        r.max_abs_diff =
            std::max(r.max_abs_diff, static_cast<double>(std::fabs(out[i] - (*reference)[s][i])));
      }
    }
    if (outputs != nullptr) outputs->push_back(std::move(out));
  }
  r.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const Snapshot end = Snapshot::Take();
  r.h2d_bytes = end.h2d - start.h2d;
  r.h2d_count = end.h2d_n - start.h2d_n;
  r.d2h_bytes = end.d2h - start.d2h;
  r.d2h_count = end.d2h_n - start.d2h_n;
  r.trace_h2d_bytes = end.trace - start.trace;
  r.device_alloc_bytes = end.alloc - start.alloc;
  r.device_peak_bytes = metrics::counter("DevicePeakBytes");
  r.kernels = end.kernels - start.kernels;
  r.graph_compiles = warmup_compiles + end.compiles - start.compiles;
  return r;
}

std::string HumanBytes(int64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  if (bytes < (1 << 20)) return absl::StrFormat("%.1f KiB", bytes / 1024.0);
  if (bytes < (int64_t{1} << 30)) return absl::StrFormat("%.1f MiB", bytes / 1048576.0);
  return absl::StrFormat("%.2f GiB", bytes / 1073741824.0);
}

void PrintTable(const std::vector<Result>& results) {
  std::printf(
      "%-18s %5s %5s %6s %6s %5s %5s | %10s %10s %5s %10s %5s %10s | %10s %10s %7s %8s %9s "
      "%9s\n",
      "strategy", "model", "mode", "layers", "hidden", "batch", "steps", "setup_h2d", "h2d",
      "h2d_n", "d2h", "d2h_n", "trace_h2d", "dev_alloc", "dev_peak", "kernels", "compiles",
      "wall_ms", "max_diff");
  for (const Result& r : results) {
    std::printf(
        "%-18s %5s %5s %6lld %6lld %5lld %5lld | %10s %10s %5lld %10s %5lld %10s | %10s %10s %7lld "
        "%8lld "
        "%9.1f %9.2e\n",
        r.strategy.c_str(), r.model.arch.c_str(), r.model.train ? "train" : "infer",
        static_cast<long long>(r.model.layers), static_cast<long long>(r.model.hidden),
        static_cast<long long>(r.model.batch), static_cast<long long>(r.model.steps),
        HumanBytes(r.setup_h2d_bytes).c_str(), HumanBytes(r.h2d_bytes).c_str(),
        static_cast<long long>(r.h2d_count), HumanBytes(r.d2h_bytes).c_str(),
        static_cast<long long>(r.d2h_count), HumanBytes(r.trace_h2d_bytes).c_str(),
        HumanBytes(r.device_alloc_bytes).c_str(), HumanBytes(r.device_peak_bytes).c_str(),
        static_cast<long long>(r.kernels), static_cast<long long>(r.graph_compiles), r.wall_ms,
        r.max_abs_diff);
  }
}

std::string Json(const std::string& device, const std::vector<Result>& results) {
  std::vector<std::string> rows;
  for (const Result& r : results) {
    rows.push_back(absl::StrFormat(
        "    {\"strategy\": \"%s\", \"model\": \"%s\", \"train\": %s, \"layers\": %d, \"hidden\": "
        "%d, \"batch\": %d, "
        "\"steps\": %d, "
        "\"setup_h2d_bytes\": %d, \"h2d_bytes\": %d, \"h2d_count\": %d, \"d2h_bytes\": %d, "
        "\"d2h_count\": %d, "
        "\"trace_h2d_bytes\": %d, \"device_alloc_bytes\": %d, \"device_peak_bytes\": %d, "
        "\"kernels\": %d, "
        "\"graph_compiles\": %d, \"wall_ms\": %.3f, \"max_abs_diff\": %.6g}",
        r.strategy, r.model.arch, r.model.train ? "true" : "false", r.model.layers, r.model.hidden,
        r.model.batch, r.model.steps, r.setup_h2d_bytes, r.h2d_bytes, r.h2d_count, r.d2h_bytes,
        r.d2h_count, r.trace_h2d_bytes, r.device_alloc_bytes, r.device_peak_bytes, r.kernels,
        r.graph_compiles, r.wall_ms, r.max_abs_diff));
  }
  std::string escaped;
  for (char c : device) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return absl::StrCat("{\"device\": \"", escaped, "\", \"results\": [\n",
                      absl::StrJoin(rows, ",\n"), "\n]}\n");
}

std::string Csv(const std::vector<Result>& results) {
  std::string out =
      "strategy,train,layers,hidden,batch,steps,setup_h2d_bytes,h2d_bytes,h2d_count,d2h_bytes,d2h_"
      "count,"
      "trace_h2d_bytes,"
      "device_alloc_bytes,device_peak_bytes,kernels,graph_compiles,wall_ms,max_abs_diff\n";
  for (const Result& r : results) {
    absl::StrAppend(
        &out,
        absl::StrFormat("%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%.3f,%.6g\n", r.strategy,
                        r.model.train ? 1 : 0, r.model.layers, r.model.hidden, r.model.batch,
                        r.model.steps, r.setup_h2d_bytes, r.h2d_bytes, r.h2d_count, r.d2h_bytes,
                        r.d2h_count, r.trace_h2d_bytes, r.device_alloc_bytes, r.device_peak_bytes,
                        r.kernels, r.graph_compiles, r.wall_ms, r.max_abs_diff));
  }
  return out;
}

Chart BytesChart(const std::vector<Result>& results) {
  Chart chart;
  chart.title = "Host -> device bytes per step vs model size";
  chart.x_label = "model weights + biases (bytes)";
  chart.y_label = "host -> device bytes per step";
  for (const std::string& strategy : TransferStrategies()) {
    Series s;
    s.name = strategy;
    for (const Result& r : results) {
      if (r.strategy != strategy) continue;
      const Model& m = r.model;
      s.x.push_back(static_cast<double>(m.layers * (m.hidden * m.hidden + m.hidden) * 4));
      s.y.push_back(static_cast<double>(r.h2d_bytes) / static_cast<double>(m.steps));
    }
    chart.series.push_back(std::move(s));
  }
  return chart;
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
  if (!file) std::fprintf(stderr, "lazycl-bench: cannot write %s\n", path.c_str());
  return static_cast<bool>(file);
}

}  // namespace

std::unique_ptr<Workload> MakeTanhWorkload(const Model& model) {
  return std::make_unique<TanhWorkload>(model);
}

const std::vector<std::string>& TransferStrategies() {
  static const auto* strategies =
      new std::vector<std::string>{"for_loop", "scan_materialized", "scan_placeholder"};
  return *strategies;
}

std::vector<Result> RunTransfer(const Model& model) {
  std::vector<Result> results;
  std::vector<std::vector<float>> reference;
  for (const std::string& strategy : TransferStrategies()) {
    const bool first = results.empty();
    results.push_back(
        Run(strategy, model, first ? nullptr : &reference, first ? &reference : nullptr));
  }
  return results;
}

std::vector<Model> SweepModels(const Model& base) {
  // One family growing in width and depth together, so that each strategy is one line.
  std::vector<Model> models;
  for (auto [l, d] : {std::pair<int64_t, int64_t>{4, 128}, {8, 256}, {16, 512}, {32, 1024}}) {
    Model m = base;
    m.layers = l;
    m.hidden = d;
    models.push_back(m);
  }
  return models;
}

int Transfer(const std::vector<std::string>& argv) {
  Args args(argv, {"sweep", "train"},
            {"model", "layers", "hidden", "batch", "steps", "seq", "json", "csv", "svg"});
  const std::string arch = args.option("model").value_or("tanh");
  // The llama model's defaults are smaller: each of its layers is ~12 D x D matrices.
  const Model defaults = arch == "llama" ? Model{4, 128, 4, 10} : Model{};
  Model base{args.positive("layers", defaults.layers), args.positive("hidden", defaults.hidden),
             args.positive("batch", defaults.batch), args.positive("steps", defaults.steps),
             args.flag("train")};
  base.arch = arch;
  base.seq = args.positive("seq", defaults.seq);
  std::string error = args.error();
  if (error.empty() && arch != "tanh" && arch != "llama") {
    error = absl::StrCat("--model must be tanh or llama, got '", arch, "'");
  }
  if (!error.empty()) {
    std::fprintf(stderr,
                 "lazycl-bench transfer: %s\nusage: lazycl-bench transfer [--layers L] [--hidden "
                 "D] [--batch B] "
                 "[--steps S] [--sweep] [--train] [--model tanh|llama] [--seq T] [--json FILE] "
                 "[--csv FILE] [--svg FILE]\n",
                 error.c_str());
    return 2;
  }
  const std::vector<Model> models =
      args.flag("sweep") ? SweepModels(base) : std::vector<Model>{base};
  try {
    const backend::DeviceInfo& info = runtime::OpenClDevice(0).info();
    const std::string device =
        absl::StrCat(info.device_name, " (", info.platform_name, ", ", info.driver_version, ")");
    std::printf("lazycl-bench transfer on %s\n", device.c_str());
    std::vector<Result> results;
    for (const Model& m : models) {
      std::vector<Result> some = RunTransfer(m);
      results.insert(results.end(), some.begin(), some.end());
    }
    PrintTable(results);
    if (arch == "llama") PrintLlama405B();
    bool ok = true;
    if (auto path = args.option("json")) ok = WriteFile(*path, Json(device, results)) && ok;
    if (auto path = args.option("csv")) ok = WriteFile(*path, Csv(results)) && ok;
    if (auto path = args.option("svg")) ok = WriteFile(*path, RenderSvg(BytesChart(results))) && ok;
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "lazycl-bench transfer: %s\n", e.what());
    return 1;
  }
}

}  // namespace lazycl::bench
