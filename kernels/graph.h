#pragma once

#include <vector>

#include "frontend/ir.h"

namespace lazycl::kernels {

// What the executor hands to lowering: a topologically ordered DAG (operands before users),
// the parameter index of every Buffer leaf (leaves sharing one buffer share one parameter) and
// the nodes to materialize. Nodes are borrowed; the executor keeps them alive.
struct Graph {
  std::vector<const ir::Node*> nodes;
  std::vector<int> param_of;  // per node: parameter index of a Buffer leaf, else -1
  int num_params = 0;
  std::vector<int> outputs;  // node indices, in the executor's output order (may repeat)
};

}  // namespace lazycl::kernels
