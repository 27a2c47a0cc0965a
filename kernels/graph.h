#pragma once

#include <vector>

#include "ir/ir.h"

namespace lazycl::kernels {

// What the executor hands to lowering: a topologically ordered DAG (operands before users),
// the parameter index of every Buffer leaf (leaves sharing one buffer share one parameter), the
// scalar index of every Scalar leaf (its value is a kernel argument, bound at run time from the
// executor's list of values in this order) and the nodes to materialize. Nodes are borrowed; the
// executor keeps them alive.
struct Graph {
  std::vector<const ir::Node*> nodes;
  std::vector<int> param_of;  // per node: parameter index of a Buffer leaf, else -1
  int num_params = 0;
  std::vector<int> scalar_of;  // per node: scalar index of a Scalar leaf, else -1
  int num_scalars = 0;
  std::vector<int> outputs;  // node indices, in the executor's output order (unique)
  // When set, every parameter and output is read or written at an element offset given at run
  // time (KernelArgSpec::Kind::kOffset), so one plan serves many windows of the same buffers:
  // scan reads xs slices in place and writes ys into one stacked buffer.
  bool bind_offsets = false;
};

}  // namespace lazycl::kernels
