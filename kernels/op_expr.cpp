#include "kernels/op_expr.h"

#include <cstddef>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "kernels/cl_text.h"

namespace lazycl::kernels {
namespace {

using ir::Op;
using Calls = std::vector<CpuMath>;

#define LAZYCL_COUNT_OP(name, arity, category) +1
constexpr size_t kOpCount = 0 LAZYCL_OPS(LAZYCL_COUNT_OP);
#undef LAZYCL_COUNT_OP
#define LAZYCL_COUNT_REDUCE(name, arity, category) \
  +(ir::OpCategory::category == ir::OpCategory::Reduce ? 1 : 0)
constexpr size_t kReduceCount = 0 LAZYCL_OPS(LAZYCL_COUNT_REDUCE);
#undef LAZYCL_COUNT_REDUCE

// Integer + - * wrap (host_eval.h). Signed overflow is undefined in OpenCL C, and the compiler
// does exploit it once a constant is involved, so compute in the unsigned type and reinterpret.
std::string Wrapping(const std::string& a, const char* op, const std::string& b, DType d) {
  const char* u = d == DType::i32 ? "uint" : "ulong";
  const char* s = d == DType::i32 ? "int" : "long";
  return absl::StrCat("as_", s, "(as_", u, "(", a, ") ", op, " as_", u, "(", b, "))");
}

// + - *: wrapping for integers.
std::string Arithmetic(const ExprArgs& a, const char* op) {
  if (IsInt(a.dtype)) return Wrapping(a.x[0], op, a.x[1], a.dtype);
  return absl::StrCat(a.x[0], " ", op, " ", a.x[1]);
}

std::string Call(const char* f, const ExprArgs& a) {
  std::string text = absl::StrCat(f, "(", a.x[0]);
  for (size_t i = 1; i < a.x.size(); ++i) absl::StrAppend(&text, ", ", a.x[i]);
  return absl::StrCat(text, ")");
}

}  // namespace

const char* CompareOperator(Op op) {
  switch (op) {
    case Op::kLt:
      return "<";
    case Op::kLe:
      return "<=";
    case Op::kGt:
      return ">";
    case Op::kGe:
      return ">=";
    case Op::kEq:
      return "==";
    case Op::kNe:
      return "!=";
    default:
      return nullptr;
  }
}

namespace {

std::string Compare(const ExprArgs& a, const char* op) {
  return absl::StrCat("(uchar)(", a.x[0], " ", op, " ", a.x[1], ")");
}

// Our own CPU maths (cpu_math.cl) is f32; f64 calls the builtins everywhere.
bool OwnMath(const ExprArgs& a) { return a.cpu && a.dtype != DType::f64; }

// A floating constant in the expression's dtype: "0.70710678f" for f32, all 17 digits for f64.
std::string Const(const ExprArgs& a, const char* f32_text, double value) {
  return a.dtype == DType::f64 ? Literal(value, DType::f64) : f32_text;
}

// The builtin on GPUs; on CPUs our own, whose definition the kernel then carries.
const char* Builtin(const char* builtin, CpuMath own, const ExprArgs& a, Calls* calls) {
  if (!OwnMath(a)) return builtin;
  calls->push_back(own);
  return CpuMathName(own);
}

// erf: on CPUs our lc_erf, which calls lc_exp (defined before it).
const char* Erf(const ExprArgs& a, Calls* calls) {
  if (!OwnMath(a)) return "erf";
  calls->push_back(CpuMath::kExp);
  calls->push_back(CpuMath::kErf);
  return CpuMathName(CpuMath::kErf);
}

// sin and cos: on CPUs our lc_sin and lc_cos, which call lc_sincos (defined before them).
const char* SinCos(const char* builtin, CpuMath own, const ExprArgs& a, Calls* calls) {
  if (!OwnMath(a)) return builtin;
  calls->push_back(CpuMath::kSinCos);
  calls->push_back(own);
  return CpuMathName(own);
}

// exp: our lc_exp for f32 on every device, GPUs too: NVIDIA's builtin measured 1.18 * 2^-23
// relative (an H200, driver 580.159.04), past the 2^-23 that codegen_test holds every device to;
// lc_exp measured 0.65 * 2^-23 on PoCL.
const char* Exp(const ExprArgs& a, Calls* calls) {
  if (a.dtype == DType::f64) return "exp";
  const CpuMath own = a.vector ? CpuMath::kExp16 : CpuMath::kExp;
  calls->push_back(own);
  return CpuMathName(own);
}

// f16 and bf16 are their bits (ushort), converted through f32 by the helpers that
// CpuMathSource defines (the kernel carries those it calls).
std::string Convert(const std::string& x, DType from, DType to, Calls* calls) {
  if (from == to) return x;
  if (is_half(to)) {
    const CpuMath f = to == DType::bf16 ? CpuMath::kF32ToBf16 : CpuMath::kF32ToF16;
    calls->push_back(f);
    return absl::StrCat(CpuMathName(f), "(", Convert(x, from, DType::f32, calls), ")");
  }
  if (is_half(from)) {
    const CpuMath f = from == DType::bf16 ? CpuMath::kBf16ToF32 : CpuMath::kF16ToF32;
    calls->push_back(f);
    return Convert(absl::StrCat(CpuMathName(f), "(", x, ")"), DType::f32, to, calls);
  }
  if (to == DType::boolean) return absl::StrCat("(uchar)(", x, " != ", Zero(from), ")");
  const bool floating = from == DType::f32 || from == DType::f64;
  if (floating && to == DType::i32) return absl::StrCat("convert_int_sat(", x, ")");
  // NaN converts to 0 as on the host; NVIDIA's convert_long_sat gave INT64_MIN for it (an H200,
  // driver 580.159.04), where OpenCL says 0.
  if (floating && to == DType::i64) {
    return absl::StrCat("(", x, " != ", x, " ? 0L : convert_long_sat(", x, "))");
  }
  return absl::StrCat("(", CType(to), ")(", x, ")");
}

using ExprFn = std::string (*)(const ExprArgs&, Calls*);
struct OpExprRow {
  Op op;
  ExprFn expr;  // nullptr: not an elementwise op
};

// Leaves, views, reductions and matmul are no expression: Emitter reads leaves and follows
// views by index arithmetic, and the strategies (emit_*.cpp) write reductions and matmuls.
// In vector mode (ExprArgs::vector) only the ops that VectorFriendly admits arrive.
constexpr OpExprRow kOpExprs[] = {
    {Op::kBuffer, nullptr},
    {Op::kConstant, nullptr},
    {Op::kScalar, nullptr},
    {Op::kIota, nullptr},
    {Op::kExp,
     [](const ExprArgs& a, Calls* c) { return absl::StrCat(Exp(a, c), "(", a.x[0], ")"); }},
    {Op::kLog,
     [](const ExprArgs& a, Calls* c) { return Call(Builtin("log", CpuMath::kLog, a, c), a); }},
    {Op::kSqrt, [](const ExprArgs& a, Calls*) { return Call("sqrt", a); }},
    {Op::kTanh,
     [](const ExprArgs& a, Calls* c) {
       if (OwnMath(a) || a.dtype == DType::f64)
         return Call(Builtin("tanh", CpuMath::kTanh, a, c), a);
       c->push_back(CpuMath::kTanhBuiltin);  // f32 (and the halves, computed in f32)
       return Call(CpuMathName(CpuMath::kTanhBuiltin), a);
     }},
    {Op::kSigmoid,
     [](const ExprArgs& a, Calls* c) {
       return absl::StrCat("1.0f / (1.0f + ", Exp(a, c), "(-", a.x[0], "))");
     }},
    {Op::kRelu,
     [](const ExprArgs& a, Calls*) {
       if (a.vector) return absl::StrCat("fmax(", a.x[0], ", 0.0f)");
       const std::string zero = Zero(a.dtype);
       return absl::StrCat(a.x[0], " > ", zero, " ? ", a.x[0], " : ", zero);
     }},
    {Op::kAbs,
     [](const ExprArgs& a, Calls*) {
       if (a.dtype == DType::f32 || a.dtype == DType::f64) return Call("fabs", a);
       const std::string zero = Zero(a.dtype);
       return absl::StrCat(a.x[0], " < ", zero, " ? ", Wrapping(zero, "-", a.x[0], a.dtype), " : ",
                           a.x[0]);
     }},
    {Op::kSin,
     [](const ExprArgs& a, Calls* c) { return Call(SinCos("sin", CpuMath::kSin, a, c), a); }},
    {Op::kCos,
     [](const ExprArgs& a, Calls* c) { return Call(SinCos("cos", CpuMath::kCos, a, c), a); }},
    {Op::kErf, [](const ExprArgs& a, Calls* c) { return Call(Erf(a, c), a); }},
    {Op::kNot, [](const ExprArgs& a, Calls*) { return absl::StrCat("(uchar)(!", a.x[0], ")"); }},
    {Op::kCast, [](const ExprArgs& a, Calls* c) { return Convert(a.x[0], a.from, a.dtype, c); }},
    {Op::kAdd, [](const ExprArgs& a, Calls*) { return Arithmetic(a, "+"); }},
    {Op::kMul, [](const ExprArgs& a, Calls*) { return Arithmetic(a, "*"); }},
    {Op::kDiv, [](const ExprArgs& a, Calls*) { return absl::StrCat(a.x[0], " / ", a.x[1]); }},
    {Op::kMaximum,
     [](const ExprArgs& a, Calls*) { return Call(is_floating(a.dtype) ? "fmax" : "max", a); }},
    {Op::kMinimum,
     [](const ExprArgs& a, Calls*) { return Call(is_floating(a.dtype) ? "fmin" : "min", a); }},
    {Op::kPow, [](const ExprArgs& a, Calls*) { return Call("pow", a); }},
    {Op::kLt, [](const ExprArgs& a, Calls*) { return Compare(a, CompareOperator(Op::kLt)); }},
    {Op::kLe, [](const ExprArgs& a, Calls*) { return Compare(a, CompareOperator(Op::kLe)); }},
    {Op::kGt, [](const ExprArgs& a, Calls*) { return Compare(a, CompareOperator(Op::kGt)); }},
    {Op::kGe, [](const ExprArgs& a, Calls*) { return Compare(a, CompareOperator(Op::kGe)); }},
    {Op::kEq, [](const ExprArgs& a, Calls*) { return Compare(a, CompareOperator(Op::kEq)); }},
    {Op::kNe, [](const ExprArgs& a, Calls*) { return Compare(a, CompareOperator(Op::kNe)); }},
    {Op::kWhere,
     [](const ExprArgs& a, Calls*) { return absl::StrCat(a.x[0], " ? ", a.x[1], " : ", a.x[2]); }},
    {Op::kReshape, nullptr},
    {Op::kPermute, nullptr},
    {Op::kExpand, nullptr},
    {Op::kSlice, nullptr},
    {Op::kPad, nullptr},
    {Op::kSum, nullptr},
    {Op::kMax, nullptr},
    {Op::kMatmul, nullptr},
    {Op::kGather, nullptr},
    {Op::kScatterAdd, nullptr},
    // mathops block
    {Op::kRsqrt, [](const ExprArgs& a, Calls*) { return Call("rsqrt", a); }},
    {Op::kSilu,  // x sigmoid(x), as x / (1 + exp(-x)): -0 (not NaN) where exp(-x) overflows
     [](const ExprArgs& a, Calls* c) {
       return absl::StrCat(a.x[0], " / (1.0f + ", Exp(a, c), "(-", a.x[0], "))");
     }},
    {Op::kGelu,  // x Phi(x) = x (1 + erf(x / sqrt 2)) / 2
     [](const ExprArgs& a, Calls* c) {
       return absl::StrCat("0.5f * ", a.x[0], " * (1.0f + ", Erf(a, c), "(", a.x[0], " * ",
                           Const(a, "0.70710678f", 0.70710678118654752), "))");
     }},
    // x (1 + tanh(u)) / 2 with u = sqrt(2 / pi) (x + 0.044715 x^3), written as x sigmoid(2u) =
    // x / (1 + exp(-2u)): no cancellation in 1 + tanh(u) for negative x, and -0 (not a tanh a
    // ulp short of -1 times x) in the far negative tail.
    {Op::kGeluTanh,
     [](const ExprArgs& a, Calls* c) {
       const std::string& x = a.x[0];
       return absl::StrCat(x, " / (1.0f + ", Exp(a, c), "(",
                           Const(a, "-1.5957691216f", -1.5957691216057308), " * (", x, " + ",
                           Const(a, "0.044715f", 0.044715), " * ", x, " * ", x, " * ", x, ")))");
     }},
    {Op::kMin, nullptr},
    {Op::kProd, nullptr},
    {Op::kCumsum, nullptr},
    // random block
    {Op::kRandomUniform,
     [](const ExprArgs& a, Calls* c) {
       c->push_back(CpuMath::kUniform);
       return Call(CpuMathName(CpuMath::kUniform), a);
     }},
};
static_assert(std::size(kOpExprs) == kOpCount, "one row per op of LAZYCL_OPS");

// A reduction folds values with an infix operator or a function of two values.
struct ReduceRow {
  Op op;
  const char* infix;         // "+": a + b, acc += v; nullptr: a function
  const char* f32_function;  // fmax(a, b) for f32 and f64
  const char* function;      // max(a, b) for the other dtypes
  std::string (*identity)(DType);
  // Where set, the combination itself (the infix and functions unused): Prod's integer products
  // wrap.
  std::string (*combine)(DType, const std::string&, const std::string&) = nullptr;
};

constexpr ReduceRow kReduces[] = {
    {Op::kSum, "+", nullptr, nullptr, [](DType t) { return Zero(t); }},
    {Op::kMax, nullptr, "fmax", "max",
     [](DType t) -> std::string {
       switch (t) {
         case DType::f32:
         case DType::f64:
           return "NAN";  // fmax skips NaN: the first value replaces it
         case DType::i32:
           return "INT_MIN";
         case DType::i64:
           return "LONG_MIN";
         case DType::boolean:
           return "((uchar)0)";
         case DType::f16:
         case DType::bf16:
           break;  // half values reduce in f32 (ir/half_precision.h)
       }
       return "";
     }},
    // mathops block
    {Op::kMin, nullptr, "fmin", "min",
     [](DType t) -> std::string {
       switch (t) {
         case DType::f32:
         case DType::f64:
           return "NAN";  // fmin skips NaN: the first value replaces it
         case DType::i32:
           return "INT_MAX";
         case DType::i64:
           return "LONG_MAX";
         case DType::boolean:
           return "((uchar)1)";
         case DType::f16:
         case DType::bf16:
           break;  // half values reduce in f32 (ir/half_precision.h)
       }
       return "";
     }},
    {Op::kProd, nullptr, nullptr, nullptr, [](DType t) { return Literal(1, t); },
     [](DType t, const std::string& a, const std::string& b) {
       if (IsInt(t)) return Wrapping(a, "*", b, t);
       return absl::StrCat("(", a, " * ", b, ")");
     }},
};
static_assert(std::size(kReduces) == kReduceCount, "one row per reduction of LAZYCL_OPS");

template <typename Row, size_t N>
constexpr bool InOrder(const Row (&rows)[N], size_t first) {
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(rows[i].op) != first + i) return false;
  }
  return true;
}
static_assert(InOrder(kOpExprs, 0), "kOpExprs is in LAZYCL_OPS order");

const ReduceRow& Reduction(Op op) {
  for (const ReduceRow& row : kReduces) {
    if (row.op == op) return row;
  }
  LAZYCL_CHECK(false, "codegen: %s is not a reduction", ir::OpName(op));
  return kReduces[0];
}

}  // namespace

std::string OpExpr(Op op, const ExprArgs& args, std::vector<CpuMath>* calls) {
  const ExprFn expr = kOpExprs[static_cast<size_t>(op)].expr;
  LAZYCL_CHECK(expr != nullptr, "codegen: %s reached inside a fused kernel", ir::OpName(op));
  return expr(args, calls);
}

std::string ReduceIdentity(Op op, DType t) { return Reduction(op).identity(t); }

std::string ReduceCombine(Op op, DType t, const std::string& a, const std::string& b,
                          bool grouped) {
  const ReduceRow& r = Reduction(op);
  if (r.combine != nullptr) return r.combine(t, a, b);
  if (r.infix != nullptr) {
    std::string text = absl::StrCat(a, " ", r.infix, " ", b);
    return grouped ? absl::StrCat("(", text, ")") : text;
  }
  return absl::StrCat(is_floating(t) ? r.f32_function : r.function, "(", a, ", ", b, ")");
}

std::string ReduceAccumulate(Op op, DType t, const std::string& acc, const std::string& v) {
  const ReduceRow& r = Reduction(op);
  if (r.combine == nullptr && r.infix != nullptr)
    return absl::StrCat(acc, " ", r.infix, "= ", v, ";");
  return absl::StrCat(acc, " = ", ReduceCombine(op, t, acc, v), ";");
}

}  // namespace lazycl::kernels
