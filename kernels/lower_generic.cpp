#include "kernels/lower_generic.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/codegen.h"
#include "kernels/generic_library.h"

namespace lazycl::kernels {
namespace {

using ir::Node;
using ir::Op;
using ir::Shape;

// Where a node's value is: element (offset + sum(index[d] * strides[d])) of a buffer.
struct Access {
  BufferRef buffer;
  int64_t offset = 0;
  std::vector<int64_t> strides;
};

std::vector<int64_t> RowMajor(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 0);
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    s *= shape[d];
  }
  return strides;
}

// Whether `a` reads a node of `shape` as one contiguous row-major run (dims of size 1 and empty
// values whatever their strides).
bool Contiguous(const Access& a, const Shape& shape) {
  if (ir::NumElements(shape) == 0) return true;
  int64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    if (a.strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

// A rank-r list as kGenericRank entries, padded in front with `fill`.
std::vector<int64_t> Padded(const std::vector<int64_t>& v, int64_t fill) {
  std::vector<int64_t> out(static_cast<size_t>(kGenericRank) - v.size(), fill);
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

size_t RoundUp(size_t n, size_t m) { return (n + m - 1) / m * m; }

// The target of the generic tier's matmul: matmul.cl, with no blocking to choose or tune.
Target Tiled(const Target& target) {
  Target tiled = target;
  tiled.cpu = false;
  tiled.bind_offsets = true;
  tiled.one_matmul_program = true;
  return tiled;
}

class GenericLowering {
 public:
  GenericLowering(const Graph& graph, const Target& target)
      : graph_(graph), target_(target), library_(GenericLibraryFor(target.cpu, target.fp64)) {}

  absl::StatusOr<Plan> Run() {
    for (size_t k = 0; k < graph_.outputs.size(); ++k) {
      const Node& n = *graph_.nodes[static_cast<size_t>(graph_.outputs[k])];
      output_of_[&n] = static_cast<int>(k);
      plan_.output_bytes.push_back(static_cast<size_t>(ir::NumElements(n.shape)) *
                                   dtype_size(n.dtype));
    }
    FindRegions();
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      const Node& n = *graph_.nodes[i];
      if (n.shape.size() > static_cast<size_t>(kGenericRank)) {
        return absl::UnimplementedError(absl::StrCat("generic tier: rank ", n.shape.size(), " of ",
                                                     ir::NodeString(n), " above ", kGenericRank));
      }
      if (absl::Status s = Visit(static_cast<int>(i), n); !s.ok()) return s;
      if (auto it = output_of_.find(&n); it != output_of_.end()) {
        const BufferRef out{BufferRef::Kind::kOutput, it->second};
        absl::StatusOr<Access> a_or = At(n);
        if (!a_or.ok()) return a_or.status();
        const Access a = *a_or;
        if (!(a.buffer.kind == out.kind && a.buffer.index == out.index)) {
          if (absl::Status s = Copy(n, a, out); !s.ok()) return s;
        }
      }
    }
    plan_.temp_last_use.assign(plan_.temp_bytes.size(), -1);
    for (size_t k = 0; k < plan_.kernels.size(); ++k) {
      for (const KernelArgSpec& a : plan_.kernels[k].args) {
        if (a.kind == KernelArgSpec::Kind::kBuffer && a.buffer.kind == BufferRef::Kind::kTemp)
          plan_.temp_last_use[static_cast<size_t>(a.buffer.index)] = static_cast<int>(k);
      }
    }
    return std::move(plan_);
  }

 private:
  absl::Status Visit(int i, const Node& n) {
    if (in_region_[Index(n)]) {
      // A region's inner nodes are computed by its root's interpreter kernel.
      return root_[Index(n)] ? Region(n) : absl::OkStatus();
    }
    if (UniformLeaf(n) != nullptr) return absl::OkStatus();  // filled where read as a buffer
    for (const ir::NodePtr& o : n.operands) {                // uniform values read as buffers
      if (absl::StatusOr<Access> a = At(*o); !a.ok()) return a.status();
    }
    switch (n.op) {
      case Op::kBuffer:
        access_[&n] = {{BufferRef::Kind::kParam, graph_.param_of[static_cast<size_t>(i)]},
                       0,
                       RowMajor(n.shape)};
        return absl::OkStatus();
      case Op::kIota:
        return Fill(n, GenericIotaKernel(n.dtype), {});
      case Op::kReshape:
      case Op::kPermute:
      case Op::kExpand:
      case Op::kSlice:
        return View(n);
      case Op::kPad:
        return Pad(n);
      case Op::kSum:
      case Op::kMax:
      case Op::kMin:
      case Op::kProd:
        return Reduce(n);
      case Op::kMatmul:
        return Matmul(n);
      case Op::kGather:
        return Gather(n);
      case Op::kScatterAdd:
        return ScatterAdd(n);
      case Op::kCumsum:
        return Cumsum(n);
      default:
        break;
    }
    return Elementwise(n, ElementwiseName(n));
  }

  // A view's access: strides over its operand's (computed before), or a contiguous copy where a
  // reshape of a strided value cannot be strides.
  absl::Status View(const Node& n) {
    switch (n.op) {
      case Op::kReshape: {
        const Node& x = *n.operands[0];
        Access a = access_.at(&x);
        if (!Contiguous(a, x.shape)) {
          const BufferRef t = Temp(x);
          if (absl::Status s = Copy(x, a, t); !s.ok()) return s;
          a = {t, 0, {}};
        }
        access_[&n] = {a.buffer, a.offset, RowMajor(n.shape)};
        return absl::OkStatus();
      }
      case Op::kPermute: {
        const Access& a = access_.at(n.operands[0].get());
        Access v{a.buffer, a.offset, {}};
        for (int64_t p : n.args) v.strides.push_back(a.strides[static_cast<size_t>(p)]);
        access_[&n] = std::move(v);
        return absl::OkStatus();
      }
      case Op::kExpand: {
        const Node& x = *n.operands[0];
        Access v = access_.at(&x);
        for (size_t d = 0; d < n.shape.size(); ++d) {
          if (x.shape[d] == 1) v.strides[d] = 0;
        }
        access_[&n] = std::move(v);
        return absl::OkStatus();
      }
      case Op::kSlice: {
        Access v = access_.at(n.operands[0].get());
        for (size_t d = 0; d < n.shape.size(); ++d) v.offset += n.args[d] * v.strides[d];
        access_[&n] = std::move(v);
        return absl::OkStatus();
      }
      default:
        return absl::InternalError(
            absl::StrCat("generic tier: ", ir::NodeString(n), " is no view"));
    }
  }

  static std::string ElementwiseName(const Node& n) {
    if (n.op == Op::kCast) return GenericCastKernel(n.operands[0]->dtype, n.dtype);
    const DType operand = n.op == Op::kWhere ? n.operands[1]->dtype : n.operands[0]->dtype;
    return GenericOpKernel(n.op, operand);
  }

  size_t Index(const Node& n) const { return static_cast<size_t>(index_of_.at(&n)); }

  // The Constant or Scalar whose value every element of `n` has when `n` is one or a view of
  // one (reshape, expand, permute, slice), else nullptr.
  static const Node* UniformLeaf(const Node& n) {
    switch (n.op) {
      case Op::kConstant:
      case Op::kScalar:
        return &n;
      case Op::kReshape:
      case Op::kExpand:
      case Op::kPermute:
      case Op::kSlice:
        return UniformLeaf(*n.operands[0]);
      default:
        return nullptr;
    }
  }

  // The value of `n` as kernels read it. A uniform value (UniformLeaf) is computed at its first
  // such read: its Constant or Scalar filled at the leaf's own shape, then the views as strides;
  // the interpreter reads it as an argument instead.
  absl::StatusOr<Access> At(const Node& n) {
    if (auto it = access_.find(&n); it != access_.end()) return it->second;
    const Node* leaf = UniformLeaf(n);
    if (leaf == nullptr) {
      return absl::InternalError(
          absl::StrCat("generic tier: ", ir::NodeString(n), " read before it is computed"));
    }
    if (leaf == &n) {  // filled at its own shape; views of it are strides over that
      if (absl::Status s = Fill(n, GenericFillKernel(n.dtype), {ValueArg(n, n.dtype)}); !s.ok())
        return s;
    } else {
      if (absl::StatusOr<Access> a = At(*n.operands[0]); !a.ok()) return a.status();
      if (absl::Status s = View(n); !s.ok()) return s;
    }
    return access_.at(&n);
  }

  // A Constant's or Scalar's value as a kernel argument of `dtype`.
  KernelArgSpec ValueArg(const Node& n, DType dtype) const {
    KernelArgSpec v;
    if (n.op == Op::kScalar) {
      v.kind = KernelArgSpec::Kind::kScalar;
      v.scalar = graph_.scalar_of[Index(n)];
    } else {
      v.kind = KernelArgSpec::Kind::kNumber;
      v.number = n.value;
    }
    v.dtype = dtype;
    return v;
  }

  // Whether the interpreter evaluates `n` (GenericLibrary::interp_ops, with its operand dtypes).
  bool Interpretable(const Node& n) const {
    const size_t op = static_cast<size_t>(n.op);
    if (op >= library_.interp_ops.size() || !library_.interp_ops[op]) return false;
    if (n.dtype != DType::f32 && n.dtype != DType::boolean) return false;
    for (size_t k = 0; k < n.operands.size(); ++k) {
      const bool want_bool = n.op == Op::kNot || (n.op == Op::kWhere && k == 0);
      if (n.operands[k]->dtype != (want_bool ? DType::boolean : DType::f32)) return false;
    }
    return true;
  }

  // Regions of interpretable nodes, each a tree: a node is inside its consumer's region when it
  // has exactly one use, by an interpretable node, and is no output; otherwise it is a region's
  // root (an f32 one: a bool result is computed by its own kernel). Consumers come after their
  // operands, so one backward pass decides.
  void FindRegions() {
    const size_t count = graph_.nodes.size();
    in_region_.assign(count, false);
    root_.assign(count, false);
    std::vector<int> uses(count, 0), consumer(count, -1);
    for (size_t i = 0; i < count; ++i) {
      index_of_[graph_.nodes[i]] = static_cast<int>(i);
      for (const ir::NodePtr& o : graph_.nodes[i]->operands) {
        auto it = index_of_.find(o.get());
        if (it == index_of_.end()) continue;  // not lowered here: never a region's
        const size_t k = static_cast<size_t>(it->second);
        ++uses[k];
        consumer[k] = static_cast<int>(i);
      }
    }
    for (size_t i = count; i-- > 0;) {
      const Node& n = *graph_.nodes[i];
      if (!Interpretable(n)) continue;
      const bool root =
          output_of_.contains(&n) || uses[i] != 1 || !in_region_[static_cast<size_t>(consumer[i])];
      if (root && n.dtype != DType::f32) continue;
      in_region_[i] = true;
      root_[i] = root;
    }
    FitRegions();
  }

  // What a region's subtree needs of the interpreter: instructions, registers, and the distinct
  // inputs and uniform values it reads (each a load slot or a float argument).
  struct Needs {
    int code = 1, registers = 1;
    std::vector<const Node*> inputs, scalars;  // sorted, distinct
    bool Fits() const {
      return code <= kInterpInstructions && registers <= kInterpRegisters &&
             scalars.size() <= static_cast<size_t>(kInterpScalars) &&
             inputs.size() <= static_cast<size_t>(kInterpInputs);
    }
  };

  static void Merge(std::vector<const Node*>& into, const std::vector<const Node*>& from) {
    into.insert(into.end(), from.begin(), from.end());
    std::sort(into.begin(), into.end());
    into.erase(std::unique(into.begin(), into.end()), into.end());
  }

  Needs NeedsOf(const Node& n, const std::vector<Needs>& inner) const {
    Needs need;
    const int arity = static_cast<int>(n.operands.size());
    need.registers = arity + 1;  // the result's register is none of the operands'
    for (int k = 0; k < arity; ++k) {
      const Node& o = *n.operands[static_cast<size_t>(k)];
      Needs of;  // a leaf: one load
      if (Inner(o)) {
        of = inner[Index(o)];
      } else if (const Node* leaf = UniformLeaf(o); leaf != nullptr) {
        of.scalars = {leaf};
      } else {
        of.inputs = {&o};
      }
      need.code += of.code;
      Merge(need.scalars, of.scalars);
      Merge(need.inputs, of.inputs);
      need.registers = std::max(need.registers, k + of.registers);
    }
    return need;
  }

  // Cuts regions that would not fit the interpreter: while a node's subtree does not, its
  // largest f32 inner operand becomes a root of its own (computed first, then loaded).
  void FitRegions() {
    std::vector<Needs> need(graph_.nodes.size());
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      if (!in_region_[i]) continue;
      const Node& n = *graph_.nodes[i];
      need[i] = NeedsOf(n, need);
      while (!need[i].Fits()) {
        const Node* cut = nullptr;
        for (const ir::NodePtr& o : n.operands) {
          if (Inner(*o) && o->dtype == DType::f32 &&
              (cut == nullptr || need[Index(*o)].code > need[Index(*cut)].code)) {
            cut = o.get();
          }
        }
        if (cut == nullptr) break;  // Region falls back to a kernel per op
        root_[Index(*cut)] = true;
        need[i] = NeedsOf(n, need);
      }
    }
  }

  // The interpreter's program for one region, built by Emit.
  struct Program {
    std::vector<uint32_t> code;
    std::vector<std::pair<const Node*, Access>> inputs;
    std::vector<KernelArgSpec> scalars;
    std::vector<const Node*> scalar_leaves;  // the Constant or Scalar of each
    unsigned used = 0;                       // registers holding live values, a bit each
    int ops = 0;                             // instructions that compute (not loads)
    int64_t bytes = 0;                       // read from memory, per result element
  };

  bool Inner(const Node& n) const { return in_region_[Index(n)] && !root_[Index(n)]; }

  // Appends the instructions that leave `n`'s value in a register and returns it; nullopt when
  // the region does not fit the interpreter (instructions, registers, inputs, scalars).
  absl::StatusOr<std::optional<int>> Emit(const Node& n, const Shape& shape, bool top, Program& p) {
    std::vector<int> xs;
    uint32_t opcode = 0;
    if (top || Inner(n)) {
      for (const ir::NodePtr& o : n.operands) {
        absl::StatusOr<std::optional<int>> r = Emit(*o, shape, false, p);
        if (!r.ok() || !r->has_value()) return r;
        xs.push_back(**r);
      }
      opcode = static_cast<uint32_t>(InterpOpcode(n.op));
      ++p.ops;
    } else if (const Node* leaf = UniformLeaf(n);
               leaf != nullptr && (n.dtype == DType::f32 || n.dtype == DType::boolean) &&
               !access_.contains(&n)) {
      opcode = kInterpScalar;
      size_t slot = 0;
      while (slot < p.scalar_leaves.size() && p.scalar_leaves[slot] != leaf) ++slot;
      if (slot == p.scalar_leaves.size()) {
        if (slot >= static_cast<size_t>(kInterpScalars)) return std::optional<int>();
        KernelArgSpec v = ValueArg(*leaf, DType::f32);
        if (leaf->op == Op::kConstant && leaf->dtype == DType::boolean) {
          v.number = leaf->value != 0 ? 1 : 0;
        }
        p.scalars.push_back(v);
        p.scalar_leaves.push_back(leaf);
      }
      xs.push_back(static_cast<int>(slot));
    } else {
      absl::StatusOr<Access> a = At(n);
      if (!a.ok()) return a.status();
      size_t slot = 0;
      while (slot < p.inputs.size() && p.inputs[slot].first != &n) ++slot;
      if (slot == p.inputs.size()) {
        if (slot >= static_cast<size_t>(kInterpInputs)) return std::optional<int>();
        Access view = *a;
        if (Mode(view, shape) == 2) {  // read at coordinates: made contiguous first
          const BufferRef t = Temp(n);
          if (absl::Status s = Copy(n, view, t); !s.ok()) return s;
          view = {t, 0, RowMajor(n.shape)};
        }
        if (Mode(view, shape) == 0) p.bytes += static_cast<int64_t>(dtype_size(n.dtype));
        p.inputs.emplace_back(&n, view);
      }
      opcode = n.dtype == DType::boolean ? kInterpLoadBool : kInterpLoad;
      xs.push_back(static_cast<int>(slot));
    }
    // The result's register is none of the operands' (a loop whose output overlaps its input
    // would not vectorise), which are free after it.
    const bool loads =
        opcode == kInterpLoad || opcode == kInterpLoadBool || opcode == kInterpScalar;
    int d = 0;
    while (d < kInterpRegisters && ((p.used >> d) & 1) != 0) ++d;
    if (d == kInterpRegisters || p.code.size() >= static_cast<size_t>(kInterpInstructions)) {
      return std::optional<int>();
    }
    uint32_t word = opcode | static_cast<uint32_t>(d) << 8;
    for (size_t k = 0; k < xs.size(); ++k) word |= static_cast<uint32_t>(xs[k]) << (14 + 6 * k);
    p.code.push_back(word);
    p.used |= 1u << d;
    if (!loads) {
      for (int x : xs) p.used &= ~(1u << x);
    }
    return std::optional<int>(d);
  }

  // The region rooted at `root`: one interpreter kernel where it fits and computes at least two
  // ops (or one with a Constant or Scalar), else a kernel per op.
  absl::Status Region(const Node& root) {
    Program p;
    absl::StatusOr<std::optional<int>> result = Emit(root, root.shape, true, p);
    if (!result.ok()) return result.status();
    if (!result->has_value() || (p.ops < 2 && p.scalars.empty())) return PerOp(root);
    const BufferRef out = Destination(root);
    const int64_t count = ir::NumElements(root.shape);
    KernelSpec& spec = plan_.kernels.emplace_back();
    spec.shared_source = &library_.source;
    spec.args = {Buffer(out, true), Offset(out, 0), I64(count),
                 I32(static_cast<int64_t>(p.code.size())), I32(**result)};
    int modes = 0;
    for (size_t k = 0; k < p.inputs.size(); ++k) {
      if (Mode(p.inputs[k].second, root.shape) == 1) modes |= 1 << k;
    }
    spec.args.push_back(I32(modes));
    for (int k = 0; k < kInterpInstructions; k += 2) {
      const uint64_t lo =
          static_cast<size_t>(k) < p.code.size() ? p.code[static_cast<size_t>(k)] : 0;
      const uint64_t hi =
          static_cast<size_t>(k + 1) < p.code.size() ? p.code[static_cast<size_t>(k + 1)] : 0;
      spec.args.push_back(I64(static_cast<int64_t>(lo | hi << 32)));
    }
    for (int k = 0; k < kInterpInputs; ++k) {
      if (static_cast<size_t>(k) < p.inputs.size()) {
        const Access& a = p.inputs[static_cast<size_t>(k)].second;
        spec.args.push_back(Buffer(a.buffer, false));
        spec.args.push_back(Offset(a.buffer, a.offset));
      } else {  // unused: the result's buffer, never read
        spec.args.push_back(Buffer(out, true));
        spec.args.push_back(I64(0));
      }
    }
    for (int k = 0; k < kInterpScalars; ++k) {
      if (static_cast<size_t>(k) < p.scalars.size()) {
        spec.args.push_back(p.scalars[static_cast<size_t>(k)]);
      } else {
        KernelArgSpec zero;
        zero.kind = KernelArgSpec::Kind::kNumber;
        zero.dtype = DType::f32;
        spec.args.push_back(zero);
      }
    }
    const size_t block = static_cast<size_t>(library_.interp_block);
    const size_t items = (static_cast<size_t>(count) + block - 1) / block;
    spec.launches.push_back(
        Launch{GenericInterpKernel(), {RoundUp(items, kGenericLocal)}, {kGenericLocal}, {}});
    spec.summary = absl::StrCat("generic interpreter (", p.ops, " ops) ", ir::NodeString(root));
    spec.fused_ops = absl::StrCat("interpreted ", p.ops, " ops");
    spec.bytes = count * (4 + p.bytes);
    access_[&root] = {out, 0, RowMajor(root.shape)};
    return absl::OkStatus();
  }

  // A region that does not fit the interpreter: a kernel per op, operands first.
  absl::Status PerOp(const Node& n) {
    for (const ir::NodePtr& o : n.operands) {
      if (Inner(*o) && !access_.contains(o.get())) {
        if (absl::Status s = PerOp(*o); !s.ok()) return s;
      }
    }
    return Elementwise(n, ElementwiseName(n));
  }

  // Where node `n` is computed: its output, or a new temporary.
  BufferRef Destination(const Node& n) {
    if (auto it = output_of_.find(&n); it != output_of_.end())
      return {BufferRef::Kind::kOutput, it->second};
    return Temp(n);
  }

  BufferRef Temp(const Node& n) {
    plan_.temp_bytes.push_back(static_cast<size_t>(ir::NumElements(n.shape)) * dtype_size(n.dtype));
    return {BufferRef::Kind::kTemp, static_cast<int>(plan_.temp_bytes.size()) - 1};
  }

  static KernelArgSpec Buffer(BufferRef ref, bool written) {
    KernelArgSpec s;
    s.kind = KernelArgSpec::Kind::kBuffer;
    s.buffer = ref;
    s.written = written;
    return s;
  }
  static KernelArgSpec I64(int64_t v) {
    KernelArgSpec s;
    s.kind = KernelArgSpec::Kind::kInt64;
    s.value = v;
    return s;
  }
  static KernelArgSpec I32(int64_t v) {
    KernelArgSpec s;
    s.kind = KernelArgSpec::Kind::kInt32;
    s.value = v;
    return s;
  }
  // An element offset into `ref`: parameters and outputs may be bound at a run-time offset.
  static KernelArgSpec Offset(BufferRef ref, int64_t v) {
    KernelArgSpec s = I64(v);
    if (ref.kind != BufferRef::Kind::kTemp) {
      s.kind = KernelArgSpec::Kind::kOffset;
      s.buffer = ref;
      s.wide = true;
    }
    return s;
  }

  // A kernel of the library writing `n` (its result's element count and padded sizes first).
  absl::StatusOr<KernelSpec*> Start(const std::string& name, const Node& n, BufferRef out,
                                    bool sizes) {
    if (!library_.kernels.contains(name)) {
      return absl::UnimplementedError(
          absl::StrCat("generic tier: no kernel ", name, " for ", ir::NodeString(n)));
    }
    const int64_t count = ir::NumElements(n.shape);
    KernelSpec& spec = plan_.kernels.emplace_back();
    spec.shared_source = &library_.source;
    spec.args = {Buffer(out, true), Offset(out, 0), I64(count)};
    if (sizes) {
      for (int64_t s : Padded(n.shape, 1)) spec.args.push_back(I64(s));
    }
    spec.launches.push_back(
        Launch{name, {RoundUp(static_cast<size_t>(count), kGenericLocal)}, {kGenericLocal}, {}});
    spec.summary = absl::StrCat("generic ", name, " ", ir::NodeString(n));
    spec.fused_ops = ir::OpName(n.op);
    spec.bytes = count * static_cast<int64_t>(dtype_size(n.dtype));
    return &spec;
  }

  // How a kernel reads `a` for a result of `shape`, as the library's LC_MODE: 0 at the result's
  // own index, 1 one element for all, 2 through the coordinates.
  static int Mode(const Access& a, const Shape& shape) {
    if (Contiguous(a, shape)) return 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] != 1 && a.strides[d] != 0) return 2;
    }
    return 1;
  }

  static void AddModes(KernelSpec& spec, const Node& n, const std::vector<const Access*>& views) {
    int modes = 0;
    for (size_t k = 0; k < views.size(); ++k) modes |= Mode(*views[k], n.shape) << (2 * k);
    spec.args.push_back(I32(modes));
  }

  static void AddView(KernelSpec& spec, const Access& a) {
    spec.args.push_back(Buffer(a.buffer, false));
    spec.args.push_back(Offset(a.buffer, a.offset));
    for (int64_t s : Padded(a.strides, 0)) spec.args.push_back(I64(s));
  }

  absl::Status Fill(const Node& n, const std::string& name, std::vector<KernelArgSpec> extra) {
    const BufferRef out = Destination(n);
    absl::StatusOr<KernelSpec*> spec = Start(name, n, out, /*sizes=*/false);
    if (!spec.ok()) return spec.status();
    for (KernelArgSpec& a : extra) (*spec)->args.push_back(std::move(a));
    access_[&n] = {out, 0, RowMajor(n.shape)};
    return absl::OkStatus();
  }

  absl::Status Elementwise(const Node& n, const std::string& name) {
    std::vector<Access> values;  // first: reading a uniform value may add a fill kernel
    for (const ir::NodePtr& o : n.operands) {
      absl::StatusOr<Access> a = At(*o);
      if (!a.ok()) return a.status();
      values.push_back(*a);
    }
    const BufferRef out = Destination(n);
    absl::StatusOr<KernelSpec*> spec = Start(name, n, out, /*sizes=*/true);
    if (!spec.ok()) return spec.status();
    std::vector<const Access*> views;
    for (size_t k = 0; k < n.operands.size(); ++k) {
      const ir::NodePtr& o = n.operands[k];
      views.push_back(&values[k]);
      if (Mode(*views.back(), n.shape) != 1)
        (*spec)->bytes += ir::NumElements(n.shape) * static_cast<int64_t>(dtype_size(o->dtype));
    }
    AddModes(**spec, n, views);
    for (const Access* v : views) AddView(**spec, *v);
    access_[&n] = {out, 0, RowMajor(n.shape)};
    return absl::OkStatus();
  }

  // The value of `n` read through `a`, written contiguously to `out`.
  absl::Status Copy(const Node& n, const Access& a, BufferRef out) {
    absl::StatusOr<KernelSpec*> spec =
        Start(GenericCopyKernel(dtype_size(n.dtype)), n, out, /*sizes=*/true);
    if (!spec.ok()) return spec.status();
    AddModes(**spec, n, {&a});
    AddView(**spec, a);
    (*spec)->fused_ops = "copy";
    (*spec)->bytes *= 2;
    return absl::OkStatus();
  }

  absl::Status Pad(const Node& n) {
    const Node& x = *n.operands[0];
    const BufferRef out = Destination(n);
    absl::StatusOr<KernelSpec*> spec = Start(GenericPadKernel(n.dtype), n, out, /*sizes=*/true);
    if (!spec.ok()) return spec.status();
    AddView(**spec, access_.at(&x));
    for (int64_t b : Padded(n.args, 0)) (*spec)->args.push_back(I64(b));
    for (int64_t z : Padded(x.shape, 1)) (*spec)->args.push_back(I64(z));
    KernelArgSpec fill;
    fill.kind = KernelArgSpec::Kind::kNumber;
    fill.number = n.value;
    fill.dtype = n.dtype;
    (*spec)->args.push_back(fill);
    access_[&n] = {out, 0, RowMajor(n.shape)};
    return absl::OkStatus();
  }

  absl::Status Reduce(const Node& n) {
    const Node& x = *n.operands[0];
    const BufferRef out = Destination(n);
    absl::StatusOr<KernelSpec*> spec =
        Start(GenericReduceKernel(n.op, n.dtype), n, out, /*sizes=*/true);
    if (!spec.ok()) return spec.status();
    AddView(**spec, access_.at(&x));
    std::vector<int64_t> reduced(x.shape.size(), 1);
    int64_t m = 1;
    for (int64_t axis : n.args) {
      reduced[static_cast<size_t>(axis)] = x.shape[static_cast<size_t>(axis)];
      m *= x.shape[static_cast<size_t>(axis)];
    }
    (*spec)->args.push_back(I64(m));
    (*spec)->args.push_back(I32(Contiguous(access_.at(&x), reduced) ? 1 : 0));
    for (int64_t t : Padded(reduced, 1)) (*spec)->args.push_back(I64(t));
    (*spec)->bytes += ir::NumElements(x.shape) * static_cast<int64_t>(dtype_size(x.dtype));
    access_[&n] = {out, 0, RowMajor(n.shape)};
    return absl::OkStatus();
  }

  // The padded position of dim `d` of a rank-`rank` value.
  static KernelArgSpec Dim(int64_t d, size_t rank) {
    return I32(d + kGenericRank - static_cast<int64_t>(rank));
  }

  absl::Status Gather(const Node& n) {
    const Node& x = *n.operands[0];
    const Node& index = *n.operands[1];
    const int64_t dim = n.args[0];
    const BufferRef out = Destination(n);
    absl::StatusOr<KernelSpec*> spec =
        Start(GenericGatherKernel(n.dtype, index.dtype), n, out, /*sizes=*/true);
    if (!spec.ok()) return spec.status();
    const Access& ix = access_.at(&index);
    AddModes(**spec, n, {&ix});
    AddView(**spec, access_.at(&x));
    AddView(**spec, ix);
    (*spec)->args.push_back(Dim(dim, n.shape.size()));
    (*spec)->args.push_back(I64(x.shape[static_cast<size_t>(dim)]));
    (*spec)->bytes += ir::NumElements(n.shape) * static_cast<int64_t>(dtype_size(index.dtype));
    access_[&n] = {out, 0, RowMajor(n.shape)};
    return absl::OkStatus();
  }

  absl::Status Cumsum(const Node& n) {
    const Node& x = *n.operands[0];
    const int64_t dim = n.args[0];
    const BufferRef out = Destination(n);
    absl::StatusOr<KernelSpec*> spec = Start(GenericCumsumKernel(n.dtype), n, out, true);
    if (!spec.ok()) return spec.status();
    AddView(**spec, access_.at(&x));
    (*spec)->args.push_back(Dim(dim, n.shape.size()));
    (*spec)->args.push_back(I32(n.args[1]));  // reverse
    const int64_t len = n.shape[static_cast<size_t>(dim)];
    (*spec)->args.push_back(I64(len));
    // Each element adds up to len values: counted as arithmetic for the tier's bound.
    (*spec)->flops = ir::NumElements(n.shape) * len / 2;
    (*spec)->bytes *= 2;
    access_[&n] = {out, 0, RowMajor(n.shape)};
    return absl::OkStatus();
  }

  absl::Status ScatterAdd(const Node& n) {
    const Node& x = *n.operands[0];
    const Node& index = *n.operands[1];
    const Node& src = *n.operands[2];
    const int64_t dim = n.args[0];
    const BufferRef out = Destination(n);
    absl::StatusOr<KernelSpec*> spec =
        Start(GenericScatterAddKernel(n.dtype, index.dtype), n, out, /*sizes=*/true);
    if (!spec.ok()) return spec.status();
    AddView(**spec, access_.at(&x));
    AddView(**spec, access_.at(&index));
    AddView(**spec, access_.at(&src));
    for (int64_t z : Padded(index.shape, 1)) (*spec)->args.push_back(I64(z));
    (*spec)->args.push_back(Dim(dim, n.shape.size()));
    // Each result element scans the index along dim: counted as arithmetic for the tier's bound.
    const int64_t along = index.shape[static_cast<size_t>(dim)];
    (*spec)->flops = ir::NumElements(n.shape) * along;
    (*spec)->bytes += ir::NumElements(index.shape) *
                      static_cast<int64_t>(dtype_size(index.dtype) + dtype_size(src.dtype));
    access_[&n] = {out, 0, RowMajor(n.shape)};
    return absl::OkStatus();
  }

  // A matmul operand as the template reads it: its batch dims folded into one stride, or, where
  // they do not fold (a broadcast batch dim beside a real one, a permuted batch), a copy.
  absl::StatusOr<StridedOperand> Operand(const Node& x) {
    Access a = access_.at(&x);
    const size_t r = x.shape.size();
    auto folded = [&](const Access& v) -> std::optional<int64_t> {
      int64_t batch_stride = 0;
      int64_t later = 1;  // the product of the later batch dims' sizes
      bool first = true;
      for (size_t d = r - 2; d-- > 0;) {
        if (x.shape[d] == 1) continue;
        if (first) {
          batch_stride = v.strides[d];
          first = false;
        } else if (v.strides[d] != batch_stride * later) {
          return std::nullopt;
        }
        later *= x.shape[d];
      }
      return batch_stride;
    };
    std::optional<int64_t> batch = folded(a);
    if (!batch.has_value()) {
      const BufferRef t = Temp(x);
      if (absl::Status s = Copy(x, a, t); !s.ok()) return s;
      a = {t, 0, RowMajor(x.shape)};
      batch = folded(a);
    }
    return StridedOperand{a.buffer, a.offset, *batch, a.strides[r - 2], a.strides[r - 1], 0, 0};
  }

  absl::Status Matmul(const Node& n) {
    absl::StatusOr<StridedOperand> a = Operand(*n.operands[0]);
    if (!a.ok()) return a.status();
    absl::StatusOr<StridedOperand> b = Operand(*n.operands[1]);
    if (!b.ok()) return b.status();
    const BufferRef out = Destination(n);
    access_[&n] = {out, 0, RowMajor(n.shape)};
    if (ir::NumElements(n.shape) == 0) return absl::OkStatus();
    KernelSpec spec = EmitMatmul(n, out, *a, *b, Tiled(target_));
    spec.fused_ops = "matmul";
    for (const Node* x : {&n, n.operands[0].get(), n.operands[1].get()})
      spec.bytes += ir::NumElements(x->shape) * static_cast<int64_t>(dtype_size(x->dtype));
    plan_.kernels.push_back(std::move(spec));
    return absl::OkStatus();
  }

  const Graph& graph_;
  const Target& target_;
  const GenericLibrary& library_;
  Plan plan_;
  absl::flat_hash_map<const Node*, int> output_of_;
  absl::flat_hash_map<const Node*, Access> access_;
  absl::flat_hash_map<const Node*, int> index_of_;
  std::vector<bool> in_region_, root_;  // FindRegions
};

}  // namespace

absl::StatusOr<Plan> LowerGeneric(const Graph& graph, const Target& target) {
  return GenericLowering(graph, target).Run();
}

KernelSpec GenericMatmulKernel(DType dtype, const Target& target) {
  const ir::NodePtr one = ir::MakeConstant(0, dtype, {1, 1});
  const ir::NodePtr product = *ir::MakeMatmul(one, one);
  const StridedOperand operand{{BufferRef::Kind::kParam, 0}, 0, 0, 1, 1, 0, 0};
  return EmitMatmul(*product, {BufferRef::Kind::kOutput, 0}, operand, operand, Tiled(target));
}

}  // namespace lazycl::kernels
