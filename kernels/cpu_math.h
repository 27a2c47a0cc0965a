#pragma once

#include <string>

// The CPU strategy's own f32 maths (kernels/templates/cpu_math.cl, where each function says why
// and how accurate it is): a kernel that calls one carries its definition in front of its body.
namespace lazycl::kernels {

enum class CpuMath {
  kExp,     // lc_exp(float)
  kExp16,   // lc_exp16(float16): lc_exp over 16 lanes, for Emitter's vector mode
  kLog,     // lc_log(float)
  kTanh,    // lc_tanh(float)
  kErf,     // lc_erf(float); calls lc_exp, so a kernel that calls it carries kExp first
  kSinCos,  // lc_sincos(float, int), which lc_sin and lc_cos call (carried before them)
  kSin,     // lc_sin(float)
  kCos,     // lc_cos(float)
  // f16 and bf16 bits (ushort) to and from float, rounding to nearest even; every strategy
  // uses these (the same arithmetic as base/half.h, bit for bit).
  kBf16ToF32,  // lc_bf16_to_f32(ushort)
  kF32ToBf16,  // lc_f32_to_bf16(float)
  kF16ToF32,   // lc_f16_to_f32(ushort)
  kF32ToF16,   // lc_f32_to_f16(float)
  // RandomUniform (ir/op_table.h) on every strategy, bit for bit as runtime/host_eval.cpp.
  kUniform,  // lc_uniform(long counter, long seed)
  // The f32 builtin tanh, exactly +-1 where tanh rounds to it (PoCL's stops 1 ulp short).
  kTanhBuiltin,  // lc_tanh_builtin(float)
};

// The name a kernel calls it by: "lc_exp".
const char* CpuMathName(CpuMath f);

// Its definition, as it goes into a kernel's source: from its `static inline` line to its
// closing `}` line, without the template's comments.
const std::string& CpuMathSource(CpuMath f);

}  // namespace lazycl::kernels
