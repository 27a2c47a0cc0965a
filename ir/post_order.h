#pragma once

#include <span>
#include <vector>

#include "absl/functional/function_ref.h"
#include "ir/ir.h"

// The one traversal of IR graphs, used by every pass that walks operands before users
// (Substitute, Backprop, the host interpreter, the executor's topological order, a traced
// Function's leaves). Iterative, so deep graphs cannot exhaust the stack.
namespace lazycl::ir {

// Every node reachable from `roots`, each once, operands before their users: a depth-first
// walk taking operands left to right, so the order is a function of the graph alone (the
// executor's plans depend on it). A node for which `stop` is true is listed but its operands
// are not walked through it (Backprop stops at its targets and at non-differentiable nodes;
// Substitute at the nodes it replaces).
std::vector<const Node*> PostOrder(
    std::span<const Node* const> roots,
    absl::FunctionRef<bool(const Node&)> stop = [](const Node&) { return false; });
std::vector<const Node*> PostOrder(
    std::span<const NodePtr> roots,
    absl::FunctionRef<bool(const Node&)> stop = [](const Node&) { return false; });

}  // namespace lazycl::ir
