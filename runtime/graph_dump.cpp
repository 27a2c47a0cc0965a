#include "runtime/graph_dump.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace lazycl::runtime {

namespace {
absl::flat_hash_map<const ir::Node*, int> Indices(const kernels::Graph& graph) {
  absl::flat_hash_map<const ir::Node*, int> index;
  for (size_t i = 0; i < graph.nodes.size(); ++i) index[graph.nodes[i]] = static_cast<int>(i);
  return index;
}
}  // namespace

std::string GraphText(const kernels::Graph& graph) {
  auto index = Indices(graph);
  std::string out;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& n = *graph.nodes[i];
    std::vector<std::string> operands;
    for (const ir::NodePtr& o : n.operands)
      operands.push_back(absl::StrCat("%", index.at(o.get())));
    absl::StrAppend(&out, "%", i, " = ", ir::NodeString(n));
    if (!operands.empty()) absl::StrAppend(&out, " (", absl::StrJoin(operands, ", "), ")");
    if (graph.param_of[i] >= 0) absl::StrAppend(&out, " param ", graph.param_of[i]);
    if (i < graph.scalar_of.size() && graph.scalar_of[i] >= 0)
      absl::StrAppend(&out, " scalar ", graph.scalar_of[i]);
    absl::StrAppend(&out, "\n");
  }
  std::vector<std::string> outputs;
  for (int o : graph.outputs) outputs.push_back(absl::StrCat("%", o));
  absl::StrAppend(&out, "outputs: ", absl::StrJoin(outputs, ", "), "\n");
  return out;
}

std::string GraphDot(const kernels::Graph& graph) {
  auto index = Indices(graph);
  std::string out = "digraph lazycl {\n  node [shape=box, fontname=monospace];\n";
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    absl::StrAppend(&out, "  n", i, " [label=\"%", i, " ", ir::NodeString(*graph.nodes[i]),
                    "\"];\n");
    for (const ir::NodePtr& o : graph.nodes[i]->operands) {
      absl::StrAppend(&out, "  n", index.at(o.get()), " -> n", i, ";\n");
    }
  }
  for (int o : graph.outputs) absl::StrAppend(&out, "  n", o, " [style=bold];\n");
  absl::StrAppend(&out, "}\n");
  return out;
}

std::string PlanSource(const kernels::Plan& plan) {
  std::string out;
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    const kernels::KernelSpec& spec = plan.kernels[k];
    absl::StrAppend(&out, "// kernel ", k, ": ", spec.summary, "\n// options: ", spec.options,
                    "\n");
    for (const kernels::Launch& launch : spec.launches) {
      std::vector<std::string> extra;
      for (const kernels::KernelArgSpec& a : launch.extra_args) {
        extra.push_back(absl::StrCat(
            a.kind == kernels::KernelArgSpec::Kind::kInt32 ? "int " : "long ", a.value));
      }
      absl::StrAppend(
          &out, "// launch ", launch.name, ": global {", absl::StrJoin(launch.global, ", "),
          "} local {", absl::StrJoin(launch.local, ", "), "}",
          extra.empty() ? "" : absl::StrCat(", then ", absl::StrJoin(extra, ", ")), "\n");
    }
    absl::StrAppend(&out, spec.text(), "\n");
  }
  return out;
}

void DumpGraph(const std::string& dir, uint64_t key, const kernels::Graph& graph,
               const kernels::Plan& plan) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  const std::string base = absl::StrCat(dir, "/graph_", absl::Hex(key, absl::kZeroPad16));
  const std::pair<const char*, std::string> files[] = {
      {".txt", GraphText(graph)}, {".dot", GraphDot(graph)}, {".cl", PlanSource(plan)}};
  for (const auto& [ext, text] : files) {
    std::ofstream file(base + ext);
    file << text;
    if (!file) std::fprintf(stderr, "lazycl: cannot write %s%s\n", base.c_str(), ext);
  }
}

}  // namespace lazycl::runtime
