// lazycl from several threads at once (issue 15): independent graphs built and run on one
// device by four threads, shared lazy tensors read concurrently, metrics read while others run,
// and trace/call/scan on two threads. Every device result is checked against the host
// interpreter on the same random inputs. scripts/test.sh also runs this binary under
// ThreadSanitizer (build/tsan).
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "test_util.h"

namespace lazycl {
namespace {

// Failures seen by worker threads (gtest assertions are thread-safe, but a message per failure
// keeps the report short when many go wrong).
class Failures {
 public:
  void Add(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (messages_.size() < 10) messages_.push_back(std::move(what));
    ++count_;
  }
  void Expect(int total) {
    std::lock_guard<std::mutex> lock(mu_);
    std::string all;
    for (const std::string& m : messages_) all += m + "\n";
    EXPECT_EQ(count_, 0) << count_ << " of " << total << " results wrong; first ones:\n" << all;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> messages_;
  int count_ = 0;
};

// Runs `read(r)` for r in [0, n) on n threads at once and joins them; an exception is a failure.
void OnThreads(int n, Failures& failures, const std::function<void(int)>& read) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        read(r);
      } catch (const std::exception& e) {
        failures.Add(std::string("exception: ") + e.what());
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

std::vector<float> Random(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Graph `kind` on inputs a [m, k] and b [k, n] (both on the same device).
Tensor Build(int kind, const Tensor& a, const Tensor& b) {
  switch (kind % 6) {
    case 0:  // elementwise, broadcast of a row
      return relu(a * 2.0 - slice(a, 0, 0, 1)) + tanh(a);
    case 1:  // reductions
      return sum(exp(a * 0.5), {1}) + max(a, {1});
    case 2:  // matmul plus bias
      return matmul(a, b) + sum(b, {0});
    case 3:  // softmax over rows
      return softmax(a * 3.0, 1);
    case 4:  // a view, then reduce everything
      return reshape(mean(transpose(matmul(a, b), 0, 1) * sigmoid(transpose(matmul(a, b), 0, 1))),
                     {1});
    default:  // log_softmax of a matmul, sliced
      return slice(log_softmax(matmul(a, b), 1), 1, 0, 3);
  }
}

bool Close(const std::vector<float>& got, const std::vector<float>& want, std::string* why) {
  if (got.size() != want.size()) {
    *why = "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
    return false;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= 1e-4f * (1 + std::fabs(want[i])))) {
      *why = "element " + std::to_string(i) + ": " + std::to_string(got[i]) +
             " != " + std::to_string(want[i]);
      return false;
    }
  }
  return true;
}

// One graph of the structure `kind`, built from fresh random inputs on `cl`, computed, read
// back and compared with the host interpreter's result on the same inputs.
void RunOne(Device cl, int kind, uint32_t seed, Failures& failures) {
  std::mt19937 rng(seed);
  // Few shapes, so that threads hit the same graph and program cache entries at once.
  const int64_t m = 3 + (seed % 3), k = 8, n = 5;
  const std::vector<float> av = Random(rng, m * k), bv = Random(rng, k * n);
  try {
    Tensor dev = Build(kind, tensor(av, {m, k}, cl), tensor(bv, {k, n}, cl));
    Tensor host =
        Build(kind, tensor(av, {m, k}, Device::host()), tensor(bv, {k, n}, Device::host()));
    if (seed % 2 == 0) sync({dev});
    std::string why;
    if (!Close(dev.to_vector<float>(), host.to_vector<float>(), &why))
      failures.Add("kind " + std::to_string(kind) + " seed " + std::to_string(seed) + ": " + why);
  } catch (const std::exception& e) {
    failures.Add("kind " + std::to_string(kind) + " seed " + std::to_string(seed) +
                 ": exception: " + e.what());
  }
}

TEST(Threads, IndependentGraphsOnOneDevice) {
  const Device cl = test::DefaultCl();
  constexpr int kThreads = 4, kGraphs = 200;
  Failures failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kGraphs; ++i)
        RunOne(cl, i + t, static_cast<uint32_t>(t * 100000 + i), failures);
    });
  }
  for (std::thread& t : threads) t.join();
  failures.Expect(kThreads * kGraphs);
}

TEST(Threads, SyncWhileOthersReadMetricsAndBuild) {
  const Device cl = test::DefaultCl();
  std::atomic<bool> done{false};
  Failures failures;
  std::thread syncer([&] {
    for (int i = 0; i < 60; ++i) RunOne(cl, i, static_cast<uint32_t>(7000 + i), failures);
    done = true;
  });
  std::thread reader([&] {
    int64_t last = 0;
    while (!done) {
      // KernelLaunches only grows (nobody resets it here), and report() names it.
      const int64_t now = metrics::counter("KernelLaunches");
      if (now < last) failures.Add("KernelLaunches went back from " + std::to_string(last));
      last = now;
      const std::string report = metrics::report();
      if (report.find("counter") == std::string::npos) failures.Add("report without a header");
    }
  });
  std::thread builder([&] {
    // Graphs recorded and dropped without running: pending nodes made and freed concurrently.
    std::mt19937 rng(3);
    while (!done) {
      Tensor a = tensor(Random(rng, 12), {3, 4}, cl);
      Tensor b = a;
      for (int j = 0; j < 20; ++j) b = b * 1.5 + a;
      if (b.shape() != std::vector<int64_t>{3, 4}) failures.Add("wrong shape");
    }
  });
  syncer.join();
  reader.join();
  builder.join();
  failures.Expect(60);
}

TEST(Threads, ManyReadersOfOneLazyTensor) {
  const Device cl = test::DefaultCl();
  std::mt19937 rng(11);
  for (int round = 0; round < 20; ++round) {
    const std::vector<float> av = Random(rng, 6 * 8), bv = Random(rng, 8 * 5);
    Tensor shared = Build(round, tensor(av, {6, 8}, cl), tensor(bv, {8, 5}, cl));
    const std::vector<float> want =
        Build(round, tensor(av, {6, 8}, Device::host()), tensor(bv, {8, 5}, Device::host()))
            .to_vector<float>();
    Failures failures;
    OnThreads(4, failures, [&](int r) {
      std::string why;
      // Some readers compute from it first: its handle is rebound while others read.
      Tensor derived = r % 2 == 0 ? shared * 1.0 : shared;
      if (r == 3) sync({shared});
      if (!Close(derived.to_vector<float>(), want, &why)) failures.Add(why);
      if (!Close(shared.to_vector<float>(), want, &why)) failures.Add(why);
    });
    failures.Expect(8);
  }
}

// The results of one deferred scan read by several threads at once: the first reader runs the
// scan (runtime/storage.h: Producer), the others wait for it; every result is the host loop's.
// Automatic cuts on several threads at once, of graphs that share one pending value: each cut
// computes the shared value with its own tensor and keeps it in the shared node (the first value
// set stays); every thread reads right results, and a later read of the shared value reads a
// kept one.
TEST(Threads, AutomaticCutsOfGraphsThatShareAValue) {
  const Device cl = test::DefaultCl();
  std::mt19937 rng(12);
  const std::vector<float> xv = Random(rng, 32);
  auto chain = [](Tensor t, int n, double scale) {
    for (int i = 0; i < n; ++i) t = t * scale + 0.001;
    return t;
  };
  for (int round = 0; round < 4; ++round) {
    const Tensor shared = chain(tensor(xv, {32}, cl), 100, 0.999);  // under the limit: pending
    const Tensor host_shared = chain(tensor(xv, {32}, Device::host()), 100, 0.999);
    const int64_t cuts = metrics::counter("AutomaticCuts");
    const int64_t kept = metrics::counter("AutomaticCutSharedValues");
    Failures failures;
    OnThreads(4, failures, [&](int r) {
      std::string why;
      const double scale = 1.0 + 0.001 * r;
      const Tensor mine = chain(shared, 250, scale);  // past the limit: cut on this thread
      const std::vector<float> want = chain(host_shared, 250, scale).to_vector<float>();
      if (!Close(mine.to_vector<float>(), want, &why)) failures.Add(why);
    });
    failures.Expect(4);
    EXPECT_GE(metrics::counter("AutomaticCuts") - cuts, 4);  // one at least on each thread
    EXPECT_GE(metrics::counter("AutomaticCutSharedValues") - kept, 1);
    std::string why;
    EXPECT_TRUE(Close(shared.to_vector<float>(), host_shared.to_vector<float>(), &why)) << why;
  }
}

TEST(Threads, ReadersOfOneDeferredScan) {
  const Device cl = test::DefaultCl();
  std::mt19937 rng(13);
  auto layer = [](const std::vector<Tensor>& h, const std::vector<Tensor>& w) {
    Tensor next = tanh(matmul(h[0], w[0]));
    return std::make_pair(std::vector<Tensor>{next}, std::vector<Tensor>{sum(next, {1})});
  };
  for (int round = 0; round < 10; ++round) {
    const std::vector<float> hv = Random(rng, 3 * 4), wv = Random(rng, 5 * 4 * 4);
    ScanResult dev = scan(layer, {tensor(hv, {3, 4}, cl)}, {tensor(wv, {5, 4, 4}, cl)});
    ScanResult host =
        scan(layer, {tensor(hv, {3, 4}, Device::host())}, {tensor(wv, {5, 4, 4}, Device::host())});
    const std::vector<float> want_carry = host.carry[0].to_vector<float>();
    const std::vector<float> want_ys = host.ys[0].to_vector<float>();
    Failures failures;
    OnThreads(4, failures, [&](int r) {
      std::string why;
      if (r % 2 == 0) {
        if (!Close((dev.carry[0] * 1.0).to_vector<float>(), want_carry, &why))
          failures.Add("carry: " + why);
      } else if (!Close(dev.ys[0].to_vector<float>(), want_ys, &why)) {
        failures.Add("ys: " + why);
      }
    });
    failures.Expect(4);
  }
}

TEST(Threads, TraceCallAndScanOnTwoThreads) {
  const Device cl = test::DefaultCl();
  Failures failures;
  auto call_worker = [&](uint32_t seed) {
    std::mt19937 rng(seed);
    for (int i = 0; i < 20; ++i) {
      try {
        Fn fn = [i](const std::vector<Tensor>& a) {
          return std::vector<Tensor>{a[0] * sin(a[1]) + static_cast<double>(i % 3)};
        };
        const std::vector<float> xv = Random(rng, 16), yv = Random(rng, 16);
        Tensor x = tensor(xv, {4, 4}, cl), y = tensor(yv, {4, 4}, cl);
        Function f = trace(fn, {{{4, 4}, DType::f32}, {{4, 4}, DType::f32}}, cl);
        std::vector<Tensor> traced = f({x, y});
        std::vector<Tensor> called = call(fn, {x, y});
        const std::vector<float> want =
            fn({tensor(xv, {4, 4}, Device::host()), tensor(yv, {4, 4}, Device::host())})[0]
                .to_vector<float>();
        std::string why;
        if (!Close(traced[0].to_vector<float>(), want, &why)) failures.Add("trace: " + why);
        if (!Close(called[0].to_vector<float>(), want, &why)) failures.Add("call: " + why);
      } catch (const std::exception& e) {
        failures.Add(std::string("call: exception: ") + e.what());
      }
    }
  };
  auto scan_worker = [&](uint32_t seed) {
    std::mt19937 rng(seed);
    auto layer = [](const std::vector<Tensor>& h, const std::vector<Tensor>& wb) {
      Tensor next = tanh(matmul(h[0], wb[0]) + wb[1]);
      return std::make_pair(std::vector<Tensor>{next}, std::vector<Tensor>{sum(next)});
    };
    for (int i = 0; i < 10; ++i) {
      try {
        const std::vector<float> hv = Random(rng, 2 * 4), wv = Random(rng, 3 * 4 * 4),
                                 bv = Random(rng, 3 * 4);
        ScanResult dev = scan(layer, {tensor(hv, {2, 4}, cl)},
                              {tensor(wv, {3, 4, 4}, cl), tensor(bv, {3, 4}, cl)});
        // The host reference is the plain loop.
        Tensor h = tensor(hv, {2, 4}, Device::host());
        Tensor w = tensor(wv, {3, 4, 4}, Device::host()), b = tensor(bv, {3, 4}, Device::host());
        for (int64_t l = 0; l < 3; ++l)
          h = tanh(matmul(h, squeeze(slice(w, 0, l, l + 1), 0)) +
                   squeeze(slice(b, 0, l, l + 1), 0));
        std::string why;
        if (!Close(dev.carry[0].to_vector<float>(), h.to_vector<float>(), &why))
          failures.Add("scan: " + why);
      } catch (const std::exception& e) {
        failures.Add(std::string("scan: exception: ") + e.what());
      }
    }
  };
  std::thread a([&] { call_worker(1); });
  std::thread b([&] { scan_worker(2); });
  std::thread c([&] { scan_worker(3); });
  std::thread d([&] { call_worker(4); });
  a.join();
  b.join();
  c.join();
  d.join();
  failures.Expect(60);
}

// One traced Function called from several threads at once: its graph is compiled by whichever
// first call runs, once, and each call's results are computed from that call's arguments (the
// calls' deferred runs read on other threads than the ones that made them, too).
TEST(Threads, OneFunctionCalledFromFourThreads) {
  const Device cl = test::DefaultCl();
  Tensor w = tensor(std::vector<float>{0.5f, -1, 2, 0.25f, 1, -0.5f}, {3, 2}, cl);
  Function f = trace(
      [w](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{tanh(matmul(a[0], w)) + a[1], sum(a[0] * a[0])};
      },
      {{{4, 3}, DType::f32}, {{4, 2}, DType::f32}}, cl);
  Failures failures;
  std::mutex mu;
  std::vector<std::vector<Tensor>> made;  // results made on one thread, read on another
  std::vector<std::vector<float>> wants;
  OnThreads(4, failures, [&](int r) {
    std::mt19937 rng(static_cast<uint32_t>(100 + r));
    for (int i = 0; i < 12; ++i) {
      const std::vector<float> av = Random(rng, 12), bv = Random(rng, 8);
      std::vector<Tensor> out = f({tensor(av, {4, 3}, cl), tensor(bv, {4, 2}, cl)});
      const Tensor ha = tensor(av, {4, 3}, Device::host());
      const Tensor wh = w.to(Device::host());
      std::vector<float> want =
          (tanh(matmul(ha, wh)) + tensor(bv, {4, 2}, Device::host())).to_vector<float>();
      want.push_back(sum(ha * ha).item<float>());
      if (i % 3 == 0) {  // some read at once, racing the other threads' first runs
        std::string why;
        if (!Close({out[1].item<float>()}, {want.back()}, &why)) failures.Add(why);
      }
      std::lock_guard<std::mutex> lock(mu);
      made.push_back(std::move(out));
      wants.push_back(std::move(want));
    }
  });
  // Read on threads other than the makers, each reader taking every fourth.
  OnThreads(4, failures, [&](int r) {
    for (size_t k = static_cast<size_t>(r); k < made.size(); k += 4) {
      std::vector<float> got = made[k][0].to_vector<float>();
      got.push_back(made[k][1].item<float>());
      std::string why;
      if (!Close(got, wants[k], &why)) failures.Add(why);
    }
  });
  EXPECT_EQ(made.size(), 48u);
  failures.Expect(48);
}

TEST(Threads, TraceBytesCountOnlyTheTracingThread) {
  // Tracing on placeholders moves nothing (TraceTransferBytes stays put) even while another
  // thread moves bytes all the time.
  const Device cl = test::DefaultCl();
  const int64_t before = test::C("TraceTransferBytes");
  std::atomic<bool> done{false};
  std::atomic<int> moves{0};
  std::thread mover([&] {
    std::vector<float> v(1024, 1.0f);
    while (!done) {
      tensor(v, {1024}, cl).to_vector<float>();
      ++moves;
    }
  });
  while (moves == 0) std::this_thread::yield();
  // A long body, so that the other thread's transfers happen while it is traced.
  Fn fn = [](const std::vector<Tensor>& a) {
    Tensor x = a[0];
    for (int k = 0; k < 300; ++k) x = exp(x) * 0.5;
    return std::vector<Tensor>{x};
  };
  for (int i = 0; i < 20; ++i) trace(fn, {{{64}, DType::f32}}, cl);
  done = true;
  mover.join();
  EXPECT_EQ(test::C("TraceTransferBytes"), before);
}

}  // namespace
}  // namespace lazycl
