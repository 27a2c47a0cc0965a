#include "kernels/cpu_math.h"

#include <array>
#include <cctype>
#include <iterator>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "kernels/templates.h"

namespace lazycl::kernels {
namespace {

constexpr const char* kNames[] = {
    "lc_exp",        "lc_exp16",      "lc_log",     "lc_tanh",        "lc_erf",
    "lc_sincos",     "lc_sin",        "lc_cos",     "lc_bf16_to_f32", "lc_f32_to_bf16",
    "lc_f16_to_f32", "lc_f32_to_f16", "lc_uniform", "lc_tanh_builtin"};

// The half conversions (cpu_math.h), as base/half.h computes them.
constexpr const char* kBf16ToF32 =
    "static inline float lc_bf16_to_f32(ushort h) { return as_float((uint)h << 16); }\n";
constexpr const char* kF32ToBf16 =
    "static inline ushort lc_f32_to_bf16(float f) {\n"
    "  const uint u = as_uint(f);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x0040u);\n"
    "  return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n"
    "}\n";
constexpr const char* kF16ToF32 =
    "static inline float lc_f16_to_f32(ushort h) {\n"
    "  const uint sign = (uint)(h & 0x8000u) << 16;\n"
    "  const uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu;\n"
    "  if (e == 0x1fu) return as_float(sign | 0x7f800000u | (m << 13));\n"
    "  if (e != 0u) return as_float(sign | ((e + 112u) << 23) | (m << 13));\n"
    "  const float v = (float)m * 5.9604644775390625e-8f;\n"
    "  return sign != 0u ? -v : v;\n"
    "}\n";
constexpr const char* kF32ToF16 =
    "static inline ushort lc_f32_to_f16(float f) {\n"
    "  const uint u = as_uint(f);\n"
    "  const ushort sign = (ushort)((u >> 16) & 0x8000u);\n"
    "  const uint a = u & 0x7fffffffu;\n"
    "  if (a > 0x7f800000u) return (ushort)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));\n"
    "  if (a >= 0x477ff000u) return (ushort)(sign | 0x7c00u);\n"
    "  if (a >= 0x38800000u) {\n"
    "    const uint r = a - 0x38000000u;\n"
    "    return (ushort)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));\n"
    "  }\n"
    "  if (a < 0x33000000u) return sign;\n"
    "  const uint e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;\n"
    "  const uint shift = 126u - e;\n"
    "  uint h = m >> shift;\n"
    "  const uint rest = m & ((1u << shift) - 1u), tie = 1u << (shift - 1u);\n"
    "  if (rest > tie || (rest == tie && (h & 1u))) ++h;\n"
    "  return (ushort)(sign | h);\n"
    "}\n";

// RandomUniform: splitmix64 of (seed, counter) in unsigned arithmetic (wrapping), its top 23
// bits k as (k + 0.5) * 2^-23, every step exact in f32.
constexpr const char* kUniform =
    "static inline float lc_uniform(long counter, long seed) {\n"
    "  ulong z = (ulong)seed * 0x9e3779b97f4a7c15UL + ((ulong)counter + 1UL) * "
    "0xbf58476d1ce4e5b9UL;\n"
    "  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;\n"
    "  z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;\n"
    "  z ^= z >> 31;\n"
    "  return ((float)(uint)(z >> 41) + 0.5f) * 1.1920928955078125e-7f;\n"
    "}\n";

// tanh(x) rounds to +-1 in f32 for |x| >= 13 ln 2 = 9.0109... (1 - tanh(x) = 2 / (e^2x + 1) is
// then below half an ulp of 1, 2^-25). PoCL 3.1's builtin gives 1 - 2^-24 there, up to
// tanh(1e4): within OpenCL's 5 ulps, but the gradient 1 - y^2 is then 1.2e-7 where it is 0
// (lazycl-fuzz, seed 2026, graph 3685 with gpu codegen: a saturated tanh in a scan, amplified
// to 2.8e-4 where JAX and the host say 0).
constexpr const char* kTanhBuiltin =
    "static inline float lc_tanh_builtin(float x) {\n"
    "  return fabs(x) >= 9.01091335f ? copysign(1.0f, x) : tanh(x);\n"
    "}\n";

// The text of cpu_math.cl from the line that starts with `head` through the first `closing`
// (which ends with a newline) after it.
std::string Extract(const std::string& head, std::string_view closing) {
  const std::string_view text = Template("cpu_math.cl");
  const size_t begin = text.find(head);
  LAZYCL_CHECK(begin != std::string_view::npos && (begin == 0 || text[begin - 1] == '\n'),
               "cpu_math.cl defines no %s", head.c_str());
  const size_t end = text.find(closing, begin);
  LAZYCL_CHECK(end != std::string_view::npos, "cpu_math.cl: %s has no closing line", head.c_str());
  return std::string(text.substr(begin, end + closing.size() - begin));
}

// The definition of `static inline float <name>(`, through its closing line.
std::string Definition(std::string_view name) {
  return Extract("static inline float " + std::string(name) + "(", "\n}\n");
}

// The definition of the table `__constant uint <name>[`, through its closing `};` line.
std::string TableDefinition(std::string_view name) {
  return Extract("__constant uint " + std::string(name) + "[", "};\n");
}

// `text` with each identifier that `from` names replaced by the matching `to`; words that
// start with a digit (literals such as 1.0f and 0x4B400000) are left alone.
std::string RenameIdentifiers(std::string_view text, const std::vector<std::string_view>& from,
                              const std::vector<std::string_view>& to) {
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (!word_char(text[i])) {
      out.push_back(text[i++]);
      continue;
    }
    size_t j = i;
    while (j < text.size() && word_char(text[j])) ++j;
    std::string_view word = text.substr(i, j - i);
    if (!std::isdigit(static_cast<unsigned char>(word[0]))) {
      for (size_t k = 0; k < from.size(); ++k) {
        if (word == from[k]) {
          word = to[k];
          break;
        }
      }
    }
    out.append(word);
    i = j;
  }
  return out;
}

}  // namespace

const char* CpuMathName(CpuMath f) { return kNames[static_cast<int>(f)]; }

const std::string& CpuMathSource(CpuMath f) {
  static const std::array<std::string, std::size(kNames)>* sources = [] {
    const std::string exp = Definition("lc_exp");
    return new std::array<std::string, std::size(kNames)>{
        exp,
        RenameIdentifiers(exp, {"lc_exp", "float", "int", "as_float", "as_int"},
                          {"lc_exp16", "float16", "int16", "as_float16", "as_int16"}),
        Definition("lc_log"),
        Definition("lc_tanh"),
        Definition("lc_erf"),
        TableDefinition("lc_inv_pio4") + Definition("lc_reduce_large") + Definition("lc_sincos"),
        Definition("lc_sin"),
        Definition("lc_cos"),
        kBf16ToF32,
        kF32ToBf16,
        kF16ToF32,
        kF32ToF16,
        kUniform,
        kTanhBuiltin,
    };
  }();
  return (*sources)[static_cast<int>(f)];
}

}  // namespace lazycl::kernels
