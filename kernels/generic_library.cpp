#include "kernels/generic_library.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ir/ir.h"
#include "kernels/cl_text.h"
#include "kernels/cpu_math.h"
#include "kernels/op_expr.h"

namespace lazycl::kernels {
namespace {

using ir::Op;

constexpr DType kAllDTypes[] = {DType::f32, DType::i32,  DType::i64, DType::boolean,
                                DType::f16, DType::bf16, DType::f64};

bool Wanted(DType d, bool fp64) { return d != DType::f64 || fp64; }

// Identifier spelling of a dtype: "f32", "bool".
std::string Id(DType d) { return dtype_name(d); }

std::string Lower(const char* op_name) {
  std::string s = op_name;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The text shared by every kernel: the size and view parameters and the coordinates of a
// work-item's element (c0 .. c5 over the sizes s0 .. s5, the last dim fastest).
constexpr char kPreamble[] =
    R"(#define LC_SIZES const long n, const long s0, const long s1, const long s2, const long s3, const long s4, const long s5
#define LC_VIEW(p) const long p##o, const long p##0, const long p##1, const long p##2, const long p##3, const long p##4, const long p##5
#define LC_SPLIT long r_ = i; c5 = r_ % s5; r_ /= s5; c4 = r_ % s4; r_ /= s4; c3 = r_ % s3; r_ /= s3; c2 = r_ % s2; r_ /= s2; c1 = r_ % s1; c0 = r_ / s1;
#define LC_COORDS const long i = get_global_id(0); if (i >= n) return; long c0, c1, c2, c3, c4, c5; LC_SPLIT
#define LC_AT(p) (p##o + c0 * p##0 + c1 * p##1 + c2 * p##2 + c3 * p##3 + c4 * p##4 + c5 * p##5)
#define LC_MODE(k) ((modes >> (2 * (k))) & 3)
#define LC_MODED_COORDS const long i = get_global_id(0); if (i >= n) return; long c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0; if (modes & 0x2A) { LC_SPLIT }
#define LC_IX(p, k) (LC_MODE(k) == 0 ? p##o + i : LC_MODE(k) == 1 ? p##o : LC_AT(p))
)";

// OpenCL has no bool kernel arguments: a bool value comes as an int.
std::string ArgType(DType d) { return d == DType::boolean ? "int" : CType(d); }

std::string Kernel(const std::string& name, const std::string& params, const std::string& body) {
  return absl::StrCat("__kernel void ", name, "(", params, ") {\n", body, "}\n");
}

std::string OutParams(DType out) {
  return absl::StrCat("__global ", CType(out), "* out, const long outo, LC_SIZES");
}

std::string ViewParam(DType d, const char* p) {
  return absl::StrCat("__global const ", CType(d), "* ", p, ", LC_VIEW(", p, ")");
}

class Builder {
 public:
  Builder(bool cpu, bool fp64) : cpu_(cpu), fp64_(fp64) {}

  GenericLibrary Build() {
    for (int o = 0; o < ir::kOpCount; ++o) {
      const Op op = static_cast<Op>(o);
      if (ir::IsElementwise(op) && op != Op::kCast) Elementwise(op);
      if (ir::IsReduce(op)) Reduce(op);
    }
    for (DType from : kAllDTypes) {
      for (DType to : kAllDTypes) {
        if (from != to && Wanted(from, fp64_) && Wanted(to, fp64_)) Cast(from, to);
      }
    }
    for (DType d : kAllDTypes) {
      if (!Wanted(d, fp64_) || is_half(d)) continue;
      Add(GenericFillKernel(d),
          absl::StrCat("__global ", CType(d), "* out, const long outo, ", "const long n, const ",
                       ArgType(d), " v"),
          absl::StrCat("  const long i = get_global_id(0);\n  if (i >= n) return;\n",
                       "  out[outo + i] = (", CType(d), ")v;\n"));
      if (d != DType::boolean) {
        Add(GenericIotaKernel(d),
            absl::StrCat("__global ", CType(d), "* out, const long outo, const long n"),
            absl::StrCat("  const long i = get_global_id(0);\n  if (i >= n) return;\n",
                         "  out[outo + i] = (", CType(d), ")(i);\n"));
      }
      Pad(d);
    }
    for (DType d : kAllDTypes) {
      if (Wanted(d, fp64_) && !is_half(d) &&
          ir::MakeScan(Op::kCumsum, ir::MakeConstant(0, d, {1}), 0, false).ok())
        Cumsum(d);
    }
    for (DType index : {DType::i32, DType::i64}) {
      for (DType d : kAllDTypes) {
        if (!Wanted(d, fp64_) || is_half(d)) continue;
        Gather(d, index);
        if (d == DType::f32 || d == DType::i32 || d == DType::i64 || d == DType::f64)
          ScatterAdd(d, index);
      }
    }
    for (const char* t : {"uchar", "ushort", "uint", "ulong"}) {
      const size_t bytes = std::string(t) == "uchar"    ? 1
                           : std::string(t) == "ushort" ? 2
                           : std::string(t) == "uint"   ? 4
                                                        : 8;
      Add(GenericCopyKernel(bytes),
          absl::StrCat("__global ", t, "* out, const long outo, LC_SIZES, const int modes, ",
                       "__global const ", t, "* a, LC_VIEW(a)"),
          "  LC_MODED_COORDS\n  out[outo + i] = a[LC_IX(a, 0)];\n");
    }
    Interpreter();
    GenericLibrary library;
    library.source = kPreamble;
    library.interp_block = interp_block_;
    library.interp_ops = std::move(interp_ops_);
    std::sort(calls_.begin(), calls_.end());
    calls_.erase(std::unique(calls_.begin(), calls_.end()), calls_.end());
    for (CpuMath f : calls_) absl::StrAppend(&library.source, CpuMathSource(f), "\n");
    library.source += body_;
    library.kernels = std::move(names_);
    return library;
  }

 private:
  void Add(const std::string& name, const std::string& params, const std::string& body) {
    absl::StrAppend(&body_, Kernel(name, params, body));
    names_[name] = Signature(params);
  }

  // GenericLibrary::kernels' letters for a parameter list as Add gets it.
  static std::string Signature(const std::string& params) {
    std::string letters;
    for (absl::string_view p : absl::StrSplit(params, ", ")) {
      if (absl::StartsWith(p, "LC_SIZES") || absl::StartsWith(p, "LC_VIEW(")) {
        letters += std::string(1 + kGenericRank, 'l');
      } else if (absl::StartsWith(p, "__global")) {
        letters += 'b';
      } else if (absl::StartsWith(p, "const long")) {
        letters += 'l';
      } else if (absl::StartsWith(p, "const int")) {
        letters += 'i';
      } else if (absl::StartsWith(p, "const float")) {
        letters += 'f';
      } else if (absl::StartsWith(p, "const double")) {
        letters += 'd';
      } else {
        letters += '?';
      }
    }
    return letters;
  }

  // The op's kernel for every operand dtype the IR accepts (asked of its own builders).
  void Elementwise(Op op) {
    for (DType d : kAllDTypes) {
      if (!Wanted(d, fp64_) || is_half(d)) continue;
      const int arity = ir::OpArity(op);
      const DType operand = op == Op::kRandomUniform ? DType::i64 : d;
      if (op == Op::kRandomUniform && d != DType::i64) continue;
      ir::NodePtr x = ir::MakeConstant(0, operand, {});
      absl::StatusOr<ir::NodePtr> made =
          arity == 1   ? ir::MakeUnary(op, x)
          : arity == 2 ? ir::MakeBinary(op, x, x)
                       : ir::MakeWhere(ir::MakeConstant(0, DType::boolean, {}), x, x);
      if (!made.ok()) continue;
      const DType out = (*made)->dtype;
      std::string params = absl::StrCat(OutParams(out), ", const int modes");
      std::string body = "  LC_MODED_COORDS\n";
      ExprArgs args{out, operand, {}, cpu_, false};
      static constexpr const char* kNames[] = {"a", "b", "w"};
      for (int k = 0; k < arity; ++k) {
        const DType t = op == Op::kWhere && k == 0 ? DType::boolean : operand;
        absl::StrAppend(&params, ", ", ViewParam(t, kNames[k]));
        absl::StrAppend(&body, "  const ", CType(t), " x", k, " = ", kNames[k], "[LC_IX(",
                        kNames[k], ", ", k, ")];\n");
        args.x.push_back(absl::StrCat("x", k));
      }
      absl::StrAppend(&body, "  out[outo + i] = ", OpExpr(op, args, &calls_), ";\n");
      Add(GenericOpKernel(op, operand), params, body);
    }
  }

  void Cast(DType from, DType to) {
    ExprArgs args{to, from, {"x0"}, cpu_, false};
    Add(GenericCastKernel(from, to),
        absl::StrCat(OutParams(to), ", const int modes, ", ViewParam(from, "a")),
        absl::StrCat("  LC_MODED_COORDS\n  const ", CType(from), " x0 = a[LC_IX(a, 0)];\n",
                     "  out[outo + i] = ", OpExpr(Op::kCast, args, &calls_), ";\n"));
  }

  // x placed at b0 .. b5 in the result, the rest v; z0 .. z5 are x's sizes.
  void Pad(DType d) {
    std::string params = absl::StrCat(OutParams(d), ", ", ViewParam(d, "a"));
    std::string body = "  LC_COORDS\n";
    std::string inside, at = "ao";
    for (int k = 0; k < kGenericRank; ++k) {
      absl::StrAppend(&params, ", const long b", k);
      absl::StrAppend(&body, "  const long d", k, " = c", k, " - b", k, ";\n");
      absl::StrAppend(&inside, k == 0 ? "" : " && ", "d", k, " >= 0 && d", k, " < z", k);
      absl::StrAppend(&at, " + d", k, " * a", k);
    }
    for (int k = 0; k < kGenericRank; ++k) absl::StrAppend(&params, ", const long z", k);
    absl::StrAppend(&params, ", const ", ArgType(d), " v");
    absl::StrAppend(&body, "  if (", inside, ") {\n    out[outo + i] = a[", at,
                    "];\n  } else {\n    out[outo + i] = (", CType(d), ")v;\n  }\n");
    Add(GenericPadKernel(d), params, body);
  }

  // x read at the result's coordinates with the one along `dim` replaced by the index's value
  // there, clamped into [0, xn - 1] (ir.h's Gather).
  void Gather(DType d, DType index) {
    Add(GenericGatherKernel(d, index),
        absl::StrCat(OutParams(d), ", const int modes, ", ViewParam(d, "a"), ", ",
                     ViewParam(index, "b"), ", const int dim, const long xn"),
        absl::StrCat("  LC_COORDS\n  const long cs[6] = {c0, c1, c2, c3, c4, c5};\n",
                     "  const long as[6] = {a0, a1, a2, a3, a4, a5};\n",
                     "  const long raw = (long)b[LC_IX(b, 0)];\n",
                     "  const long c = raw < 0 ? 0 : (raw >= xn ? xn - 1 : raw);\n",
                     "  out[outo + i] = a[LC_AT(a) + (c - cs[dim]) * as[dim]];\n"));
  }

  // The running sum along `dim` up to the result's coordinate (from the end: `reverse`), in the
  // fused scan kernel's order, from 0; one work-item per element, len additions at most.
  void Cumsum(DType d) {
    ExprArgs sum{d, d, {"acc", "a[base + j * as[dim]]"}, cpu_, false};
    const std::string add = OpExpr(Op::kAdd, sum, &calls_);
    Add(GenericCumsumKernel(d),
        absl::StrCat(OutParams(d), ", ", ViewParam(d, "a"),
                     ", const int dim, const int reverse, const long len"),
        absl::StrCat("  LC_COORDS\n  const long cs[6] = {c0, c1, c2, c3, c4, c5};\n",
                     "  const long as[6] = {a0, a1, a2, a3, a4, a5};\n",
                     "  const long base = LC_AT(a) - cs[dim] * as[dim];\n  ", CType(d),
                     " acc = ", Zero(d), ";\n  if (reverse) {\n",
                     "    for (long j = len - 1; j >= cs[dim]; --j) acc = ", add, ";\n",
                     "  } else {\n    for (long j = 0; j <= cs[dim]; ++j) acc = ", add, ";\n",
                     "  }\n  out[outo + i] = acc;\n"));
  }

  // x plus the src elements whose index names the result's coordinate along `dim`, in
  // ascending order along it (ir.h's ScatterAdd; the order of the host's and the fused
  // kernels' sums); z0 .. z5 are the index's and src's sizes.
  void ScatterAdd(DType d, DType index) {
    std::string params = absl::StrCat(OutParams(d), ", ", ViewParam(d, "a"), ", ",
                                      ViewParam(index, "b"), ", ", ViewParam(d, "w"));
    for (int k = 0; k < kGenericRank; ++k) absl::StrAppend(&params, ", const long z", k);
    absl::StrAppend(&params, ", const int dim");
    ExprArgs sum{d, d, {"acc", "v"}, cpu_, false};
    Add(GenericScatterAddKernel(d, index), params,
        absl::StrCat(
            "  LC_COORDS\n  ", CType(d), " acc = a[LC_AT(a)];\n",
            "  const long p[6] = {c0, c1, c2, c3, c4, c5};\n",
            "  const long zs[6] = {z0, z1, z2, z3, z4, z5};\n",
            "  const long bs[6] = {b0, b1, b2, b3, b4, b5};\n",
            "  const long ws[6] = {w0, w1, w2, w3, w4, w5};\n",
            "  int inside = 1;\n  long ib = bo, iw = wo;\n",
            "  for (int k = 0; k < 6; ++k) {\n    if (k == dim) continue;\n",
            "    if (p[k] >= zs[k]) inside = 0;\n    ib += p[k] * bs[k];\n",
            "    iw += p[k] * ws[k];\n  }\n", "  for (long j = 0; inside && j < zs[dim]; ++j) {\n",
            "    if ((long)b[ib + j * bs[dim]] != p[dim]) continue;\n", "    const ", CType(d),
            " v = w[iw + j * ws[dim]];\n    acc = ", OpExpr(Op::kAdd, sum, &calls_), ";\n  }\n",
            "  out[outo + i] = acc;\n"));
  }

  // One work-item per result element: its coordinates c0 .. c5 over the result's sizes (1 along
  // the reduced dims) plus e0 .. e5 over the m elements of the reduced dims t0 .. t5 (1 along
  // the kept dims).
  void Reduce(Op op) {
    for (DType d : kAllDTypes) {
      if (!Wanted(d, fp64_) || is_half(d)) continue;
      if (!ir::MakeReduce(op, ir::MakeConstant(0, d, {1}), {0}).ok()) continue;
      const std::string t = CType(d);
      std::string params =
          absl::StrCat(OutParams(d), ", ", ViewParam(d, "a"), ", const long m, const int linear");
      for (int k = 0; k < kGenericRank; ++k) absl::StrAppend(&params, ", const long t", k);
      std::string at = "base";
      for (int k = 0; k < kGenericRank; ++k) absl::StrAppend(&at, " + e", k, " * a", k);
      // `linear`: the reduced elements of a result element are m consecutive ones. Eight
      // accumulators, element j into lane j % 8, combined pairwise; a floating sum compensates
      // each lane's rounding (Kahan; the compensation restarts where the lane is no longer
      // finite, so inf and NaN come out as a plain sum's). One accumulator's float sum of 2^20
      // exps was 1.4e-4 off, eight still over tiering_test's 1e-5.
      const bool compensated = op == Op::kSum && (d == DType::f32 || d == DType::f64);
      const std::string accumulate =
          compensated ? absl::StrCat("{ const ", t, " y = v - comp[j & 7], s = lane[j & 7] + y; ",
                                     "comp[j & 7] = isfinite(s) ? (s - lane[j & 7]) - y : 0; ",
                                     "lane[j & 7] = s; }")
                      : ReduceAccumulate(op, d, "lane[j & 7]", "v");
      auto lanes = [&](int lo, int hi, auto& self) -> std::string {
        if (hi - lo == 1) return absl::StrCat("lane[", lo, "]");
        const int mid = (lo + hi) / 2;
        return ReduceCombine(op, d, self(lo, mid, self), self(mid, hi, self), /*grouped=*/true);
      };
      std::string body = absl::StrCat(
          "  LC_COORDS\n  const long base = LC_AT(a);\n  ", t, " lane[8];\n",
          compensated ? absl::StrCat("  ", t, " comp[8] = {0};\n") : "",
          "  for (int l = 0; l < 8; ++l) lane[l] = ", ReduceIdentity(op, d),
          ";\n  if (linear) {\n    for (long j = 0; j < m; ++j) {\n", "      const ", t,
          " v = a[base + j];\n      ", accumulate,
          "\n    }\n  } else {\n    for (long j = 0; j < m; ++j) {\n      long q = j;\n");
      for (int k = kGenericRank - 1; k >= 1; --k) {
        absl::StrAppend(&body, "      const long e", k, " = q % t", k, ";\n      q /= t", k, ";\n");
      }
      absl::StrAppend(&body, "      const long e0 = q;\n      const ", t, " v = a[", at,
                      "];\n      ", accumulate,
                      "\n    }\n  }\n  out[outo + i] = ", lanes(0, 8, lanes), ";\n");
      Add(GenericReduceKernel(op, d), params, body);
    }
  }

  // The ops the interpreter evaluates and the text of each one's case.
  void Interpreter() {
    interp_ops_.assign(static_cast<size_t>(ir::kOpCount), false);
    interp_block_ = cpu_ ? 128 : 1;
    std::string cases;
    const ir::NodePtr f = ir::MakeConstant(0, DType::f32, {});
    const ir::NodePtr b = ir::MakeConstant(0, DType::boolean, {});
    for (int o = 0; o < ir::kOpCount; ++o) {
      const Op op = static_cast<Op>(o);
      if (!ir::IsElementwise(op) || op == Op::kCast || op == Op::kRandomUniform) continue;
      const int arity = ir::OpArity(op);
      const bool bool_in = op == Op::kNot;
      absl::StatusOr<ir::NodePtr> made = arity == 1   ? ir::MakeUnary(op, bool_in ? b : f)
                                         : arity == 2 ? ir::MakeBinary(op, f, f)
                                                      : ir::MakeWhere(b, f, f);
      if (!made.ok()) continue;
      const DType out = (*made)->dtype;
      if (out != DType::f32 && out != DType::boolean) continue;
      ExprArgs args{out, bool_in ? DType::boolean : DType::f32, {}, cpu_, false};
      static constexpr const char* kRegs[] = {"rx[j]", "ry[j]", "rz[j]"};
      for (int k = 0; k < arity; ++k) {
        const bool is_bool = bool_in || (op == Op::kWhere && k == 0);
        args.x.push_back(is_bool ? absl::StrCat("(", kRegs[k], " != 0.0f)") : kRegs[k]);
      }
      interp_ops_[static_cast<size_t>(o)] = true;
      absl::StrAppend(&cases, "      case ", InterpOpcode(op),
                      ":\n        for (int j = 0; j < m; ++j) rd[j] = (float)(",
                      OpExpr(op, args, &calls_), ");\n        break;\n");
    }
    std::string params =
        "__global float* out, const long outo, const long n, const int count, const int result, "
        "const int modes";
    for (int k = 0; k < kInterpInstructions / 2; ++k) absl::StrAppend(&params, ", const long p", k);
    for (int k = 0; k < kInterpInputs; ++k) {
      absl::StrAppend(&params, ", __global const uchar* a", k, ", const long a", k, "o");
    }
    for (int k = 0; k < kInterpScalars; ++k) absl::StrAppend(&params, ", const float f", k);
    auto list = [](const char* prefix, int count, const char* suffix) {
      std::string l;
      for (int k = 0; k < count; ++k) absl::StrAppend(&l, k ? ", " : "", prefix, k, suffix);
      return l;
    };
    const std::string block = std::to_string(interp_block_);
    const std::string body = absl::StrCat(
        "  const long i0 = (long)get_global_id(0) * ", block, ";\n", "  if (i0 >= n) return;\n",
        "  const int m = (int)min((long)", block, ", n - i0);\n", "  const long prog[",
        kInterpInstructions / 2, "] = {", list("p", kInterpInstructions / 2, ""), "};\n",
        "  __global const uchar* in[", kInterpInputs, "] = {", list("a", kInterpInputs, ""), "};\n",
        "  const long at[", kInterpInputs, "] = {", list("a", kInterpInputs, "o"), "};\n",
        "  const float sc[", kInterpScalars, "] = {", list("f", kInterpScalars, ""), "};\n",
        "  float reg[", kInterpRegisters, "][", block, "];\n",
        "  for (int p = 0; p < count; ++p) {\n",
        "    const uint w = (uint)((ulong)prog[p >> 1] >> (32 * (p & 1)));\n",
        "    const int d = (w >> 8) & 63, x = (w >> 14) & 63, y = (w >> 20) & 63, z = (w >> 26) & "
        "63;\n",
        "    float* rd = reg[d & 7];\n",
        "    const float* rx = reg[x & 7];\n    const float* ry = reg[y & 7];\n",
        "    const float* rz = reg[z & 7];\n", "    switch (w & 255) {\n", "      case ",
        kInterpLoad, ": {\n",
        "        __global const float* s = (__global const float*)in[x & 7] + at[x & 7];\n",
        "        if ((modes >> x) & 1) {\n          const float v = s[0];\n",
        "          for (int j = 0; j < m; ++j) rd[j] = v;\n        } else {\n",
        "          s += i0;\n          for (int j = 0; j < m; ++j) rd[j] = s[j];\n        }\n",
        "        break;\n      }\n", "      case ", kInterpLoadBool, ": {\n",
        "        __global const uchar* s = in[x & 7] + at[x & 7];\n",
        "        if ((modes >> x) & 1) {\n          const float v = s[0] ? 1.0f : 0.0f;\n",
        "          for (int j = 0; j < m; ++j) rd[j] = v;\n        } else {\n",
        "          s += i0;\n          for (int j = 0; j < m; ++j) rd[j] = s[j] ? 1.0f : 0.0f;\n",
        "        }\n        break;\n      }\n", "      case ", kInterpScalar,
        ": {\n        const float v = sc[x & 7];\n",
        "        for (int j = 0; j < m; ++j) rd[j] = v;\n        break;\n      }\n", cases,
        "    }\n  }\n",
        "  __global float* o = out + outo + i0;\n  const float* r = reg[result & 7];\n",
        "  for (int j = 0; j < m; ++j) o[j] = r[j];\n");
    Add(GenericInterpKernel(), params, body);
  }

  bool cpu_;
  bool fp64_;
  int interp_block_ = 1;
  std::vector<bool> interp_ops_;
  std::vector<CpuMath> calls_;
  std::string body_;
  absl::flat_hash_map<std::string, std::string> names_;
};

}  // namespace

std::string GenericOpKernel(Op op, DType operand) {
  return absl::StrCat("g_", Lower(ir::OpName(op)), "_", Id(operand));
}
std::string GenericCastKernel(DType from, DType to) {
  return absl::StrCat("g_cast_", Id(from), "_", Id(to));
}
std::string GenericFillKernel(DType dtype) { return absl::StrCat("g_fill_", Id(dtype)); }
std::string GenericIotaKernel(DType dtype) { return absl::StrCat("g_iota_", Id(dtype)); }
std::string GenericCopyKernel(size_t element_bytes) {
  return absl::StrCat("g_copy_", element_bytes);
}
std::string GenericPadKernel(DType dtype) { return absl::StrCat("g_pad_", Id(dtype)); }
std::string GenericGatherKernel(DType dtype, DType index) {
  return absl::StrCat("g_gather_", Id(dtype), "_", Id(index));
}
std::string GenericCumsumKernel(DType dtype) { return absl::StrCat("g_cumsum_", Id(dtype)); }
std::string GenericScatterAddKernel(DType dtype, DType index) {
  return absl::StrCat("g_scatter_add_", Id(dtype), "_", Id(index));
}
std::string GenericInterpKernel() { return "g_interp_f32"; }
std::string GenericReduceKernel(Op op, DType dtype) {
  return absl::StrCat("g_", Lower(ir::OpName(op)), "_", Id(dtype));
}

const GenericLibrary& GenericLibraryFor(bool cpu, bool fp64) {
  static std::mutex mu;
  static std::array<std::unique_ptr<GenericLibrary>, 4>* libraries =
      new std::array<std::unique_ptr<GenericLibrary>, 4>();  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<GenericLibrary>& slot = (*libraries)[(cpu ? 2 : 0) + (fp64 ? 1 : 0)];
  if (slot == nullptr) slot = std::make_unique<GenericLibrary>(Builder(cpu, fp64).Build());
  return *slot;
}

}  // namespace lazycl::kernels
