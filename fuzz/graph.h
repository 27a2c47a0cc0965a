#pragma once

// lazycl-fuzz's random graphs: an op list over symbolic shapes, run through the public API on
// the host and on a device and compared.
//
// PoCL compiles each distinct kernel in ~0.4 s cold, so a graph's structure is run over several
// size palettes before the next structure: shapes are symbolic (a dim is 0, 1, A or B, or a
// product of them), and each palette gives A and B other values (always >= 2, A != B) with the
// same 0/1 pattern. Sizes reach kernels as arguments, so the palettes of one structure mostly
// reuse its programs and cost only their run time.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lazycl/lazycl.h"

namespace lazycl::fuzz {

inline constexpr int kPalettes = 8;
inline constexpr std::array<int64_t, kPalettes> kA = {3, 2, 5, 4, 7, 2, 9, 3};
inline constexpr std::array<int64_t, kPalettes> kB = {4, 5, 3, 2, 3, 6, 4, 17};

using Dim = std::array<int64_t, kPalettes>;  // the size of one dim in each palette
using SymShape = std::vector<Dim>;

std::vector<int64_t> Concrete(const SymShape& s, int palette);

enum class Kind {
  kInput,         // shape, dtype
  kUnary,         // a, which
  kBinary,        // a, b, which
  kScalar,        // a, which, scalar
  kCompare,       // a, b, which
  kWhere,         // a (bool), b, c
  kReduce,        // a, which, dims, keepdim
  kTranspose,     // a, dims[0], dims[1]
  kPermute,       // a, dims
  kSlice,         // a, dims[0] = dim, dims[1] = start, dims[2] = end
  kFlatten,       // a
  kUnsqueeze,     // a, dims[0]
  kBroadcast,     // a, shape
  kCat,           // a, b, dims[0]
  kSoftmax,       // a, dims[0], which (0 softmax, 1 log_softmax)
  kMatmul,        // a, b
  kGather,        // a, dims[0], b (i32 index)
  kIndexSelect,   // a, dims[0], b (i32 ids, 1-D)
  kScatterAdd,    // a, dims[0], b (i32 index), c (src)
  kArg,           // a, which (0 argmax, 1 argmin), dims[0], keepdim -> i64
  kCumsum,        // a, dims[0]
  kTri,           // a, which (0 tril, 1 triu), dims[0] = k
  kTopk,          // a, dims = {k, dim}, which (0 the values, 1 their i64 indices)
  kStack,         // a, b (a's shape and dtype), dims[0]
  kSqueeze,       // a, dims[0] (a dim of size 1)
  kCast,          // a -> dtype
  kNorm,          // a, which (0 rms_norm(a, b), 1 layer_norm(a, b, c), 2 layer_norm(a))
  kLinear,        // a, b (weight [N, K]), c (bias [N]) or -1
  kEmbedding,     // a (integral ids), b (table [V, D])
  kOneHot,        // a (integral ids), dims[0] = classes
  kCrossEntropy,  // a (logits [N, C, d...]), b (i32 labels [N, d...])
  kAttention,     // a (q [..., L, E]), b (k [..., S, E]), c (v [..., S, Ev]), keepdim = causal
  kTakeAlongDim,  // a, dims[0], b (i32 index), as kGather
  kIndex2,        // a.index({..., b, ..., c}): i32 ids b and c (one shape) at dims[0] < dims[1]
  kIndexPut,      // index_put(a, {..., b}, c, accumulate = keepdim): i32 ids b at dims[0]
  kMaskedFill,    // masked_fill(a, b (bool, a's shape), scalar)
  // scan over dim 0 of a (f32, rank >= 1) from init c (f32, a's shape without dim 0):
  // carry' = tanh(binary `which`(carry, x) [+ 0.5 * b, captured]), y = unary dims[0](carry');
  // the value is the stacked ys, or the last carry with keepdim.
  kScan,
};

struct Step {
  explicit Step(Kind k) : kind(k) {}
  Kind kind;
  int a = -1, b = -1, c = -1;
  int which = 0;
  std::vector<int64_t> dims;
  bool keepdim = false;
  double scalar = 0;
  SymShape shape;  // kInput, kBroadcast; and the result's shape, for printing
  DType dtype = DType::f32;
  int input_id = 0;  // kInput: which data it holds (its index when generated; kept by Shrink)
  // On a device, the op runs inside call(): traced on placeholders of its operands, its result
  // substituted into the caller's graph. The host reference runs it plainly.
  bool in_call = false;
};

using Graph = std::vector<Step>;

// The random op list of one structure seed: 1-3 inputs and 1-`max_ops` ops. A second random
// stream of the same seed then wraps some ops in call() and may append a scan (a stream of
// their own: changing them leaves the op lists alone). A report reruns with the same build.
Graph Generate(uint64_t structure_seed, int max_ops);

// "%3 = add %1 %2 -> f32[3/2/5,1/1/1]"
std::string StepString(const Step& step, int index);
std::string GraphString(const Graph& graph);

// A Kind::kScan step's body ops: the binary step combining (carry, x) as operands 0 and 1, and
// the unary step making y from the new carry (operand 0).
struct ScanBody {
  Step binary{Kind::kBinary};
  Step unary{Kind::kUnary};
};
ScanBody ScanBodyOf(const Step& scan);

// The operands a step reads (indices of earlier steps).
std::vector<int> Operands(const Step& step);

// Every value of the graph for `palette`, on `device`: inputs are made on the host from
// `data_seed`, passed through `hook` (when set: hook(step index, host tensor) returns the tensor
// to use) and copied; a step whose entry in `fixed` is defined takes that value instead of
// computing it. Throws what the library throws.
using InputHook = std::function<Tensor(int step, const Tensor& input)>;
std::vector<Tensor> Interpret(const Graph& graph, uint64_t data_seed, int palette, Device device,
                              const InputHook& hook = {}, const std::vector<Tensor>& fixed = {});

// The gradient check of one graph whose last value is f32: loss = sum(last * c) for a random c;
// d loss / d every f32 input the loss reads, by `grad` on the host and on `device`, must agree
// (Mismatch's tolerance); when the graph has only smooth ops (no compare, where, max, abs, relu,
// minimum or maximum), the host's gradient must also agree with central finite differences at a
// few elements (central differences at 1e-2 and 5e-3, extrapolated, within 3e-2 (1 + |g|): f32
// differences over chains of up to 40 ops; skipped where the two steps disagree).
// "" when they agree or nothing is differentiable; `checked` counts the gradients compared.
std::string CheckGradients(const Graph& graph, uint64_t data_seed, int palette, Device device,
                           int* checked);

// "" when `got` matches `want` (the host's value), else what differs. Floats within the
// tolerance of the coarser of their own dtype and `coarsest` (what went into them): f32 within
// 1e-4 * max(|want|, 1) + 1e-5 (chains of up to 40 f32 ops with reductions round more than one
// op; ops_test checks single ops at 1e-5), f16 and bf16 within four of their ulps (a tenth of
// that absolute), f64 within 1e-9 relative; integers and bools exactly.
std::string Mismatch(const Tensor& want, const Tensor& got, DType coarsest = DType::f64);
// The largest |got - want| Mismatch accepts at `want` for a value of dtype `t`.
double Tolerance(DType t, DType coarsest, double want);

// ValueMismatch of value `index` given every value of the graph on the host and the device; where
// it fails, the host's values are computed again taking the device's indices at each earlier
// argmax, argmin or topk whose indices differ only by ties (a downstream value then follows the
// other, equally right, choice: seed 2026, graph 6520 with gpu codegen, a gather by argmin).
std::string ValuesMismatch(const Graph& graph, size_t index, uint64_t data_seed, int palette,
                           const std::vector<Tensor>& host, const std::vector<Tensor>& dev);
// Mismatch(host, dev) of value `index` of `graph`, except where indices of extremes (argmax,
// argmin, topk's) pick values that tie up to rounding, or where a floating value is
// ill-conditioned (IllConditioned, with the host's value recomputed from inputs nudged by 2
// ulps: NudgeOf; all scaled alike, and three times each element at random). Found by a long run
// (seed 2026, graph 26968): the sqrt of a carry that cancels to 1e-8 through the steps of a scan.
std::string ValueMismatch(const Graph& graph, size_t index, uint64_t data_seed, int palette,
                          const Tensor& host, const Tensor& dev);
// Whether `got` differs from `want` only by the rounding of an ill-conditioned problem: NaN
// where the other is NaN, and over the elements outside `tolerance(want)`, a root mean square
// difference at most 4x that of how far `moved` (want recomputed from nudged inputs; each
// element's farthest) are from want. Pooled over elements, since one element's noise is too
// few samples (seed 2026, graph 44247: 48 gradient elements of pure cancellation noise).
bool IllConditioned(const std::vector<double>& want, const std::vector<double>& got,
                    const std::vector<std::vector<double>>& moved,
                    const std::function<double(double)>& tolerance);
// A floating input as f64 (others as they are): the host's run of a graph on widened inputs is
// close to its exact value where the f32 run is ill-conditioned.
Tensor Widen(const Tensor& input);
// Whether `got` (the device's) is no farther from `exact` (the value computed from widened
// inputs) than `want` (the host's) is, by at most 2x in root mean square over the elements
// outside `tolerance(want)`: then the host's value has rounded as much as the device's (seed
// 2026, graph 3685 with gpu codegen: the gradient of tanh at saturation, 1 - t^2, where the
// host's t rounds to 1 and the device's to 1 - 2^-24, and f64 says 6e-8).
bool NoFartherFromExact(const std::vector<double>& want, const std::vector<double>& got,
                        const std::vector<double>& exact,
                        const std::function<double(double)>& tolerance);
// The relative nudge of an input for values whose coarsest ancestry is `coarsest`: 2 ulps.
double NudgeOf(DType coarsest);
// A floating input scaled by 1 + nudge, or with `random`, each element by a factor drawn from
// [1 - nudge, 1 + nudge) with `seed`; other inputs as they are.
Tensor Nudge(const Tensor& input, uint64_t seed, double nudge, bool random);

// A floating tensor's values as doubles (f64 as is, the others through float).
std::vector<double> Doubles(const Tensor& t);

// The least precise floating dtype step `i` reads, directly or not (itself included), counting
// f32 for a step that computes in f32 inside itself (x + randn, pow's tanh of an integer); f64
// when nothing coarser went in.
DType Coarsest(const Graph& graph, size_t i);

// The graph as a C++ program against the public API that prints host and device values of the
// last step (the reproducer printed for a failing graph).
std::string CppReproducer(const Graph& graph, uint64_t data_seed, int palette);

// A smaller graph for which `fails` still holds (it holds for `graph`): later steps cut, ops
// bypassed (their uses read an operand of the same shape and dtype instead) and unused steps
// removed, greedily, calling `fails` at most `budget` times.
Graph Shrink(Graph graph, const std::function<bool(const Graph&)>& fails, int budget = 200);

}  // namespace lazycl::fuzz
