// lazycl-fuzz: random graphs of 1-40 ops (graph.h) built on the host and on a device, compared.
//
//   lazycl-fuzz [--seed S] [--graphs N] [--minutes M] [--max-ops K] [--grad-every K]
//               [--from G] [--device cl:0]
//
// Every graph's values are compared on host and device; for every K-th structure (default 2)
// the gradient of a random scalar loss too, on host and device and (for smooth graphs) against
// finite differences (graph.h, CheckGradients).
// Graph g of seed S is structure g / 8 of S, run with size palette g % 8. It stops after N
// graphs or M minutes, whichever comes first (0 = no limit). A failing graph is shrunk and
// printed as an op list and as a C++ program; the exit status is 1 when any graph failed, 2 for
// bad arguments. The codegen strategy is LAZYCL_CODEGEN's (cpu or gpu), as for any program.
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
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
};

[[noreturn]] void Usage(const std::string& why) {
  std::cerr << "lazycl-fuzz: " << why
            << "\nusage: lazycl-fuzz [--seed S] [--graphs N] [--minutes M] [--max-ops K] "
               "[--grad-every K] [--from G] [--device cl:N]\n";
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
    return Mismatch(host[index], dev[index], Coarsest(g, index));
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

int Run(const Options& o) {
  const Device device = Device::parse(o.device);
  const char* codegen = std::getenv("LAZYCL_CODEGEN");
  std::cout << "lazycl-fuzz: seed " << o.seed << ", device " << device.str() << " ("
            << default_env().device().str() << " default), codegen "
            << (codegen != nullptr ? codegen : "(default)") << ", up to " << o.max_ops
            << " ops per graph\n"
            << std::flush;
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
      const std::string bad = Mismatch(host[i], dev[i], Coarsest(graph, i));
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
    if (graphs % 100 == 0) {
      std::cout << "  " << graphs << " graphs, " << failed << " failed, " << minutes() * 60
                << " s\n"
                << std::flush;
    }
  }
  std::cout << "lazycl-fuzz: " << graphs << " graphs, " << compared << " values and "
            << grads_checked << " gradients compared, " << failed << " failed, " << minutes() * 60
            << " s, " << metrics::counter("KernelLaunches") << " kernel launches, "
            << metrics::counter("ProgramBuilds") << " programs built ("
            << metrics::counter("ProgramDiskCacheHits") << " from the disk cache)\n";
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace lazycl::fuzz

int main(int argc, char** argv) {
  const lazycl::fuzz::Options options = lazycl::fuzz::Parse(argc, argv);
  try {
    return lazycl::fuzz::Run(options);
  } catch (const lazycl::Error& e) {
    std::cerr << "lazycl-fuzz: " << e.what() << "\n";
    return 2;
  }
}
