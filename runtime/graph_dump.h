#pragma once

#include <string>

#include "kernels/graph.h"
#include "kernels/plan.h"

// Text for LAZYCL_DEBUG and LAZYCL_DUMP_DIR.
namespace lazycl::runtime {

std::string GraphText(const kernels::Graph& graph);  // one line per node
std::string GraphDot(const kernels::Graph& graph);   // Graphviz
std::string PlanSource(const kernels::Plan& plan);   // every kernel's OpenCL C

// Writes <dir>/graph_<hex>.txt, .dot and .cl; failures are reported on stderr, never thrown.
void DumpGraph(const std::string& dir, uint64_t key, const kernels::Graph& graph,
               const kernels::Plan& plan);

}  // namespace lazycl::runtime
