#pragma once

#include <string>
#include <vector>

#include "ir/op_table.h"
#include "kernels/cpu_math.h"
#include "lazycl/dtype.h"

// The OpenCL C text of each op, one table per pass (kernels/op_expr.cpp): the expression of every
// elementwise op, and the combiner and identity of every reduction. Emitter and the kernel
// strategies ask these for an op's text instead of branching on the op.
namespace lazycl::kernels {

// What an elementwise op's expression is written from.
struct ExprArgs {
  DType dtype;                 // the result's
  DType from;                  // the first operand's (Cast converts from it)
  std::vector<std::string> x;  // the operands' values: variable names or literals
  bool cpu = false;            // CPU strategy: exp, log and tanh are our own (cpu_math.h)
  bool vector = false;         // f32 values are float16 (Emitter's vector mode)
};

// The expression of elementwise op `op` (ir::IsElementwise). Appends to `calls` each CPU maths
// function the expression calls, for the kernel to define.
std::string OpExpr(ir::Op op, const ExprArgs& args, std::vector<CpuMath>* calls);

// The OpenCL C operator of a comparison op ("<", "<=", ...); nullptr for any other op.
const char* CompareOperator(ir::Op op);

// Reductions (ir::IsReduce) of values of dtype `t`:
// the value an accumulator starts from;
std::string ReduceIdentity(ir::Op op, DType t);
// `a` combined with `b`: "a + b", "fmax(a, b)"; `grouped` puts an infix combination in
// parentheses, so that it can be an operand of another;
std::string ReduceCombine(ir::Op op, DType t, const std::string& a, const std::string& b,
                          bool grouped = false);
// the statement that folds `v` into the accumulator `acc`: "acc += v;", "acc = fmax(acc, v);".
std::string ReduceAccumulate(ir::Op op, DType t, const std::string& acc, const std::string& v);

}  // namespace lazycl::kernels
