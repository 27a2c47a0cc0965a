#include "runtime/matmul_tuner.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/check.h"
#include "base/settings.h"
#include "ir/ir.h"
#include "kernels/codegen.h"
#include "kernels/templates.h"

namespace lazycl::runtime {

using kernels::MatmulBlocking;

namespace {

constexpr int64_t kDefaultL1 = 32 * 1024;

// A cache size from /sys ("48K", "1024K", "32M"); 0 when absent or malformed.
int64_t SysCacheBytes(int index) {
  std::ifstream in(absl::StrCat("/sys/devices/system/cpu/cpu0/cache/index", index, "/size"));
  int64_t value = 0;
  char unit = 0;
  if (!(in >> value)) return 0;
  in >> unit;
  if (unit == 'K') return value * 1024;
  if (unit == 'M') return value * 1024 * 1024;
  return value;
}

// The cache level and type of /sys's index `index`.
bool SysCacheIs(int index, int level, const char* type) {
  std::ifstream lv(absl::StrCat("/sys/devices/system/cpu/cpu0/cache/index", index, "/level"));
  std::ifstream ty(absl::StrCat("/sys/devices/system/cpu/cpu0/cache/index", index, "/type"));
  int l = 0;
  std::string t;
  return (lv >> l) && (ty >> t) && l == level && (t == type || t == "Unified");
}

// "|cpu <vendor> family F model M stepping S": a CPU device's name (PoCL's names its LLVM
// target and the model name, which a virtual machine may shorten to "AMD EPYC") does not tell
// two CPU generations apart, and a blocking tuned on one need not suit the other (the CI VM's
// one device name ran 1024^3 at 440 GFLOP/s one day and 180 two days later, on family 25
// model 17, with JAX's falling alike); "" without /proc/cpuinfo.
std::string CpuIdentity() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, vendor, family, model, stepping;
  while (std::getline(in, line) && !line.empty()) {  // the first processor's block
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.pop_back();
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (name == "vendor_id") vendor = value;
    if (name == "cpu family") family = value;
    if (name == "model") model = value;
    if (name == "stepping") stepping = value;
  }
  if (vendor.empty() && family.empty() && model.empty()) return "";
  return absl::StrCat("|cpu ", vendor, " family ", family, " model ", model, " stepping ",
                      stepping);
}

int VectorWidth(const SimdInfo& s) {
  const int w = s.native_float_width > 0 ? s.native_float_width : s.preferred_float_width;
  return w >= 16 ? 16 : w >= 8 ? 8 : 4;
}

// The most rows of one product's register block, at most 16; 0 when fewer than 2 fit.
int MaxRows(int vw, int nr) {
  const int mr = std::min(16, kernels::RowsInRegisters(vw, nr, 1));
  return mr >= 2 ? mr : 0;
}

int64_t PowerOfTwoAtMost(int64_t x) {
  int64_t p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}

// KB: the largest power of two whose panel (kb * nr floats) fills at most L1, in [64, 1024] and
// in local memory. A panel that fills L1 is streamed from L2 by every row block (8 bytes a
// cycle at 8 x 32), which costs less than twice the passes over C and twice the per-block setup
// of a panel that fits with room for A's rows: at 3/4 of L1 (kb 128 at 32 KiB and NR 32) the
// MLP training step of `lazycl-bench models` took 77.0 ms against 73.0 at kb 256 (medians of
// 4 rounds alternating, the step faster in each round and each of its three products in the
// medians; 2-core Zen 4 EPYC), and 76.8 against 70.8 ms with AVX2 code (kb 256 against 512 at
// NR 16, 6 rows; 2 of 4 rounds noisy).
int PanelDepth(const SimdInfo& s, int nr) {
  const int64_t l1 = s.l1_bytes > 0 ? s.l1_bytes : kDefaultL1;
  int64_t kb = std::clamp<int64_t>(PowerOfTwoAtMost(l1 / (nr * 4)), 64, 1024);
  while (s.local_mem_bytes > 0 && kb > 16 && kb * nr * 4 > s.local_mem_bytes) kb /= 2;
  return static_cast<int>(kb);
}

MatmulBlocking Make(int vw, int mr, int nr, int kb) {
  MatmulBlocking b;
  b.vw = vw;
  b.mr = mr;
  b.nr = nr;
  b.kb = kb;
  b.rows = 128 / mr * mr;
  return b;
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// Deterministic values in [-1, 1).
std::vector<float> Values(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = static_cast<float>(static_cast<double>(seed >> 40) / double(1 << 23) - 1.0);
  }
  return v;
}

// The median (of an even count, the mean of the middle two); v must not be empty.
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// Runs one candidate's kernel on [m, k] @ [k, n] through the backend; returns the result in
// `out` and the median milliseconds of `repeat` launches after one warm-up. With `ta` (`tb`), A
// (B) is the transposed view of a stored [k, m] ([n, k]), read in place.
class Runner {
 public:
  Runner(backend::Device& device, int64_t m, int64_t n, int64_t k, int64_t batches = 1,
         bool ta = false, bool tb = false)
      : device_(device), m_(m), n_(n), k_(k), batches_(batches), ta_(ta), tb_(tb) {
    a_ = Values(static_cast<size_t>(batches * m * k), 1);
    b_ = Values(static_cast<size_t>(batches * k * n), 2);
    backend::BufferManager& buffers = device.buffers();
    ids_[0] = buffers.Declare(a_.size() * 4, "matmul tune A");
    ids_[1] = buffers.Declare(b_.size() * 4, "matmul tune B");
    ids_[2] = buffers.Declare(static_cast<size_t>(batches * m * n) * 4, "matmul tune C");
  }
  ~Runner() {
    for (backend::BufferId id : ids_) device_.buffers().Release(id);
  }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  absl::StatusOr<double> Run(const MatmulBlocking& blocking, int repeat, std::vector<float>* out) {
    if (!uploaded_) {
      if (absl::Status s = device_.buffers().Upload(ids_[0], a_.data(), 0, a_.size() * 4); !s.ok())
        return s;
      if (absl::Status s = device_.buffers().Upload(ids_[1], b_.data(), 0, b_.size() * 4); !s.ok())
        return s;
      uploaded_ = true;
    }
    ir::Shape as = {m_, k_}, bs = {k_, n_};
    if (batches_ > 1) {
      as.insert(as.begin(), batches_);
      bs.insert(bs.begin(), batches_);
    }
    absl::StatusOr<ir::NodePtr> root =
        ir::MakeMatmul(ir::MakeConstant(0, DType::f32, as), ir::MakeConstant(0, DType::f32, bs));
    if (!root.ok()) return root.status();
    kernels::Target target;
    target.cpu = true;
    target.matmul = blocking;
    target.compute_units = device_.info().compute_units;
    kernels::BufferRef a{kernels::BufferRef::Kind::kParam, 0},
        b{kernels::BufferRef::Kind::kParam, 1};
    const kernels::KernelSpec spec = kernels::EmitMatmul(
        **root, {kernels::BufferRef::Kind::kOutput, 0}, {a, 0, m_ * k_, ta_ ? 1 : k_, ta_ ? m_ : 1},
        {b, 0, k_ * n_, tb_ ? 1 : n_, tb_ ? k_ : 1}, target);
    std::vector<backend::KernelArg> args;
    std::vector<int64_t> packed;  // the kPack arguments' fields (EmitMatmul makes one)
    for (const kernels::KernelArgSpec& s : spec.args) {
      if (s.kind == kernels::KernelArgSpec::Kind::kBuffer) {
        const backend::BufferId id =
            s.buffer.kind == kernels::BufferRef::Kind::kOutput ? ids_[2] : ids_[s.buffer.index];
        args.push_back(s.written ? backend::KernelArg::Write(id) : backend::KernelArg::Read(id));
      } else if (s.kind == kernels::KernelArgSpec::Kind::kPack) {
        LAZYCL_CHECK(packed.empty(), "the tuner's matmul has one packed argument");
        packed.reserve(s.fields.size());  // args[] points into it
        for (const kernels::KernelArgSpec& f : s.fields) packed.push_back(f.value);
        args.push_back(backend::KernelArg::Bytes(packed.data(), packed.size() * sizeof(int64_t)));
      } else {
        args.push_back(backend::KernelArg::Int64(s.value));
      }
    }
    const kernels::Launch& launch = spec.launches.at(0);
    absl::StatusOr<backend::KernelRef> kernel =
        device_.GetKernel(spec.source, spec.options, launch.name);
    if (!kernel.ok()) return kernel.status();
    std::vector<double> times;
    for (int i = 0; i <= repeat; ++i) {
      const auto start = std::chrono::steady_clock::now();
      if (absl::Status s = device_.Launch(kernel->get(), args, launch.global, launch.local);
          !s.ok())
        return s;
      if (absl::Status s = device_.Finish(); !s.ok()) return s;
      if (i > 0)
        times.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count());
    }
    if (out != nullptr) {
      out->resize(static_cast<size_t>(batches_ * m_ * n_));
      if (absl::Status s = device_.buffers().Download(ids_[2], out->data(), 0, out->size() * 4);
          !s.ok())
        return s;
    }
    return times.empty() ? 0.0 : Median(std::move(times));
  }

  // The largest error of `c` against a double-precision product, relative to the size of the
  // terms (sum |a| |b|).
  double Error(const std::vector<float>& c) const {
    double worst = 0;
    for (int64_t i = 0; i < m_; ++i) {
      for (int64_t j = 0; j < n_; ++j) {
        double sum = 0, mag = 0;
        for (int64_t p = 0; p < k_; ++p) {
          const double t =
              double(a_[ta_ ? p * m_ + i : i * k_ + p]) * double(b_[tb_ ? j * k_ + p : p * n_ + j]);
          sum += t;
          mag += std::fabs(t);
        }
        worst = std::max(worst, std::fabs(c[i * n_ + j] - sum) / (mag + 1e-30));
      }
    }
    return worst;
  }

 private:
  backend::Device& device_;
  int64_t m_, n_, k_, batches_;
  bool ta_, tb_;
  std::vector<float> a_, b_;
  backend::BufferId ids_[3] = {0, 0, 0};
  bool uploaded_ = false;
};

}  // namespace

SimdInfo SimdOf(const backend::DeviceInfo& info) {
  SimdInfo s;
  s.preferred_float_width = info.preferred_float_width;
  s.native_float_width = info.native_float_width;
  s.local_mem_bytes = info.local_mem_bytes;
  if (info.type == base::DeviceType::kCpu) {
    for (int i = 0; i < 8; ++i) {
      if (s.l1_bytes == 0 && SysCacheIs(i, 1, "Data")) s.l1_bytes = SysCacheBytes(i);
      if (s.l2_bytes == 0 && SysCacheIs(i, 2, "Unified")) s.l2_bytes = SysCacheBytes(i);
    }
  }
  if (s.l2_bytes == 0) s.l2_bytes = info.global_mem_cache_bytes;
  return s;
}

MatmulBlocking DefaultBlocking(const SimdInfo& simd) {
  const int vw = VectorWidth(simd);
  const int nr = std::clamp(2 * vw, 16, 64);
  return Make(vw, std::min(8, MaxRows(vw, nr)), nr, PanelDepth(simd, nr));
}

std::vector<MatmulBlocking> MatmulCandidates(const SimdInfo& simd) {
  const int vw = VectorWidth(simd);
  std::vector<MatmulBlocking> out = {DefaultBlocking(simd)};
  auto add = [&](const MatmulBlocking& b) {
    if (kernels::ValidBlocking(b) &&
        (simd.local_mem_bytes <= 0 || int64_t{b.kb} * b.nr * 4 <= simd.local_mem_bytes) &&
        std::find(out.begin(), out.end(), b) == out.end())
      out.push_back(b);
  };
  for (int nr : {16, 32, 64}) {
    if (nr < vw || nr / vw > 4) continue;
    const int most = MaxRows(vw, nr);
    if (most == 0) continue;
    const int kb = PanelDepth(simd, nr);
    std::vector<int> mrs;  // the most rows and the next of 8, 4: two of them
    for (int mr : {most, 8, 4}) {
      if (mr <= most && mrs.size() < 2 && std::find(mrs.begin(), mrs.end(), mr) == mrs.end())
        mrs.push_back(mr);
    }
    for (int mr : mrs) add(Make(vw, mr, nr, kb));
  }
  // Deeper panels (in L2), and fewer or more rows per work-item (a panel copy shared by more
  // rows), for the default. On a Zen 4 EPYC (2 cores), kb 2x with 256 rows was 3-9% faster
  // than the default from [256, 1024] x [1024, 1024] to 2048^3, timed alternating in one
  // process.
  MatmulBlocking deeper = out[0];
  deeper.kb *= 2;
  const bool deeper_fits =
      simd.l2_bytes <= 0 || int64_t{deeper.kb} * deeper.nr * 4 <= simd.l2_bytes / 4;
  if (deeper_fits) add(deeper);
  MatmulBlocking fewer = out[0];
  fewer.rows = 64 / fewer.mr * fewer.mr;
  add(fewer);
  MatmulBlocking more = out[0];
  more.rows = 256 / more.mr * more.mr;
  add(more);
  if (deeper_fits) {
    more.kb = deeper.kb;
    add(more);
  }
  return out;
}

std::vector<int> CandidateWidths(const SimdInfo& simd) {
  const int vw = VectorWidth(simd);
  if (vw > 4) return {vw, vw / 2};
  return {vw};
}

SimdInfo WithWidth(SimdInfo simd, int width) {
  simd.preferred_float_width = simd.native_float_width = width;
  return simd;
}

absl::StatusOr<TuneMode> TuneModeFromEnv() {
  const char* v = std::getenv("LAZYCL_MATMUL_TUNE");
  if (v == nullptr) return TuneMode::kAuto;
  const std::string s = v;
  if (s == "0") return TuneMode::kOff;
  if (s == "1") return TuneMode::kOn;
  if (s == "auto" || s.empty()) return TuneMode::kAuto;
  return absl::InvalidArgumentError(
      absl::StrCat("LAZYCL_MATMUL_TUNE='", s, "' is not valid: expected 0, 1 or auto"));
}

std::string BlockingString(const MatmulBlocking& b) {
  return absl::StrFormat("vw=%d mr=%d nr=%d kb=%d rows=%d", b.vw, b.mr, b.nr, b.kb, b.rows);
}

std::string TuneCacheKey(const backend::DeviceInfo& info) {
  return absl::StrCat(
      info.device_name, "|", info.driver_version, "|", LAZYCL_VERSION_STRING, "|template ",
      absl::Hex(Fnv1a(absl::StrCat(std::string(kernels::Template("prefetch.cl")),
                                   std::string(kernels::Template("matmul_cpu.cl"))))),
      info.type == base::DeviceType::kCpu ? CpuIdentity() : "");
}

std::string TuneCachePath(const backend::DeviceInfo& info, const std::string& dir) {
  if (dir.empty()) return "";
  return (std::filesystem::path(dir) /
          absl::StrCat("matmul-tune-", absl::Hex(Fnv1a(TuneCacheKey(info)), absl::kZeroPad16),
                       ".txt"))
      .string();
}

std::optional<MatmulBlocking> ReadTuneCache(const std::string& path, const std::string& key,
                                            const SimdInfo& simd) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string magic, key_line, blocking_line, extra;
  if (!std::getline(in, magic) || magic != "lazycl matmul tune v1") return std::nullopt;
  if (!std::getline(in, key_line) || key_line != "key: " + key) return std::nullopt;
  if (!std::getline(in, blocking_line) || !blocking_line.starts_with("blocking:"))
    return std::nullopt;
  if (std::getline(in, extra) && !extra.empty()) return std::nullopt;
  std::istringstream words(blocking_line.substr(9));
  MatmulBlocking b;
  std::string rest;
  if (!(words >> b.vw >> b.mr >> b.nr >> b.kb >> b.rows) || (words >> rest)) return std::nullopt;
  // Only a blocking that this device's candidates contain is trusted.
  for (int width : CandidateWidths(simd)) {
    const std::vector<MatmulBlocking> candidates = MatmulCandidates(WithWidth(simd, width));
    if (std::find(candidates.begin(), candidates.end(), b) != candidates.end()) return b;
  }
  return std::nullopt;
}

const CandidateResult* PickBlocking(const std::vector<CandidateResult>& results,
                                    const MatmulBlocking& incumbent, int width) {
  auto competes = [&](const CandidateResult& r) {
    return r.gflops > 0 && (width == 0 || r.blocking.vw == width);
  };
  const CandidateResult* held = nullptr;
  for (const CandidateResult& r : results) {
    if (competes(r) && r.blocking == incumbent) held = &r;
  }
  const CandidateResult* best = held;
  for (const CandidateResult& r : results) {
    if (!competes(r) || &r == held) continue;
    const double margin = best == held ? 1.05 : 1.0;
    if (best == nullptr || r.gflops > best->gflops * margin) best = &r;
  }
  return best;
}

std::vector<double> PairedScores(const std::vector<std::vector<double>>& scores, size_t reference) {
  const size_t n = scores.empty() ? 0 : scores[0].size();
  std::vector<double> out(n, 0);
  std::vector<double> reference_scores;
  for (const std::vector<double>& round : scores) {
    LAZYCL_CHECK(round.size() == n && reference < n, "PairedScores: ragged rounds");
    if (round[reference] > 0) reference_scores.push_back(round[reference]);
  }
  if (reference_scores.empty()) return out;
  const double reference_median = Median(reference_scores);
  for (size_t c = 0; c < n; ++c) {
    std::vector<double> ratios;
    bool failed = false;
    for (const std::vector<double>& round : scores) {
      if (round[reference] <= 0) continue;
      failed = failed || !(round[c] > 0);
      ratios.push_back(round[c] / round[reference]);
    }
    out[c] = failed ? 0 : reference_median * Median(ratios);
  }
  return out;
}

absl::StatusOr<TuneResult> TuneMatmul(backend::Device& device, const std::string& cache_dir,
                                      bool force, std::vector<MatmulBlocking> candidates) {
  const SimdInfo simd = SimdOf(device.info());
  TuneResult result;
  result.cache_path = TuneCachePath(device.info(), cache_dir);
  const std::string key = TuneCacheKey(device.info());
  if (!force && !result.cache_path.empty()) {
    if (std::optional<MatmulBlocking> b = ReadTuneCache(result.cache_path, key, simd)) {
      result.best = *b;
      result.from_cache = true;
      return result;
    }
  }
  // Without a list, the widths' defaults are timed first and the rest of the fastest width's
  // candidates after them.
  const bool probe_widths = candidates.empty();
  if (probe_widths) {
    for (int width : CandidateWidths(simd))
      candidates.push_back(DefaultBlocking(WithWidth(simd, width)));
  }
  // Each candidate must match a double-precision reference on a product whose sizes are no
  // multiple of any block and whose K spans several panels; then it is timed.
  Runner check(device, 67, 83, 1100);
  // Timed on shapes that models have: an MLP layer (batch 256) forward and its two backward
  // products (dX = dY W^T, dW = X^T dY: training runs two of them for each forward one), and an
  // attention product with narrow N; a candidate's score is the geometric mean of its GFLOP/s.
  // Without the backward products a 2 x 32 blocking, ahead on the attention product alone, could
  // win over a 6 x 16 one that ran A B^T at 1024^3 13-16% faster (AVX2 code).
  struct Timed {
    std::unique_ptr<Runner> runner;
    double flops;
  };
  struct Shape {
    int64_t m, n, k, batches;
    bool ta, tb;
  };
  std::vector<Timed> shapes;
  for (const Shape& s :
       {Shape{256, 1024, 1024, 1, false, false}, Shape{256, 1024, 1024, 1, false, true},
        Shape{1024, 1024, 256, 1, true, false}, Shape{64, 32, 64, 128, false, false}}) {
    shapes.push_back({std::make_unique<Runner>(device, s.m, s.n, s.k, s.batches, s.ta, s.tb),
                      2.0 * s.m * s.n * s.k * s.batches});
  }
  auto evaluate = [&](const MatmulBlocking& b) {
    CandidateResult r{b, 0, ""};
    std::vector<float> out;
    if (!kernels::ValidBlocking(b)) {
      r.error = "invalid blocking";
    } else if (absl::StatusOr<double> ms = check.Run(b, 0, &out); !ms.ok()) {
      r.error = std::string(ms.status().message());
    } else if (const double err = check.Error(out); !(err < 1e-5)) {
      r.error = absl::StrFormat("wrong result: relative error %.3g", err);
    }
    result.candidates.push_back(r);  // timed by paired_rounds below
  };
  for (const MatmulBlocking& b : candidates) evaluate(b);
  // Rounds side by side (PairedScores against `incumbent`, or the first that ran where it did
  // not): in each, every shape is timed for every candidate in turn, in reverse order every
  // other round. The best of three rounds each, timed one candidate after another, kept a
  // 2 x 32 blocking instead of the 6 x 16 default in 3 of the 11 first-use tunes one 2-core AVX2
  // VM's cache held (the candidates' scores 120-145 GFLOP/s, within each other's noise), with
  // which 1024^3 A B^T ran at 141 GFLOP/s against 159-164 (best of 8 batches, 2 rounds).
  auto paired_rounds = [&](int width_only, const MatmulBlocking& incumbent, int rounds) {
    std::vector<CandidateResult*> running;
    size_t reference = 0;
    for (CandidateResult& r : result.candidates) {
      if (!r.error.empty() || (width_only != 0 && r.blocking.vw != width_only)) continue;
      if (r.blocking == incumbent) reference = running.size();
      running.push_back(&r);
    }
    if (running.empty()) return;
    std::vector<std::vector<double>> scores(rounds, std::vector<double>(running.size(), 0));
    for (int round = 0; round < rounds; ++round) {
      std::vector<double> log_sum(running.size(), 0);
      std::vector<bool> failed(running.size(), false);
      for (Timed& t : shapes) {
        for (size_t j = 0; j < running.size(); ++j) {
          const size_t c = round % 2 == 0 ? j : running.size() - 1 - j;
          if (failed[c]) continue;
          absl::StatusOr<double> ms = t.runner->Run(running[c]->blocking, 2, nullptr);
          if (!ms.ok()) {
            failed[c] = true;
            running[c]->error = std::string(ms.status().message());
            continue;
          }
          log_sum[c] += std::log(t.flops / std::max(*ms, 1e-6) / 1e6);
        }
      }
      for (size_t c = 0; c < running.size(); ++c) {
        if (!failed[c])
          scores[round][c] = std::exp(log_sum[c] / static_cast<double>(shapes.size()));
      }
    }
    const std::vector<double> paired = PairedScores(scores, reference);
    for (size_t c = 0; c < running.size(); ++c) running[c]->gflops = paired[c];
  };
  int width = 0;  // when probing: the width whose candidates go on
  if (probe_widths) {
    // The width is chosen for good here, so its defaults get their extra rounds first: when
    // they were compared on one round each, a first-use tune on a noisy VM once kept a 2-row
    // blocking of the narrower width (a sampling step 25% slower than with the wider default).
    paired_rounds(0, candidates[0], 3);
    result.probe = result.candidates;
    const CandidateResult* fastest = PickBlocking(result.probe, candidates[0]);
    width = fastest != nullptr ? fastest->blocking.vw : result.candidates[0].blocking.vw;
    for (const MatmulBlocking& b : MatmulCandidates(WithWidth(simd, width))) {
      if (std::find(candidates.begin(), candidates.end(), b) == candidates.end()) evaluate(b);
    }
  }
  // Every candidate of that width (all of them when not probing), against the incumbent.
  const MatmulBlocking incumbent =
      probe_widths ? DefaultBlocking(WithWidth(simd, width)) : candidates[0];
  paired_rounds(width, incumbent, 5);
  // The chosen width's default is the incumbent: when it was the first candidate's, a narrower
  // width's candidates had only to beat each other, and a first-use tune under AVX2 code kept
  // a 2-row blocking 2% ahead of the 6-row default in its score, with which the MLP training
  // step took 76-82 ms against 69-71 (2 rounds alternating, 2-core Zen 4 EPYC).
  // Only that width's candidates compete: the other widths' defaults hold scores from the
  // probe's rounds, against another reference, and one of them once won here over the chosen
  // width's (vw=8 at 112 GFLOP/s in the probe against vw=16 at 96 in the later rounds, a noisy
  // 2-core VM in CI).
  const CandidateResult* best = PickBlocking(result.candidates, incumbent, width);
  if (best != nullptr) result.best = best->blocking;
  if (best == nullptr) {
    std::string why;
    for (const CandidateResult& r : result.candidates)
      absl::StrAppend(&why, "\n  ", BlockingString(r.blocking), ": ", r.error);
    return absl::InternalError(
        absl::StrCat("matmul tuner: no candidate blocking matched the reference on ",
                     device.info().device_name, ":", why));
  }
  if (!result.cache_path.empty()) {
    // Written whole under a temporary name, then renamed: a reader never sees half a file.
    std::error_code ec;
    std::filesystem::create_directories(cache_dir, ec);
    const std::string tmp = absl::StrCat(result.cache_path, ".tmp", getpid());
    {
      std::ofstream file(tmp);
      const MatmulBlocking& b = result.best;
      file << "lazycl matmul tune v1\nkey: " << key << "\nblocking: " << b.vw << " " << b.mr << " "
           << b.nr << " " << b.kb << " " << b.rows << "\n";
    }
    std::filesystem::rename(tmp, result.cache_path, ec);
    if (ec)
      std::filesystem::remove(tmp, ec);  // an unwritable cache is not an error: re-tuned next time
  }
  return result;
}

namespace {

std::mutex& ChosenMutex() {
  static auto* mu = new std::mutex();
  return *mu;
}

std::map<const backend::Device*, MatmulBlocking>& Chosen() {
  static auto* chosen = new std::map<const backend::Device*, MatmulBlocking>();
  return *chosen;
}

std::atomic<uint64_t> generation{0};

}  // namespace

void OverrideMatmulBlocking(backend::Device& device, const MatmulBlocking& blocking) {
  std::lock_guard<std::mutex> lock(ChosenMutex());
  Chosen()[&device] = blocking;
  generation.fetch_add(1);
}

uint64_t MatmulBlockingGeneration() { return generation.load(); }

absl::StatusOr<MatmulBlocking> MatmulBlockingFor(backend::Device& device) {
  std::lock_guard<std::mutex> lock(ChosenMutex());
  std::map<const backend::Device*, MatmulBlocking>* chosen = &Chosen();
  if (auto it = chosen->find(&device); it != chosen->end()) return it->second;
  absl::StatusOr<TuneMode> mode = TuneModeFromEnv();
  if (!mode.ok()) return mode.status();
  const base::Settings& settings = base::CurrentSettings();
  MatmulBlocking b = DefaultBlocking(SimdOf(device.info()));
  const char* how = "default, untuned";
  if (*mode == TuneMode::kOn || (*mode == TuneMode::kAuto && !settings.kernel_cache_dir.empty())) {
    absl::StatusOr<TuneResult> tuned = TuneMatmul(device, settings.kernel_cache_dir, false);
    if (!tuned.ok()) return tuned.status();
    b = tuned->best;
    how = tuned->from_cache ? "tuned earlier, from the cache" : "tuned now";
  }
  if (settings.debug >= 1)
    std::fprintf(stderr, "lazycl: f32 matmul blocking %s (%s)\n", BlockingString(b).c_str(), how);
  chosen->emplace(&device, b);
  return b;
}

}  // namespace lazycl::runtime
