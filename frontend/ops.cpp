#include "lazycl/ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status.h"
#include "frontend/dispatch.h"
#include "frontend/ops_more.h"
#include "ir/ir.h"

namespace lazycl {
namespace {

using base::Throw;
using base::ValueOrThrow;
using frontend::NodeOn;
using frontend::Wrap;
using ir::NodePtr;
using ir::Op;
using ir::Shape;

using frontend::NormalizeDim;
using frontend::Reduce;

NodePtr CastNode(NodePtr n, DType dtype) {
  if (n->dtype == dtype) return n;
  return base::ValueOrThrow(ir::MakeCast(std::move(n), dtype));
}

// Whether two shapes broadcast together (NumPy's rule).
bool Broadcastable(const Shape& a, const Shape& b) {
  for (size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
    const int64_t x = a[a.size() - i];
    const int64_t y = b[b.size() - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

}  // namespace

namespace frontend {
ir::Shape BroadcastShapes(const std::vector<const ir::Shape*>& shapes, absl::string_view op) {
  size_t rank = 0;
  for (const ir::Shape* s : shapes) rank = std::max(rank, s->size());
  ir::Shape out(rank, 1);
  for (const ir::Shape* s : shapes) {
    const size_t offset = rank - s->size();
    for (size_t d = 0; d < s->size(); ++d) {
      int64_t& o = out[offset + d];
      const int64_t v = (*s)[d];
      if (o == 1) {
        o = v;
      } else if (v != 1 && v != o) {
        std::vector<std::string> names;
        for (const ir::Shape* t : shapes) names.push_back(ir::ShapeString(*t));
        base::ThrowInvalid(op, absl::StrCat("shapes ", absl::StrJoin(names, " and "),
                                            " cannot be broadcast together (dim ", offset + d, ": ",
                                            o, " vs ", v, ")"));
      }
    }
  }
  return out;
}
}  // namespace frontend

namespace {

using frontend::BroadcastShapes;

NodePtr BroadcastNode(NodePtr n, const Shape& shape) {
  if (n->shape == shape) return n;
  if (n->shape.size() < shape.size()) {
    Shape padded(shape.size() - n->shape.size(), 1);
    padded.insert(padded.end(), n->shape.begin(), n->shape.end());
    n = base::ValueOrThrow(ir::MakeReshape(std::move(n), std::move(padded)));
  }
  if (n->shape == shape) return n;
  return base::ValueOrThrow(ir::MakeExpand(std::move(n), shape));
}

// The user's number as a rank-0 Scalar leaf (a kernel argument, not part of the graph's
// structure: a new learning rate compiles nothing) on the other operand's device, in the dtype it
// computes in. With `bake`, a Constant instead, baked into the kernel's source.
Tensor Scalar(double value, const Tensor& like, bool bake = false) {
  DType dtype = like.dtype();
  const bool integral_value = std::floor(value) == value && std::isfinite(value);
  if (!integral_value && !is_floating(dtype)) dtype = DType::f32;
  if (dtype == DType::boolean) dtype = DType::i32;
  // An integral scalar must fit the integer dtype it computes in (PyTorch: "value cannot be
  // converted to type int32 without overflow"), rather than wrap silently.
  const double limit = dtype == DType::i32 ? 2147483648.0 : 9223372036854775808.0;
  if (!is_floating(dtype) && !(value >= -limit && value < limit)) {
    base::Throw(absl::InvalidArgumentError(absl::StrFormat(
        "scalar %.0f cannot be converted to type %s without overflow (the tensor operand is %s%s; "
        "cast it to a wider dtype first)",
        value, dtype_name(dtype), dtype_name(like.dtype()), ir::ShapeString(like.shape()))));
  }
  return Wrap(bake ? ir::MakeConstant(value, dtype, {}) : ir::MakeScalar(value, dtype, {}),
              like.device());
}

// Composites (ir/op_table.h): ops written with others, having no IR op of their own; their
// gradients come from the ops they are made of.

// -x as x * -1: keeps -0.0 for +0.0 (0 - x would not); integers wrap (-INT_MIN == INT_MIN).
absl::StatusOr<NodePtr> NegNode(NodePtr x) {
  if (x->dtype == DType::boolean) {
    return base::InvalidArgument(
        "neg", "not defined for bool tensors; cast to an integer or float dtype first");
  }
  NodePtr minus_one = ir::MakeConstant(-1, x->dtype, x->shape);
  return ir::MakeBinary(Op::kMul, std::move(x), std::move(minus_one));
}

// The shared path of binary and comparison ops: common device, dtype and shape. With
// `negate_b`, b is negated after promotion and broadcasting (sub = a + neg(b): IEEE a - b is
// a + (-b), and integers wrap alike).
Tensor Binary(Op op, const Tensor& a, const Tensor& b, absl::string_view name,
              bool negate_b = false) {
  const Device device = frontend::OpDevice({&a, &b}, name);
  const NodePtr a0 = NodeOn(a, device, name, 0);
  const NodePtr b0 = NodeOn(b, device, name, 1);
  NodePtr x = a0;
  NodePtr y = b0;
  DType dtype = promote(x->dtype, y->dtype);
  if ((op == Op::kDiv || op == Op::kPow) && !is_floating(dtype)) dtype = DType::f32;
  if (ir::Category(op) == ir::OpCategory::Binary && dtype == DType::boolean) dtype = DType::i32;
  const Shape shape = BroadcastShapes({&x->shape, &y->shape}, name);
  x = BroadcastNode(CastNode(std::move(x), dtype), shape);
  y = BroadcastNode(CastNode(std::move(y), dtype), shape);
  if (negate_b) y = ValueOrThrow(NegNode(std::move(y)));
  return Wrap(ir::MakeBinary(op, std::move(x), std::move(y)), device, {{&a, a0}, {&b, b0}});
}

Tensor Unary(Op op, const Tensor& x, absl::string_view name, bool floating) {
  const Device device = frontend::OpDevice({&x}, name);
  const NodePtr x0 = NodeOn(x, device, name, 0);
  NodePtr n = x0;
  if (floating && !is_floating(n->dtype)) n = CastNode(std::move(n), DType::f32);
  return Wrap(ir::MakeUnary(op, std::move(n)), device, {{&x, x0}});
}

std::vector<int64_t> ReduceAxes(const Tensor& x, std::vector<int64_t> dims, absl::string_view op) {
  frontend::ImplOf(x, op);  // an undefined x is an Error naming the op
  const int64_t rank = x.dim();
  if (dims.empty()) {
    dims.resize(rank);
    std::iota(dims.begin(), dims.end(), 0);
    return dims;
  }
  for (int64_t& d : dims) d = NormalizeDim(d, rank, op);
  std::sort(dims.begin(), dims.end());
  if (std::adjacent_find(dims.begin(), dims.end()) != dims.end()) {
    base::ThrowInvalid(op, absl::StrCat("dims (", absl::StrJoin(dims, ","), ") repeat a dim"));
  }
  return dims;
}

// An op of x alone on x's device (views, casts, unary composites): `make` builds its IR.
Tensor View(const Tensor& x, absl::string_view name, const auto& make) {
  const Device device = frontend::OpDevice({&x}, name);
  const NodePtr x0 = NodeOn(x, device, name, 0);
  return Wrap(make(x0), device, {{&x, x0}});
}

}  // namespace

namespace frontend {

int64_t NormalizeDim(int64_t dim, int64_t rank, absl::string_view op, bool inclusive_end) {
  const int64_t limit = inclusive_end ? rank + 1 : rank;
  if (dim < -limit || dim >= limit) {
    base::ThrowInvalid(op, absl::StrCat("dim ", dim, " is out of range for a tensor of rank ", rank,
                                        " (expected ", -limit, " <= dim < ", limit, ")"));
  }
  return dim < 0 ? dim + limit : dim;
}

Tensor Reduce(Op op, const Tensor& x, std::vector<int64_t> dims, bool keepdim,
              absl::string_view name, DType compute) {
  const std::vector<int64_t> axes = ReduceAxes(x, std::move(dims), name);
  const Device device = frontend::OpDevice({&x}, name);
  const NodePtr x0 = NodeOn(x, device, name, 0);
  NodePtr n = CastNode(x0, compute);
  NodePtr r = base::ValueOrThrow(ir::MakeReduce(op, std::move(n), axes));
  if (!keepdim) {
    Shape kept;
    for (size_t d = 0; d < r->shape.size(); ++d) {
      if (!std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(d)))
        kept.push_back(r->shape[d]);
    }
    r = base::ValueOrThrow(ir::MakeReshape(std::move(r), std::move(kept)));
  }
  return Wrap(std::move(r), device, {{&x, x0}});
}

}  // namespace frontend

Tensor neg(const Tensor& x) { return View(x, "neg", NegNode); }
Tensor exp(const Tensor& x) { return Unary(Op::kExp, x, "exp", true); }
Tensor log(const Tensor& x) { return Unary(Op::kLog, x, "log", true); }
Tensor sqrt(const Tensor& x) { return Unary(Op::kSqrt, x, "sqrt", true); }
Tensor tanh(const Tensor& x) { return Unary(Op::kTanh, x, "tanh", true); }
Tensor sigmoid(const Tensor& x) { return Unary(Op::kSigmoid, x, "sigmoid", true); }
Tensor erf(const Tensor& x) { return Unary(Op::kErf, x, "erf", true); }
Tensor relu(const Tensor& x) { return Unary(Op::kRelu, x, "relu", false); }
Tensor abs(const Tensor& x) { return Unary(Op::kAbs, x, "abs", false); }
Tensor sin(const Tensor& x) { return Unary(Op::kSin, x, "sin", true); }
Tensor cos(const Tensor& x) { return Unary(Op::kCos, x, "cos", true); }

Tensor cast(const Tensor& x, DType dtype) {
  return View(x, "cast", [&](NodePtr n) { return CastNode(std::move(n), dtype); });
}

Tensor add(const Tensor& a, const Tensor& b) { return Binary(Op::kAdd, a, b, "add"); }
Tensor sub(const Tensor& a, const Tensor& b) {
  return Binary(Op::kAdd, a, b, "sub", /*negate_b=*/true);
}
Tensor mul(const Tensor& a, const Tensor& b) { return Binary(Op::kMul, a, b, "mul"); }
Tensor div(const Tensor& a, const Tensor& b) { return Binary(Op::kDiv, a, b, "div"); }
Tensor maximum(const Tensor& a, const Tensor& b) { return Binary(Op::kMaximum, a, b, "maximum"); }
Tensor minimum(const Tensor& a, const Tensor& b) { return Binary(Op::kMinimum, a, b, "minimum"); }
Tensor pow(const Tensor& a, const Tensor& b) { return Binary(Op::kPow, a, b, "pow"); }
// An exponent of exactly 2 stays baked: measured on PoCL (4M f32 elements, CPU and GPU codegen),
// pow(x, 2) with the literal runs in ~525 ms, with 2 as an argument in ~605 ms (the compiler
// specialises pow for a known exponent, though not into x * x, which takes 0.65 ms). Every other
// exponent is an argument.
Tensor pow(const Tensor& a, double exponent) {
  return Binary(Op::kPow, a, Scalar(exponent, a, /*bake=*/exponent == 2), "pow");
}

Tensor lt(const Tensor& a, const Tensor& b) { return Binary(Op::kLt, a, b, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return Binary(Op::kLe, a, b, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return Binary(Op::kGt, a, b, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return Binary(Op::kGe, a, b, "ge"); }
Tensor eq(const Tensor& a, const Tensor& b) { return Binary(Op::kEq, a, b, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return Binary(Op::kNe, a, b, "ne"); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Device device = frontend::OpDevice({&cond, &a, &b}, "where");
  NodePtr c = NodeOn(cond, device, "where", 0);
  if (c->dtype != DType::boolean) {
    base::ThrowInvalid(
        "where", absl::StrCat("the condition must be a bool tensor, got ", dtype_name(c->dtype)));
  }
  const NodePtr a0 = NodeOn(a, device, "where", 1);
  const NodePtr b0 = NodeOn(b, device, "where", 2);
  const NodePtr c0 = c;
  NodePtr x = a0;
  NodePtr y = b0;
  const DType dtype = promote(x->dtype, y->dtype);
  const Shape shape = BroadcastShapes({&c->shape, &x->shape, &y->shape}, "where");
  return Wrap(ir::MakeWhere(BroadcastNode(std::move(c), shape),
                            BroadcastNode(CastNode(std::move(x), dtype), shape),
                            BroadcastNode(CastNode(std::move(y), dtype), shape)),
              device, {{&cond, c0}, {&a, a0}, {&b, b0}});
}
Tensor where(const Tensor& cond, const Tensor& a, double b) { return where(cond, a, Scalar(b, a)); }
Tensor where(const Tensor& cond, double a, const Tensor& b) { return where(cond, Scalar(a, b), b); }

Tensor sum(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  frontend::ImplOf(x, "sum");
  const DType compute = is_floating(x.dtype()) ? x.dtype() : DType::i64;
  return Reduce(Op::kSum, x, std::move(dims), keepdim, "sum", compute);
}

Tensor mean(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  const std::vector<int64_t> axes = ReduceAxes(x, dims, "mean");
  int64_t count = 1;
  for (int64_t a : axes) count *= x.size(a);
  Tensor total =
      Reduce(Op::kSum, x, axes, keepdim, "mean", is_floating(x.dtype()) ? x.dtype() : DType::f32);
  // The mean of nothing is NaN, as in NumPy. 1/count is a Scalar (an argument): means over many
  // lengths share one program.
  return total * (count == 0 ? std::nan("") : 1.0 / static_cast<double>(count));
}

Tensor max(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  frontend::ImplOf(x, "max");
  return Reduce(Op::kMax, x, std::move(dims), keepdim, "max", x.dtype());
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  const Device device = frontend::OpDevice({&a, &b}, "matmul");
  const NodePtr a0 = NodeOn(a, device, "matmul", 0);
  const NodePtr b0 = NodeOn(b, device, "matmul", 1);
  NodePtr x = a0;
  NodePtr y = b0;
  if (x->shape.size() < 2 || y->shape.size() < 2) {
    base::ThrowInvalid(
        "matmul", absl::StrCat("expected operands of rank >= 2, got ", ir::ShapeString(x->shape),
                               " and ", ir::ShapeString(y->shape)));
  }
  const int64_t k = x->shape.back();
  if (k != y->shape[y->shape.size() - 2]) {
    base::ThrowInvalid("matmul",
                       absl::StrCat("inner dimensions differ: ", ir::ShapeString(x->shape), " @ ",
                                    ir::ShapeString(y->shape), " (", k, " vs ",
                                    y->shape[y->shape.size() - 2], ")"));
  }
  if (x->dtype == DType::boolean || y->dtype == DType::boolean) {
    base::ThrowInvalid("matmul", "bool operands are not supported; cast them first");
  }
  const DType dtype = promote(x->dtype, y->dtype);
  if (y->shape.size() == 2 && x->shape.size() > 2 && k > 0 && !ir::IsView(x->op)) {
    // [.., M, K] @ [K, N] as one [B * M, K] @ [K, N] product (a contiguous operand reshapes for
    // free; a view stays batched and is read in place): b's gradient is then one product over
    // B * M rows rather than B products and a sum.
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < x->shape.size(); ++d) rows *= x->shape[d];
    Shape out(x->shape.begin(), x->shape.end() - 1);
    out.push_back(y->shape.back());
    absl::StatusOr<NodePtr> flat = ir::MakeReshape(CastNode(std::move(x), dtype), {rows, k});
    if (!flat.ok()) base::Throw(flat.status());
    absl::StatusOr<NodePtr> product =
        ir::MakeMatmul(*std::move(flat), CastNode(std::move(y), dtype));
    if (!product.ok()) base::Throw(product.status());
    return Wrap(ir::MakeReshape(*std::move(product), std::move(out)), device, {{&a, a0}, {&b, b0}});
  }
  const Shape xb(x->shape.begin(), x->shape.end() - 2);
  const Shape yb(y->shape.begin(), y->shape.end() - 2);
  if (!Broadcastable(xb, yb)) {
    base::ThrowInvalid("matmul",
                       absl::StrCat("batch dims ", ir::ShapeString(xb), " of ",
                                    ir::ShapeString(x->shape), " and ", ir::ShapeString(yb), " of ",
                                    ir::ShapeString(y->shape), " cannot be broadcast together"));
  }
  Shape batch = BroadcastShapes({&xb, &yb}, "matmul");
  Shape xs = batch;
  xs.insert(xs.end(), x->shape.end() - 2, x->shape.end());
  Shape ys = batch;
  ys.insert(ys.end(), y->shape.end() - 2, y->shape.end());
  x = BroadcastNode(CastNode(std::move(x), dtype), xs);
  y = BroadcastNode(CastNode(std::move(y), dtype), ys);
  return Wrap(ir::MakeMatmul(std::move(x), std::move(y)), device, {{&a, a0}, {&b, b0}});
}

Tensor reshape(const Tensor& x, std::vector<int64_t> shape) {
  const int64_t numel = x.numel();
  int infer = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      if (infer >= 0)
        base::ThrowInvalid("reshape",
                           absl::StrCat("only one dim of ", ir::ShapeString(shape), " can be -1"));
      infer = static_cast<int>(d);
    } else if (shape[d] < 0) {
      base::ThrowInvalid("reshape",
                         absl::StrCat("invalid size ", shape[d], " in ", ir::ShapeString(shape)));
    }
  }
  // The product of the given dims must not overflow before it is compared or divided.
  std::vector<int64_t> given = shape;
  if (infer >= 0) given[infer] = 1;
  if (!ir::ValidateShape(given, "reshape").ok()) {
    base::ThrowInvalid("reshape", absl::StrCat("shape ", ir::ShapeString(shape),
                                               " has too many elements: its element count "
                                               "overflows 64 bits"));
  }
  const int64_t known = ir::NumElements(given);
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) {
      base::ThrowInvalid("reshape",
                         absl::StrCat("cannot reshape ", ir::ShapeString(x.shape()), " (", numel,
                                      " elements) to ", ir::ShapeString(shape)));
    }
    shape[infer] = numel / known;
  }
  return View(x, "reshape", [&](NodePtr n) -> absl::StatusOr<NodePtr> {
    if (n->shape == shape) return n;
    return ir::MakeReshape(std::move(n), shape);
  });
}

Tensor permute(const Tensor& x, std::vector<int64_t> dims) {
  const int64_t rank = x.dim();
  if (static_cast<int64_t>(dims.size()) != rank) {
    base::ThrowInvalid("permute",
                       absl::StrCat("got ", dims.size(), " dims (", absl::StrJoin(dims, ","),
                                    ") for a tensor of rank ", rank));
  }
  for (int64_t& d : dims) d = NormalizeDim(d, rank, "permute");
  return View(x, "permute", [&](NodePtr n) { return ir::MakePermute(std::move(n), dims); });
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  const int64_t rank = x.dim();
  dim0 = NormalizeDim(dim0, rank, "transpose");
  dim1 = NormalizeDim(dim1, rank, "transpose");
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[dim0], perm[dim1]);
  return permute(x, perm);
}

Tensor broadcast_to(const Tensor& x, std::vector<int64_t> shape) {
  const Shape from = frontend::NodeOf(frontend::ImplOf(x, "broadcast_to"))->shape;
  bool ok = from.size() <= shape.size();
  for (size_t d = 0; ok && d < from.size(); ++d) {
    const int64_t want = shape[shape.size() - from.size() + d];
    ok = from[d] == want || from[d] == 1;
  }
  for (int64_t d : shape) ok = ok && d >= 0;
  if (!ok) {
    base::ThrowInvalid("broadcast_to", absl::StrCat("cannot broadcast ", ir::ShapeString(from),
                                                    " to ", ir::ShapeString(shape)));
  }
  return View(x, "broadcast_to", [&](NodePtr n) { return BroadcastNode(std::move(n), shape); });
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end) {
  const int64_t rank = x.dim();
  dim = NormalizeDim(dim, rank, "slice");
  const int64_t size = x.size(dim);
  auto clamp = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  start = clamp(start);
  end = std::max(start, clamp(end));
  return View(x, "slice", [&](NodePtr n) -> absl::StatusOr<NodePtr> {
    if (start == 0 && end == size) return n;
    std::vector<int64_t> starts(rank, 0);
    starts[dim] = start;
    Shape shape = n->shape;
    shape[dim] = end - start;
    return ir::MakeSlice(std::move(n), std::move(starts), std::move(shape));
  });
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  dim = NormalizeDim(dim, x.dim(), "unsqueeze", /*inclusive_end=*/true);
  std::vector<int64_t> shape = x.shape();
  shape.insert(shape.begin() + dim, 1);
  return reshape(x, shape);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  dim = NormalizeDim(dim, x.dim(), "squeeze");
  std::vector<int64_t> shape = x.shape();
  if (shape[dim] != 1) {
    base::ThrowInvalid("squeeze", absl::StrCat("dim ", dim, " of ", ir::ShapeString(shape),
                                               " has size ", shape[dim], ", not 1"));
  }
  shape.erase(shape.begin() + dim);
  return reshape(x, shape);
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) base::ThrowInvalid("cat", "expected at least one tensor");
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : tensors) {
    frontend::ImplOf(t, "cat");
    ptrs.push_back(&t);
  }
  const Shape first = frontend::NodeOf(*tensors[0].impl())->shape;
  const int64_t rank = static_cast<int64_t>(first.size());
  if (rank == 0) base::ThrowInvalid("cat", "cannot concatenate rank-0 tensors; stack them instead");
  dim = NormalizeDim(dim, rank, "cat");
  DType dtype = tensors[0].dtype();
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Shape s = frontend::NodeOf(*tensors[i].impl())->shape;
    bool ok = static_cast<int64_t>(s.size()) == rank;
    for (int64_t d = 0; ok && d < rank; ++d) ok = d == dim || s[d] == first[d];
    if (!ok) {
      base::ThrowInvalid(
          "cat", absl::StrCat("tensor ", i, " has shape ", ir::ShapeString(s), " but tensor 0 has ",
                              ir::ShapeString(first), "; all dims but ", dim, " must match"));
    }
    total += s[dim];
    dtype = promote(dtype, tensors[i].dtype());
  }
  const Device device = frontend::OpDevice(ptrs, "cat");
  // Each part is padded to the full extent and the parts are summed: one fused expression.
  // Bool parts are summed as i32.
  const DType sum_dtype = dtype == DType::boolean ? DType::i32 : dtype;
  Shape out = first;
  out[dim] = total;
  NodePtr acc;
  int64_t offset = 0;
  std::vector<frontend::OpInput> inputs;
  for (size_t i = 0; i < tensors.size(); ++i) {
    inputs.push_back({&tensors[i], NodeOn(tensors[i], device, "cat", static_cast<int>(i))});
    NodePtr n = CastNode(inputs.back().node, sum_dtype);
    const int64_t extent = n->shape[dim];
    std::vector<int64_t> before(rank, 0);
    before[dim] = offset;
    offset += extent;
    // Padded with -0.0 (for floats): x + -0.0 is x for every x, so a -0.0 part stays -0.0.
    if (n->shape != out) {
      n = base::ValueOrThrow(ir::MakePad(std::move(n), std::move(before), out, -0.0));
    }
    acc = acc ? base::ValueOrThrow(ir::MakeBinary(Op::kAdd, std::move(acc), std::move(n)))
              : std::move(n);
  }
  return Wrap(CastNode(std::move(acc), dtype), device, inputs);
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (tensors.empty()) base::ThrowInvalid("stack", "expected at least one tensor");
  const int64_t rank = tensors[0].dim();
  dim = NormalizeDim(dim, rank, "stack", /*inclusive_end=*/true);
  std::vector<Tensor> parts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].shape() != tensors[0].shape()) {
      base::ThrowInvalid(
          "stack", absl::StrCat("tensor ", i, " has shape ", ir::ShapeString(tensors[i].shape()),
                                " but tensor 0 has ", ir::ShapeString(tensors[0].shape())));
    }
    parts.push_back(unsqueeze(tensors[i], dim));
  }
  return cat(parts, dim);
}

Tensor softmax(const Tensor& x, int64_t dim) {
  dim = NormalizeDim(dim, x.dim(), "softmax");
  // max has no identity over an empty dim; the result is empty then (as in PyTorch) and needs no
  // shift. The shift is a constant to autograd (JAX's stop_gradient): softmax does not depend on
  // it, so the gradient that would flow through max is zero and costs a pass over x for nothing.
  if (x.size(dim) == 0 || !is_floating(x.dtype())) {
    Tensor z = x.size(dim) == 0 ? x : x - max(x, {dim}, true).detach();
    Tensor e = exp(z);
    return e / sum(e, {dim}, true);
  }
  // The same ops as one recorded expression, so that its gradient is taken over all of it:
  // ir::Backprop's softmax rule, y (g - sum(g y)), one pass that reads y.
  const Device device = frontend::OpDevice({&x}, "softmax");
  const NodePtr x0 = NodeOn(x, device, "softmax", 0);
  const NodePtr shift = ir::MakeStopGradient(ValueOrThrow(ir::MakeReduce(Op::kMax, x0, {dim})));
  const NodePtr z = ValueOrThrow(
      ir::MakeBinary(Op::kAdd, x0, ValueOrThrow(NegNode(BroadcastNode(shift, x0->shape)))));
  const NodePtr e = ValueOrThrow(ir::MakeUnary(Op::kExp, z));
  const NodePtr s = ValueOrThrow(ir::MakeReduce(Op::kSum, e, {dim}));
  return Wrap(ir::MakeBinary(Op::kDiv, e, BroadcastNode(s, e->shape)), device, {{&x, x0}});
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  dim = NormalizeDim(dim, x.dim(), "log_softmax");
  Tensor z = x.size(dim) == 0 ? x : x - max(x, {dim}, true).detach();  // see softmax
  return z - log(sum(exp(z), {dim}, true));
}

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, Scalar(b, a)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, Scalar(b, a)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, Scalar(b, a)); }
Tensor operator/(const Tensor& a, double b) { return div(a, Scalar(b, a)); }
Tensor operator+(double a, const Tensor& b) { return add(Scalar(a, b), b); }
Tensor operator-(double a, const Tensor& b) { return sub(Scalar(a, b), b); }
Tensor operator*(double a, const Tensor& b) { return mul(Scalar(a, b), b); }
Tensor operator/(double a, const Tensor& b) { return div(Scalar(a, b), b); }

}  // namespace lazycl
