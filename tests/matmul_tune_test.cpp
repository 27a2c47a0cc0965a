// The f32 CPU matmul's blockings and their tuner (runtime/matmul_tuner.h): the candidates derive
// from the reported vector width and caches (checked with faked reports), every candidate a
// device could pick matches the host reference on edge shapes and strided views, and the tuner's
// cache file is written, reused, and re-tuned when it is corrupt or for another blocking.

#include <unistd.h>
#include <algorithm>
#include <cmath>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/lower.h"
#include "runtime/devices.h"
#include "runtime/matmul_tuner.h"
#include "test_util.h"

namespace lazycl {
namespace {

using kernels::MatmulBlocking;
using runtime::SimdInfo;
using Shape = std::vector<int64_t>;

SimdInfo Fake(int width, int64_t l1 = 32 * 1024, int64_t local = 64 * 1024) {
  SimdInfo s;
  s.preferred_float_width = width;
  s.native_float_width = width;
  s.l1_bytes = l1;
  s.l2_bytes = 1 << 20;
  s.local_mem_bytes = local;
  return s;
}

int Registers(int vw) { return vw >= 16 ? 32 : 16; }

TEST(MatmulCandidatesTest, FollowTheReportedVectorWidth) {
  for (int w : {0, 1, 2, 4, 8, 16, 32}) {
    const SimdInfo s = Fake(w);
    const std::vector<MatmulBlocking> c = runtime::MatmulCandidates(s);
    ASSERT_GE(c.size(), 2u) << w;
    EXPECT_EQ(c[0], runtime::DefaultBlocking(s));
    const int vw = w >= 16 ? 16 : w >= 8 ? 8 : 4;
    for (const MatmulBlocking& b : c) {
      SCOPED_TRACE(runtime::BlockingString(b));
      EXPECT_TRUE(kernels::ValidBlocking(b));
      EXPECT_EQ(b.vw, vw) << "reported width " << w;
      // Accumulators, one row of B and the broadcast fit the vector registers.
      const int nv = b.nr / b.vw;
      EXPECT_LE(b.mr * nv + nv + 1, Registers(b.vw));
      EXPECT_LE(int64_t{b.kb} * b.nr * 4, s.local_mem_bytes);
      EXPECT_EQ(std::count(c.begin(), c.end(), b), 1);
    }
  }
}

TEST(MatmulCandidatesTest, Avx2AndAvx512Defaults) {
  // AVX2 (8 floats, 16 registers, 32 KiB L1): 6 x 16 in 12 accumulators over a panel that fills
  // L1, no 64-wide panels.
  const SimdInfo avx2 = Fake(8);
  const MatmulBlocking d2 = runtime::DefaultBlocking(avx2);
  EXPECT_EQ(runtime::BlockingString(d2), "vw=8 mr=6 nr=16 kb=512 rows=126");
  for (const MatmulBlocking& b : runtime::MatmulCandidates(avx2)) EXPECT_LE(b.nr, 32);
  // AVX-512 (16 floats, 32 registers, 48 KiB L1): 8 x 32 over a 256-deep panel (384 would not
  // be a power of two), the same at 32 KiB.
  const MatmulBlocking d5 = runtime::DefaultBlocking(Fake(16, 48 * 1024));
  EXPECT_EQ(runtime::BlockingString(d5), "vw=16 mr=8 nr=32 kb=256 rows=128");
  EXPECT_EQ(runtime::BlockingString(runtime::DefaultBlocking(Fake(16, 32 * 1024))),
            "vw=16 mr=8 nr=32 kb=256 rows=128");
  // The native width is preferred to the preferred one when both are reported.
  SimdInfo mixed = Fake(16);
  mixed.native_float_width = 8;
  EXPECT_EQ(runtime::DefaultBlocking(mixed).vw, 8);
}

TEST(MatmulCandidatesTest, PanelDepthFollowsCaches) {
  EXPECT_EQ(runtime::DefaultBlocking(Fake(16, 16 * 1024)).kb, 128);           // small L1
  EXPECT_EQ(runtime::DefaultBlocking(Fake(16, 8 * 1024)).kb, 64);             // at least 64
  EXPECT_EQ(runtime::DefaultBlocking(Fake(16, 8 << 20, 8 << 20)).kb, 1024);   // capped
  EXPECT_EQ(runtime::DefaultBlocking(Fake(16, 48 * 1024, 8 * 1024)).kb, 64);  // local memory
  EXPECT_EQ(runtime::DefaultBlocking(Fake(16, 0)).kb, 256);  // unknown L1: 32 KiB assumed
}

TEST(MatmulCandidatesTest, WidthsTriedAreTheReportedAndHalfOfIt) {
  EXPECT_EQ(runtime::CandidateWidths(Fake(16)), (std::vector<int>{16, 8}));
  EXPECT_EQ(runtime::CandidateWidths(Fake(8)), (std::vector<int>{8, 4}));
  EXPECT_EQ(runtime::CandidateWidths(Fake(4)), (std::vector<int>{4}));
  EXPECT_EQ(runtime::CandidateWidths(Fake(0)), (std::vector<int>{4}));
  EXPECT_EQ(runtime::DefaultBlocking(runtime::WithWidth(Fake(16), 8)),
            runtime::DefaultBlocking(Fake(8)));
}

// The incumbent (the chosen width's default) stays unless another ran 5% faster, wherever it is
// in the list: behind a slower default of another width (the width probe's first candidate),
// two of the narrower width's blockings 2% apart once let the faster-scoring 2-row one win.
TEST(MatmulCandidatesTest, TheIncumbentStaysUnlessAnotherIsFivePercentFaster) {
  const MatmulBlocking wide = runtime::DefaultBlocking(Fake(16));
  const MatmulBlocking narrow = runtime::DefaultBlocking(Fake(8));
  MatmulBlocking two_rows = narrow;
  two_rows.mr = 2;
  two_rows.rows = 128;
  MatmulBlocking deeper = narrow;
  deeper.kb *= 2;
  std::vector<runtime::CandidateResult> results = {
      {wide, 83.2, ""}, {narrow, 172.0, ""}, {two_rows, 175.9, ""}, {deeper, 176.7, ""}};
  auto pick = [](const std::vector<runtime::CandidateResult>& rs, const MatmulBlocking& held) {
    const runtime::CandidateResult* r = runtime::PickBlocking(rs, held);
    return r == nullptr ? std::string("none") : runtime::BlockingString(r->blocking);
  };
  const std::string s_narrow = runtime::BlockingString(narrow),
                    s_two = runtime::BlockingString(two_rows),
                    s_deeper = runtime::BlockingString(deeper);
  EXPECT_EQ(pick(results, narrow), s_narrow);
  results[2].gflops = 181.0;  // 5.2% faster: it wins, and so would the fastest of the rest
  EXPECT_EQ(pick(results, narrow), s_two);
  results[3].gflops = 181.5;
  EXPECT_EQ(pick(results, narrow), s_deeper);
  // An incumbent that failed (gflops 0) holds nothing back; none that ran: nullptr.
  results[1] = {narrow, 0, "wrong result"};
  results[2].gflops = results[3].gflops = 173.0;
  EXPECT_EQ(pick(results, narrow), s_two);
  for (runtime::CandidateResult& r : results) r.gflops = 0;
  EXPECT_EQ(pick(results, narrow), "none");
  // The width probe: the reported width's default against the half width's.
  EXPECT_EQ(pick({{wide, 100, ""}, {narrow, 104, ""}}, wide), runtime::BlockingString(wide));
  EXPECT_EQ(pick({{wide, 100, ""}, {narrow, 106, ""}}, wide), s_narrow);
  // After the probe, only the chosen width competes: the other width's default, scored in the
  // probe's rounds against another reference, cannot win (it once did, 112 against 96).
  const std::vector<runtime::CandidateResult> after_probe = {
      {wide, 96.5, ""}, {narrow, 112.2, ""}, {two_rows, 101.0, ""}};
  const runtime::CandidateResult* kept = runtime::PickBlocking(after_probe, wide, 16);
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->blocking, wide);
  kept = runtime::PickBlocking(after_probe, narrow, 8);
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->blocking, narrow);
  EXPECT_EQ(runtime::PickBlocking(after_probe, wide, 4), nullptr);
}

// Rounds timed side by side: a candidate 8% faster than the reference in every round scores 8%
// above the reference's median although the machine's speed halves between rounds; one that is
// 10% slower but for one lucky round (where the reference ran slow) stays 10% slower, where its
// best round would have won; a candidate that failed in a round scores 0; a round where the
// reference failed is left out.
TEST(MatmulCandidatesTest, PairedRoundsCompareCandidatesWithinARound) {
  const double speed[] = {1.0, 0.6, 1.1, 0.5, 0.9};
  std::vector<std::vector<double>> scores;
  for (int r = 0; r < 5; ++r) {
    const double ref = 100 * speed[r];
    scores.push_back({ref, 1.08 * ref, r == 3 ? 190.0 : 0.9 * ref});
  }
  std::vector<double> got = runtime::PairedScores(scores, 0);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_DOUBLE_EQ(got[0], 90.0);  // the median of 100, 60, 110, 50, 90
  EXPECT_NEAR(got[1], 1.08 * 90.0, 1e-9);
  EXPECT_NEAR(got[2], 0.9 * 90.0, 1e-9);
  const MatmulBlocking narrow = runtime::DefaultBlocking(Fake(8));
  MatmulBlocking faster = narrow, lucky = narrow;
  faster.kb *= 2;
  lucky.mr = 2;
  lucky.rows = 128;
  const std::vector<runtime::CandidateResult> results = {
      {narrow, got[0], ""}, {faster, got[1], ""}, {lucky, got[2], ""}};
  const runtime::CandidateResult* best = runtime::PickBlocking(results, narrow);  // into results
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->blocking, faster);
  // The reference failed in round 1: the other four rounds decide; a failure elsewhere scores 0.
  scores[1][0] = 0;
  scores[2][2] = 0;
  got = runtime::PairedScores(scores, 0);
  EXPECT_DOUBLE_EQ(got[0], 95.0);  // the median of 100, 110, 50, 90
  EXPECT_NEAR(got[1], 1.08 * 95.0, 1e-9);
  EXPECT_EQ(got[2], 0);
  // An even number of rounds: the mean of the middle two ratios.
  got = runtime::PairedScores({{100, 110}, {100, 90}}, 0);
  EXPECT_NEAR(got[1], 100.0, 1e-9);
}

// A dual product's two sets of accumulators, two B's vectors and a broadcast fit the vector
// registers (under AVX2 code half of 6 rows did not: two accumulators lived on the stack).
TEST(MatmulCandidatesTest, DualProductsKeepTheirAccumulatorsInRegisters) {
  EXPECT_EQ(kernels::DualRows(runtime::DefaultBlocking(Fake(16))), 4);  // 8 x 32 in 16-float
  EXPECT_EQ(kernels::DualRows(runtime::DefaultBlocking(Fake(8))), 2);   // 6 x 16 in 8-float
  for (int w : {4, 8, 16}) {
    for (const MatmulBlocking& b : runtime::MatmulCandidates(Fake(w, 48 * 1024, 1 << 20))) {
      const int rows = kernels::DualRows(b), nv = b.nr / b.vw;
      EXPECT_GE(rows, 1) << runtime::BlockingString(b);
      EXPECT_LE(rows, std::max(1, b.mr / 2)) << runtime::BlockingString(b);
      if (rows > 1) {
        EXPECT_LE(2 * rows * nv + 2 * nv + 1, Registers(b.vw)) << runtime::BlockingString(b);
      }
    }
  }
}

// Every blocking that some reported width could make a candidate. Under AddressSanitizer, one
// of each register block (vector width, MR, NR): the others differ from it only in KB and the
// rows per work-item, numbers the same host code passes on to the kernel, and the kernels run
// uninstrumented in PoCL either way, so the Release pass's check of every candidate is what
// covers their results (the whole list took 130 s of the sanitizer pass on a 2-core VM).
std::vector<MatmulBlocking> AllCandidates() {
  std::vector<MatmulBlocking> all;
  for (int w : {4, 8, 16}) {
    for (const MatmulBlocking& b : runtime::MatmulCandidates(Fake(w, 48 * 1024, 1 << 20))) {
#if defined(__SANITIZE_ADDRESS__)
      const bool seen = std::any_of(all.begin(), all.end(), [&](const MatmulBlocking& o) {
        return o.vw == b.vw && o.mr == b.mr && o.nr == b.nr;
      });
#else
      const bool seen = std::find(all.begin(), all.end(), b) != all.end();
#endif
      if (!seen) all.push_back(b);
    }
  }
  return all;
}

// |device - host| <= 1e-5 * (|a| @ |b|) + 1e-6 elementwise.
void ExpectMatches(const Tensor& device, const Tensor& host, const Tensor& scale,
                   const std::string& what) {
  ASSERT_EQ(device.shape(), host.shape()) << what;
  const std::vector<float> d = device.to_vector<float>(), h = host.to_vector<float>(),
                           s = scale.to_vector<float>();
  int bad = 0;
  for (size_t i = 0; i < d.size() && bad < 3; ++i) {
    if (!(std::fabs(d[i] - h[i]) <= 1e-5 * s[i] + 1e-6)) {
      ADD_FAILURE() << what << ": element " << i << " is " << d[i] << ", host " << h[i];
      ++bad;
    }
  }
}

TEST(MatmulTuneTest, EveryCandidateMatchesTheHost) {
  const Device cl = test::DefaultCl();
  backend::Device& device = runtime::OpenClDevice(0);
  struct Case {
    Shape a, b;
    bool ta = false, tb = false;  // the operand is a transposed view of an uploaded tensor
    bool dual = false;            // also as a dual product (each one costs a program to build)
  };
  std::vector<Case> cases = {
      {{1, 1}, {1, 1}},
      {{5, 1}, {1, 9}},                                  // K = 1
      {{5, 0}, {0, 9}},                                  // K = 0: zeros
      {{2, 3, 0}, {2, 0, 4}, true, true},                // K = 0, batched and transposed
      {{1, 7}, {7, 1}},                                  // size-1 M and N
      {{37, 70}, {70, 67}, false, false, true},          // no dim a multiple of any block
      {{130, 300}, {300, 45}, false, false, true},       // several row blocks, K past 256
      {{67, 1100}, {1100, 83}},                          // K past every panel depth
      {{2, 20, 513}, {2, 513, 33}, false, false, true},  // batched
      {{4, 1, 9, 6}, {3, 6, 5}},                         // broadcast batch dims
      {{33, 65}, {65, 40}, true, false},                 // A^T read in place
      {{33, 65}, {65, 40}, false, true},                 // B^T read in place
      {{203, 40}, {40, 600}, false, true},               // B^T: a work-item takes all 203 rows
      {{3, 17, 33}, {3, 33, 18}, true, true},
      // Several panels per work-item (LC_PANELS), A^T packed for them (LC_APACK): ragged rows,
      // panels and passes, batched.
      {{300, 290}, {290, 1100}},
      {{2, 300, 290}, {2, 290, 1100}, true, false},
  };
  // B^T whose pass of A's rows (K = 64 deep) fills more than a quarter of the device's cache:
  // the tuned rows over several panels instead of all of M (emit_matmul.cpp's whole_m).
  if (const int64_t cache = device.info().global_mem_cache_bytes; cache > 0) {
    const int64_t m = std::min<int64_t>(cache, 64 << 20) / (4 * 4 * 64) + 7;
    cases.push_back({{m, 64}, {64, 40}, false, true});
  }
  const Device host = Device::host();
  for (const MatmulBlocking& b : AllCandidates()) {
    runtime::OverrideMatmulBlocking(device, b);
    uint64_t seed = 100;
    for (const Case& c : cases) {
      const std::string what = runtime::BlockingString(b) + " case " + std::to_string(seed);
      // Host values and the same view of an uploaded copy on the device.
      auto make = [&](Shape s, bool t) {
        if (t) std::swap(s[s.size() - 1], s[s.size() - 2]);
        const Tensor x = randn(s, ++seed, DType::f32, host);
        const int64_t r = static_cast<int64_t>(s.size());
        if (!t) return std::make_pair(x, x.to(cl));
        return std::make_pair(transpose(x, r - 1, r - 2), transpose(x.to(cl), r - 1, r - 2));
      };
      const auto [ha, da] = make(c.a, c.ta);
      const auto [hb, db] = make(c.b, c.tb);
      const Tensor scale = matmul(abs(ha), abs(hb));
      ExpectMatches(matmul(da, db), matmul(ha, hb), scale, what);
      // An epilogue: relu(x @ w + bias) stores through lc_epilogue.
      const Tensor bias = randn({c.b.back()}, ++seed, DType::f32, host);
      ExpectMatches(relu(matmul(da, db) + bias.to(cl)), relu(matmul(ha, hb) + bias),
                    scale + abs(bias), what + " epilogue");
      // A dual product (LC_DUAL, where B is row-major: kernels::DualRows rows per block):
      // a @ b - a @ b2.
      if (!c.dual) continue;
      const auto [hb2, db2] = make(c.b, c.tb);
      ExpectMatches(matmul(da, db) - matmul(da, db2), matmul(ha, hb) - matmul(ha, hb2),
                    scale + matmul(abs(ha), abs(hb2)), what + " dual");
    }
  }
  runtime::OverrideMatmulBlocking(device, runtime::DefaultBlocking(runtime::SimdOf(device.info())));
}

// A^T B and A B^T of views read the operands in place: one kernel each.
TEST(MatmulTuneTest, TransposedOperandsAreNotCopied) {
  const Device cl = test::DefaultCl();
  Tensor a = randn({64, 48}, 1, DType::f32, cl), b = randn({64, 40}, 2, DType::f32, cl);
  Tensor c = randn({40, 48}, 3, DType::f32, cl);
  sync({a, b, c});
  int64_t before = test::C("KernelLaunches");
  sync({matmul(transpose(a, 0, 1), b)});
  EXPECT_EQ(test::C("KernelLaunches") - before, 1);
  before = test::C("KernelLaunches");
  sync({matmul(a, transpose(c, 0, 1))});
  EXPECT_EQ(test::C("KernelLaunches") - before, 1);
}

class TuneCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("lazycl-tune-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Two cheap candidates: the default and its variant with fewer rows per work-item.
  std::vector<MatmulBlocking> Candidates() {
    std::vector<MatmulBlocking> all =
        runtime::MatmulCandidates(runtime::SimdOf(runtime::OpenClDevice(0).info()));
    return {all.front(), all.back()};
  }
  runtime::TuneResult Tune() {
    absl::StatusOr<runtime::TuneResult> r =
        runtime::TuneMatmul(runtime::OpenClDevice(0), dir_.string(), false, Candidates());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : runtime::TuneResult{};
  }
  std::string Read(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

  std::filesystem::path dir_;
};

TEST_F(TuneCacheTest, WrittenReusedAndCorruptEntriesRetuned) {
  const runtime::TuneResult first = Tune();
  ASSERT_FALSE(first.from_cache);
  ASSERT_EQ(first.candidates.size(), 2u);
  for (const runtime::CandidateResult& c : first.candidates) {
    EXPECT_EQ(c.error, "");
    EXPECT_GT(c.gflops, 0);
  }
  const std::string path = first.cache_path;
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  const std::string good = Read(path);
  EXPECT_NE(good.find("key: " + runtime::TuneCacheKey(runtime::OpenClDevice(0).info())),
            std::string::npos)
      << good;

  const runtime::TuneResult second = Tune();
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.best, first.best);
  EXPECT_TRUE(second.candidates.empty());

  // Each damaged entry is re-tuned (not trusted) and replaced by a good one.
  const std::string key_line = good.substr(0, good.find("blocking:"));
  const std::string damaged[] = {
      "",
      "garbage\n",
      good.substr(0, good.size() / 2),
      key_line + "blocking: 16 8 32\n",
      key_line + "blocking: 16 3 32 256 126\n",  // not a candidate here
      key_line + "blocking: 99 8 32 256 128\n",
      key_line + "blocking: 16 8 32 256 128 7\n",
      "lazycl matmul tune v1\nkey: another device|1.0|0.1.0|template 0\nblocking: 16 8 32 256 "
      "128\n",
      good + "trailing\n",
  };
  for (const std::string& text : damaged) {
    Write(path, text);
    const runtime::TuneResult r = Tune();
    EXPECT_FALSE(r.from_cache) << text;
    EXPECT_EQ(r.candidates.size(), 2u);
    EXPECT_TRUE(runtime::ReadTuneCache(path, runtime::TuneCacheKey(runtime::OpenClDevice(0).info()),
                                       runtime::SimdOf(runtime::OpenClDevice(0).info())))
        << "not rewritten after: " << text;
  }
  // On a CPU the key names the processor (family, model, stepping), which the device name does
  // not: an entry tuned on another generation of the same-named device is re-tuned.
  const std::string key = runtime::TuneCacheKey(runtime::OpenClDevice(0).info());
  if (runtime::OpenClDevice(0).info().type == base::DeviceType::kCpu &&
      std::filesystem::exists("/proc/cpuinfo")) {
    const size_t cpu = key.find("|cpu ");
    ASSERT_NE(cpu, std::string::npos) << key;
    EXPECT_NE(key.find(" family ", cpu), std::string::npos) << key;
    EXPECT_NE(key.find(" model ", cpu), std::string::npos) << key;
    Write(path, "lazycl matmul tune v1\nkey: " + key.substr(0, cpu) +
                    "|cpu AnotherVendor family 99 model 1 stepping 0\nblocking: " +
                    good.substr(good.find("blocking: ") + 10));
    EXPECT_FALSE(Tune().from_cache) << Read(path);
    EXPECT_TRUE(Tune().from_cache);
  }
  // An entry that cannot be read at all (a directory in its place) is re-tuned too.
  std::filesystem::remove(path);
  std::filesystem::create_directory(path);
  EXPECT_FALSE(Tune().from_cache);
}

// An entry for a narrower width than the device reports (what the tuner keeps where the
// driver's compiler targets narrower vectors than it reports) is trusted.
TEST_F(TuneCacheTest, AnEntryOfHalfTheReportedWidthIsTrusted) {
  backend::Device& device = runtime::OpenClDevice(0);
  const SimdInfo simd = runtime::SimdOf(device.info());
  const std::vector<int> widths = runtime::CandidateWidths(simd);
  if (widths.size() < 2) GTEST_SKIP() << "the device reports 4 floats per vector";
  const MatmulBlocking half = runtime::DefaultBlocking(runtime::WithWidth(simd, widths[1]));
  const std::string path = runtime::TuneCachePath(device.info(), dir_.string());
  std::filesystem::create_directories(dir_);
  Write(path, "lazycl matmul tune v1\nkey: " + runtime::TuneCacheKey(device.info()) +
                  "\nblocking: " + std::to_string(half.vw) + " " + std::to_string(half.mr) + " " +
                  std::to_string(half.nr) + " " + std::to_string(half.kb) + " " +
                  std::to_string(half.rows) + "\n");
  const runtime::TuneResult r = Tune();
  EXPECT_TRUE(r.from_cache) << Read(path);
  EXPECT_EQ(r.best, half);
}

// Without a list, the tuner first times each width's default, then the rest of the fastest
// width's candidates, and keeps one of that width.
TEST(MatmulTuneTest, ProbesTheWidthsFirst) {
  backend::Device& device = runtime::OpenClDevice(0);
  if (device.info().type != base::DeviceType::kCpu) GTEST_SKIP() << "the CPU matmul's tuner";
  const SimdInfo simd = runtime::SimdOf(device.info());
  const std::vector<int> widths = runtime::CandidateWidths(simd);
  absl::StatusOr<runtime::TuneResult> r = runtime::TuneMatmul(device, "", /*force=*/true);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GT(r->candidates.size(), widths.size());
  for (size_t i = 0; i < widths.size(); ++i) {
    EXPECT_EQ(r->candidates[i].blocking,
              runtime::DefaultBlocking(runtime::WithWidth(simd, widths[i])));
  }
  const int chosen = r->candidates[widths.size()].blocking.vw;
  EXPECT_NE(std::find(widths.begin(), widths.end(), chosen), widths.end());
  std::vector<MatmulBlocking> tried;
  for (const runtime::CandidateResult& c : r->candidates) {
    SCOPED_TRACE(runtime::BlockingString(c.blocking));
    EXPECT_EQ(c.error, "");
    EXPECT_GT(c.gflops, 0);
    tried.push_back(c.blocking);
  }
  for (size_t i = widths.size(); i < tried.size(); ++i) EXPECT_EQ(tried[i].vw, chosen);
  // Every candidate of the chosen width was timed, once.
  for (const MatmulBlocking& b : runtime::MatmulCandidates(runtime::WithWidth(simd, chosen))) {
    EXPECT_EQ(std::count(tried.begin(), tried.end(), b), 1) << runtime::BlockingString(b);
  }
  // The chosen width's default was the fastest default in the probe's rounds (the reported
  // width's by a 5% margin): judged on the probe's own scores, since the chosen default is timed
  // again with the rest of its width.
  ASSERT_EQ(r->probe.size(), widths.size());
  const runtime::CandidateResult* chosen_default = nullptr;
  for (size_t i = 0; i < widths.size(); ++i) {
    EXPECT_EQ(r->probe[i].blocking, r->candidates[i].blocking);
    EXPECT_GT(r->probe[i].gflops, 0) << widths[i];
    if (widths[i] == chosen) chosen_default = &r->probe[i];
  }
  ASSERT_NE(chosen_default, nullptr);
  for (size_t i = 0; i < widths.size(); ++i)
    EXPECT_LE(r->probe[i].gflops, chosen_default->gflops * 1.05) << widths[i];
  // The one kept is of the chosen width, whatever the other widths' defaults scored.
  EXPECT_EQ(r->best.vw, chosen);
  EXPECT_EQ(r->cache_path, "");
}

TEST(TuneModeTest, ReadsTheVariable) {
  ASSERT_EQ(::setenv("LAZYCL_MATMUL_TUNE", "banana", 1), 0);
  absl::StatusOr<runtime::TuneMode> bad = runtime::TuneModeFromEnv();
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(test::Has(std::string(bad.status().message()), "'banana'")) << bad.status();
  ASSERT_EQ(::setenv("LAZYCL_MATMUL_TUNE", "0", 1), 0);
  EXPECT_EQ(*runtime::TuneModeFromEnv(), runtime::TuneMode::kOff);
  ASSERT_EQ(::setenv("LAZYCL_MATMUL_TUNE", "1", 1), 0);
  EXPECT_EQ(*runtime::TuneModeFromEnv(), runtime::TuneMode::kOn);
  ASSERT_EQ(::unsetenv("LAZYCL_MATMUL_TUNE"), 0);
  EXPECT_EQ(*runtime::TuneModeFromEnv(), runtime::TuneMode::kAuto);
}

}  // namespace
}  // namespace lazycl

namespace lazycl {
namespace {

// matmul([B, T, K], [K, N]) runs as one [B * T, K] @ [K, N] product, so the weight's gradient
// (A^T dC summed over B) is one matmul over B * T rows, not B products and a sum; both match
// the host.
TEST(MatmulTuneTest, WeightGradientOfBatchedInputIsOneProduct) {
  const Device cl = test::DefaultCl();
  const Device host = Device::host();
  const Tensor hx = randn({4, 16, 32}, 1, DType::f32, host);
  const Tensor hw = randn({32, 24}, 2, DType::f32, host);
  const Tensor hg = randn({4, 16, 24}, 3, DType::f32, host);
  const Tensor x = hx.to(cl), g = hg.to(cl);
  const Tensor w = hw.to(cl).requires_grad_();
  sync({x, w, g});
  const Tensor y = matmul(x, w);
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{4, 16, 24}));
  const std::vector<Tensor> dw = grad(y, {w}, g);
  const int64_t before = test::C("KernelLaunches");
  sync(dw);
  EXPECT_EQ(test::C("KernelLaunches") - before, 1);
  test::ExpectNear(dw[0], matmul(transpose(reshape(hx, {64, 32}), 0, 1), reshape(hg, {64, 24})),
                   1e-4);
  test::ExpectNear(y, matmul(hx, hw), 1e-4);
  // A view operand stays batched (read in place): the same values.
  const Tensor xt = transpose(randn({4, 32, 16}, 4, DType::f32, host), 1, 2);
  test::ExpectNear(matmul(xt.to(cl), w.detach()), matmul(xt, hw), 1e-4);
}

}  // namespace
}  // namespace lazycl
