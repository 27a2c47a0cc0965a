#include "runtime/host_eval.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
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

namespace lazycl::runtime {
namespace {

using ir::Node;
using ir::Op;
using ir::Shape;

using Bool = uint8_t;  // the element type of DType::boolean, always 0 or 1

// The value of one evaluated node: its elements, contiguous row-major in the node's shape. The
// alternative held is the node's dtype.
using Array =
    std::variant<std::vector<float>, std::vector<int32_t>, std::vector<int64_t>, std::vector<Bool>>;

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

template <typename T>
constexpr bool kIsInt = std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;

// Integer arithmetic wraps (two's complement); done in the unsigned type to stay defined.
template <typename T>
T WrapNeg(T x) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U{0} - static_cast<U>(x));
}
template <typename T>
T WrapAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <typename T>
T WrapSub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <typename T>
T WrapMul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
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

template <typename T>
T ApplyUnary(Op op, T x) {
  if constexpr (std::is_same_v<T, float>) {
    switch (op) {
      case Op::kNeg:
        return -x;
      case Op::kAbs:
        return std::fabs(x);
      case Op::kRelu:
        return x > 0 ? x : 0.0f;
      case Op::kExp:
        return std::exp(x);
      case Op::kLog:
        return std::log(x);
      case Op::kSqrt:
        return std::sqrt(x);
      case Op::kTanh:
        return std::tanh(x);
      case Op::kSin:
        return std::sin(x);
      case Op::kCos:
        return std::cos(x);
      case Op::kSigmoid:
        return 1.0f / (1.0f + std::exp(-x));
      default:
        break;
    }
  } else if constexpr (kIsInt<T>) {
    switch (op) {
      case Op::kNeg:
        return WrapNeg(x);
      case Op::kAbs:
        return x < 0 ? WrapNeg(x) : x;
      case Op::kRelu:
        return x > 0 ? x : T{0};
      default:
        break;
    }
  } else {
    if (op == Op::kNot) return x != 0 ? 0 : 1;
  }
  LAZYCL_CHECK(false, "%s is not defined on this dtype", ir::OpName(op));
  return x;
}

template <typename T>
T ApplyBinary(Op op, T a, T b) {
  if constexpr (std::is_same_v<T, float>) {
    switch (op) {
      case Op::kAdd:
        return a + b;
      case Op::kSub:
        return a - b;
      case Op::kMul:
        return a * b;
      case Op::kDiv:
        return a / b;
      case Op::kMaximum:
        return std::fmax(a, b);
      case Op::kMinimum:
        return std::fmin(a, b);
      case Op::kPow:
        return std::pow(a, b);
      default:
        break;
    }
  } else if constexpr (kIsInt<T>) {
    switch (op) {
      case Op::kAdd:
        return WrapAdd(a, b);
      case Op::kSub:
        return WrapSub(a, b);
      case Op::kMul:
        return WrapMul(a, b);
      case Op::kMaximum:
        return std::max(a, b);
      case Op::kMinimum:
        return std::min(a, b);
      default:
        break;
    }
  }
  LAZYCL_CHECK(false, "%s is not defined on this dtype", ir::OpName(op));
  return a;
}

template <typename T>
Bool ApplyCompare(Op op, T a, T b) {
  switch (op) {
    case Op::kLt:
      return a < b;
    case Op::kLe:
      return a <= b;
    case Op::kGt:
      return a > b;
    case Op::kGe:
      return a >= b;
    case Op::kEq:
      return a == b;
    case Op::kNe:
      return a != b;
    default:
      break;
  }
  LAZYCL_CHECK(false, "%s is not a comparison", ir::OpName(op));
  return 0;
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
    out.push_back(source < 0 ? T{0} : in[source]);
  });
  return out;
}

// Sums and matmul dot products accumulate in double for f32 (rounded once at the end) and in
// the unsigned type for integers (so they wrap).
template <typename T>
struct AccumulatorOf {
  using type = std::make_unsigned_t<T>;
};
template <>
struct AccumulatorOf<float> {
  using type = double;
};
template <typename T>
using Accumulator = typename AccumulatorOf<T>::type;

template <typename T>
std::vector<T> EvalReduce(const Node& node, const std::vector<T>& in) {
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
  auto out_index = [&](const std::vector<int64_t>& index) {
    int64_t o = 0;
    for (size_t d = 0; d < index.size(); ++d) o += index[d] * out_strides[d];
    return o;
  };

  std::vector<T> out;
  if (node.op == Op::kSum) {
    std::vector<Accumulator<T>> acc(out_size, 0);
    int64_t i = 0;
    ForEachIndex(in_shape, [&](const std::vector<int64_t>& index) {
      acc[out_index(index)] += static_cast<Accumulator<T>>(in[i++]);
    });
    out.reserve(out_size);
    for (Accumulator<T> a : acc) out.push_back(static_cast<T>(a));
    return out;
  }
  LAZYCL_CHECK(node.op == Op::kMax, "%s is not a reduction", ir::OpName(node.op));
  if constexpr (std::is_floating_point_v<T>) {
    // fmax(NaN, x) == x, so a NaN seed makes the first element the running max and leaves NaN
    // only where every element is NaN.
    const T seed = reduced_size == 0 ? -INFINITY : std::numeric_limits<T>::quiet_NaN();
    out.assign(out_size, seed);
    int64_t i = 0;
    ForEachIndex(in_shape, [&](const std::vector<int64_t>& index) {
      T& o = out[out_index(index)];
      o = std::fmax(o, in[i++]);
    });
  } else {
    out.assign(out_size, std::numeric_limits<T>::min());
    int64_t i = 0;
    ForEachIndex(in_shape, [&](const std::vector<int64_t>& index) {
      T& o = out[out_index(index)];
      o = std::max(o, in[i++]);
    });
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

  std::vector<T> out(ir::NumElements(node.shape));
  for (int64_t batch = 0; batch < batches; ++batch) {
    const T* a_batch = a.data() + batch * m_size * k_size;
    const T* b_batch = b.data() + batch * k_size * n_size;
    T* out_batch = out.data() + batch * m_size * n_size;
    for (int64_t m = 0; m < m_size; ++m) {
      for (int64_t n = 0; n < n_size; ++n) {
        Accumulator<T> acc = 0;
        for (int64_t k = 0; k < k_size; ++k) {
          acc += static_cast<Accumulator<T>>(a_batch[m * k_size + k]) *
                 static_cast<Accumulator<T>>(b_batch[k * n_size + n]);
        }
        out_batch[m * n_size + n] = static_cast<T>(acc);
      }
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

// Evaluates one node whose operands are evaluated; `operands` parallels node.operands.
absl::StatusOr<Array> EvalNode(const Node& node, const std::vector<const Array*>& operands) {
  const int64_t n = ir::NumElements(node.shape);
  switch (ir::Category(node.op)) {
    case ir::OpCategory::Leaf:
      if (node.op == Op::kBuffer) return ReadBuffer(node);
      return WithType(node.dtype, [&](auto tag) -> Array {
        using T = typename decltype(tag)::type;
        std::vector<T> v(n);
        for (int64_t i = 0; i < n; ++i) {
          v[i] = node.op == Op::kConstant ? Convert<T>(node.value) : Convert<T>(i);
        }
        return v;
      });
    case ir::OpCategory::Unary:
      return std::visit(
          [&](const auto& x) -> Array {
            using T = typename std::decay_t<decltype(x)>::value_type;
            if (node.op == Op::kCast) {
              return WithType(node.dtype, [&](auto tag) -> Array {
                using To = typename decltype(tag)::type;
                std::vector<To> out;
                out.reserve(x.size());
                for (T v : x) out.push_back(Convert<To>(v));
                return out;
              });
            }
            std::vector<T> out;
            out.reserve(x.size());
            for (T v : x) out.push_back(ApplyUnary(node.op, v));
            return out;
          },
          *operands[0]);
    case ir::OpCategory::Binary:
    case ir::OpCategory::Compare:
      return std::visit(
          [&](const auto& a) -> Array {
            using T = typename std::decay_t<decltype(a)>::value_type;
            const std::vector<T>& b = As<T>(*operands[1]);
            if (ir::Category(node.op) == ir::OpCategory::Compare) {
              std::vector<Bool> out(a.size());
              for (size_t i = 0; i < a.size(); ++i) out[i] = ApplyCompare(node.op, a[i], b[i]);
              return out;
            }
            std::vector<T> out(a.size());
            for (size_t i = 0; i < a.size(); ++i) out[i] = ApplyBinary(node.op, a[i], b[i]);
            return out;
          },
          *operands[0]);
    case ir::OpCategory::Ternary: {
      const std::vector<Bool>& cond = As<Bool>(*operands[0]);
      return std::visit(
          [&](const auto& a) -> Array {
            using T = typename std::decay_t<decltype(a)>::value_type;
            const std::vector<T>& b = As<T>(*operands[2]);
            std::vector<T> out(a.size());
            for (size_t i = 0; i < a.size(); ++i) out[i] = cond[i] != 0 ? a[i] : b[i];
            return out;
          },
          *operands[1]);
    }
    case ir::OpCategory::View:
      return std::visit([&](const auto& x) -> Array { return EvalView(node, x); }, *operands[0]);
    case ir::OpCategory::Reduce:
      return std::visit([&](const auto& x) -> Array { return EvalReduce(node, x); }, *operands[0]);
    case ir::OpCategory::Matmul:
      return std::visit(
          [&](const auto& a) -> Array {
            using T = typename std::decay_t<decltype(a)>::value_type;
            if constexpr (std::is_same_v<T, Bool>) {
              LAZYCL_CHECK(false, "matmul on bool");
              return a;
            } else {
              return EvalMatmul(node, a, As<T>(*operands[1]));
            }
          },
          *operands[0]);
  }
  LAZYCL_CHECK(false, "unknown op category for %s", ir::OpName(node.op));
  return Array{};
}

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

absl::StatusOr<std::shared_ptr<ir::Storage>> EvaluateOnHost(const ir::NodePtr& root) {
  // Every node's value stays here until the end; the map is what keeps a shared subgraph from
  // being evaluated once per path. Iterative post-order, so deep chains cannot overflow the stack.
  absl::flat_hash_map<const Node*, Array> values;
  struct Frame {
    const Node* node;
    bool operands_pushed;
  };
  std::vector<Frame> stack = {{root.get(), false}};
  while (!stack.empty()) {
    Frame& frame = stack.back();
    const Node* node = frame.node;
    if (values.contains(node)) {
      stack.pop_back();
      continue;
    }
    if (!frame.operands_pushed) {
      frame.operands_pushed = true;
      for (const ir::NodePtr& operand : node->operands) {
        if (!values.contains(operand.get())) stack.push_back({operand.get(), false});
      }
      continue;
    }
    stack.pop_back();
    std::vector<const Array*> operands;
    for (const ir::NodePtr& operand : node->operands) operands.push_back(&values.at(operand.get()));
    absl::StatusOr<Array> value = EvalNode(*node, operands);
    if (!value.ok()) return value.status();
    values.emplace(node, *std::move(value));
  }
  return ToStorage(*root, values.at(root.get()));
}

}  // namespace lazycl::runtime
