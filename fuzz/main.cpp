// lazycl-fuzz: random graphs of 1-40 ops (graph.h) built on the host and on a device, compared.
//
//   lazycl-fuzz [--seed S] [--graphs N] [--minutes M] [--max-ops K] [--grad-every K]
//               [--from G] [--device cl:0] [--per-process P]
//
// Every graph's values are compared on host and device; for every K-th structure (default 2)
// the gradient of a random scalar loss too, on host and device and (for smooth graphs) against
// finite differences (graph.h, CheckGradients).
// Graph g of seed S is structure g / 8 of S, run with size palette g % 8. It stops after N
// graphs or M minutes, whichever comes first (0 = no limit). A failing graph is shrunk and
// printed as an op list and as a C++ program; the exit status is 1 when any graph failed, 2 for
// bad arguments. The codegen strategy is LAZYCL_CODEGEN's (cpu or gpu), as for any program.
// Every P graphs (default 10000; 0: never) run in a child process of their own: PoCL 3.1 keeps
// every kernel it ever loaded mapped (its pthread device takes two references per launch and
// gives back one; fixed in PoCL 4.0), and a run of 100,000 graphs loads more than the kernel's
// vm.max_map_count allows one process (lazycl then refuses new kernels with an error).
#include <sys/wait.h>
#include <unistd.h>

#include <execinfo.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz/graph.h"
#include "lazycl/lazycl.h"

namespace lazycl::fuzz {
namespace {

struct Options {
  uint64_t seed = 1;
  int64_t graphs = 100;
  int64_t from = 0;  // the first graph's number: "graph G (seed S)" in a report reruns as --from G
  double minutes = 0;
  int max_ops = 40;
  int grad_every = 2;  // check gradients of every 2nd structure (0: never)
  std::string device = "cl:0";
  int64_t per_process = 10000;
};

// What a run (or a child's part of it) did.
struct Totals {
  int64_t graphs = 0, compared = 0, grads = 0, failed = 0;
  int64_t launches = 0, builds = 0, disk_hits = 0;
  double seconds = 0;
};

[[noreturn]] void Usage(const std::string& why) {
  std::cerr << "lazycl-fuzz: " << why
            << "\nusage: lazycl-fuzz [--seed S] [--graphs N] [--minutes M] [--max-ops K] "
               "[--grad-every K] [--from G] [--device cl:N] [--per-process P]\n";
  std::exit(2);
}

int64_t ParseInt(const std::string& flag, const std::string& text, int64_t lo) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo) {
    Usage(flag + " expects an integer >= " + std::to_string(lo) + ", got '" + text + "'");
  }
  return v;
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage("missing the value of " + flag);
    const std::string value = argv[++i];
    if (flag == "--seed") {
      o.seed = static_cast<uint64_t>(ParseInt(flag, value, 0));
    } else if (flag == "--from") {
      o.from = ParseInt(flag, value, 0);
    } else if (flag == "--graphs") {
      o.graphs = ParseInt(flag, value, 0);
    } else if (flag == "--minutes") {
      char* end = nullptr;
      o.minutes = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(o.minutes >= 0)) {
        Usage("--minutes expects a number >= 0, got '" + value + "'");
      }
    } else if (flag == "--max-ops") {
      o.max_ops = static_cast<int>(ParseInt(flag, value, 1));
    } else if (flag == "--grad-every") {
      o.grad_every = static_cast<int>(ParseInt(flag, value, 0));
    } else if (flag == "--device") {
      o.device = value;
    } else if (flag == "--per-process") {
      o.per_process = ParseInt(flag, value, 0);
    } else {
      Usage("unknown flag '" + flag + "'");
    }
  }
  if (o.graphs == 0 && o.minutes == 0) Usage("--graphs 0 needs --minutes");
  return o;
}

// "" when the graph's value `index` agrees on host and device, else what went wrong.
std::string CheckValue(const Graph& g, uint64_t data_seed, int palette, Device device,
                       size_t index) {
  try {
    const std::vector<Tensor> host = Interpret(g, data_seed, palette, Device::host());
    const std::vector<Tensor> dev = Interpret(g, data_seed, palette, device);
    return ValuesMismatch(g, index, data_seed, palette, host, dev);
  } catch (const Error& e) {
    return std::string("threw: ") + e.what();
  }
}

using Check = std::function<std::string(const Graph&)>;

// Prints a failing graph, shrunk while `check` still fails on it, and its C++ reproducer.
void Report(const Graph& failing, uint64_t data_seed, int palette, const std::string& what,
            const Check& check) {
  std::cout << "FAIL " << what << "\n" << GraphString(failing);
  Graph shown = failing;
  if (check(failing).empty()) {
    std::cout << "(it passes when run alone: not shrunk)\n";
  } else {
    shown = Shrink(failing, [&](const Graph& c) { return !check(c).empty(); });
    std::cout << "shrunk to " << shown.size() << " steps (" << check(shown) << "):\n"
              << GraphString(shown);
  }
  std::cout << CppReproducer(shown, data_seed, palette) << std::flush;
}

// Runs graphs [o.from, o.from + o.graphs) in this process; `banner`: print the run's first line.
Totals Run(const Options& o, bool banner) {
  const Device device = Device::parse(o.device);
  if (banner) {
    const char* codegen = std::getenv("LAZYCL_CODEGEN");
    std::cout << "lazycl-fuzz: seed " << o.seed << ", device " << device.str() << " ("
              << default_env().device().str() << " default), codegen "
              << (codegen != nullptr ? codegen : "(default)") << ", up to " << o.max_ops
              << " ops per graph\n"
              << std::flush;
  }
  const auto start = std::chrono::steady_clock::now();
  auto minutes = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 60;
  };
  int64_t graphs = 0, compared = 0, failed = 0;
  int grads_checked = 0;
  for (int64_t g = o.from; o.graphs == 0 || g < o.from + o.graphs; ++g) {
    if (o.minutes > 0 && minutes() >= o.minutes) break;
    const uint64_t structure =
        o.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(g) / kPalettes;
    const int palette = static_cast<int>(g % kPalettes);
    const uint64_t data_seed = o.seed * 1000003ull + static_cast<uint64_t>(g);
    const Graph graph = Generate(structure, o.max_ops);
    const std::string name = "graph " + std::to_string(g) + " (seed " + std::to_string(o.seed) +
                             ", palette " + std::to_string(palette) + ")";
    ++graphs;
    // Outputs: the last value, and for every third structure a few earlier ones synced with it.
    std::vector<size_t> outputs = {graph.size() - 1};
    if ((g / kPalettes) % 3 == 0) {
      for (size_t i = 0; i + 1 < graph.size(); i += 3) {
        if (graph[i].kind != Kind::kInput) outputs.push_back(i);
      }
    }
    std::vector<Tensor> host, dev;
    try {
      host = Interpret(graph, data_seed, palette, Device::host());
      dev = Interpret(graph, data_seed, palette, device);
      std::vector<Tensor> group;
      for (size_t i : outputs) group.push_back(dev[i]);
      sync(group);
    } catch (const Error& e) {
      ++failed;
      Report(
          graph, data_seed, palette, name + " threw: " + std::string(e.what()),
          [&](const Graph& c) { return CheckValue(c, data_seed, palette, device, c.size() - 1); });
      continue;
    }
    bool bad_value = false;
    for (size_t i : outputs) {
      const std::string bad = ValuesMismatch(graph, i, data_seed, palette, host, dev);
      ++compared;
      if (!bad.empty()) {
        ++failed;
        Report(Graph(graph.begin(), graph.begin() + static_cast<long>(i) + 1), data_seed, palette,
               name + ", value %" + std::to_string(i) + ": " + bad, [&](const Graph& c) {
                 return CheckValue(c, data_seed, palette, device, c.size() - 1);
               });
        bad_value = true;
        break;
      }
    }
    // Gradients, for every `grad_every`-th structure.
    if (!bad_value && o.grad_every > 0 && (g / kPalettes) % o.grad_every == 0) {
      // An error is a failure like a mismatch (reported and shrunk), not the end of the run.
      auto check = [&](const Graph& c) {
        int unused = 0;
        try {
          return CheckGradients(c, data_seed, palette, device, &unused);
        } catch (const Error& e) {
          return std::string("threw: ") + e.what();
        }
      };
      std::string bad;
      try {
        bad = CheckGradients(graph, data_seed, palette, device, &grads_checked);
      } catch (const Error& e) {
        bad = std::string("threw: ") + e.what();
      }
      if (!bad.empty()) {
        ++failed;
        Report(graph, data_seed, palette, name + ", gradients: " + bad, check);
      }
    }
    if ((g + 1) % 100 == 0) {
      std::cout << "  graph " << g + 1 << ", " << failed << " failed here, " << minutes() * 60
                << " s\n"
                << std::flush;
    }
  }
  return Totals{graphs,
                compared,
                grads_checked,
                failed,
                metrics::counter("KernelLaunches"),
                metrics::counter("ProgramBuilds"),
                metrics::counter("ProgramDiskCacheHits"),
                minutes() * 60};
}

void Add(Totals* sum, const Totals& t) {
  sum->graphs += t.graphs;
  sum->compared += t.compared;
  sum->grads += t.grads;
  sum->failed += t.failed;
  sum->launches += t.launches;
  sum->builds += t.builds;
  sum->disk_hits += t.disk_hits;
  sum->seconds += t.seconds;
}

// Runs the graphs `o.per_process` at a time, each part in a child process that writes its
// Totals to a pipe. The parent never touches a device (a forked OpenCL runtime is not usable).
Totals RunInParts(const Options& o) {
  Totals sum;
  for (int64_t from = o.from; o.graphs == 0 || from < o.from + o.graphs;) {
    Options part = o;
    part.from = from;
    part.graphs = o.graphs == 0 ? o.per_process : std::min(o.per_process, o.from + o.graphs - from);
    if (o.minutes > 0) {
      part.minutes = o.minutes - sum.seconds / 60;
      if (part.minutes <= 0) break;
    }
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("lazycl-fuzz: pipe() failed");
    std::cout << std::flush;
    const pid_t child = fork();
    if (child < 0) throw std::runtime_error("lazycl-fuzz: fork() failed");
    if (child == 0) {
      close(fds[0]);
      int status = 2;
      try {
        const Totals t = Run(part, /*banner=*/from == o.from);
        status = write(fds[1], &t, sizeof t) == static_cast<ssize_t>(sizeof t) ? 0 : 2;
      } catch (const std::exception& e) {
        std::cerr << "lazycl-fuzz: " << e.what() << "\n";
      }
      std::cout << std::flush;
      std::cerr << std::flush;
      _exit(status);
    }
    close(fds[1]);
    Totals t;
    const ssize_t got = read(fds[0], &t, sizeof t);
    close(fds[0]);
    int status = 0;
    waitpid(child, &status, 0);
    if (got != static_cast<ssize_t>(sizeof t) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      throw std::runtime_error("lazycl-fuzz: the process running graphs " + std::to_string(from) +
                               " on died (status " + std::to_string(status) + ")");
    }
    Add(&sum, t);
    from += part.graphs;
    if (t.graphs < part.graphs) break;  // out of minutes
  }
  return sum;
}

// A fatal signal prints the stack of the thread it hit (glibc's backtrace, which unwinds by the
// binaries' call-frame tables, where Abseil's handler walked frame pointers that Release code
// lacks and printed one frame), then takes the signal's default action. lazycl_fuzz_gpu died of
// SIGSEGV in two fresh-clone CI runs (cold caches, ctest -j2) that no local run reproduced, and
// said nothing of where. Under a sanitizer its own report says more, so its handler stays.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define LAZYCL_FUZZ_CRASH_STACK 1
void OnFatalSignal(int sig) {
  static constexpr char kHead[] = "lazycl-fuzz: fatal signal; the stack of the thread it hit:\n";
  (void)!write(STDERR_FILENO, kHead, sizeof kHead - 1);
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  signal(sig, SIG_DFL);
  raise(sig);
}
#endif

void InstallCrashStack() {
#ifdef LAZYCL_FUZZ_CRASH_STACK
  void* warm[1];
  (void)backtrace(warm, 1);  // loads the unwinder now, not inside the handler
  struct sigaction action = {};
  action.sa_handler = OnFatalSignal;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) sigaction(sig, &action, nullptr);
#endif
}

}  // namespace
}  // namespace lazycl::fuzz

int main(int argc, char** argv) {
  using namespace lazycl::fuzz;
  InstallCrashStack();
  const Options o = Parse(argc, argv);
  try {
    const bool parts = o.per_process > 0 && (o.graphs == 0 || o.graphs > o.per_process);
    const Totals t = parts ? RunInParts(o) : Run(o, /*banner=*/true);
    std::cout << "lazycl-fuzz: " << t.graphs << " graphs, " << t.compared << " values and "
              << t.grads << " gradients compared, " << t.failed << " failed, " << t.seconds
              << " s, " << t.launches << " kernel launches, " << t.builds << " programs built ("
              << t.disk_hits << " from the disk cache)\n";
    return t.failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "lazycl-fuzz: " << e.what() << "\n";
    return 2;
  }
}
