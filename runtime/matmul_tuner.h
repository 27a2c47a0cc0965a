#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/device.h"
#include "kernels/lower.h"

// The f32 CPU matmul's blocking per device (kernels::MatmulBlocking, templates/matmul_cpu.cl).
// The candidates derive from what the device reports (float vector width, caches); on first use
// each is built, checked against a host reference and timed on model-like products, and
// the fastest correct one is kept in the kernel cache directory, keyed by device name, driver
// version, library version and template text. LAZYCL_MATMUL_TUNE: "0" never times (the
// derived default), "1" always tunes on first use (in memory when there is no cache
// directory), "auto" (the default) tunes when LAZYCL_KERNEL_CACHE_DIR is set, so that the
// result outlives the process.
namespace lazycl::runtime {

// What the candidates derive from.
struct SimdInfo {
  int preferred_float_width = 0;  // CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT (0: not reported)
  int native_float_width = 0;     // CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT
  int64_t l1_bytes = 0;           // per-core data cache (0: unknown, 32 KiB assumed)
  int64_t l2_bytes = 0;           // per-core L2 (0: unknown)
  int64_t local_mem_bytes = 0;    // CL_DEVICE_LOCAL_MEM_SIZE (0: unknown)
};

// The device's figures; for a CPU device, L1/L2 from /sys (the host's caches).
SimdInfo SimdOf(const backend::DeviceInfo& info);

// The blocking used without timing: NR = 2 vectors (16..64 floats), MR as many rows (<= 8) as
// the vector registers hold, KB filling at most L1 with the copied panel.
kernels::MatmulBlocking DefaultBlocking(const SimdInfo& simd);

// The candidates, DefaultBlocking first; every one passes kernels::ValidBlocking and fits
// local memory.
std::vector<kernels::MatmulBlocking> MatmulCandidates(const SimdInfo& simd);

// The vector widths the tuner tries, the reported one first: it and half of it (down to 4). A
// CPU driver may report the host's widest vectors while its compiler targets narrower ones:
// PoCL with POCL_LLVM_CPU_NAME=haswell on an AVX-512 host reports 16 and emits AVX2, where the
// 16-wide default's accumulators spill (63 GFLOP/s on the tuner's shapes against 157 for the
// 8-wide default, 2-core Zen 4 VM).
std::vector<int> CandidateWidths(const SimdInfo& simd);
SimdInfo WithWidth(SimdInfo simd, int width);  // as if the device reported `width`

enum class TuneMode { kOff, kOn, kAuto };
// LAZYCL_MATMUL_TUNE; InvalidArgument quoting a value that is not 0, 1 or auto.
absl::StatusOr<TuneMode> TuneModeFromEnv();

std::string BlockingString(const kernels::MatmulBlocking& b);  // "vw=16 mr=8 nr=32 kb=256 rows=128"

struct CandidateResult {
  kernels::MatmulBlocking blocking;
  double gflops = 0;  // geometric mean over the timed shapes; 0 when it failed
  std::string error;  // why it could not win ("" when it ran and matched the reference)
};

struct TuneResult {
  kernels::MatmulBlocking best;
  std::vector<CandidateResult> candidates;  // empty when `best` came from the cache file
  // Without a list of candidates: each width's default as the probe rounds scored it, the
  // figures the width was chosen by (the chosen width's default is timed again with the rest of
  // its width, and `candidates` holds that later score).
  std::vector<CandidateResult> probe;
  std::string cache_path;  // "" without a cache directory
  bool from_cache = false;
};

// The winner among `results`: `incumbent`'s result unless another ran 5% faster (timings on a
// shared machine vary by more than the smaller differences), else the fastest; nullptr when
// none ran. The incumbent is a default blocking, derived from what the device reports. With
// `width` other than 0, only the results of that many floats per vector compete.
const CandidateResult* PickBlocking(const std::vector<CandidateResult>& results,
                                    const kernels::MatmulBlocking& incumbent, int width = 0);

// Candidates' scores from rounds of timings taken side by side: scores[r][c] is candidate c's
// GFLOP/s in round r, 0 where it failed. Each candidate's result is the median of `reference`'s
// scores times the median over rounds of its ratio to `reference`'s score in the same round: a
// slow stretch of a shared machine slows every candidate of its rounds alike, and one lucky
// round does not decide (a best of rounds did). Rounds where `reference` failed are skipped; a
// candidate that failed in another round scores 0.
std::vector<double> PairedScores(const std::vector<std::vector<double>>& scores, size_t reference);

// The cache file for `info` in `dir` and the key line it must hold.
std::string TuneCachePath(const backend::DeviceInfo& info, const std::string& dir);
std::string TuneCacheKey(const backend::DeviceInfo& info);

// The blocking stored at `path` for `key`; nullopt when the file is missing, unreadable, for
// another key, malformed or not a candidate for `simd` at any of its CandidateWidths.
std::optional<kernels::MatmulBlocking> ReadTuneCache(const std::string& path,
                                                     const std::string& key, const SimdInfo& simd);

// Times every candidate on `device` (reusing the cache file in `cache_dir` unless `force`) and
// writes the winner there. `candidates` empty: the default of each of CandidateWidths first,
// then the rest of MatmulCandidates for the width whose default was fastest (the reported one
// unless another is 5% faster), of which that width's default stays unless another is 5%
// faster (PickBlocking). An error when no candidate matched the reference.
absl::StatusOr<TuneResult> TuneMatmul(backend::Device& device, const std::string& cache_dir,
                                      bool force,
                                      std::vector<kernels::MatmulBlocking> candidates = {});

// The blocking for `device` as LAZYCL_MATMUL_TUNE says, decided once per device and process.
absl::StatusOr<kernels::MatmulBlocking> MatmulBlockingFor(backend::Device& device);

// For tests: `blocking` is `device`'s from now on. Plans lowered before are not reused (the
// graph cache's key holds MatmulBlockingGeneration, which this advances).
void OverrideMatmulBlocking(backend::Device& device, const kernels::MatmulBlocking& blocking);
uint64_t MatmulBlockingGeneration();

}  // namespace lazycl::runtime
