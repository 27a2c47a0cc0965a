#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "ir/ir.h"
#include "kernels/codegen.h"
#include "kernels/cpu_math.h"
#include "kernels/plan.h"

// The writer under every kernel strategy (emit_*.cpp): evaluates a fused expression at symbolic
// indices, collecting the kernel's buffer and size arguments as it goes, and finishes the body
// into a KernelSpec. What each op is in OpenCL C comes from op_expr.h; how a kernel loops and
// what it stores is the strategy's.
namespace lazycl::kernels {

// Division of 31-bit indices by a run-time divisor d >= 2 as a multiply-high and a shift.
struct DivisorMagic {
  uint32_t multiplier = 0;
  int shift = 0;
};
DivisorMagic MagicOf(int64_t d);

// Work-items per work-group of the indexed entry points (Emitter::FinishIndexed).
constexpr size_t kLocalSize = 64;

inline size_t RoundUp(size_t n, size_t m) { return (n + m - 1) / m * m; }

// Rows per work-group of a row-form launch (Emitter::FinishRows) `local` columns wide: up to 256
// work-items, a power of two that divides `rows`.
size_t RowsPerGroup(int64_t rows, size_t local);

// An index into a node's value: either one linear (row-major) index or one index per dim.
struct Index {
  bool linear = true;
  std::string lin;
  std::vector<std::string> dims;

  static Index Linear(std::string lin) { return Index{true, std::move(lin), {}}; }
  static Index Multi(std::vector<std::string> dims) { return Index{false, "", std::move(dims)}; }
  std::string Key() const { return linear ? "L" + lin : "M" + absl::StrJoin(dims, ","); }
};

// Writes the body of one kernel. Each (node, index) pair is evaluated once per scope.
class Emitter {
 public:
  Emitter(const InputMap& inputs, std::string idx_type, const Target& target)
      : inputs_(inputs),
        idx_(std::move(idx_type)),
        bind_offsets_(target.bind_offsets),
        cpu_(target.cpu),
        scalar_of_(target.scalar_of) {}

  const std::string& idx_type() const { return idx_; }
  bool cpu() const { return cpu_; }

  // A size, stride or offset: literals for 0 and 1 (which codegen may specialise on), an
  // argument otherwise, one argument per `key`. Keys name structural roles (DimKey, "count"),
  // never values, so that shapes of one structure share one source: [3, 4] and [4, 4] alike.
  std::string Sym(int64_t v, const std::string& key);

  // For a size v >= 2 under `key`: the kernel parameters (uint multiplier, int shift) of
  // MagicOf(v), once per key: q = mul_hi((uint)n, m) >> s is n / v for 0 <= n < 2^31.
  std::pair<std::string, std::string> DivisorSyms(int64_t v, const std::string& key);

  // The kernel's parameter for `ref` (once per buffer), as an expression to index.
  std::string Buffer(BufferRef ref, DType dtype, bool written);

  // The kernel's parameter for Scalar leaf `n` (once per scalar index), as an expression of n's
  // dtype. Named in order of first use in this kernel, not by the graph's scalar index, so that
  // one expression has one source whichever graph it is in.
  std::string ScalarArg(const ir::Node& n);

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
  void UnifyDims(const ir::Node& root);

  std::string DimKey(const ir::Node* n, size_t d);
  std::vector<std::string> DimKeys(const ir::Node& n);

  // `idx` as a linear index into a value of `shape` (dims named by `keys`), or as one index
  // per dim.
  std::string Linear(const Index& idx, const ir::Node& n) {
    return Linear(idx, n.shape, DimKeys(n));
  }
  std::vector<std::string> Multi(const Index& idx, const ir::Node& n) {
    return Multi(idx, n.shape, DimKeys(n));
  }
  std::string Linear(const Index& idx, const ir::Shape& shape,
                     const std::vector<std::string>& keys);
  std::vector<std::string> Multi(const Index& idx, const ir::Shape& shape,
                                 const std::vector<std::string>& keys);

  // The value of `n` at `idx`, as an expression (a variable name or a literal).
  std::string Eval(const ir::Node& n, const Index& idx);

  // From now on `n` is read from `ref`, which the kernel itself wrote at n's indices.
  void ReadBack(const ir::Node& n, BufferRef ref) { read_back_[&n] = ref; }
  // `n` is not evaluated but given: the expression `value`, whatever the index (a matmul's
  // accumulator in its epilogue; a reduction computed earlier in a row kernel, read through a
  // broadcast). Survives scopes. Set before UnifyDims, which then stops at `n`, or after it.
  void SetValue(const ir::Node* n, std::string value) { values_[n] = std::move(value); }

  // Vector mode: f32 values are float16, and an index names the element there and the 15 after
  // it in row-major order (VectorFriendly says which expressions can be evaluated this way).
  // `broadcast_row` is the scalar index at which an Expand over the trailing `broadcast_dims`
  // dims is read. With `broadcast_dims` 0 or 1 the 16 elements lie in one row of the last dim,
  // so an Expand that keeps the last dim (a bias over rows) is read as 16 elements too.
  void SetVector(bool on, std::string broadcast_row = "", size_t broadcast_dims = 0) {
    vec_ = on;
    broadcast_row_ = std::move(broadcast_row);
    broadcast_dims_ = broadcast_dims;
  }
  // In vector mode, also prefetch what is read from memory (LC_PREFETCH, defined by the CPU
  // matmul template), for a function whose only effect is that.
  void SetPrefetch(bool on) { prefetch_ = on; }
  // Vector mode over rows of one reduced dim: the position along the row of the first of the
  // 16 elements evaluated next ("r"), for masks that compare positions (LaneFriendly).
  void SetLaneBase(std::string base) { lane_base_ = std::move(base); }

  // The body written so far, which the emitter forgets (the parameters it collected stay): for a
  // second function over the same parameters (FinishFunction).
  std::string TakeBody() { return std::exchange(body_, std::string()); }

  // The body as `static inline <ret> <name>(<leading>, <the collected parameters>)`, after the
  // CPU maths it calls; the parameters and the arguments that pass them on are also defined as
  // the macros LC_EPI_PARAMS and LC_EPI_ARGS (each empty or starting with a comma), for a
  // template that calls the function. `more` (other functions over the same parameters) follows
  // it, and then the pragma that gives the template after the text the default contraction back.
  // Returns the text; `args` receives the arguments in order.
  std::string FinishFunction(absl::string_view ret, absl::string_view name,
                             absl::string_view leading, std::vector<KernelArgSpec>* args,
                             absl::string_view more = "");

  // The body, written for the element index `gid`, becomes an inline function and two entry
  // points, launched in this order: `<name>` for gid = get_global_id(0) with no bounds check,
  // over the whole work-groups of kLocalSize items that fit in `count`, and `<name>_tail` for
  // gid = base + get_global_id(0) while gid < count, over the rest (the unchecked launch is
  // what PoCL needs to vectorise the loop over work-items). Small kernels run the tail alone.
  // The kernel is named after its own text, so that the same code gets the same name (and
  // source) whatever the shapes and in every process: the program caches key on the source.
  KernelSpec FinishIndexed(absl::string_view prefix, int64_t count);

  // A range of columns of FinishRows and the body (TakeBody) that computes them.
  struct RowPiece {
    int64_t lo = 0, hi = 0;
    std::string body;
  };
  // Each piece's body, written for the index (`row`, `col`) of a [rows, cols] view of the
  // elements with lo <= col < hi, becomes an inline function and an entry point over a 2-D range
  // {hi - lo, rows} in groups of {16, 32 or 64, 1} (dividing hi - lo): PoCL's loop over the
  // work-items of a group runs along `col` with `row` fixed, so what depends on the row alone
  // (dividing it into the leading dims) is computed once per group, and reads contiguous along
  // `col` are vector loads. Pieces all of one width are one entry point and one launch over
  // {width, rows}, each work-item computing its column of every piece.
  KernelSpec FinishRows(absl::string_view prefix, int64_t rows,
                        const std::vector<RowPiece>& pieces);

  // From now on the bodies are for columns lo <= `col` < hi only (FinishRows' pieces): a Pad
  // along the last dim read at `col` itself (a cat's pieces) is resolved where it is written,
  // its operand read with no clamp (so along `col` it stays a vector load) or its pad value.
  void SetColumnRange(int64_t lo, int64_t hi) {
    col_lo_ = lo;
    col_hi_ = hi;
  }

  // How many reads of memory so far were at another linear index than `own` (the element's own,
  // as the caller names it): a view of another layout, a broadcast.
  void SetOwnIndex(std::string own) { own_index_ = std::move(own); }
  int other_index_reads() const { return other_index_reads_; }

  // The body, written for the group index `gid` and the lane `lane` (get_local_id) of
  // work-groups of `local` items, becomes the kernel itself, launched as `groups` groups: the
  // body may use barriers and __local memory. One launch: every group is whole.
  KernelSpec FinishGroups(absl::string_view prefix, int64_t groups, size_t local);

 private:
  using DimRef = std::pair<const ir::Node*, size_t>;

  std::string NodeKey(const char* what, const ir::Node& n, size_t d);
  std::string Assign(DType dtype, const std::string& expr);
  std::string EvalUncached(const ir::Node& n, const Index& idx);
  std::string EvalVector(const ir::Node& n, const Index& idx);
  std::string EvalElementwise(const ir::Node& n, const Index& idx);
  std::string Pad(const ir::Node& n, const Index& idx);
  static std::string SplitKey(const std::vector<std::string>& dims, const ir::Shape& shape,
                              const std::vector<std::string>& keys);
  // An integer or bool node that LaneFriendly admits, at `coords` (one per dim: scalar
  // expressions, or kLaneCoord for the 16 positions lane_base_ + 0..15 along the row): an
  // int16 expression when it depends on the position (a bool as OpenCL's -1/0 mask), a scalar
  // one otherwise.
  struct LaneValue {
    bool vec = false;
    std::string expr;
  };
  LaneValue Lane(const ir::Node& n, const std::vector<std::string>& coords);
  // Where(cond, a, b) in vector mode, cond LaneFriendly.
  std::string WhereVector(const ir::Node& n, const Index& idx);
  // In the column and epilogue forms (vector mode with no broadcast row), whether `expand`
  // broadcasts a value along the last dim: one scalar for the 16 lanes of one row.
  bool RowScalar(const ir::Node& expand) const;
  // Gather and ScatterAdd (emit_gather.cpp): the dims they force equal, and Gather's value.
  void UnifyIndexing(const ir::Node& n);
  std::string Gather(const ir::Node& n, const Index& idx);
  // The CPU maths functions the body calls, each defined once, in order of first call, then
  // #pragma OPENCL FP_CONTRACT OFF for the generated code that follows them.
  std::string Helpers() const;
  DimRef Find(DimRef r);
  void Union(DimRef a, DimRef b);

  const InputMap& inputs_;
  absl::flat_hash_map<const ir::Node*, BufferRef> read_back_;
  std::string idx_;
  bool bind_offsets_;
  bool cpu_;
  const absl::flat_hash_map<const ir::Node*, int>* scalar_of_;
  absl::flat_hash_map<int, std::string> scalars_;  // scalar index -> expression
  bool vec_ = false;
  bool prefetch_ = false;
  std::string broadcast_row_;
  size_t broadcast_dims_ = 0;
  std::string lane_base_ = "r";
  std::vector<CpuMath> helpers_;
  std::vector<std::string> names_;
  std::string body_;
  std::string indent_ = "  ";
  int next_var_ = 0;
  std::string own_index_;
  int64_t col_lo_ = 0, col_hi_ = 0;  // SetColumnRange; empty: not known
  int other_index_reads_ = 0;
  std::vector<std::string> params_;
  std::vector<KernelArgSpec> args_;
  absl::flat_hash_map<DimRef, DimRef> parent_;
  absl::flat_hash_map<std::string, std::string> syms_;
  absl::flat_hash_map<std::string, int64_t> sym_values_;
  absl::flat_hash_map<std::pair<int, int>, std::string> buffers_;
  absl::flat_hash_map<std::string, std::string> memo_;
  absl::flat_hash_map<std::string, std::vector<std::string>> delin_;
  // SplitKey of the dims Multi made from a linear index -> that index.
  absl::flat_hash_map<std::string, std::string> relin_;
  absl::flat_hash_map<const ir::Node*, std::string> values_;
};

// The index type of a kernel over `root`: "int" when every extent in it fits, which is faster
// everywhere, "long" otherwise.
std::string IndexType(const ir::Node& root, const InputMap& inputs, const Target& target);

// Whether `x`, reduced over its trailing `reduced_dims` dims, can be evaluated 16 elements at a
// time in Emitter's vector mode: f32 elementwise ops whose vector forms are plain OpenCL C,
// reading inputs at x's own linear index, Expands that only broadcast a per-row value along the
// reduced dims (softmax's x - max) and, with at most one reduced dim, Expands that keep the
// last dim (a bias, RMSNorm's weight). `reduced_dims` 0 is a matmul's epilogue or a column
// reduction: 16 elements of one row of the last dim, where an Expand may also broadcast a
// per-row value along that dim (LastDimBroadcast); a Where there must compare f32 values at its
// own index (relu's gradient).
bool VectorFriendly(const ir::Node& n, const InputMap& inputs, const ir::Shape& x_shape,
                    size_t reduced_dims);

// Whether `n` is an Expand that broadcasts a computed (not constant) value along the last dim.
bool LastDimBroadcast(const ir::Node& n);

// Whether an integer or bool `n` is computed from positions alone: iotas, integer constants,
// broadcasts, unit-dim reshapes, integer casts and comparisons (the causal mask col <= row).
// Such a condition lets Where run in vector mode.
bool LaneFriendly(const ir::Node& n, const InputMap& inputs);

}  // namespace lazycl::kernels
