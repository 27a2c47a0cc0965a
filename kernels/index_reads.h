#pragma once

#include <functional>

#include "ir/ir.h"

// The one "reads only at its own index" analysis. Lowering asks it whether a row kernel may take
// a reduction in (fusion_rules.cpp) and whether an elementwise chain may be a matmul's epilogue;
// code generation asks it whether a row kernel may store a value into its output row and read it
// back. Each asks the same question of the paths from a kernel's root down to one value.
namespace lazycl::kernels {

// A Reshape to its operand's own shape (what Tensor::detach() makes of a pending value): it
// reads its operand at its own index, as an elementwise op does.
bool IsIdentityReshape(const ir::Node& n);

// Whether `view` reads a 2-D product of shape `product` ([M, N]) by splitting its rows: [..., N]
// of M * N elements, the same element order (a [B, T, K] @ [K, N] product, run as
// [B * T, K] @ [K, N], read back as [B, T, N]).
bool SplitsRows(const ir::Shape& product, const ir::Shape& view);

// Which nodes a path from the root may pass through on its way to x.
enum class OwnIndex {
  // Elementwise nodes (and identity reshapes) of root's shape only, so x is read at root's own
  // index. Reductions end paths: in a row kernel they are values computed before the row
  // (codegen), and an epilogue chain holds none (its caller checks).
  kElement,
  // x is a per-row value of root's row kernel (fusion_rules.cpp): a node on a path may also be
  // a reduction of a value of root's shape (taken into the kernel, it reads its own row), an
  // Expand of a value of x's shape to root's shape, or elementwise (or an identity reshape) of
  // x's shape (log of a sum, a mean, softmax's detached max). A view such as a transpose on a
  // path would read other rows.
  kRow,
  // x is read at root's own linear index: every node on a path is elementwise or a Reshape
  // (which keeps the row-major order) of as many elements as root (a reduction's result read
  // by the chain stored in its place: a mean's scale, an argmax's index fix-up).
  kLinear,
};

// Nodes the kernel reads from memory (Buffer leaves and other kernels' results): they end
// paths, since what lies below them belongs to another kernel.
using IsKernelInput = std::function<bool(const ir::Node&)>;

// Whether `root` reads `x`, and reads it only as `mode` allows: every node on every path from
// root down to x (root included, x not) is of a kind `mode` names. Paths end at x, at nodes
// `is_input` names (root itself is never one: it is the value being computed) and, for
// kElement and kLinear, at reductions.
bool ReadsOnlyAtOwnIndex(const ir::Node& root, const ir::Node& x, const IsKernelInput& is_input,
                         OwnIndex mode = OwnIndex::kElement);

}  // namespace lazycl::kernels
