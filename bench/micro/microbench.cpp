// lazycl-microbench: Google Benchmark micro-benchmarks of the host-side overheads users feel
// (issue "Performance"). Each benchmark checks the counters that prove it measured what its name
// says (no kernel ran while building a graph, a replay hit the graph cache, a load came from the
// disk cache, ...) and fails with SkipWithError otherwise; main() then exits non-zero.
//
// Every benchmark uses wall-clock time (UseRealTime), also for its rates: most of them wait for
// the device, whose worker threads the process CPU time of the calling thread does not see.
// Counters: `per_op` and `per_kernel` are seconds per IR op / per kernel (Google Benchmark prints
// them with an SI prefix: 85.2n = 85.2 ns, 3.1u = 3.1 us); bytes_per_second for transfers.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backend/device.h"
#include "frontend/materialize.h"
#include "frontend/tensor_impl.h"
#include "kernels/lower.h"
#include "lazycl/lazycl.h"
#include "runtime/devices.h"
#include "runtime/executor.h"

namespace lazycl::microbench {
namespace {

bool g_failed = false;  // any benchmark failed: main() exits 1

void Fail(benchmark::State& state, const std::string& message) {
  g_failed = true;
  state.SkipWithError(message.c_str());
}

// Throws lazycl::Error, which every benchmark turns into SkipWithError.
void Check(const absl::Status& s) {
  if (!s.ok()) throw Error(std::string(s.message()));
}

// Snapshot of lazycl's counters around a timed loop.
class CounterDelta {
 public:
  explicit CounterDelta(std::string name) : name_(std::move(name)) {
    start_ = metrics::counter(name_);
  }
  int64_t get() const { return metrics::counter(name_) - start_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  int64_t start_ = 0;
};

// Empty when `delta` moved by `expected`; otherwise what went wrong.
std::string Expect(const CounterDelta& delta, int64_t expected) {
  if (delta.get() == expected) return "";
  return absl::StrCat(delta.name(), " moved by ", delta.get(), " in the timed loop, expected ",
                      expected);
}

// Seconds per `per_iteration` items (Google Benchmark divides by time, then inverts).
benchmark::Counter PerItem(double per_iteration) {
  return benchmark::Counter(
      per_iteration, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

Tensor DeviceTensor(std::vector<int64_t> shape, uint64_t seed) {
  Tensor t = randn(std::move(shape), seed, DType::f32, Device::opencl());
  sync({t});
  return t;
}

// A chain of `n` elementwise binary ops on computed device tensors, one IR node each.
Tensor Chain(const Tensor& a, const Tensor& b, int64_t n) {
  Tensor t = a;
  for (int64_t i = 0; i < n; ++i) t = (i % 2 == 0) ? t * b : t + b;
  return t;
}

kernels::Target TargetOfDevice() {  // as frontend/executor.cpp's TargetOf
  const backend::DeviceInfo& info = runtime::OpenClDevice(0).info();
  const base::Settings& settings = base::CurrentSettings();
  kernels::Target target;
  target.cpu =
      settings.codegen == base::CodegenStrategy::kCpu ||
      (settings.codegen == base::CodegenStrategy::kAuto && info.type != base::DeviceType::kGpu);
  if (info.max_param_bytes > 0) target.max_param_bytes = info.max_param_bytes;
  return target;
}

// The generated kernel of a 64-op elementwise chain: a realistic program for the cache lookups.
const kernels::KernelSpec& ChainKernel() {
  static const kernels::KernelSpec* spec = [] {
    Tensor a = DeviceTensor({4096}, 1), b = DeviceTensor({4096}, 2);
    Tensor t = Chain(a, b, 64);
    runtime::BuiltGraph built = runtime::BuildGraph({t.impl()->node.get()}, false);
    absl::StatusOr<kernels::Plan> plan = kernels::Lower(built.graph, TargetOfDevice());
    Check(plan.status());
    return new kernels::KernelSpec(plan->kernels.at(0));
  }();
  return *spec;
}

// ---- Graph building ------------------------------------------------------------------------

// Making `n` lazy elementwise ops (t = t * b, t = t + b, ...) on computed device tensors: shape
// and dtype checks, IR node construction and the structural hash. Nothing may run. Short chains
// are built several times per iteration (256 ops at least), so that pausing the timer to free
// them costs little.
void BM_GraphBuild(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int64_t chains = (256 + n - 1) / n;
  try {
    Tensor a = DeviceTensor({1024}, 1), b = DeviceTensor({1024}, 2);
    if (Tensor t = Chain(a, b, n); t.impl()->node->pending != n) {
      return Fail(state, absl::StrCat("a chain of ", n, " ops made ", t.impl()->node->pending,
                                      " IR nodes"));
    }
    std::vector<Tensor> built;
    built.reserve(static_cast<size_t>(chains));
    CounterDelta launches("KernelLaunches"), compiles("GraphCompiles");
    for (auto _ : state) {
      for (int64_t c = 0; c < chains; ++c) built.push_back(Chain(a, b, n));
      benchmark::DoNotOptimize(built.back().impl()->node->hash);
      state.PauseTiming();
      built.clear();
      state.ResumeTiming();
    }
    for (const CounterDelta* d : {&launches, &compiles}) {
      if (std::string e = Expect(*d, 0); !e.empty()) return Fail(state, e);
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n * chains);
    state.counters["per_op"] = PerItem(static_cast<double>(n * chains));
  } catch (const Error& e) {
    Fail(state, e.what());
  }
}
BENCHMARK(BM_GraphBuild)->UseRealTime()->Arg(16)->Arg(256);

// ---- Replay of a cached graph --------------------------------------------------------------

// `k` independent sums of 64-element device tensors: one kernel each.
std::vector<Tensor> Sums(const std::vector<Tensor>& xs) {
  std::vector<Tensor> outs;
  outs.reserve(xs.size());
  for (const Tensor& x : xs) outs.push_back(sum(x));
  return outs;
}

std::vector<Tensor> SmallInputs(int64_t k) {
  std::vector<Tensor> xs;
  for (int64_t i = 0; i < k; ++i) xs.push_back(DeviceTensor({64}, 100 + static_cast<uint64_t>(i)));
  return xs;
}

// Compiles the graph of `Sums(xs)` and returns its kernel launches per sync.
int64_t WarmSums(const std::vector<Tensor>& xs) {
  sync(Sums(xs));
  CounterDelta launches("KernelLaunches");
  sync(Sums(xs));
  return launches.get();
}

// The counters a replay loop must move: one graph-cache hit per iteration, no compiles or
// builds, `kernels` launches per iteration.
struct ReplayCounters {
  CounterDelta hits{"GraphCacheHits"}, compiles{"GraphCompiles"}, builds{"ProgramBuilds"},
      launches{"KernelLaunches"};
};

// Fails the benchmark unless the replay loop moved the counters as a cached replay must;
// otherwise sets the per-kernel figures.
void ReplayChecked(benchmark::State& state, const ReplayCounters& c, int64_t kernels) {
  const int64_t it = static_cast<int64_t>(state.iterations());
  for (auto [d, want] : {std::pair{&c.hits, it},
                         {&c.compiles, int64_t{0}},
                         {&c.builds, int64_t{0}},
                         {&c.launches, kernels * it}}) {
    if (std::string e = Expect(*d, want); !e.empty()) return Fail(state, e);
  }
  state.counters["kernels"] = static_cast<double>(kernels);
  state.counters["per_kernel"] = PerItem(static_cast<double>(kernels));
}

// What a training step of tiny ops costs on the host once its graph is compiled: build the same
// `k`-kernel graph (k sums) and sync it, which finds the plan in the graph cache, enqueues the
// kernels and waits for them. Freeing the results is outside the timing.
void BM_ReplayBuildAndSync(benchmark::State& state) {
  const int64_t k = state.range(0);
  try {
    const std::vector<Tensor> xs = SmallInputs(k);
    const int64_t kernels = WarmSums(xs);
    const ReplayCounters replay;
    for (auto _ : state) {
      std::vector<Tensor> outs = Sums(xs);
      sync(outs);
      state.PauseTiming();
      outs.clear();
      state.ResumeTiming();
    }
    ReplayChecked(state, replay, kernels);
  } catch (const Error& e) {
    Fail(state, e.what());
  }
}
BENCHMARK(BM_ReplayBuildAndSync)->UseRealTime()->Arg(1)->Arg(200)->Unit(benchmark::kMicrosecond);

// The host overhead of replaying a cached `k`-kernel graph, as lazycl-bench ops'
// replay_overhead_us_per_kernel measures it: only frontend::Materialize without waiting (graph
// key, cache lookup, result buffers, argument setting, enqueue). Building the graph and waiting
// for the device are outside the timing.
void BM_ReplayEnqueue(benchmark::State& state) {
  const int64_t k = state.range(0);
  try {
    const std::vector<Tensor> xs = SmallInputs(k);
    const int64_t kernels = WarmSums(xs);
    backend::Device& device = runtime::OpenClDevice(0);
    const ReplayCounters replay;
    for (auto _ : state) {
      state.PauseTiming();
      std::vector<Tensor> outs = Sums(xs);
      std::vector<TensorImpl*> impls;
      for (const Tensor& o : outs) impls.push_back(o.impl().get());
      state.ResumeTiming();
      Check(frontend::Materialize(impls, /*wait=*/false));
      state.PauseTiming();
      Check(device.Finish());
      outs.clear();
      state.ResumeTiming();
    }
    ReplayChecked(state, replay, kernels);
  } catch (const Error& e) {
    Fail(state, e.what());
  }
}
BENCHMARK(BM_ReplayEnqueue)->UseRealTime()->Arg(1)->Arg(200)->Unit(benchmark::kMicrosecond);

// The argument path for the user's scalars: `k` sums of `x * lr + step`, replayed with a new
// `lr` and `step` every iteration (a learning-rate schedule, a step count). They are kernel
// arguments (IR Scalar leaves), so every iteration is a graph-cache hit that builds nothing; a
// scalar baked into the source would compile each iteration, and the benchmark fails then.
void BM_ReplayChangingScalars(benchmark::State& state) {
  const int64_t k = state.range(0);
  try {
    const std::vector<Tensor> xs = SmallInputs(k);
    auto step = [&](double i) {
      std::vector<Tensor> outs;
      for (const Tensor& x : xs) outs.push_back(sum(x * (0.01 / (1.0 + i)) + i));
      return outs;
    };
    sync(step(0));
    CounterDelta launches("KernelLaunches");
    sync(step(1));
    const int64_t kernels = launches.get();
    const ReplayCounters replay;
    double i = 2;
    for (auto _ : state) {
      std::vector<Tensor> outs = step(i);
      sync(outs);
      state.PauseTiming();
      i += 1;
      outs.clear();
      state.ResumeTiming();
    }
    ReplayChecked(state, replay, kernels);
  } catch (const Error& e) {
    Fail(state, e.what());
  }
}
BENCHMARK(BM_ReplayChangingScalars)->UseRealTime()->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);

// ---- Lowering + codegen --------------------------------------------------------------------

// kernels::Lower alone (partitioning into kernels and generating OpenCL C) on a prebuilt
// kernels::Graph; no graph cache, no OpenCL. `Chain`: one fused kernel of n elementwise ops.
void BM_LowerChain(benchmark::State& state) {
  const int64_t n = state.range(0);
  try {
    Tensor a = DeviceTensor({4096}, 1), b = DeviceTensor({4096}, 2);
    Tensor t = Chain(a, b, n);
    const runtime::BuiltGraph built = runtime::BuildGraph({t.impl()->node.get()}, false);
    const kernels::Target target = TargetOfDevice();
    size_t kernels = 0, source_bytes = 0;
    for (auto _ : state) {
      absl::StatusOr<kernels::Plan> plan = kernels::Lower(built.graph, target);
      Check(plan.status());
      kernels = plan->kernels.size();
      source_bytes = plan->kernels.empty() ? 0 : plan->kernels[0].source.size();
      benchmark::DoNotOptimize(plan);
    }
    state.counters["nodes"] = static_cast<double>(built.graph.nodes.size());
    state.counters["kernels"] = static_cast<double>(kernels);
    state.counters["source_bytes"] = static_cast<double>(source_bytes);
  } catch (const Error& e) {
    Fail(state, e.what());
  }
}
BENCHMARK(BM_LowerChain)->UseRealTime()->Arg(8)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond);

// kernels::Lower on a graph of k independent sums (k kernels, k parameters).
void BM_LowerSums(benchmark::State& state) {
  const int64_t k = state.range(0);
  try {
    const std::vector<Tensor> xs = SmallInputs(k);
    const std::vector<Tensor> outs = Sums(xs);
    std::vector<const ir::Node*> nodes;
    for (const Tensor& o : outs) nodes.push_back(o.impl()->node.get());
    const runtime::BuiltGraph built = runtime::BuildGraph(nodes, false);
    const kernels::Target target = TargetOfDevice();
    size_t kernels = 0;
    for (auto _ : state) {
      absl::StatusOr<kernels::Plan> plan = kernels::Lower(built.graph, target);
      Check(plan.status());
      kernels = plan->kernels.size();
      benchmark::DoNotOptimize(plan);
    }
    state.counters["nodes"] = static_cast<double>(built.graph.nodes.size());
    state.counters["kernels"] = static_cast<double>(kernels);
    state.counters["per_kernel"] = PerItem(static_cast<double>(kernels));
  } catch (const Error& e) {
    Fail(state, e.what());
  }
}
BENCHMARK(BM_LowerSums)->UseRealTime()->Arg(16)->Arg(200)->Unit(benchmark::kMicrosecond);

// ---- Program cache -------------------------------------------------------------------------

// backend::Device::GetKernel of a program already in the in-memory cache (the generated kernel
// of a 64-op chain): the key string, its hash and two map lookups. Nothing may be built/loaded.
void BM_ProgramCacheHit(benchmark::State& state) {
  try {
    const kernels::KernelSpec& spec = ChainKernel();
    backend::Device& device = runtime::OpenClDevice(0);
    Check(device.GetKernel(spec.source, spec.options, spec.launches.front().name).status());
    CounterDelta builds("ProgramBuilds"), loads("ProgramDiskCacheHits");
    for (auto _ : state) {
      absl::StatusOr<backend::KernelRef> kernel =
          device.GetKernel(spec.source, spec.options, spec.launches.front().name);
      Check(kernel.status());
      benchmark::DoNotOptimize(*kernel);
    }
    for (const CounterDelta* d : {&builds, &loads}) {
      if (std::string e = Expect(*d, 0); !e.empty()) return Fail(state, e);
    }
    state.counters["source_bytes"] = static_cast<double>(spec.source.size());
  } catch (const Error& e) {
    Fail(state, e.what());
  }
}
BENCHMARK(BM_ProgramCacheHit)->UseRealTime();

// GetKernel of a program that is in the disk cache (LAZYCL_KERNEL_CACHE_DIR) but not in memory:
// read the file, check it, clCreateProgramWithBinary + clBuildProgram, clCreateKernel. Each
// iteration uses a freshly opened backend::Device (its own context and empty memory cache);
// opening and closing it are outside the timing.
void BM_ProgramDiskCacheLoad(benchmark::State& state) {
  try {
    const base::Settings& settings = base::CurrentSettings();
    if (settings.kernel_cache_dir.empty()) {
      return Fail(state, "the disk cache is off (LAZYCL_KERNEL_CACHE_DIR=off)");
    }
    const kernels::KernelSpec& spec = ChainKernel();
    // Puts the program on disk (built and saved, or already there).
    Check(runtime::OpenClDevice(0)
              .GetKernel(spec.source, spec.options, spec.launches.front().name)
              .status());
    CounterDelta builds("ProgramBuilds"), loads("ProgramDiskCacheHits");
    for (auto _ : state) {
      state.PauseTiming();
      absl::StatusOr<std::unique_ptr<backend::Device>> fresh = backend::Device::Open(settings, 0);
      Check(fresh.status());
      state.ResumeTiming();
      absl::StatusOr<backend::KernelRef> kernel =
          (*fresh)->GetKernel(spec.source, spec.options, spec.launches.front().name);
      Check(kernel.status());
      benchmark::DoNotOptimize(*kernel);
      state.PauseTiming();
      fresh->reset();
      state.ResumeTiming();
    }
    if (std::string e = Expect(builds, 0); !e.empty()) return Fail(state, e);
    if (std::string e = Expect(loads, static_cast<int64_t>(state.iterations())); !e.empty())
      return Fail(state, e);
    state.counters["source_bytes"] = static_cast<double>(spec.source.size());
  } catch (const Error& e) {
    Fail(state, e.what());
  }
}
BENCHMARK(BM_ProgramDiskCacheLoad)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- Launch latency ------------------------------------------------------------------------

constexpr const char* kTinySource = R"CL(
__kernel void tiny(__global float* out) {
  const size_t i = get_global_id(0);
  out[i] = (float)i;
}
)CL";

struct Tiny {
  backend::Device* device = nullptr;
  backend::KernelRef kernel;
  backend::BufferId buffer = 0;
  size_t global[1] = {64};
  size_t local[1] = {64};

  Tiny() {
    device = &runtime::OpenClDevice(0);
    absl::StatusOr<backend::KernelRef> k = device->GetKernel(kTinySource, "", "tiny");
    Check(k.status());
    kernel = *k;
    buffer = device->buffers().Declare(sizeof(float) * global[0], "microbench tiny");
    Launch();  // first launch: PoCL's per-local-size compile step
    Check(device->Finish());
  }
  ~Tiny() { device->buffers().Release(buffer); }
  void Launch() {
    const backend::KernelArg args[] = {backend::KernelArg::Write(buffer)};
    Check(device->Launch(kernel, args, global, local));
  }
};

// One launch of a 64-work-item kernel and clFinish: the round trip (worker wake-up included).
void BM_LaunchRoundTrip(benchmark::State& state) {
  try {
    Tiny tiny;
    CounterDelta launches("KernelLaunches");
    for (auto _ : state) {
      tiny.Launch();
      Check(tiny.device->Finish());
    }
    if (std::string e = Expect(launches, static_cast<int64_t>(state.iterations())); !e.empty())
      return Fail(state, e);
  } catch (const Error& e) {
    Fail(state, e.what());
  }
}
BENCHMARK(BM_LaunchRoundTrip)->UseRealTime()->Unit(benchmark::kMicrosecond);

// n launches of the same kernel back to back and one clFinish: per_kernel is the queued cost.
void BM_LaunchQueued(benchmark::State& state) {
  const int64_t n = state.range(0);
  try {
    Tiny tiny;
    CounterDelta launches("KernelLaunches");
    for (auto _ : state) {
      for (int64_t i = 0; i < n; ++i) tiny.Launch();
      Check(tiny.device->Finish());
    }
    if (std::string e = Expect(launches, n * static_cast<int64_t>(state.iterations())); !e.empty())
      return Fail(state, e);
    state.counters["per_kernel"] = PerItem(static_cast<double>(n));
  } catch (const Error& e) {
    Fail(state, e.what());
  }
}
BENCHMARK(BM_LaunchQueued)->UseRealTime()->Arg(100)->Unit(benchmark::kMicrosecond);

// ---- Transfers -----------------------------------------------------------------------------

// BufferManager::Upload / Download of `bytes` into / from one device buffer that already has
// storage. A download is a blocking read; an upload of up to OpenClMemory::kStagedCopyInBytes
// returns while its write is still queued, so BM_Upload waits for the device after each one
// (Device::Finish: the bytes are there) and BM_UploadQueued times the caller's share alone,
// waiting every 64 uploads.
enum class Mode { kDownload, kUpload, kUploadQueued };
void Transfer(benchmark::State& state, Mode mode) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  try {
    backend::Device& device = runtime::OpenClDevice(0);
    backend::BufferManager& buffers = device.buffers();
    std::vector<char> host(bytes, 1);
    const backend::BufferId id = buffers.Declare(bytes, "microbench transfer");
    Check(buffers.Upload(id, host.data(), 0, bytes));  // allocates
    Check(device.Finish());
    CounterDelta moved(mode == Mode::kDownload ? "TransferFromDeviceBytes"
                                               : "TransferToDeviceBytes");
    int64_t n = 0;
    for (auto _ : state) {
      if (mode == Mode::kDownload) {
        Check(buffers.Download(id, host.data(), 0, bytes));
      } else {
        Check(buffers.Upload(id, host.data(), 0, bytes));
        if (mode == Mode::kUpload || ++n % 64 == 0) Check(device.Finish());
      }
      benchmark::ClobberMemory();
    }
    Check(device.Finish());
    buffers.Release(id);
    const int64_t total = static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes);
    if (std::string e = Expect(moved, total); !e.empty()) return Fail(state, e);
    state.SetBytesProcessed(total);
  } catch (const Error& e) {
    Fail(state, e.what());
  }
}
void BM_Upload(benchmark::State& state) { Transfer(state, Mode::kUpload); }
void BM_UploadQueued(benchmark::State& state) { Transfer(state, Mode::kUploadQueued); }
void BM_Download(benchmark::State& state) { Transfer(state, Mode::kDownload); }
BENCHMARK(BM_UploadQueued)->UseRealTime()->Arg(4 << 10)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Upload)->UseRealTime()->Arg(4 << 10)->Arg(1 << 20)->Arg(64 << 20)->Unit(
    benchmark::kMicrosecond);
BENCHMARK(BM_Download)
    ->UseRealTime()
    ->Arg(4 << 10)
    ->Arg(1 << 20)
    ->Arg(64 << 20)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace lazycl::microbench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  const size_t ran = benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (ran == 0) {
    std::fprintf(stderr, "lazycl-microbench: no benchmark matched --benchmark_filter\n");
    return 1;
  }
  return lazycl::microbench::g_failed ? 1 : 0;
}
