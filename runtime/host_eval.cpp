#include "runtime/host_eval.h"

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backend/host_memory.h"
#include "base/check.h"
#include "base/half.h"
#include "base/random.h"
#include "ir/half_precision.h"
#include "ir/post_order.h"
#include "runtime/host_indexing.h"

namespace lazycl::runtime {
namespace {

using ir::Node;
using ir::Op;
using ir::Shape;

using Bool = uint8_t;  // the element type of DType::boolean, always 0 or 1

// The value of one evaluated node: its elements, contiguous row-major in the node's shape. The
// alternative held is the node's dtype.
// f16 and bf16 values are their bits (uint16_t): ir::ComputeHalfInF32 leaves only Buffer
// leaves and Casts of them to evaluate (EvalCast converts).
using Half = uint16_t;
using Array = std::variant<std::vector<float>, std::vector<int32_t>, std::vector<int64_t>,
                           std::vector<Bool>, std::vector<Half>, std::vector<double>>;

template <typename T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>{}) with T the element type of `dtype`.
template <typename F>
Array WithType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f(Tag<float>{});
    case DType::i32:
      return f(Tag<int32_t>{});
    case DType::i64:
      return f(Tag<int64_t>{});
    case DType::boolean:
      return f(Tag<Bool>{});
    case DType::f16:
    case DType::bf16:
      return f(Tag<Half>{});
    case DType::f64:
      return f(Tag<double>{});
  }
  LAZYCL_CHECK(false, "unknown dtype %d", static_cast<int>(dtype));
  return {};
}

template <typename T>
const std::vector<T>& As(const Array& a) {
  const std::vector<T>* v = std::get_if<std::vector<T>>(&a);
  LAZYCL_CHECK(v != nullptr, "operand holds an unexpected dtype");
  return *v;
}

// The element types an op takes, as constraints on its host function.
template <typename T>
concept Float = std::same_as<T, float> || std::same_as<T, double>;
template <typename T>
concept Int = std::same_as<T, int32_t> || std::same_as<T, int64_t>;
template <typename T>
concept Number = Float<T> || Int<T>;
template <typename T>
concept Boolean = std::same_as<T, Bool>;
template <typename T>
concept Element = Number<T> || Boolean<T>;

// Integer arithmetic wraps (two's complement): done in the unsigned type to stay defined.
template <typename T, typename Fn>
T Wrapping(Fn fn, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return fn(a, b);
  } else {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(fn(static_cast<U>(a), static_cast<U>(b)));
  }
}

// OpenCL convert_<int>_sat: truncate toward zero, saturate, NaN -> 0.
template <typename I, typename F>
I SaturatingToInt(F x) {
  if (std::isnan(x)) return 0;
  // The bounds are -2^(bits-1) and 2^(bits-1), both exact in float and double.
  constexpr F kLow = static_cast<F>(std::numeric_limits<I>::min());
  constexpr F kHighExclusive = -kLow;
  if (x <= kLow) return std::numeric_limits<I>::min();
  if (x >= kHighExclusive) return std::numeric_limits<I>::max();
  return static_cast<I>(x);
}

// The Cast semantics, also used for Constant (from double) and Iota (from int64_t).
template <typename To, typename From>
To Convert(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<To, Bool>) {
    return x != 0 ? 1 : 0;
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(x);
  } else if constexpr (std::is_floating_point_v<From>) {
    return SaturatingToInt<To>(x);
  } else {
    // Integer to integer: modulo 2^bits, i.e. sign extension when widening and the low bits
    // when narrowing.
    return static_cast<To>(static_cast<std::make_unsigned_t<To>>(x));
  }
}

// Row-major strides of `shape`, in elements.
std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// Calls f(index) for every multi-index of `shape`, in row-major order.
template <typename F>
void ForEachIndex(const Shape& shape, F&& f) {
  if (ir::NumElements(shape) == 0) return;
  std::vector<int64_t> index(shape.size(), 0);
  while (true) {
    f(index);
    size_t d = shape.size();
    while (d > 0 && ++index[d - 1] == shape[d - 1]) {
      index[d - 1] = 0;
      --d;
    }
    if (d == 0) return;
  }
}

// The input element that a view node's output element `index` reads (linear, in the operand's
// shape), or -1 for a Pad element outside the input.
int64_t ViewSource(const Node& node, const std::vector<int64_t>& in_strides,
                   const std::vector<int64_t>& index) {
  const Shape& in_shape = node.operands[0]->shape;
  int64_t source = 0;
  for (size_t d = 0; d < index.size(); ++d) {
    switch (node.op) {
      case Op::kPermute:
        source += index[d] * in_strides[node.args[d]];
        break;
      case Op::kExpand:
        if (in_shape[d] != 1) source += index[d] * in_strides[d];
        break;
      case Op::kSlice:
        source += (index[d] + node.args[d]) * in_strides[d];
        break;
      case Op::kPad: {
        const int64_t i = index[d] - node.args[d];
        if (i < 0 || i >= in_shape[d]) return -1;
        source += i * in_strides[d];
        break;
      }
      default:
        LAZYCL_CHECK(false, "%s is not a strided view", ir::OpName(node.op));
    }
  }
  return source;
}

template <typename T>
std::vector<T> EvalView(const Node& node, const std::vector<T>& in) {
  if (node.op == Op::kReshape) return in;
  const std::vector<int64_t> in_strides = Strides(node.operands[0]->shape);
  std::vector<T> out;
  out.reserve(ir::NumElements(node.shape));
  ForEachIndex(node.shape, [&](const std::vector<int64_t>& index) {
    const int64_t source = ViewSource(node, in_strides, index);
    LAZYCL_CHECK(source < static_cast<int64_t>(in.size()), "%s reads past its operand",
                 ir::NodeString(node).c_str());
    out.push_back(source < 0 ? static_cast<T>(node.value) : in[source]);
  });
  return out;
}

// Sums and matmul dot products accumulate in double for f32 (rounded once at the end) and f64,
// and in the unsigned type for integers (so they wrap).
template <typename T>
struct AccumulatorOf {
  using type = std::make_unsigned_t<T>;
};
template <>
struct AccumulatorOf<float> {
  using type = double;
};
template <>
struct AccumulatorOf<double> {
  using type = double;
};
template <typename T>
using Accumulator = typename AccumulatorOf<T>::type;

// The host reductions, one rule each: an accumulator type, the identity an output element starts
// from, and the combiner that folds in each input element (row-major input order).
struct SumRule {
  template <typename T>
  using Acc = Accumulator<T>;  // f32 sums in double and rounds once; integers wrap
  template <typename T>
  static Acc<T> Identity(int64_t /*reduced_size*/) {
    return 0;
  }
  template <typename T>
  static Acc<T> Combine(Acc<T> acc, T x) {
    return acc + static_cast<Acc<T>>(x);
  }
};
struct MaxRule {
  template <typename T>
  using Acc = T;
  // fmax(NaN, x) == x, so a NaN identity makes the first element the running max and leaves NaN
  // only where every element is NaN. Over nothing (the IR rejects it): -INFINITY or the minimum.
  template <typename T>
  static T Identity(int64_t reduced_size) {
    if constexpr (Float<T>) {
      return reduced_size == 0 ? -INFINITY : std::numeric_limits<T>::quiet_NaN();
    } else {
      return std::numeric_limits<T>::min();
    }
  }
  template <typename T>
  static T Combine(T acc, T x) {
    if constexpr (Float<T>) {
      return std::fmax(acc, x);
    } else {
      return std::max(acc, x);
    }
  }
};

// mathops block: min like max, prod like sum (f32 products in double, integers wrap).
struct MinRule {
  template <typename T>
  using Acc = T;
  template <typename T>
  static T Identity(int64_t reduced_size) {
    if constexpr (Float<T>) {
      return reduced_size == 0 ? INFINITY : std::numeric_limits<T>::quiet_NaN();
    } else {
      return std::numeric_limits<T>::max();
    }
  }
  template <typename T>
  static T Combine(T acc, T x) {
    if constexpr (Float<T>) {
      return std::fmin(acc, x);
    } else {
      return std::min(acc, x);
    }
  }
};
struct ProdRule {
  template <typename T>
  using Acc = Accumulator<T>;
  template <typename T>
  static Acc<T> Identity(int64_t /*reduced_size*/) {
    return 1;
  }
  template <typename T>
  static Acc<T> Combine(Acc<T> acc, T x) {
    return acc * static_cast<Acc<T>>(x);
  }
};

template <typename Rule, typename T>
std::vector<T> Reduce(const Node& node, const std::vector<T>& in) {
  const Shape& in_shape = node.operands[0]->shape;
  const int64_t out_size = ir::NumElements(node.shape);
  // The output keeps every axis, the reduced ones with size 1, so an input index reaches its
  // output element through the output strides with the reduced axes' strides zeroed.
  std::vector<int64_t> out_strides = Strides(node.shape);
  int64_t reduced_size = 1;
  for (int64_t axis : node.args) {
    out_strides[axis] = 0;
    reduced_size *= in_shape[axis];
  }
  using Acc = typename Rule::template Acc<T>;
  std::vector<Acc> acc(out_size, Rule::template Identity<T>(reduced_size));
  int64_t i = 0;
  ForEachIndex(in_shape, [&](const std::vector<int64_t>& index) {
    int64_t o = 0;
    for (size_t d = 0; d < index.size(); ++d) o += index[d] * out_strides[d];
    acc[o] = Rule::template Combine<T>(acc[o], in[i++]);
  });
  std::vector<T> out;
  out.reserve(out_size);
  for (Acc a : acc) out.push_back(static_cast<T>(a));
  return out;
}

// Cumsum along args[0] (from the end when args[1]): f32 runs in double, rounded per element;
// integers wrap.
template <typename T>
std::vector<T> Scan(const Node& node, const std::vector<T>& in) {
  const Shape& shape = node.shape;
  const size_t axis = static_cast<size_t>(node.args[0]);
  const bool reverse = node.args[1] != 0;
  int64_t outer = 1;
  int64_t inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = shape[axis];
  std::vector<T> out(in.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      Accumulator<T> acc = 0;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t j = (o * n + (reverse ? n - 1 - k : k)) * inner + i;
        acc += static_cast<Accumulator<T>>(in[j]);
        out[j] = static_cast<T>(acc);
      }
    }
  }
  return out;
}

template <typename T>
std::vector<T> EvalMatmul(const Node& node, const std::vector<T>& a, const std::vector<T>& b) {
  const Shape& a_shape = node.operands[0]->shape;
  const size_t rank = a_shape.size();
  const int64_t m_size = a_shape[rank - 2];
  const int64_t k_size = a_shape[rank - 1];
  const int64_t n_size = node.shape[rank - 1];
  int64_t batches = 1;
  for (size_t d = 0; d + 2 < rank; ++d) batches *= a_shape[d];

  // A row of C at a time, k outermost within it: each row of B is read in order, and every
  // element's sum still adds its products in k order, so the results are those of the dot
  // products one by one (the loop before this, which walked B's columns: 2.7 GFLOP/s at
  // [640, 128] x [128, 352] and 1.4 at 512^3 on a Zen 4 EPYC VM).
  std::vector<T> out(ir::NumElements(node.shape));
  std::vector<Accumulator<T>> acc(static_cast<size_t>(n_size));
  for (int64_t batch = 0; batch < batches; ++batch) {
    const T* a_batch = a.data() + batch * m_size * k_size;
    const T* b_batch = b.data() + batch * k_size * n_size;
    T* out_batch = out.data() + batch * m_size * n_size;
    for (int64_t m = 0; m < m_size; ++m) {
      std::fill(acc.begin(), acc.end(), Accumulator<T>{0});
      for (int64_t k = 0; k < k_size; ++k) {
        const auto x = static_cast<Accumulator<T>>(a_batch[m * k_size + k]);
        const T* b_row = b_batch + k * n_size;
        for (int64_t n = 0; n < n_size; ++n) acc[n] += x * static_cast<Accumulator<T>>(b_row[n]);
      }
      for (int64_t n = 0; n < n_size; ++n) out_batch[m * n_size + n] = static_cast<T>(acc[n]);
    }
  }
  return out;
}

absl::StatusOr<Array> ReadBuffer(const Node& node) {
  const ir::Storage& storage = *node.storage;
  backend::BufferManager& manager = storage.manager();
  LAZYCL_CHECK(storage.device().is_host(), "EvaluateOnHost got the device buffer '%s'",
               manager.Label(storage.id()).c_str());
  absl::Status readable = manager.CheckReadable(storage.id());
  if (!readable.ok()) return readable;
  const int64_t n = ir::NumElements(node.shape);
  const size_t bytes = static_cast<size_t>(n) * dtype_size(node.dtype);
  LAZYCL_CHECK(storage.bytes() >= bytes, "buffer '%s' holds %zu bytes, %s needs %zu",
               manager.Label(storage.id()).c_str(), storage.bytes(), ir::NodeString(node).c_str(),
               bytes);
  absl::Status status;
  Array array = WithType(node.dtype, [&](auto tag) -> Array {
    using T = typename decltype(tag)::type;
    std::vector<T> v(n);
    if (bytes > 0) status = manager.Download(storage.id(), v.data(), 0, bytes);
    if constexpr (std::is_same_v<T, Bool>) {
      for (Bool& x : v) x = x != 0 ? 1 : 0;
    }
    return v;
  });
  if (!status.ok()) return status;
  return array;
}

// How the host evaluates a node whose operands are evaluated (`operands` parallels its
// operands): one row per op, in LAZYCL_OPS order.
using Operands = std::vector<const Array*>;
using NodeEval = absl::StatusOr<Array> (*)(const Node& node, const Operands& operands);
struct HostRow {
  ir::Op op;
  NodeEval eval;
};

// Applies `f` element by element. It takes (x), (a, b) or (cond, a, b) by the op's arity, with
// a, b and x of one element type, and cond bool; its constraints say which element types it
// takes (the IR's dtype rules in ir.cpp admit no other).
template <typename F>
absl::StatusOr<Array> Elementwise(const Node& node, const Operands& in) {
  constexpr F f{};
  return std::visit(
      [&](const auto& last) -> Array {
        using T = typename std::decay_t<decltype(last)>::value_type;
        auto map = [&](const auto&... operands) {
          using R = decltype(f(operands[0]...));
          std::vector<R> out(last.size());
          for (size_t i = 0; i < out.size(); ++i) out[i] = f(operands[i]...);
          return out;
        };
        if constexpr (std::is_invocable_v<F, T>) {
          if (in.size() == 1) return map(last);
        }
        if constexpr (std::is_invocable_v<F, T, T>) {
          if (in.size() == 2) return map(As<T>(*in[0]), last);
        }
        if constexpr (std::is_invocable_v<F, Bool, T, T>) {
          if (in.size() == 3) return map(As<Bool>(*in[0]), As<T>(*in[1]), last);
        }
        LAZYCL_CHECK(false, "%s: no host function for these operands",
                     ir::NodeString(node).c_str());
        return last;
      },
      *in.back());
}
// The row of an elementwise op, from its scalar function.
template <typename F>
constexpr NodeEval Scalar(F) {
  return &Elementwise<F>;
}

absl::StatusOr<Array> EvalBuffer(const Node& node, const Operands&) { return ReadBuffer(node); }

absl::StatusOr<Array> EvalFill(const Node& node, const Operands&) {
  const int64_t n = ir::NumElements(node.shape);
  return WithType(node.dtype, [&](auto tag) -> Array {
    using T = typename decltype(tag)::type;
    std::vector<T> v(n);
    for (int64_t i = 0; i < n; ++i) {
      v[i] = node.op == Op::kIota ? Convert<T>(i) : Convert<T>(node.value);
    }
    return v;
  });
}

// Casts to and from f16 and bf16 go through f32, rounding to nearest even (base/half.h).
absl::StatusOr<Array> EvalCast(const Node& node, const Operands& in) {
  const DType from = node.operands[0]->dtype;
  if (is_half(node.dtype)) {
    LAZYCL_CHECK(from == DType::f32, "a cast to %s reads %s (ComputeHalfInF32 casts from f32)",
                 dtype_name(node.dtype), dtype_name(from));
    const std::vector<float>& x = As<float>(*in[0]);
    std::vector<Half> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      out[i] = node.dtype == DType::bf16 ? base::FloatToBf16(x[i]) : base::FloatToF16(x[i]);
    }
    return out;
  }
  if (is_half(from)) {
    const std::vector<Half>& x = As<Half>(*in[0]);
    std::vector<float> wide(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      wide[i] = from == DType::bf16 ? base::Bf16ToFloat(x[i]) : base::F16ToFloat(x[i]);
    }
    if (node.dtype == DType::f32) return wide;
    return WithType(node.dtype, [&](auto tag) -> Array {
      using To = typename decltype(tag)::type;
      std::vector<To> out;
      out.reserve(wide.size());
      for (float v : wide) out.push_back(Convert<To>(v));
      return out;
    });
  }
  return std::visit(
      [&](const auto& x) -> Array {
        using From = typename std::decay_t<decltype(x)>::value_type;
        return WithType(node.dtype, [&](auto tag) -> Array {
          using To = typename decltype(tag)::type;
          std::vector<To> out;
          out.reserve(x.size());
          for (From v : x) out.push_back(Convert<To>(v));
          return out;
        });
      },
      *in[0]);
}

absl::StatusOr<Array> EvalViewNode(const Node& node, const Operands& in) {
  return std::visit([&](const auto& x) -> Array { return EvalView(node, x); }, *in[0]);
}

template <typename Rule>
absl::StatusOr<Array> EvalReduce(const Node& node, const Operands& in) {
  return std::visit([&](const auto& x) -> Array { return Reduce<Rule>(node, x); }, *in[0]);
}

absl::StatusOr<Array> EvalScan(const Node& node, const Operands& in) {
  return std::visit(
      [&](const auto& x) -> Array {
        using T = typename std::decay_t<decltype(x)>::value_type;
        if constexpr (Boolean<T>) {
          LAZYCL_CHECK(false, "scan on bool");
          return x;
        } else {
          return Scan(node, x);
        }
      },
      *in[0]);
}

absl::StatusOr<Array> EvalMatmulNode(const Node& node, const Operands& in) {
  return std::visit(
      [&](const auto& a) -> Array {
        using T = typename std::decay_t<decltype(a)>::value_type;
        if constexpr (Boolean<T>) {
          LAZYCL_CHECK(false, "matmul on bool");
          return a;
        } else {
          return EvalMatmul(node, a, As<T>(*in[1]));
        }
      },
      *in[0]);
}

// Gather and ScatterAdd (host_indexing.h), for each index dtype.
template <typename F>
Array WithIndex(const Array& index, F&& f) {
  if (const auto* i32 = std::get_if<std::vector<int32_t>>(&index)) return f(*i32);
  return f(As<int64_t>(index));
}
absl::StatusOr<Array> EvalGather(const Node& node, const Operands& in) {
  return std::visit(
      [&](const auto& x) -> Array {
        return WithIndex(*in[1],
                         [&](const auto& index) -> Array { return GatherOnHost(node, x, index); });
      },
      *in[0]);
}
absl::StatusOr<Array> EvalScatterAdd(const Node& node, const Operands& in) {
  return std::visit(
      [&](const auto& x) -> Array {
        using T = typename std::decay_t<decltype(x)>::value_type;
        return WithIndex(*in[1], [&](const auto& index) -> Array {
          return ScatterAddOnHost(node, x, index, As<T>(*in[2]));
        });
      },
      *in[0]);
}

// The host semantics of every op (host_eval.h states them in words).
constexpr HostRow kHostRows[] = {
    {Op::kBuffer, &EvalBuffer},
    {Op::kConstant, &EvalFill},
    {Op::kScalar, &EvalFill},
    {Op::kIota, &EvalFill},
    {Op::kExp, Scalar([](Float auto x) { return std::exp(x); })},
    {Op::kLog, Scalar([](Float auto x) { return std::log(x); })},
    {Op::kSqrt, Scalar([](Float auto x) { return std::sqrt(x); })},
    {Op::kTanh, Scalar([](Float auto x) { return std::tanh(x); })},
    {Op::kSigmoid, Scalar([]<Float T>(T x) -> T { return T{1} / (T{1} + std::exp(-x)); })},
    {Op::kRelu, Scalar([]<Number T>(T x) { return x > 0 ? x : T{0}; })},
    {Op::kAbs, Scalar([]<Number T>(T x) -> T {
       if constexpr (Float<T>) return std::fabs(x);
       return x < 0 ? Wrapping(std::minus<>(), T{0}, x) : x;
     })},
    {Op::kSin, Scalar([](Float auto x) { return std::sin(x); })},
    {Op::kCos, Scalar([](Float auto x) { return std::cos(x); })},
    {Op::kErf, Scalar([](Float auto x) { return std::erf(x); })},
    {Op::kNot, Scalar([](Boolean auto x) -> Bool { return x != 0 ? 0 : 1; })},
    {Op::kCast, &EvalCast},
    {Op::kAdd, Scalar([]<Number T>(T a, T b) { return Wrapping(std::plus<>(), a, b); })},
    {Op::kMul, Scalar([]<Number T>(T a, T b) { return Wrapping(std::multiplies<>(), a, b); })},
    {Op::kDiv, Scalar([]<Float T>(T a, T b) { return a / b; })},
    {Op::kMaximum, Scalar([]<Number T>(T a, T b) -> T {
       if constexpr (Float<T>) return std::fmax(a, b);
       return std::max(a, b);
     })},
    {Op::kMinimum, Scalar([]<Number T>(T a, T b) -> T {
       if constexpr (Float<T>) return std::fmin(a, b);
       return std::min(a, b);
     })},
    {Op::kPow, Scalar([]<Float T>(T a, T b) -> T { return std::pow(a, b); })},
    {Op::kLt, Scalar([]<Element T>(T a, T b) -> Bool { return a < b; })},
    {Op::kLe, Scalar([]<Element T>(T a, T b) -> Bool { return a <= b; })},
    {Op::kGt, Scalar([]<Element T>(T a, T b) -> Bool { return a > b; })},
    {Op::kGe, Scalar([]<Element T>(T a, T b) -> Bool { return a >= b; })},
    {Op::kEq, Scalar([]<Element T>(T a, T b) -> Bool { return a == b; })},
    {Op::kNe, Scalar([]<Element T>(T a, T b) -> Bool { return a != b; })},
    {Op::kWhere, Scalar([]<Element T>(Bool cond, T a, T b) { return cond != 0 ? a : b; })},
    {Op::kReshape, &EvalViewNode},
    {Op::kPermute, &EvalViewNode},
    {Op::kExpand, &EvalViewNode},
    {Op::kSlice, &EvalViewNode},
    {Op::kPad, &EvalViewNode},
    {Op::kSum, &EvalReduce<SumRule>},
    {Op::kMax, &EvalReduce<MaxRule>},
    {Op::kMatmul, &EvalMatmulNode},
    {Op::kGather, &EvalGather},
    {Op::kScatterAdd, &EvalScatterAdd},
    // mathops block
    {Op::kRsqrt, Scalar([]<Float T>(T x) -> T { return T{1} / std::sqrt(x); })},
    {Op::kSilu, Scalar([]<Float T>(T x) -> T { return x / (T{1} + std::exp(-x)); })},
    // The constants as T: for f32 the same floats as 0.70710678f and friends.
    {Op::kGelu, Scalar([]<Float T>(T x) -> T {
       return T{0.5} * x * (T{1} + std::erf(x * static_cast<T>(0.70710678118654752)));
     })},
    {Op::kGeluTanh, Scalar([]<Float T>(T x) -> T {
       return x / (T{1} + std::exp(static_cast<T>(-1.5957691216057308) *
                                   (x + static_cast<T>(0.044715) * x * x * x)));
     })},
    {Op::kMin, &EvalReduce<MinRule>},
    {Op::kProd, &EvalReduce<ProdRule>},
    {Op::kCumsum, &EvalScan},
    // random block
    {Op::kRandomUniform, Scalar([]<std::same_as<int64_t> T>(T counter, T seed) -> float {
       return base::RandomUniform(counter, seed);
     })},
};
static_assert(std::size(kHostRows) == ir::kOpCount, "one host row per op");
static_assert(ir::IsOpTable(kHostRows), "host rows in LAZYCL_OPS order");

absl::StatusOr<std::shared_ptr<ir::Storage>> ToStorage(const Node& node, const Array& value) {
  backend::BufferManager& memory = backend::HostMemory();
  const size_t bytes = static_cast<size_t>(ir::NumElements(node.shape)) * dtype_size(node.dtype);
  // The installed abseil's StrCat takes absl::string_view, not std::string_view.
  const std::string dtype(dtype_name(node.dtype));
  auto storage = std::make_shared<ir::Storage>(
      Device::host(), &memory, bytes,
      absl::StrCat("host result ", dtype, ir::ShapeString(node.shape)));
  absl::Status status = memory.PrepareWrite(storage->id());
  if (!status.ok()) return status;
  std::visit(
      [&](const auto& v) {
        LAZYCL_CHECK(v.size() * sizeof(v[0]) == bytes, "%s evaluated to %zu elements",
                     ir::NodeString(node).c_str(), v.size());
        if (bytes > 0) std::memcpy(memory.Data(storage->id()), v.data(), bytes);
      },
      value);
  return storage;
}

}  // namespace

namespace {

// The host could not hold the value of `node` (or its working space): ResourceExhausted naming
// the bytes of the value, rather than a std::bad_alloc escaping lazycl.
absl::Status HostAllocFailed(const Node& node) {
  const int64_t bytes = ir::NumElements(node.shape) * static_cast<int64_t>(dtype_size(node.dtype));
  return absl::ResourceExhaustedError(
      absl::StrCat("host out of memory (", ir::OpName(node.op), " ", dtype_name(node.dtype),
                   ir::ShapeString(node.shape), " on the host): requested ", bytes, " bytes"));
}

}  // namespace

absl::StatusOr<std::shared_ptr<ir::Storage>> EvaluateOnHost(const ir::NodePtr& given) {
  // Half values compute in f32 (ir/half_precision.h).
  ir::NodePtr root = given;
  if (const ir::Node* r = given.get(); ir::HasHalf(std::span<const Node* const>(&r, 1))) {
    ir::NodePtr rewritten = ir::ComputeHalfInF32(std::span<const Node* const>(&r, 1))[0];
    if (rewritten != nullptr) root = std::move(rewritten);
  }
  // Every node's value stays here until the end; the map is what keeps a shared subgraph from
  // being evaluated once per path.
  absl::flat_hash_map<const Node*, Array> values;
  for (const Node* node : ir::PostOrder(std::span<const ir::NodePtr>(&root, 1))) {
    Operands operands;
    for (const ir::NodePtr& operand : node->operands) operands.push_back(&values.at(operand.get()));
    absl::StatusOr<Array> value = absl::InternalError("");
    try {
      value = kHostRows[static_cast<int>(node->op)].eval(*node, operands);
    } catch (const std::bad_alloc&) {
      return HostAllocFailed(*node);
    } catch (const std::length_error&) {
      return HostAllocFailed(*node);
    }
    if (!value.ok()) return value.status();
    values.emplace(node, *std::move(value));
  }
  return ToStorage(*root, values.at(root.get()));
}

}  // namespace lazycl::runtime
