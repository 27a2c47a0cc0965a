// Shrinking a failing graph (graph.h, Shrink).
#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "fuzz/graph.h"

namespace lazycl::fuzz {
namespace {

bool Used(const Graph& g, int j) {
  for (size_t k = static_cast<size_t>(j) + 1; k < g.size(); ++k) {
    for (int o : Operands(g[k])) {
      if (o == j) return true;
    }
  }
  return false;
}

// `g` without step j, which no step reads.
Graph Erase(Graph g, int j) {
  g.erase(g.begin() + j);
  for (Step& s : g) {
    for (int* o : {&s.a, &s.b, &s.c}) {
      if (*o > j) --*o;
    }
  }
  return g;
}

// Steps that nothing reads, but the last (the output), removed.
Graph Prune(Graph g) {
  for (int j = static_cast<int>(g.size()) - 2; j >= 0; --j) {
    if (!Used(g, j)) g = Erase(std::move(g), j);
  }
  return g;
}

// Uses of step j read `to` instead (same shape and dtype), and j is removed.
Graph Bypass(Graph g, int j, int to) {
  for (size_t k = static_cast<size_t>(j) + 1; k < g.size(); ++k) {
    for (int* o : {&g[k].a, &g[k].b, &g[k].c}) {
      if (*o == j) *o = to;
    }
  }
  return Prune(std::move(g));
}

}  // namespace

Graph Shrink(Graph graph, const std::function<bool(const Graph&)>& fails, int budget) {
  // A candidate is smaller, or as long with fewer ops in call().
  auto calls = [](const Graph& g) {
    return std::count_if(g.begin(), g.end(), [](const Step& s) { return s.in_call; });
  };
  auto attempt = [&](const Graph& candidate) {
    const bool smaller = candidate.size() < graph.size() ||
                         (candidate.size() == graph.size() && calls(candidate) < calls(graph));
    if (budget <= 0 || !smaller) return false;
    --budget;
    if (!fails(candidate)) return false;
    graph = candidate;
    return true;
  };
  attempt(Prune(graph));
  // The shortest failing prefix: an earlier value may already be wrong.
  for (size_t end = 1; end < graph.size() && budget > 0; ++end) {
    if (graph[end - 1].kind == Kind::kInput) continue;
    if (attempt(Prune(Graph(graph.begin(), graph.begin() + static_cast<long>(end))))) break;
  }
  // Bypass ops, last first, while that keeps the failure.
  for (bool changed = true; changed && budget > 0;) {
    changed = false;
    for (int j = static_cast<int>(graph.size()) - 2; j >= 0 && !changed; --j) {
      const Step& s = graph[static_cast<size_t>(j)];
      for (int o : Operands(s)) {
        const Step& from = graph[static_cast<size_t>(o)];
        if (from.shape != s.shape || from.dtype != s.dtype) continue;
        if (attempt(Bypass(graph, j, o))) {
          changed = true;
          break;
        }
      }
    }
  }
  // Ops run plainly rather than in call(), while that keeps the failure.
  for (size_t j = 0; j < graph.size() && budget > 0; ++j) {
    if (!graph[j].in_call) continue;
    Graph plain = graph;
    plain[j].in_call = false;
    attempt(plain);
  }
  return graph;
}

}  // namespace lazycl::fuzz
