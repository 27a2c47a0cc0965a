#include "kernels/codegen.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "base/dtype_table.h"
#include "kernels/templates.h"

namespace lazycl::kernels {
namespace {

using ir::Node;
using ir::Op;
using ir::Shape;

constexpr size_t kLocalSize = 64;
// Work-group size of the GPU strategy's tree reductions (one that every GPU we know of takes).
constexpr size_t kGroupSize = 128;
// The CPU matmul splits its rows finer while it would have fewer work-items than this.
constexpr int64_t kMatmulMinWorkItems = 16;
// Below this many work-items the guarded tail entry point runs alone: one launch instead of
// two, where the unchecked main kernel would save less than a launch costs.
constexpr int64_t kTailOnlyBelow = int64_t{1} << 16;

// Fast f32 maths for CPU devices, where PoCL's builtins are slow (log: ~100 ms over 2^24
// floats against exp's ~5 ms) and do not vectorise with the work-item loop. Straight-line
// selects only, so the loop over work-items stays vectorisable.
// lc_tanh: a rational x * P(x^2) / Q(x^2) of degrees 13 / 6, fitted by us to tanh on [0, 9]
//   (scripts/fit_tanh.py: minimax relative error, Cheney-Loeb differential correction polished
//   by an L^p fit with p up to 128; 1.34e-7 in exact arithmetic), x clamped to [-9, 9] where tanh
//   rounds to +-1 in f32. One division and no exp: PoCL's exp cost W1 as much as its memory
//   traffic. Max relative error in f32 3.32 * 2^-23 over every float (host emulation); the device
//   bound 4 * 2^-23 is enforced by tests/codegen_test.cpp. -0 stays -0, NaN stays NaN, +-inf gives
//   +-1.
// lc_log: Cephes logf (x = m * 2^e, m in [sqrt(1/2), sqrt(2)), a degree-9 polynomial in m - 1);
//   subnormals are scaled by 2^23 first; 0 -> -inf, negative -> NaN, inf -> inf, NaN -> NaN.
constexpr const char* kTanhHelper = R"CL(static inline float lc_tanh(float x) {
  const float c = fmin(fmax(x, -9.0f), 9.0f);
  const float s = c * c;
  float p = 4.9320299037e-14f;
  p = fma(p, s, -4.8425155547e-13f);
  p = fma(p, s, -9.0319400030e-09f);
  p = fma(p, s, 8.3836348042e-06f);
  p = fma(p, s, 2.8392796580e-03f);
  p = fma(p, s, 1.2847369738e-01f);
  p = fma(p, s, 9.9999998595e-01f);
  float q = 2.1604321225e-04f;
  q = fma(q, s, 2.3442009168e-02f);
  q = fma(q, s, 4.6180680223e-01f);
  q = fma(q, s, 1.0f);
  return isnan(x) ? x : p * c / q;
}
)CL";
// lc_exp, lc_exp16: Cephes expf (n = round(x / ln 2) by the 1.5 * 2^23 trick, r = x - n ln 2
//   in two parts, a degree-7 polynomial), then 2^n applied as two exact power-of-two factors so
//   that subnormal results are rounded once and overflow gives inf. x is clamped to
//   [-110, 89] (beyond: 0 and inf); NaN stays NaN. Branch-free, so PoCL vectorises it; its
//   builtin exp cost softmax's exp pass more than its memory traffic (softmax 8.7 -> 4.7 ms).
//   Max relative error measured 0.65 * 2^-23 (normal results; subnormal ones within 2^-149),
//   bound 2^-23 enforced by tests/codegen_test.cpp.
#define LAZYCL_EXP_HELPER(NAME, T, I, AS_T, AS_I)                  \
  "static inline " #T " " #NAME "(" #T                             \
  " x) {\n"                                                        \
  "  const " #T                                                    \
  " t = fmin(fmax(x, -110.0f), 89.0f);\n"                          \
  "  const " #T " k = fma(t, (" #T ")(1.44269504088896341f), (" #T \
  ")(12582912.0f));\n"                                             \
  "  const " #T                                                    \
  " n = k - 12582912.0f;\n"                                        \
  "  " #T " r = fma(n, (" #T                                       \
  ")(-0.693359375f), t);\n"                                        \
  "  r = fma(n, (" #T                                              \
  ")(2.12194440e-4f), r);\n"                                       \
  "  " #T " p = (" #T                                              \
  ")(1.9875691500e-4f);\n"                                         \
  "  p = fma(p, r, (" #T                                           \
  ")(1.3981999507e-3f));\n"                                        \
  "  p = fma(p, r, (" #T                                           \
  ")(8.3334519073e-3f));\n"                                        \
  "  p = fma(p, r, (" #T                                           \
  ")(4.1665795894e-2f));\n"                                        \
  "  p = fma(p, r, (" #T                                           \
  ")(1.6666665459e-1f));\n"                                        \
  "  p = fma(p, r, (" #T                                           \
  ")(5.0000001201e-1f));\n"                                        \
  "  p = fma(p, r * r, r) + 1.0f;\n"                               \
  "  const " #I " ni = " #AS_I                                     \
  "(k) - 0x4B400000;\n"                                            \
  "  const " #I                                                    \
  " n1 = ni >> 1;\n"                                               \
  "  const " #T " y = p * " #AS_T "((n1 + 127) << 23) * " #AS_T    \
  "((ni - n1 + 127) << 23);\n"                                     \
  "  return select(y, x, isnan(x));\n"                             \
  "}\n"
constexpr const char* kExpHelper = LAZYCL_EXP_HELPER(lc_exp, float, int, as_float, as_int);
constexpr const char* kExp16Helper =
    LAZYCL_EXP_HELPER(lc_exp16, float16, int16, as_float16, as_int16);
#undef LAZYCL_EXP_HELPER
constexpr const char* kLogHelper = R"CL(static inline float lc_log(float x) {
  const int sub = x < 1.17549435e-38f;
  const float xs = sub ? x * 8388608.0f : x;
  const int bits = as_int(xs);
  const float m0 = as_float((bits & 0x007fffff) | 0x3f000000);
  const int small = m0 < 0.707106781186547524f;
  const float e = (float)(((bits >> 23) & 0xff) - 126 - (sub ? 23 : 0) - small);
  const float f = (small ? m0 + m0 : m0) - 1.0f;
  const float z = f * f;
  float y = ((((((((7.0376836292e-2f * f - 1.1514610310e-1f) * f + 1.1676998740e-1f) * f -
                 1.2420140846e-1f) * f + 1.4249322787e-1f) * f - 1.6668057665e-1f) * f +
              2.0000714765e-1f) * f - 2.4999993993e-1f) * f + 3.3333331174e-1f) * f * z;
  y += -2.12194440e-4f * e;
  y += -0.5f * z;
  float r = f + y + 0.693359375f * e;
  r = x == INFINITY ? x : r;
  r = x == 0.0f ? -INFINITY : r;
  return (x < 0.0f || isnan(x)) ? NAN : r;
}
)CL";

std::string CType(DType d) { return base::Info(d).opencl; }

std::string Literal(double v, DType d) {
  switch (d) {
    case DType::f32:
      if (std::isnan(v)) return "NAN";
      if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
      return absl::StrFormat("%.9ef", v);
    case DType::i32:
      return absl::StrCat("((int)", static_cast<int64_t>(v), "L)");
    case DType::i64: {
      int64_t i = static_cast<int64_t>(v);
      if (i == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807L - 1L)";
      return absl::StrCat("(", i, "L)");
    }
    case DType::boolean:
      return v != 0 ? "((uchar)1)" : "((uchar)0)";
  }
  return "0";
}

std::string Zero(DType d) { return Literal(0, d); }

bool IsInt(DType d) { return d == DType::i32 || d == DType::i64; }

// Integer + - * wrap (host_eval.h). Signed overflow is undefined in OpenCL C, and the compiler
// does exploit it once a constant is involved, so compute in the unsigned type and reinterpret.
std::string Wrapping(const std::string& a, const char* op, const std::string& b, DType d) {
  const char* u = d == DType::i32 ? "uint" : "ulong";
  const char* s = d == DType::i32 ? "int" : "long";
  return absl::StrCat("as_", s, "(as_", u, "(", a, ") ", op, " as_", u, "(", b, "))");
}

size_t RoundUp(size_t n, size_t m) { return (n + m - 1) / m * m; }

// FNV-1a: unlike absl::Hash, the same in every process.
uint64_t StableHash(absl::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// An index into a node's value: either one linear (row-major) index or one index per dim.
struct Index {
  bool linear = true;
  std::string lin;
  std::vector<std::string> dims;

  static Index Linear(std::string lin) { return Index{true, std::move(lin), {}}; }
  static Index Multi(std::vector<std::string> dims) { return Index{false, "", std::move(dims)}; }
  std::string Key() const { return linear ? "L" + lin : "M" + absl::StrJoin(dims, ","); }
};

// Writes the body of one kernel: evaluates nodes at symbolic indices, collecting buffer and
// size arguments as it goes. Each (node, index) pair is evaluated once per scope.
class Emitter {
 public:
  Emitter(const InputMap& inputs, std::string idx_type, const Target& target)
      : inputs_(inputs),
        idx_(std::move(idx_type)),
        bind_offsets_(target.bind_offsets),
        cpu_(target.cpu) {}

  const std::string& idx_type() const { return idx_; }

  // A size, stride or offset: literals for 0 and 1 (which codegen may specialise on), an
  // argument otherwise, one argument per `key`. Keys name structural roles (DimKey, "count"),
  // never values, so that shapes of one structure share one source: [3, 4] and [4, 4] alike.
  std::string Sym(int64_t v, const std::string& key) {
    if (v == 0 || v == 1) return absl::StrCat(v);
    auto it = syms_.find(key);
    if (it != syms_.end()) {
      LAZYCL_CHECK(sym_values_.at(key) == v, "codegen: size %s is both %lld and %lld", key.c_str(),
                   static_cast<long long>(sym_values_.at(key)), static_cast<long long>(v));
      return it->second;
    }
    std::string name = absl::StrCat("s", syms_.size());
    syms_.emplace(key, name);
    sym_values_.emplace(key, v);
    params_.push_back(absl::StrCat("const ", idx_, " ", name));
    names_.push_back(name);
    KernelArgSpec arg;
    arg.kind = idx_ == "int" ? KernelArgSpec::Kind::kInt32 : KernelArgSpec::Kind::kInt64;
    arg.value = v;
    args_.push_back(arg);
    return name;
  }

  std::string Buffer(BufferRef ref, DType dtype, bool written) {
    auto key = std::make_pair(static_cast<int>(ref.kind), ref.index);
    auto it = buffers_.find(key);
    if (it != buffers_.end()) return it->second;
    std::string name = absl::StrCat(written ? "out" : "in", buffers_.size());
    params_.push_back(
        absl::StrCat("__global ", written ? "" : "const ", CType(dtype), "* restrict ", name));
    names_.push_back(name);
    KernelArgSpec arg;
    arg.kind = KernelArgSpec::Kind::kBuffer;
    arg.buffer = ref;
    arg.written = written;
    args_.push_back(arg);
    if (bind_offsets_ && ref.kind != BufferRef::Kind::kTemp) {
      // The buffer is bound at a run-time element offset (Graph::bind_offsets).
      params_.push_back(absl::StrCat("const ", idx_, " ", name, "_off"));
      names_.push_back(absl::StrCat(name, "_off"));
      KernelArgSpec off;
      off.kind = KernelArgSpec::Kind::kOffset;
      off.buffer = ref;
      off.wide = idx_ != "int";
      args_.push_back(off);
      name = absl::StrCat("(", name, " + ", name, "_off)");
    }
    buffers_.emplace(key, name);
    return name;
  }

  std::string Var() { return absl::StrCat("v", next_var_++); }
  // A line at the top of the body (declarations that later blocks assign).
  void Prepend(absl::string_view s) { body_ = absl::StrCat(indent_, s, "\n", body_); }
  void Line(absl::string_view s) { absl::StrAppend(&body_, indent_, s, "\n"); }
  void Indent() { indent_ += "  "; }
  void Dedent() { indent_.resize(indent_.size() - 2); }

  // Scopes: values computed inside a loop are not visible after it.
  absl::flat_hash_map<std::string, std::string> SaveScope() const { return memo_; }
  void RestoreScope(absl::flat_hash_map<std::string, std::string> memo) { memo_ = std::move(memo); }

  // Dims that the ops force to be equal (an elementwise op's operands and result, the kept
  // dims of Expand, Permute and Reduce) are one class and share one size argument. Call before
  // evaluating; `inputs` are not followed.
  void UnifyDims(const Node& root) {
    std::vector<const Node*> stack = {&root};
    absl::flat_hash_map<const Node*, bool> seen;
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (seen.contains(n) || inputs_.contains(n) || values_.contains(n)) continue;
      seen[n] = true;
      switch (n->op) {
        case Op::kReshape:
        case Op::kSlice:
        case Op::kPad:
        case Op::kConstant:
        case Op::kIota:
          break;
        case Op::kPermute:
          for (size_t d = 0; d < n->shape.size(); ++d)
            Union({n, d}, {n->operands[0].get(), static_cast<size_t>(n->args[d])});
          break;
        case Op::kExpand:
          for (size_t d = 0; d < n->shape.size(); ++d) {
            if (n->operands[0]->shape[d] != 1) Union({n, d}, {n->operands[0].get(), d});
          }
          break;
        default:
          if (ir::IsReduce(n->op)) {
            const Node& x = *n->operands[0];
            for (size_t d = 0; d < n->shape.size(); ++d) {
              if (std::find(n->args.begin(), n->args.end(), static_cast<int64_t>(d)) ==
                  n->args.end())
                Union({n, d}, {&x, d});
            }
          } else {
            for (const ir::NodePtr& o : n->operands) {
              if (o->shape.size() != n->shape.size()) continue;
              for (size_t d = 0; d < n->shape.size(); ++d) Union({n, d}, {o.get(), d});
            }
          }
      }
      for (const ir::NodePtr& o : n->operands) stack.push_back(o.get());
    }
  }

  std::string DimKey(const Node* n, size_t d) {
    const DimRef r = Find({n, d});
    return absl::StrCat("dim|", reinterpret_cast<uintptr_t>(r.first), "|", r.second);
  }
  std::vector<std::string> DimKeys(const Node& n) {
    std::vector<std::string> keys;
    for (size_t d = 0; d < n.shape.size(); ++d) keys.push_back(DimKey(&n, d));
    return keys;
  }
  std::string NodeKey(const char* what, const Node& n, size_t d) {
    return absl::StrCat(what, "|", reinterpret_cast<uintptr_t>(&n), "|", d);
  }

  std::string Linear(const Index& idx, const Node& n) { return Linear(idx, n.shape, DimKeys(n)); }
  std::vector<std::string> Multi(const Index& idx, const Node& n) {
    return Multi(idx, n.shape, DimKeys(n));
  }

  std::string Linear(const Index& idx, const Shape& shape, const std::vector<std::string>& keys) {
    if (idx.linear) return idx.lin;
    std::string acc;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      acc = acc.empty()
                ? idx.dims[d]
                : absl::StrCat("(", acc, ") * ", Sym(shape[d], keys[d]), " + ", idx.dims[d]);
    }
    if (acc.empty()) return "0";
    std::string key = absl::StrCat("lin|", acc);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    std::string v = Var();
    Line(absl::StrCat("const ", idx_, " ", v, " = ", acc, ";"));
    memo_[key] = v;
    return v;
  }

  std::vector<std::string> Multi(const Index& idx, const Shape& shape,
                                 const std::vector<std::string>& keys) {
    if (!idx.linear) return idx.dims;
    // Which dims are 1 is part of the structure; the rest of the shape is named by its keys.
    std::string ones;
    for (int64_t s : shape) ones.push_back(s == 1 ? '1' : 'n');
    std::string key = absl::StrCat("delin|", idx.lin, "|", ones, "|", absl::StrJoin(keys, ","));
    std::vector<std::string> dims(shape.size(), "0");
    int first = -1;  // the outermost dim that is not 1 needs no modulo
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] != 1) {
        first = static_cast<int>(d);
        break;
      }
    }
    if (first < 0) return dims;
    auto it = delin_.find(key);
    if (it != delin_.end() && memo_.contains(key)) return it->second;
    std::string rest = idx.lin;
    for (int d = static_cast<int>(shape.size()) - 1; d >= first; --d) {
      if (shape[d] == 1) continue;
      if (d == first) {
        dims[d] = rest;
        break;
      }
      std::string v = Var();
      Line(absl::StrCat("const ", idx_, " ", v, " = ", rest, " % ", Sym(shape[d], keys[d]), ";"));
      dims[d] = v;
      std::string q = Var();
      Line(absl::StrCat("const ", idx_, " ", q, " = ", rest, " / ", Sym(shape[d], keys[d]), ";"));
      rest = q;
    }
    delin_[key] = dims;
    memo_[key] = "";
    return dims;
  }

  // The value of `n` at `idx`, as an expression (a variable name or a literal).
  std::string Eval(const Node& n, const Index& idx) {
    std::string key = absl::StrCat(reinterpret_cast<uintptr_t>(&n), "|", idx.Key());
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    std::string v = EvalUncached(n, idx);
    memo_[key] = v;
    return v;
  }

  std::string Assign(DType dtype, const std::string& expr) {
    std::string v = Var();
    const std::string type = vec_ && dtype == DType::f32 ? "float16" : CType(dtype);
    Line(absl::StrCat("const ", type, " ", v, " = ", expr, ";"));
    return v;
  }

  // A helper function that the body calls, emitted once before it.
  void UseHelper(const char* text) {
    for (const char* h : helpers_) {
      if (h == text) return;
    }
    helpers_.push_back(text);
  }

  bool cpu() const { return cpu_; }

  // From now on `n` is read from `ref`, which the kernel itself wrote at n's indices.
  void ReadBack(const Node& n, BufferRef ref) { read_back_[&n] = ref; }
  // `n` is not evaluated but given: the expression `value`, whatever the index (a matmul's
  // accumulator in its epilogue; a reduction computed earlier in a row kernel, read through a
  // broadcast). Survives scopes. Set before UnifyDims, which then stops at `n`, or after it.
  void SetValue(const Node* n, std::string value) { values_[n] = std::move(value); }

  // The body as `static inline <ret> <name>(<leading>, <the collected parameters>)`, after the
  // helpers; the parameters and the arguments that pass them on are also defined as the macros
  // LC_EPI_PARAMS and LC_EPI_ARGS (each empty or starting with a comma), for a template that
  // calls the function. Returns the text; `args` receives the arguments in order.
  std::string FinishFunction(absl::string_view ret, absl::string_view name,
                             absl::string_view leading, std::vector<KernelArgSpec>* args) {
    std::string params;
    std::string names;
    for (size_t i = 0; i < params_.size(); ++i) {
      absl::StrAppend(&params, ", ", params_[i]);
      absl::StrAppend(&names, ", ", names_[i]);
    }
    std::string text = absl::StrJoin(helpers_, "");
    absl::StrAppend(&text, "#define LC_EPI_PARAMS ", params, "\n#define LC_EPI_ARGS ", names,
                    "\nstatic inline ", ret, " ", name, "(", leading, " LC_EPI_PARAMS) {\n", body_,
                    "}\n");
    *args = args_;
    return text;
  }

  // Vector mode: f32 values are float16, and a linear index i names elements i .. i + 15
  // (VectorFriendly says which expressions can be evaluated this way). `broadcast_row` is the
  // scalar index at which an Expand over the trailing `broadcast_dims` dims is read.
  void SetVector(bool on, std::string broadcast_row = "", size_t broadcast_dims = 0) {
    vec_ = on;
    broadcast_row_ = std::move(broadcast_row);
    broadcast_dims_ = broadcast_dims;
  }

  // The body, written for the element index `gid`, becomes an inline function and two entry
  // points, launched in this order: `<name>` for gid = get_global_id(0) with no bounds check,
  // `<name>_tail` for gid = base + get_global_id(0) while gid < count. The kernel is named
  // after its own text, so that the same code gets the same name (and source) whatever the
  // shapes and in every process: the program caches key on the source.
  KernelSpec FinishIndexed(absl::string_view prefix, int64_t count) {
    const std::string limit = Sym(count, "count");
    const std::string params = absl::StrJoin(params_, ",\n    ");
    const std::string names = absl::StrJoin(names_, ", ");
    std::string text = absl::StrJoin(helpers_, "");
    const std::string hash_input = absl::StrCat(idx_, text, params, "|", limit, "|", body_);
    const std::string name =
        absl::StrCat(prefix, "_", absl::Hex(StableHash(hash_input) & 0xffffffffu));
    absl::StrAppend(&text, "static inline void ", name, "_at(", params,
                    ",\n    const idx_t gid) {\n", body_, "}\n");
    absl::StrAppend(&text, "__kernel void ", name, "(", params, ") {\n  ", name, "_at(", names,
                    ", (idx_t)get_global_id(0));\n}\n");
    absl::StrAppend(
        &text, "__kernel void ", name, "_tail(", params,
        ",\n    const idx_t base) {\n  const idx_t gid = base + (idx_t)get_global_id(0);\n",
        "  if (gid < ", limit, ") ", name, "_at(", names, ", gid);\n}\n");
    // The unchecked launch covers the whole work-groups, unless the kernel is small; the tail
    // launch the rest (its index starts at `base`, the last argument of `<name>_tail`).
    const size_t n = static_cast<size_t>(count);
    const size_t main = count < kTailOnlyBelow ? 0 : n / kLocalSize * kLocalSize;
    KernelArgSpec base;
    base.kind = idx_ == "int" ? KernelArgSpec::Kind::kInt32 : KernelArgSpec::Kind::kInt64;
    base.value = static_cast<int64_t>(main);
    KernelSpec spec;
    spec.source = absl::StrCat("typedef ", idx_, " idx_t;\n", text);
    spec.args = args_;
    spec.launches.push_back(Launch{name, {main}, {kLocalSize}, {}});
    spec.launches.push_back(
        Launch{absl::StrCat(name, "_tail"), {RoundUp(n - main, kLocalSize)}, {kLocalSize}, {base}});
    return spec;
  }

  // The body, written for the group index `gid` and the lane `lane` (get_local_id) of
  // work-groups of `local` items, becomes the kernel itself, launched as `groups` groups: the
  // body may use barriers and __local memory. One launch: every group is whole.
  KernelSpec FinishGroups(absl::string_view prefix, int64_t groups, size_t local) {
    const std::string params = absl::StrJoin(params_, ",\n    ");
    std::string text = absl::StrJoin(helpers_, "");
    const std::string hash_input = absl::StrCat(idx_, text, params, "|groups ", local, "|", body_);
    const std::string name =
        absl::StrCat(prefix, "_", absl::Hex(StableHash(hash_input) & 0xffffffffu));
    absl::StrAppend(&text, "__kernel __attribute__((reqd_work_group_size(", local,
                    ", 1, 1))) void ", name, "(", params,
                    ") {\n  const idx_t gid = get_group_id(0);\n"
                    "  const int lane = (int)get_local_id(0);\n",
                    body_, "}\n");
    KernelSpec spec;
    spec.source = absl::StrCat("typedef ", idx_, " idx_t;\n", text);
    spec.args = args_;
    spec.launches.push_back(Launch{name, {static_cast<size_t>(groups) * local}, {local}, {}});
    return spec;
  }

 private:
  std::string EvalUncached(const Node& n, const Index& idx) {
    if (auto it = values_.find(&n); it != values_.end()) return it->second;
    const auto input = inputs_.find(&n);
    const auto back = read_back_.find(&n);
    if (input != inputs_.end() || back != read_back_.end()) {
      std::string buf = back != read_back_.end() ? Buffer(back->second, n.dtype, true)
                                                 : Buffer(input->second, n.dtype, false);
      if (vec_)
        return Assign(n.dtype, absl::StrCat("vload16(0, ", buf, " + ", Linear(idx, n), ")"));
      return Assign(n.dtype, absl::StrCat(buf, "[", Linear(idx, n), "]"));
    }
    const DType t = n.dtype;
    auto operand = [&](int i) { return Eval(*n.operands[i], idx); };
    if (vec_) {
      // Only what VectorFriendly admits reaches here; the rest is shared with scalar code.
      if (n.op == Op::kConstant)
        return Assign(t, absl::StrCat("(float16)(", Literal(n.value, t), ")"));
      if (n.op == Op::kRelu) return Assign(t, absl::StrCat("fmax(", operand(0), ", 0.0f)"));
      if (n.op == Op::kDiv && n.operands[1]->op == Op::kExpand) {
        // Division by a per-row value (softmax's sum): one reciprocal per row and a multiply
        // per element; a vector divide costs ~10x a multiply. Within 1 ulp of the division.
        std::string a = operand(0);
        vec_ = false;
        std::string row = Eval(*n.operands[1]->operands[0], Index::Linear(broadcast_row_));
        vec_ = true;
        return Assign(t, absl::StrCat(a, " * (1.0f / ", row, ")"));
      }
      if (n.op == Op::kExpand) {
        vec_ = false;
        std::string row = Eval(*n.operands[0], Index::Linear(broadcast_row_));
        vec_ = true;
        return Assign(t, absl::StrCat("(float16)(", row, ")"));
      }
    }
    switch (n.op) {
      case Op::kConstant:
        return Literal(n.value, t);
      case Op::kIota:
        return Assign(t, absl::StrCat("(", CType(t), ")(", Linear(idx, n), ")"));
      case Op::kNeg:
        if (IsInt(t)) return Assign(t, Wrapping(Zero(t), "-", operand(0), t));
        return Assign(t, absl::StrCat("-", operand(0)));
      case Op::kExp:
        return Assign(t, absl::StrCat(Exp(), "(", operand(0), ")"));
      case Op::kLog:
        if (cpu_) {
          UseHelper(kLogHelper);
          return Assign(t, absl::StrCat("lc_log(", operand(0), ")"));
        }
        return Assign(t, absl::StrCat("log(", operand(0), ")"));
      case Op::kSqrt:
        return Assign(t, absl::StrCat("sqrt(", operand(0), ")"));
      case Op::kTanh:
        if (cpu_) {
          UseHelper(kTanhHelper);
          return Assign(t, absl::StrCat("lc_tanh(", operand(0), ")"));
        }
        return Assign(t, absl::StrCat("tanh(", operand(0), ")"));
      case Op::kSigmoid:
        return Assign(t, absl::StrCat("1.0f / (1.0f + ", Exp(), "(-", operand(0), "))"));
      case Op::kRelu: {
        std::string x = operand(0);
        return Assign(t, absl::StrCat(x, " > ", Zero(t), " ? ", x, " : ", Zero(t)));
      }
      case Op::kAbs: {
        std::string x = operand(0);
        if (t == DType::f32) return Assign(t, absl::StrCat("fabs(", x, ")"));
        return Assign(
            t, absl::StrCat(x, " < ", Zero(t), " ? ", Wrapping(Zero(t), "-", x, t), " : ", x));
      }
      case Op::kSin:
        return Assign(t, absl::StrCat("sin(", operand(0), ")"));
      case Op::kCos:
        return Assign(t, absl::StrCat("cos(", operand(0), ")"));
      case Op::kNot:
        return Assign(t, absl::StrCat("(uchar)(!", operand(0), ")"));
      case Op::kCast:
        return Assign(t, Convert(operand(0), n.operands[0]->dtype, t));
      case Op::kAdd:
        if (IsInt(t)) return Assign(t, Wrapping(operand(0), "+", operand(1), t));
        return Assign(t, absl::StrCat(operand(0), " + ", operand(1)));
      case Op::kSub:
        if (IsInt(t)) return Assign(t, Wrapping(operand(0), "-", operand(1), t));
        return Assign(t, absl::StrCat(operand(0), " - ", operand(1)));
      case Op::kMul:
        if (IsInt(t)) return Assign(t, Wrapping(operand(0), "*", operand(1), t));
        return Assign(t, absl::StrCat(operand(0), " * ", operand(1)));
      case Op::kDiv:
        return Assign(t, absl::StrCat(operand(0), " / ", operand(1)));
      case Op::kMaximum:
        return Assign(
            t, absl::StrCat(t == DType::f32 ? "fmax(" : "max(", operand(0), ", ", operand(1), ")"));
      case Op::kMinimum:
        return Assign(
            t, absl::StrCat(t == DType::f32 ? "fmin(" : "min(", operand(0), ", ", operand(1), ")"));
      case Op::kPow:
        return Assign(t, absl::StrCat("pow(", operand(0), ", ", operand(1), ")"));
      case Op::kLt:
        return Compare(n, idx, "<");
      case Op::kLe:
        return Compare(n, idx, "<=");
      case Op::kGt:
        return Compare(n, idx, ">");
      case Op::kGe:
        return Compare(n, idx, ">=");
      case Op::kEq:
        return Compare(n, idx, "==");
      case Op::kNe:
        return Compare(n, idx, "!=");
      case Op::kWhere:
        return Assign(t, absl::StrCat(operand(0), " ? ", operand(1), " : ", operand(2)));
      case Op::kReshape:
        return Eval(*n.operands[0], Index::Linear(Linear(idx, n)));
      case Op::kPermute: {
        std::vector<std::string> out = Multi(idx, n);
        std::vector<std::string> in(out.size());
        for (size_t i = 0; i < out.size(); ++i) in[n.args[i]] = out[i];
        return Eval(*n.operands[0], Index::Multi(std::move(in)));
      }
      case Op::kExpand: {
        std::vector<std::string> in = Multi(idx, n);
        const Shape& s = n.operands[0]->shape;
        for (size_t d = 0; d < in.size(); ++d) {
          if (s[d] == 1) in[d] = "0";
        }
        return Eval(*n.operands[0], Index::Multi(std::move(in)));
      }
      case Op::kSlice: {
        std::vector<std::string> in = Multi(idx, n);
        for (size_t d = 0; d < in.size(); ++d) {
          if (n.args[d] != 0)
            in[d] = absl::StrCat("(", in[d], " + ", Sym(n.args[d], NodeKey("slice", n, d)), ")");
        }
        return Eval(*n.operands[0], Index::Multi(std::move(in)));
      }
      case Op::kPad:
        return Pad(n, idx);
      default:
        LAZYCL_CHECK(false, "codegen: %s reached inside a fused kernel", ir::OpName(n.op));
    }
    return "";
  }

  // The exp to call: the builtin on GPUs, ours on CPUs (in vector mode, its float16 form).
  const char* Exp() {
    if (!cpu_) return "exp";
    UseHelper(vec_ ? kExp16Helper : kExpHelper);
    return vec_ ? "lc_exp16" : "lc_exp";
  }

  std::string Compare(const Node& n, const Index& idx, const char* op) {
    std::string a = Eval(*n.operands[0], idx);
    std::string b = Eval(*n.operands[1], idx);
    return Assign(DType::boolean, absl::StrCat("(uchar)(", a, " ", op, " ", b, ")"));
  }

  std::string Convert(const std::string& x, DType from, DType to) {
    if (from == to) return x;
    if (to == DType::boolean) return absl::StrCat("(uchar)(", x, " != ", Zero(from), ")");
    if (from == DType::f32 && to == DType::i32) return absl::StrCat("convert_int_sat(", x, ")");
    if (from == DType::f32 && to == DType::i64) return absl::StrCat("convert_long_sat(", x, ")");
    return absl::StrCat("(", CType(to), ")(", x, ")");
  }

  // Zero outside the operand's window; inside, the operand at the shifted index. The index is
  // clamped so that the load stays in bounds whichever way the select goes.
  std::string Pad(const Node& n, const Index& idx) {
    const Node& x = *n.operands[0];
    if (ir::NumElements(x.shape) == 0) return Zero(n.dtype);
    std::vector<std::string> in = Multi(idx, n);
    std::vector<std::string> conds;
    for (size_t d = 0; d < in.size(); ++d) {
      if (n.args[d] == 0 && x.shape[d] == n.shape[d]) continue;
      if (x.shape[d] == 1) {
        conds.push_back(
            absl::StrCat("(", in[d], " == ", Sym(n.args[d], NodeKey("pad", n, d)), ")"));
        in[d] = "0";
        continue;
      }
      std::string t = Var();
      const std::string lo = Sym(n.args[d], NodeKey("pad", n, d));
      const std::string size = Sym(x.shape[d], DimKey(&x, d));
      Line(absl::StrCat("const ", idx_, " ", t, " = ", in[d], " - ", lo, ";"));
      conds.push_back(absl::StrCat("(", t, " >= 0 && ", t, " < ", size, ")"));
      std::string c = Var();
      Line(absl::StrCat("const ", idx_, " ", c, " = ", t, " < 0 ? 0 : (", t, " >= ", size, " ? ",
                        size, " - 1 : ", t, ");"));
      in[d] = c;
    }
    std::string value = Eval(x, Index::Multi(std::move(in)));
    if (conds.empty()) return value;
    return Assign(n.dtype, absl::StrCat("(", absl::StrJoin(conds, " && "), ") ? ", value, " : ",
                                        Zero(n.dtype)));
  }

  const InputMap& inputs_;
  absl::flat_hash_map<const Node*, BufferRef> read_back_;
  std::string idx_;
  bool bind_offsets_;
  bool cpu_;
  bool vec_ = false;
  std::string broadcast_row_;
  size_t broadcast_dims_ = 0;
  std::vector<const char*> helpers_;
  std::vector<std::string> names_;
  std::string body_;
  std::string indent_ = "  ";
  int next_var_ = 0;
  std::vector<std::string> params_;
  std::vector<KernelArgSpec> args_;
  using DimRef = std::pair<const Node*, size_t>;
  DimRef Find(DimRef r) {
    while (true) {
      auto it = parent_.find(r);
      if (it == parent_.end() || it->second == r) return r;
      r = it->second;
    }
  }
  void Union(DimRef a, DimRef b) {
    a = Find(a);
    b = Find(b);
    if (a != b) parent_[b] = a;
  }

  absl::flat_hash_map<DimRef, DimRef> parent_;
  absl::flat_hash_map<std::string, std::string> syms_;
  absl::flat_hash_map<std::string, int64_t> sym_values_;
  absl::flat_hash_map<std::pair<int, int>, std::string> buffers_;
  absl::flat_hash_map<std::string, std::string> memo_;
  absl::flat_hash_map<std::string, std::vector<std::string>> delin_;
  absl::flat_hash_map<const Node*, std::string> values_;
};

// 32-bit indices when every extent in the kernel fits, which is faster everywhere. Buffers bound
// at run-time offsets may be larger than any extent seen here, so they take 64 bits.
std::string IndexType(const Node& root, const InputMap& inputs, const Target& target) {
  if (target.bind_offsets) return "long";
  int64_t largest = ir::NumElements(root.shape);
  std::vector<const Node*> stack = {&root};
  absl::flat_hash_map<const Node*, bool> seen;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (seen.contains(n)) continue;
    seen[n] = true;
    largest = std::max(largest, ir::NumElements(n->shape));
    if (inputs.contains(n)) continue;
    for (const ir::NodePtr& o : n->operands) stack.push_back(o.get());
  }
  return largest < (int64_t{1} << 31) - 1 ? "int" : "long";
}

// Whether `x`, reduced over its trailing `reduced_dims` dims, can be evaluated 16 elements at a
// time in Emitter's vector mode: f32 elementwise ops whose vector forms are plain OpenCL C,
// reading inputs at x's own linear index, and Expands that only broadcast a per-row value
// along the reduced dims (softmax's x - max).
bool VectorFriendly(const Node& n, const InputMap& inputs, const Shape& x_shape,
                    size_t reduced_dims) {
  if (n.dtype != DType::f32) return false;
  if (inputs.contains(&n)) return true;
  switch (n.op) {
    case Op::kConstant:
      return true;
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
    case Op::kDiv:
    case Op::kMaximum:
    case Op::kMinimum:
    case Op::kNeg:
    case Op::kExp:
    case Op::kSqrt:
    case Op::kAbs:
    case Op::kRelu:
    case Op::kSigmoid:
    case Op::kReshape:
      for (const ir::NodePtr& o : n.operands) {
        if (!VectorFriendly(*o, inputs, x_shape, reduced_dims)) return false;
      }
      return true;
    case Op::kExpand: {
      if (n.shape != x_shape) return false;
      const Shape& s = n.operands[0]->shape;
      const size_t kept = x_shape.size() - reduced_dims;
      for (size_t d = 0; d < s.size(); ++d) {
        if (d < kept ? s[d] != x_shape[d] : s[d] != 1) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

KernelSpec EmitElementwise(const Node& root, BufferRef out, const InputMap& inputs,
                           const Target& target) {
  Emitter e(inputs, IndexType(root, inputs, target), target);
  const int64_t n = ir::NumElements(root.shape);
  e.UnifyDims(root);
  std::string out_name = e.Buffer(out, root.dtype, true);
  std::string v = e.Eval(root, Index::Linear("gid"));
  e.Line(absl::StrCat(out_name, "[gid] = ", v, ";"));
  KernelSpec spec = e.FinishIndexed("ew", n);
  spec.summary = absl::StrCat("elementwise ", ir::NodeString(root));
  return spec;
}

KernelSpec EmitReduce(const Node& root, BufferRef out, const InputMap& inputs, int64_t split,
                      const Target& target) {
  LAZYCL_CHECK(ir::IsReduce(root.op), "EmitReduce on %s", ir::OpName(root.op));
  const Node& x = *root.operands[0];
  const std::vector<int64_t>& axes = root.args;
  Shape reduced_shape;
  for (int64_t a : axes) reduced_shape.push_back(x.shape[a]);
  const int64_t reduced = ir::NumElements(reduced_shape);
  const int64_t outputs = ir::NumElements(root.shape);
  const int64_t chunk = split > 1 ? (reduced + split - 1) / split : reduced;

  Emitter e(inputs, IndexType(root, inputs, target), target);
  e.UnifyDims(root);
  const DType t = root.dtype;
  std::string out_name = e.Buffer(out, t, true);
  std::string o = "gid";
  if (split > 1) {
    e.Line(absl::StrCat("const idx_t o = gid / ", e.Sym(split, "split"), ";"));
    e.Line(absl::StrCat("const idx_t r0 = (gid % ", e.Sym(split, "split"), ") * ",
                        e.Sym(chunk, "chunk"), ";"));
    e.Line(absl::StrCat("const idx_t r1 = min(r0 + ", e.Sym(chunk, "chunk"), ", (idx_t)",
                        e.Sym(reduced, "reduced"), ");"));
    o = "o";
  } else {
    e.Line("const idx_t r0 = 0;");
    e.Line(absl::StrCat("const idx_t r1 = ", e.Sym(reduced, "reduced"), ";"));
  }
  // Reducing the trailing dims reads one contiguous run per output: a linear index suffices.
  bool trailing = true;
  for (size_t i = 0; i < axes.size(); ++i) {
    trailing = trailing && axes[i] == static_cast<int64_t>(x.shape.size() - axes.size() + i);
  }
  std::vector<std::string> kept;
  if (!trailing) kept = e.Multi(Index::Linear(o), root);

  std::string identity;
  std::string combine;
  if (root.op == Op::kSum) {
    identity = Zero(t);
  } else {
    identity = t == DType::f32   ? "NAN"
               : t == DType::i32 ? "INT_MIN"
               : t == DType::i64 ? "LONG_MIN"
                                 : "((uchar)0)";
  }
  auto combine_line = [&](const std::string& a, const std::string& v) {
    if (root.op == Op::kSum) return absl::StrCat(a, " += ", v, ";");
    if (t == DType::f32) return absl::StrCat(a, " = fmax(", a, ", ", v, ");");
    return absl::StrCat(a, " = max(", a, ", ", v, ");");
  };
  // CPU: trailing contiguous rows are read 16 floats at a time into float16 accumulators (PoCL
  // runs a loop inside a work-item scalar unless it is written with vectors), then the rest
  // of the row one at a time.
  const bool vector_rows = target.cpu && trailing && t == DType::f32 && reduced >= 16 &&
                           VectorFriendly(x, inputs, x.shape, axes.size());
  if (vector_rows) {
    e.Line(absl::StrCat("float16 acc16 = (float16)(", identity, ");"));
    e.Line("idx_t r = r0;");
    e.Line("for (; r < r1 - 15; r += 16) {");
    e.Indent();
    auto vscope = e.SaveScope();
    e.SetVector(true, o, axes.size());
    std::string vv =
        e.Eval(x, Index::Linear(absl::StrCat("(", o, " * ", e.Sym(reduced, "reduced"), " + r)")));
    e.Line(combine_line("acc16", vv));
    e.SetVector(false);
    e.RestoreScope(std::move(vscope));
    e.Dedent();
    e.Line("}");
    if (root.op == Op::kSum) {
      e.Line("const float8 acc8 = acc16.lo + acc16.hi;");
      e.Line("const float4 acc4 = acc8.lo + acc8.hi;");
      e.Line("float acc = (acc4.x + acc4.y) + (acc4.z + acc4.w);");
    } else {
      e.Line("const float8 acc8 = fmax(acc16.lo, acc16.hi);");
      e.Line("const float4 acc4 = fmax(acc8.lo, acc8.hi);");
      e.Line("float acc = fmax(fmax(acc4.x, acc4.y), fmax(acc4.z, acc4.w));");
    }
  } else {
    e.Line(absl::StrCat(CType(t), " acc = ", identity, ";"));
  }
  // GPU: a work-group of kGroupSize items per output; lanes take strided elements (coalesced
  // for trailing reductions), then a tree in local memory.
  const bool groups = !target.cpu;
  if (groups) {
    e.Line(absl::StrCat("for (idx_t r = r0 + lane; r < r1; r += ", kGroupSize, ") {"));
  } else {
    e.Line(vector_rows ? "for (; r < r1; ++r) {" : "for (idx_t r = r0; r < r1; ++r) {");
  }
  e.Indent();
  auto scope = e.SaveScope();
  Index idx;
  if (trailing) {
    idx = Index::Linear(
        reduced == 1 ? o : absl::StrCat("(", o, " * ", e.Sym(reduced, "reduced"), " + r)"));
  } else {
    std::vector<std::string> r_keys;
    for (int64_t a : axes) r_keys.push_back(e.DimKey(&x, static_cast<size_t>(a)));
    std::vector<std::string> r_dims = e.Multi(Index::Linear("r"), reduced_shape, r_keys);
    std::vector<std::string> dims = kept;
    for (size_t i = 0; i < axes.size(); ++i) dims[axes[i]] = r_dims[i];
    idx = Index::Multi(std::move(dims));
  }
  std::string v = e.Eval(x, idx);
  e.Line(combine_line("acc", v));
  e.RestoreScope(std::move(scope));
  e.Dedent();
  e.Line("}");
  KernelSpec spec;
  if (groups) {
    e.Line(absl::StrCat("__local ", CType(t), " scratch[", kGroupSize, "];"));
    e.Line("scratch[lane] = acc;");
    e.Line("barrier(CLK_LOCAL_MEM_FENCE);");
    e.Line(absl::StrCat("for (int s = ", kGroupSize / 2, "; s > 0; s >>= 1) {"));
    e.Indent();
    e.Line(absl::StrCat("if (lane < s) ", combine_line("scratch[lane]", "scratch[lane + s]")));
    e.Line("barrier(CLK_LOCAL_MEM_FENCE);");
    e.Dedent();
    e.Line("}");
    e.Line(absl::StrCat("if (lane == 0) ", out_name, "[gid] = scratch[0];"));
    spec = e.FinishGroups(split > 1 ? "gred_part" : "gred", outputs * split, kGroupSize);
  } else {
    e.Line(absl::StrCat(out_name, "[gid] = acc;"));
    spec = e.FinishIndexed(split > 1 ? "red_part" : "red", outputs * split);
  }
  spec.summary =
      absl::StrCat(split > 1 ? "partial " : "", "reduce ", ir::NodeString(root), " of ",
                   ir::NodeString(x), split > 1 ? absl::StrCat(" in ", split, " parts") : "");
  return spec;
}

// Whether `root`, once the reductions of its row kernel are values, reads `x` and reads it only
// at root's own index: every node on a path from root down to x is elementwise and of root's
// shape (a view such as a transpose would read other rows). Inputs and reductions end paths.
bool ReadsOnlyAtOwnIndex(const Node& root, const Node& x, const InputMap& inputs) {
  absl::flat_hash_map<const Node*, bool> reaches;
  std::function<bool(const Node&)> reach = [&](const Node& n) {
    if (&n == &x) return true;
    if (inputs.contains(&n) || ir::IsReduce(n.op)) return false;
    if (auto it = reaches.find(&n); it != reaches.end()) return it->second;
    bool any = false;
    for (const ir::NodePtr& o : n.operands) any = reach(*o) || any;
    reaches[&n] = any;
    return any;
  };
  if (!reach(root)) return false;
  for (const auto& [n, on_path] : reaches) {
    if (on_path && (!ir::IsElementwise(n->op) || n->shape != root.shape)) return false;
  }
  return true;
}

KernelSpec EmitRowKernel(const Node& root, BufferRef out, const std::vector<const Node*>& reduces,
                         const InputMap& inputs, const Target& target) {
  LAZYCL_CHECK(!reduces.empty(), "EmitRowKernel without reductions");
  const size_t reduced_dims = reduces[0]->args.size();
  int64_t row = 1;
  for (size_t d = root.shape.size() - reduced_dims; d < root.shape.size(); ++d)
    row *= root.shape[d];
  const int64_t rows = ir::NumElements(root.shape) / std::max<int64_t>(row, 1);

  Emitter e(inputs, IndexType(root, inputs, target), target);
  e.UnifyDims(root);
  std::string out_name = e.Buffer(out, root.dtype, true);
  // Every loop below walks the trailing dims of one row; the row's elements are contiguous.
  const std::string n = e.Sym(row, "row");
  const std::string base = absl::StrCat("(gid * ", n, " + r)");
  // Vector loops over the row, 16 elements a step; with `unroll` > 1 first `unroll` vectors a
  // step (independent accumulators hide the latency of fmax and add), then one. `body` gets
  // the value, its index and which of the unrolled vectors it is.
  using VectorBody = std::function<void(const std::string&, const std::string&, int)>;
  auto vector_loop = [&](const Node& x, int unroll, const VectorBody& body) {
    e.Line("idx_t r = 0;");
    if (!VectorFriendly(x, inputs, root.shape, reduced_dims)) return;
    for (int u : {unroll, 1}) {
      e.Line(absl::StrCat("for (; r < ", n, " - ", 16 * u - 1, "; r += ", 16 * u, ") {"));
      e.Indent();
      auto scope = e.SaveScope();
      e.SetVector(true, "gid", reduced_dims);
      for (int k = 0; k < u; ++k) {
        const std::string at = k == 0 ? base : absl::StrCat("(gid * ", n, " + r + ", 16 * k, ")");
        body(e.Eval(x, Index::Linear(at)), at, k);
      }
      e.SetVector(false);
      e.RestoreScope(std::move(scope));
      e.Dedent();
      e.Line("}");
      if (unroll == 1) break;
    }
  };
  auto scalar_loop = [&](const Node& x, const std::function<void(const std::string&)>& body) {
    e.Line(absl::StrCat("for (; r < ", n, "; ++r) {"));
    e.Indent();
    auto scope = e.SaveScope();
    body(e.Eval(x, Index::Linear(base)));
    e.RestoreScope(std::move(scope));
    e.Dedent();
    e.Line("}");
  };
  // The last reduction's operand, when root reads it at root's own index and it costs more
  // than a load (softmax: exp(x - max)), is stored into root's row as it is reduced and read
  // back from there (in cache) instead of being computed again.
  const Node& last = *reduces.back()->operands[0];
  const bool store_last = !inputs.contains(&last) && !ir::IsLeaf(last.op) &&
                          last.dtype == root.dtype && ReadsOnlyAtOwnIndex(root, last, inputs);
  for (size_t j = 0; j < reduces.size(); ++j) {
    const Node& red = *reduces[j];
    const Node& x = *red.operands[0];
    const bool sum = red.op == Op::kSum;
    const bool store = store_last && j + 1 == reduces.size();
    const std::string acc = absl::StrCat("acc", j);
    e.Line("{");
    e.Indent();
    e.Line(absl::StrCat("float16 ", acc, "v = (float16)(", sum ? "0.0f" : "NAN", ");"));
    e.Line(absl::StrCat("float16 ", acc, "w = ", acc, "v;"));
    vector_loop(x, 2, [&](const std::string& v, const std::string& at, int k) {
      if (store) e.Line(absl::StrCat("vstore16(", v, ", 0, ", out_name, " + ", at, ");"));
      const std::string a = absl::StrCat(acc, k == 0 ? "v" : "w");
      e.Line(sum ? absl::StrCat(a, " += ", v, ";") : absl::StrCat(a, " = fmax(", a, ", ", v, ");"));
    });
    e.Line(sum ? absl::StrCat(acc, "v += ", acc, "w;")
               : absl::StrCat(acc, "v = fmax(", acc, "v, ", acc, "w);"));
    const char* f = sum ? "" : "fmax";
    auto fold = [&](const std::string& a, const std::string& b) {
      return sum ? absl::StrCat("(", a, " + ", b, ")") : absl::StrCat(f, "(", a, ", ", b, ")");
    };
    e.Line(absl::StrCat("const float8 ", acc, "h = ", fold(acc + "v.lo", acc + "v.hi"), ";"));
    e.Line(absl::StrCat("const float4 ", acc, "q = ", fold(acc + "h.lo", acc + "h.hi"), ";"));
    e.Line(absl::StrCat("float ", acc, " = ",
                        fold(fold(acc + "q.x", acc + "q.y"), fold(acc + "q.z", acc + "q.w")), ";"));
    scalar_loop(x, [&](const std::string& v) {
      if (store) e.Line(absl::StrCat(out_name, "[", base, "] = ", v, ";"));
      e.Line(sum ? absl::StrCat(acc, " += ", v, ";")
                 : absl::StrCat(acc, " = fmax(", acc, ", ", v, ");"));
    });
    e.Line(absl::StrCat("red", j, " = ", acc, ";"));
    e.Dedent();
    e.Line("}");
    e.SetValue(&red, absl::StrCat("red", j));
    if (store) e.ReadBack(x, out);
  }
  e.Line("{");
  e.Indent();
  vector_loop(root, 1, [&](const std::string& v, const std::string& at, int) {
    e.Line(absl::StrCat("vstore16(", v, ", 0, ", out_name, " + ", at, ");"));
  });
  scalar_loop(root, [&](const std::string& v) {
    e.Line(absl::StrCat(out_name, "[", base, "] = ", v, ";"));
  });
  e.Dedent();
  e.Line("}");
  e.Prepend(absl::StrCat(
      "float ",
      [&] {
        std::vector<std::string> names;
        for (size_t j = 0; j < reduces.size(); ++j) names.push_back(absl::StrCat("red", j));
        return absl::StrJoin(names, ", ");
      }(),
      ";"));
  KernelSpec spec = e.FinishIndexed("row", rows);
  std::vector<std::string> what;
  for (const Node* r : reduces) what.push_back(ir::NodeString(*r));
  spec.summary = absl::StrCat("row kernel ", ir::NodeString(root), " with ",
                              absl::StrJoin(what, ", "), " (one work-item per row)");
  return spec;
}

KernelSpec EmitMatmul(const Node& root, BufferRef out, const StridedOperand& a,
                      const StridedOperand& b, const Target& target, const Node* epilogue,
                      const InputMap* inputs) {
  const size_t r = root.shape.size();
  const int64_t m = root.shape[r - 2];
  const int64_t n = root.shape[r - 1];
  const int64_t k = root.operands[0]->shape[r - 1];
  int64_t batches = 1;
  for (size_t d = 0; d + 2 < r; ++d) batches *= root.shape[d];

  // CPU and f32: 8 x 32 register blocks over a copied B panel (matmul_cpu.cl); otherwise 16 x 16
  // local-memory tiles.
  const bool blocked = target.cpu && root.dtype == DType::f32;
  KernelSpec spec;
  spec.source = std::string(Template(blocked ? "matmul_cpu.cl" : "matmul.cl"));
  const std::string t = CType(root.dtype);
  if (!blocked) spec.options = absl::StrCat("-DT=", t, " -DTS=16");
  auto buffer = [](BufferRef ref, bool written) {
    KernelArgSpec s;
    s.kind = KernelArgSpec::Kind::kBuffer;
    s.buffer = ref;
    s.written = written;
    return s;
  };
  auto i64 = [](int64_t v) {
    KernelArgSpec s;
    s.kind = KernelArgSpec::Kind::kInt64;
    s.value = v;
    return s;
  };
  // Offsets of parameters and outputs may move at run time (Graph::bind_offsets).
  auto offset = [&](BufferRef ref, int64_t v) {
    KernelArgSpec s = i64(v);
    if (target.bind_offsets && ref.kind != BufferRef::Kind::kTemp) {
      s.kind = KernelArgSpec::Kind::kOffset;
      s.buffer = ref;
      s.wide = true;
    }
    return s;
  };
  spec.args = {buffer(a.buffer, false),
               offset(a.buffer, a.offset),
               i64(a.batch_stride),
               i64(a.row_stride),
               i64(a.col_stride),
               buffer(b.buffer, false),
               offset(b.buffer, b.offset),
               i64(b.batch_stride),
               i64(b.row_stride),
               i64(b.col_stride),
               buffer(out, true),
               offset(out, 0),
               i64(m),
               i64(n),
               i64(k)};
  if (blocked) {
    // Rows per work-item (matmul_cpu.cl's `mb`, a multiple of its MR = 8): many rows share one
    // copy of a B panel, but keep enough work-items for every core.
    int64_t rows = std::min<int64_t>(128, static_cast<int64_t>(RoundUp(static_cast<size_t>(m), 8)));
    auto work_items = [&](int64_t r) { return (m + r - 1) / r * ((n + 31) / 32) * batches; };
    while (rows > 8 && work_items(rows) < kMatmulMinWorkItems) rows = rows / 16 * 8;
    spec.args.push_back(i64(rows));
    spec.launches.push_back(
        Launch{"matmul_cpu",
               {static_cast<size_t>((m + rows - 1) / rows),
                RoundUp(static_cast<size_t>(n), 32) / 32, static_cast<size_t>(batches)},
               {1, 1, 1},
               {}});
  } else {
    spec.launches.push_back(
        Launch{"matmul",
               {RoundUp(static_cast<size_t>(n), 16), RoundUp(static_cast<size_t>(m), 16),
                static_cast<size_t>(batches)},
               {16, 16, 1},
               {}});
  }
  if (epilogue != nullptr) {
    // lc_epilogue(acc, batch, row, col): the chain at the element's index, with the batch dims
    // recovered from the folded batch index.
    LAZYCL_CHECK(
        inputs != nullptr && epilogue->shape == root.shape && epilogue->dtype == root.dtype,
        "codegen: matmul epilogue %s does not fit", ir::NodeString(*epilogue).c_str());
    Emitter e(*inputs, "long", target);
    e.SetValue(&root, "acc");
    e.UnifyDims(*epilogue);
    std::vector<std::string> dims;
    if (r > 2) {
      const Shape batch_shape(epilogue->shape.begin(), epilogue->shape.end() - 2);
      std::vector<std::string> keys = e.DimKeys(*epilogue);
      keys.resize(r - 2);
      dims = e.Multi(Index::Linear("batch"), batch_shape, keys);
    }
    dims.push_back("row");
    dims.push_back("col");
    const std::string v = e.Eval(*epilogue, Index::Multi(std::move(dims)));
    e.Line(absl::StrCat("return ", v, ";"));
    std::vector<KernelArgSpec> extra;
    spec.source = absl::StrCat(
        "#define LC_EPILOGUE 1\n",
        e.FinishFunction(
            t, "lc_epilogue",
            absl::StrCat("const ", t, " acc, const long batch, const long row, ", "const long col"),
            &extra),
        spec.source);
    spec.args.insert(spec.args.end(), extra.begin(), extra.end());
  }
  spec.summary = absl::StrCat("matmul ", ir::NodeString(root), " (K=", k, ")");
  if (epilogue != nullptr) absl::StrAppend(&spec.summary, " -> ", ir::NodeString(*epilogue));
  return spec;
}

int64_t ArgBytes(const KernelSpec& spec) {
  auto bytes = [](const std::vector<KernelArgSpec>& args) {
    int64_t sum = 0;
    for (const KernelArgSpec& a : args) {
      const bool narrow = a.kind == KernelArgSpec::Kind::kInt32 ||
                          (a.kind == KernelArgSpec::Kind::kOffset && !a.wide);
      sum += narrow ? 4 : 8;
    }
    return sum;
  };
  int64_t extra = 0;
  for (const Launch& launch : spec.launches) extra = std::max(extra, bytes(launch.extra_args));
  return bytes(spec.args) + extra;
}

}  // namespace lazycl::kernels
