#include "kernels/emitter.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "kernels/cl_text.h"
#include "kernels/op_expr.h"
#include "kernels/packed_params.h"

namespace lazycl::kernels {

using ir::Node;
using ir::Op;
using ir::Shape;

namespace {

// Below this many work-items, unless they are whole work-groups, the guarded tail entry point
// runs alone: one launch instead of two, where the unchecked main kernel would save less than a
// launch costs. Whole work-groups run the unchecked kernel alone at any size: PoCL vectorises
// only its work-item loop (silu(a) * b over [64, 352]: 16.9 us guarded).
constexpr int64_t kTailOnlyBelow = int64_t{1} << 16;

// Generated code rounds every operation on its own, as the host interpreter does: OpenCL C lets
// the compiler contract a * b + c into one fma, and NVIDIA's does so across statements (rand's
// lo + (hi - lo) * u differed from the host in the last bit on an H200). The helpers before it
// (cpu_math.cl and the like) keep the default; kContracted restores it where a template follows.
constexpr absl::string_view kUncontracted = "#pragma OPENCL FP_CONTRACT OFF\n";
constexpr absl::string_view kContracted = "#pragma OPENCL FP_CONTRACT ON\n";

// The work-group width of a row piece `width` columns wide (whole vectors of 16).
size_t RowsLocal(int64_t width) { return width % 64 == 0 ? 64 : width % 32 == 0 ? 32 : 16; }

// FNV-1a: unlike absl::Hash, the same in every process.
uint64_t StableHash(absl::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

// PoCL pays a scheduling cost per work-group: one row of 32 per group made the rotary
// embedding's gradient over [16, 64, 4, 32] 4096 groups and 223 us.
size_t RowsPerGroup(int64_t rows, size_t local) {
  size_t r = 1;
  while (r * 2 * local <= 256 && rows % static_cast<int64_t>(r * 2) == 0) r *= 2;
  return r;
}

std::string Emitter::Sym(int64_t v, const std::string& key) {
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

DivisorMagic MagicOf(int64_t d) {
  LAZYCL_CHECK(d >= 2 && d < (int64_t{1} << 31), "codegen: no magic for divisor %lld",
               static_cast<long long>(d));
  int l = 0;
  while ((int64_t{1} << l) < d) ++l;  // ceil(log2 d) >= 1
  // m = ceil(2^(31 + l) / d) < 2^32; for 0 <= n < 2^31, floor(n * m / 2^(31 + l)) = n / d
  // (Granlund and Montgomery, 1994, theorem 4.2 with N = 31).
  const unsigned __int128 num = static_cast<unsigned __int128>(1) << (31 + l);
  const uint64_t m = static_cast<uint64_t>((num + static_cast<unsigned __int128>(d) - 1) /
                                           static_cast<unsigned __int128>(d));
  return {static_cast<uint32_t>(m), l - 1};
}

std::pair<std::string, std::string> Emitter::DivisorSyms(int64_t v, const std::string& key) {
  const std::string k = absl::StrCat("div|", key);
  auto it = syms_.find(k);
  if (it != syms_.end()) return {it->second + "m", it->second + "s"};
  Sym(v, key);  // checks that the key's size is v
  const std::string name = absl::StrCat("d", syms_.size());
  syms_.emplace(k, name);
  sym_values_.emplace(k, v);
  const DivisorMagic magic = MagicOf(v);
  params_.push_back(absl::StrCat("const uint ", name, "m"));
  params_.push_back(absl::StrCat("const int ", name, "s"));
  names_.push_back(name + "m");
  names_.push_back(name + "s");
  KernelArgSpec m;
  m.kind = KernelArgSpec::Kind::kInt32;
  m.value = static_cast<int32_t>(magic.multiplier);
  args_.push_back(m);
  KernelArgSpec sh;
  sh.kind = KernelArgSpec::Kind::kInt32;
  sh.value = magic.shift;
  args_.push_back(sh);
  return {name + "m", name + "s"};
}

std::string Emitter::Buffer(BufferRef ref, DType dtype, bool written) {
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
    // The buffer is bound at a run-time element offset (Graph::bind_offsets), always 64-bit:
    // a layer's slice of stacked weights may start past 2^31 while the kernel's own indices
    // stay narrow.
    params_.push_back(absl::StrCat("const long ", name, "_off"));
    names_.push_back(absl::StrCat(name, "_off"));
    KernelArgSpec off;
    off.kind = KernelArgSpec::Kind::kOffset;
    off.buffer = ref;
    off.wide = true;
    args_.push_back(off);
    name = absl::StrCat("(", name, " + ", name, "_off)");
  }
  buffers_.emplace(key, name);
  return name;
}

std::string Emitter::ScalarArg(const Node& n) {
  LAZYCL_CHECK(scalar_of_ != nullptr && scalar_of_->contains(&n),
               "codegen: a Scalar leaf without a scalar index");
  const int index = scalar_of_->at(&n);
  if (auto it = scalars_.find(index); it != scalars_.end()) return it->second;
  std::string name = absl::StrCat("sc", scalars_.size());
  // OpenCL has no bool kernel arguments: a bool is passed as an int and narrowed here.
  const bool narrowed = n.dtype == DType::boolean;
  params_.push_back(absl::StrCat("const ", narrowed ? "int" : CType(n.dtype), " ", name));
  names_.push_back(name);
  KernelArgSpec arg;
  arg.kind = KernelArgSpec::Kind::kScalar;
  arg.scalar = index;
  arg.dtype = n.dtype;
  args_.push_back(arg);
  if (narrowed) name = absl::StrCat("((", CType(n.dtype), ")", name, ")");
  scalars_.emplace(index, name);
  return name;
}

void Emitter::UnifyDims(const Node& root) {
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
      case Op::kScalar:
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
      case Op::kGather:
      case Op::kScatterAdd:
        UnifyIndexing(*n);
        break;
      default:
        if (ir::IsReduce(n->op)) {
          const Node& x = *n->operands[0];
          for (size_t d = 0; d < n->shape.size(); ++d) {
            if (std::find(n->args.begin(), n->args.end(), static_cast<int64_t>(d)) == n->args.end())
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

std::string Emitter::DimKey(const Node* n, size_t d) {
  const DimRef r = Find({n, d});
  return absl::StrCat("dim|", reinterpret_cast<uintptr_t>(r.first), "|", r.second);
}

std::vector<std::string> Emitter::DimKeys(const Node& n) {
  std::vector<std::string> keys;
  for (size_t d = 0; d < n.shape.size(); ++d) keys.push_back(DimKey(&n, d));
  return keys;
}

std::string Emitter::NodeKey(const char* what, const Node& n, size_t d) {
  return absl::StrCat(what, "|", reinterpret_cast<uintptr_t>(&n), "|", d);
}

std::string Emitter::Linear(const Index& idx, const Shape& shape,
                            const std::vector<std::string>& keys) {
  if (idx.linear) return idx.lin;
  // The dims of a linear index split over this very shape: that index (a reshape of a view
  // need not split and join again).
  if (auto it = relin_.find(SplitKey(idx.dims, shape, keys)); it != relin_.end()) return it->second;
  std::string acc;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    acc = acc.empty() ? idx.dims[d]
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

std::string Emitter::SplitKey(const std::vector<std::string>& dims, const Shape& shape,
                              const std::vector<std::string>& keys) {
  std::string ones;
  for (int64_t s : shape) ones.push_back(s == 1 ? '1' : 'n');
  return absl::StrCat(absl::StrJoin(dims, ","), "|", ones, "|", absl::StrJoin(keys, ","));
}

std::vector<std::string> Emitter::Multi(const Index& idx, const Shape& shape,
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
    std::string q = Var();
    const std::string size = Sym(shape[d], keys[d]);
    if (idx_ == "int" && shape[d] >= 2) {  // (a size-0 kernel is never launched)
      // Indices below 2^31 are divided by a multiply and a shift (DivisorMagic): vectorisable,
      // where an integer division is not (and costs ~25 cycles).
      const auto [magic, shift] = DivisorSyms(shape[d], keys[d]);
      Line(absl::StrCat("const int ", q, " = (int)(mul_hi((uint)(", rest, "), ", magic, ") >> ",
                        shift, ");"));
      Line(absl::StrCat("const int ", v, " = ", rest, " - ", q, " * ", size, ";"));
    } else {
      Line(absl::StrCat("const ", idx_, " ", v, " = ", rest, " % ", size, ";"));
      Line(absl::StrCat("const ", idx_, " ", q, " = ", rest, " / ", size, ";"));
    }
    dims[d] = v;
    rest = q;
  }
  delin_[key] = dims;
  memo_[key] = "";
  relin_[SplitKey(dims, shape, keys)] = idx.lin;
  return dims;
}

std::string Emitter::Eval(const Node& n, const Index& idx) {
  std::string key = absl::StrCat(reinterpret_cast<uintptr_t>(&n), "|", idx.Key());
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  std::string v = EvalUncached(n, idx);
  memo_[key] = v;
  return v;
}

std::string Emitter::Assign(DType dtype, const std::string& expr) {
  std::string v = Var();
  const std::string type = vec_ && dtype == DType::f32 ? "float16" : CType(dtype);
  Line(absl::StrCat("const ", type, " ", v, " = ", expr, ";"));
  return v;
}

std::string Emitter::FinishFunction(absl::string_view ret, absl::string_view name,
                                    absl::string_view leading, std::vector<KernelArgSpec>* args,
                                    absl::string_view more) {
  std::string params;
  std::string names;
  for (size_t i = 0; i < params_.size(); ++i) {
    absl::StrAppend(&params, ", ", params_[i]);
    absl::StrAppend(&names, ", ", names_[i]);
  }
  std::string text = Helpers();
  absl::StrAppend(&text, "#define LC_EPI_PARAMS ", params, "\n#define LC_EPI_ARGS ", names,
                  "\nstatic inline ", ret, " ", name, "(", leading, " LC_EPI_PARAMS) {\n", body_,
                  "}\n", more, kContracted);
  *args = args_;
  return text;
}

KernelSpec Emitter::FinishIndexed(absl::string_view prefix, int64_t count) {
  const std::string limit = Sym(count, "count");
  const std::string params = absl::StrJoin(params_, ",\n    ");
  const std::string names = absl::StrJoin(names_, ", ");
  std::string text = Helpers();
  const std::string hash_input = absl::StrCat(idx_, text, params, "|", limit, "|", body_);
  const std::string name =
      absl::StrCat(prefix, "_", absl::Hex(StableHash(hash_input) & 0xffffffffu));
  absl::StrAppend(&text, "static inline void ", name, "_at(", params, ",\n    const idx_t gid) {\n",
                  body_, "}\n");
  const PackedParams entry = PackIntegerParams(params_, args_);
  absl::StrAppend(&text, "__kernel void ", name, "(", entry.params, ") {\n", entry.unpack, "  ",
                  name, "_at(", names, ", (idx_t)get_global_id(0));\n}\n");
  absl::StrAppend(&text, "__kernel void ", name, "_tail(", entry.params,
                  ",\n    const idx_t base) {\n", entry.unpack,
                  "  const idx_t gid = base + (idx_t)get_global_id(0);\n", "  if (gid < ", limit,
                  ") ", name, "_at(", names, ", gid);\n}\n");
  // The unchecked launch covers the whole work-groups, unless the kernel is small; the tail
  // launch the rest (its index starts at `base`, the last argument of `<name>_tail`).
  const size_t n = static_cast<size_t>(count);
  const bool whole_groups = n % kLocalSize == 0;
  const size_t main = count < kTailOnlyBelow && !whole_groups ? 0 : n / kLocalSize * kLocalSize;
  KernelArgSpec base;
  base.kind = idx_ == "int" ? KernelArgSpec::Kind::kInt32 : KernelArgSpec::Kind::kInt64;
  base.value = static_cast<int64_t>(main);
  KernelSpec spec;
  spec.source = absl::StrCat("typedef ", idx_, " idx_t;\n", text);
  spec.args = entry.args;
  spec.launches.push_back(Launch{name, {main}, {kLocalSize}, {}});
  spec.launches.push_back(
      Launch{absl::StrCat(name, "_tail"), {RoundUp(n - main, kLocalSize)}, {kLocalSize}, {base}});
  return spec;
}

KernelSpec Emitter::FinishRows(absl::string_view prefix, int64_t rows,
                               const std::vector<RowPiece>& pieces) {
  const std::string params = absl::StrJoin(params_, ",\n    ");
  const std::string names = absl::StrJoin(names_, ", ");
  // Pieces of one width (the halves of a rotary embedding's cat) run in one launch: each
  // work-item computes its column of every piece, one body after the other.
  bool joined = pieces.size() > 1;
  for (const RowPiece& p : pieces) joined = joined && p.hi - p.lo == pieces[0].hi - pieces[0].lo;
  std::string text = Helpers();
  const PackedParams packed = PackIntegerParams(params_, args_);
  std::string hash_input = absl::StrCat(idx_, text, params, joined ? "|joined rows" : "|rows");
  for (const RowPiece& p : pieces) absl::StrAppend(&hash_input, "|", p.body);
  const std::string name =
      absl::StrCat(prefix, "_", absl::Hex(StableHash(hash_input) & 0xffffffffu));
  KernelSpec spec;
  spec.args = packed.args;
  const KernelArgSpec::Kind col_kind =
      idx_ == "int" ? KernelArgSpec::Kind::kInt32 : KernelArgSpec::Kind::kInt64;
  std::string joined_params, joined_names, joined_calls;
  std::vector<KernelArgSpec> joined_cols;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const RowPiece& p = pieces[i];
    const std::string entry = pieces.size() == 1 ? name : absl::StrCat(name, "_", i);
    absl::StrAppend(&text, "static inline void ", entry, "_at(", params,
                    ",\n    const idx_t row, const idx_t col) {\n", p.body, "}\n");
    const int64_t width = p.hi - p.lo;
    LAZYCL_CHECK(width > 0 && width % 16 == 0,
                 "codegen: row piece [%lld, %lld) is not whole vectors",
                 static_cast<long long>(p.lo), static_cast<long long>(p.hi));
    KernelArgSpec col0;
    col0.kind = col_kind;
    col0.value = p.lo;
    if (joined) {
      absl::StrAppend(&joined_params, ",\n    const idx_t col", i);
      absl::StrAppend(&joined_names, ", col", i);
      absl::StrAppend(&joined_calls, "  ", entry, "_at(", names, ", row, col", i, " + c);\n");
      joined_cols.push_back(col0);
      continue;
    }
    absl::StrAppend(&text, "static inline void ", entry, "_rows(", params,
                    ",\n    const idx_t col0, const idx_t row, const idx_t c) {\n  ", entry, "_at(",
                    names, ", row, col0 + c);\n}\n");
    absl::StrAppend(&text, "__kernel void ", entry, "(", packed.params,
                    ",\n    const idx_t col0) {\n", packed.unpack, "  ", entry, "_rows(", names,
                    ", col0, (idx_t)get_global_id(1), (idx_t)get_global_id(0));\n}\n");
    spec.launches.push_back(Launch{entry,
                                   {static_cast<size_t>(width), static_cast<size_t>(rows)},
                                   {RowsLocal(width), RowsPerGroup(rows, RowsLocal(width))},
                                   {col0}});
  }
  if (joined) {
    const int64_t width = pieces[0].hi - pieces[0].lo;
    absl::StrAppend(&text, "static inline void ", name, "_rows(", params, joined_params,
                    ",\n    const idx_t row, const idx_t c) {\n", joined_calls, "}\n");
    absl::StrAppend(&text, "__kernel void ", name, "(", packed.params, joined_params, ") {\n",
                    packed.unpack, "  ", name, "_rows(", names, joined_names,
                    ", (idx_t)get_global_id(1), (idx_t)get_global_id(0));\n}\n");
    spec.launches.push_back(Launch{name,
                                   {static_cast<size_t>(width), static_cast<size_t>(rows)},
                                   {RowsLocal(width), RowsPerGroup(rows, RowsLocal(width))},
                                   std::move(joined_cols)});
  }
  spec.source = absl::StrCat("typedef ", idx_, " idx_t;\n", text);
  if (spec.launches.size() == 1) {  // one entry point: kernels/merge_rows.h may merge it
    spec.rows_fn = absl::StrCat(name, "_rows");
    spec.rows_decls = params_;
    spec.rows_names = names_;
    spec.rows_args = args_;
    // Its launch's extra arguments are the column starts col0, col1, ... of its pieces.
    for (size_t i = 0; i < spec.launches[0].extra_args.size(); ++i) {
      spec.rows_decls.push_back(absl::StrCat("const idx_t col", i));
      spec.rows_names.push_back(absl::StrCat("col", i));
    }
    spec.rows_wide = idx_ != "int";
  }
  return spec;
}

KernelSpec Emitter::FinishGroups(absl::string_view prefix, int64_t groups, size_t local) {
  const std::string params = absl::StrJoin(params_, ",\n    ");
  std::string text = Helpers();
  const std::string hash_input = absl::StrCat(idx_, text, params, "|groups ", local, "|", body_);
  const std::string name =
      absl::StrCat(prefix, "_", absl::Hex(StableHash(hash_input) & 0xffffffffu));
  const PackedParams packed = PackIntegerParams(params_, args_);
  absl::StrAppend(&text, "__kernel __attribute__((reqd_work_group_size(", local, ", 1, 1))) void ",
                  name, "(", packed.params, ") {\n", packed.unpack,
                  "  const idx_t gid = get_group_id(0);\n"
                  "  const int lane = (int)get_local_id(0);\n",
                  body_, "}\n");
  KernelSpec spec;
  spec.source = absl::StrCat("typedef ", idx_, " idx_t;\n", text);
  spec.args = packed.args;
  spec.launches.push_back(Launch{name, {static_cast<size_t>(groups) * local}, {local}, {}});
  return spec;
}

std::string Emitter::EvalUncached(const Node& n, const Index& idx) {
  if (auto it = values_.find(&n); it != values_.end()) return it->second;
  const auto input = inputs_.find(&n);
  const auto back = read_back_.find(&n);
  if (input != inputs_.end() || back != read_back_.end()) {
    std::string buf = back != read_back_.end() ? Buffer(back->second, n.dtype, true)
                                               : Buffer(input->second, n.dtype, false);
    const std::string lin = Linear(idx, n);
    if (lin != own_index_) ++other_index_reads_;
    if (vec_) {
      const std::string at = absl::StrCat(buf, " + ", lin);
      if (prefetch_) Line(absl::StrCat("LC_PREFETCH(", at, ");"));
      return Assign(n.dtype, absl::StrCat("vload16(0, ", at, ")"));
    }
    return Assign(n.dtype, absl::StrCat(buf, "[", lin, "]"));
  }
  if (vec_) {
    if (std::string v = EvalVector(n, idx); !v.empty()) return v;
  }
  const DType t = n.dtype;
  switch (n.op) {
    case Op::kConstant:
      return Literal(n.value, t);
    case Op::kScalar:
      return ScalarArg(n);
    case Op::kIota:
      return Assign(t, absl::StrCat("(", CType(t), ")(", Linear(idx, n), ")"));
    case Op::kReshape: {
      const Node& x = *n.operands[0];
      if (idx.linear || x.shape.empty() || n.shape.empty() || x.shape.back() != n.shape.back())
        return Eval(x, Index::Linear(Linear(idx, n)));
      // The last dim kept (unsqueeze, merging or splitting leading dims): only the leading dims
      // go through a linear index, and the column stays as it is (a row-form kernel's `col`).
      std::vector<std::string> out = Multi(idx, n);
      const std::string col = out.back();
      out.pop_back();
      std::vector<std::string> out_keys = DimKeys(n), in_keys = DimKeys(x);
      out_keys.pop_back();
      in_keys.pop_back();
      const Shape out_lead(n.shape.begin(), n.shape.end() - 1);
      const Shape in_lead(x.shape.begin(), x.shape.end() - 1);
      std::vector<std::string> in =
          Multi(Index::Linear(Linear(Index::Multi(std::move(out)), out_lead, out_keys)), in_lead,
                in_keys);
      in.push_back(col);
      return Eval(x, Index::Multi(std::move(in)));
    }
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
    case Op::kGather:
      return Gather(n, idx);
    default:
      return EvalElementwise(n, idx);
  }
}

// Vector mode's own forms of a leaf, a broadcast and a division by one; empty for the rest,
// which is shared with scalar code. Only what VectorFriendly admits reaches here.
std::string Emitter::EvalVector(const Node& n, const Index& idx) {
  const DType t = n.dtype;
  // An Expand that keeps the last dim, where the 16 elements lie in one row of it: 16 elements
  // of its operand, the broadcast dims at 0 (VectorFriendly's column form).
  auto column_form = [&](const Node& expand) {
    const Shape& s = expand.operands[0]->shape;
    return broadcast_dims_ <= 1 && !s.empty() && s.back() == expand.shape.back();
  };
  if (n.op == Op::kConstant) return Assign(t, absl::StrCat("(float16)(", Literal(n.value, t), ")"));
  if (n.op == Op::kScalar) return Assign(t, absl::StrCat("(float16)(", ScalarArg(n), ")"));
  if (n.op == Op::kExpand && column_form(n)) {
    std::vector<std::string> in = Multi(idx, n);
    const Shape& s = n.operands[0]->shape;
    for (size_t d = 0; d < in.size(); ++d) {
      if (s[d] == 1) in[d] = "0";
    }
    return Eval(*n.operands[0], Index::Multi(std::move(in)));
  }
  // Column and epilogue forms (no broadcast row): the 16 lanes lie in one row of the last dim,
  // so a value broadcast along the last dim (a per-row statistic, RMSNorm's 1 / rms in its
  // weight's gradient) is one scalar, read at lane 0's coordinates and splatted.
  if (n.op == Op::kExpand && RowScalar(n)) {
    std::vector<std::string> in = Multi(idx, n);
    const Shape& s = n.operands[0]->shape;
    for (size_t d = 0; d < in.size(); ++d) {
      if (s[d] == 1) in[d] = "0";
    }
    vec_ = false;
    std::string row = Eval(*n.operands[0], Index::Multi(std::move(in)));
    vec_ = true;
    return Assign(t, absl::StrCat("(float16)(", row, ")"));
  }
  if (n.op == Op::kDiv && n.operands[1]->op == Op::kExpand && !column_form(*n.operands[1]) &&
      !RowScalar(*n.operands[1])) {
    // Division by a per-row value (softmax's sum): the row's value is loaded once and divides
    // the 16 lanes. The division stays a division: a multiply by the reciprocal is up to 1 ulp
    // off, and a value must be the same bits in every kernel and in the scalar tail that
    // computes it (max's gradient compares x with max(x) computed elsewhere).
    std::string a = Eval(*n.operands[0], idx);
    vec_ = false;
    std::string row = Eval(*n.operands[1]->operands[0], Index::Linear(broadcast_row_));
    vec_ = true;
    return Assign(t, absl::StrCat(a, " / ", row));
  }
  if (n.op == Op::kWhere) return WhereVector(n, idx);
  if (n.op == Op::kExpand) {
    vec_ = false;
    std::string row = Eval(*n.operands[0], Index::Linear(broadcast_row_));
    vec_ = true;
    return Assign(t, absl::StrCat("(float16)(", row, ")"));
  }
  return "";
}

bool Emitter::RowScalar(const Node& expand) const {
  return broadcast_dims_ == 0 && broadcast_row_ == "0" && LastDimBroadcast(expand);
}

namespace {

constexpr char kLaneCoord[] = "@lane";

bool Integral(DType t) { return t == DType::i32 || t == DType::i64; }

// The dims of `to` that are not 1, matched in order to those of `from`: -1 where `to` has a 1,
// empty when a reshape does more than add or drop unit dims.
std::vector<int> UnitDimMap(const Shape& from, const Shape& to) {
  std::vector<int> map(to.size(), -1);
  size_t f = 0;
  for (size_t d = 0; d < to.size(); ++d) {
    if (to[d] == 1) continue;
    while (f < from.size() && from[f] == 1) ++f;
    if (f == from.size() || from[f] != to[d]) return {};
    map[d] = static_cast<int>(f++);
  }
  while (f < from.size() && from[f] == 1) ++f;
  if (f != from.size()) return {};
  if (map.empty()) map.push_back(-1);  // a scalar: not "failed"
  return map;
}

}  // namespace

bool LaneFriendly(const Node& n, const InputMap& inputs) {
  if (inputs.contains(&n)) return false;
  switch (n.op) {
    case Op::kConstant:
      return Integral(n.dtype) && std::abs(n.value) < 2147483647.0;
    case Op::kIota:
      return Integral(n.dtype) && ir::NumElements(n.shape) < (int64_t{1} << 31) - 16;
    case Op::kExpand:
      return n.operands[0]->shape.size() == n.shape.size() && LaneFriendly(*n.operands[0], inputs);
    case Op::kReshape:
      return !UnitDimMap(n.operands[0]->shape, n.shape).empty() &&
             LaneFriendly(*n.operands[0], inputs);
    case Op::kCast:
      return Integral(n.dtype) && Integral(n.operands[0]->dtype) &&
             LaneFriendly(*n.operands[0], inputs);
    default:
      return CompareOperator(n.op) != nullptr && Integral(n.operands[0]->dtype) &&
             LaneFriendly(*n.operands[0], inputs) && LaneFriendly(*n.operands[1], inputs);
  }
}

Emitter::LaneValue Emitter::Lane(const Node& n, const std::vector<std::string>& coords) {
  switch (n.op) {
    case Op::kConstant:
      return {false, absl::StrCat("(int)(", Literal(n.value, DType::i64), ")")};
    case Op::kIota: {
      // Row-major position of coords; the lane adds its offset times its dim's stride.
      std::vector<std::string> at = coords;
      int lane_dim = -1;
      for (size_t d = 0; d < at.size(); ++d) {
        if (at[d] == kLaneCoord) {
          lane_dim = static_cast<int>(d);
          at[d] = lane_base_;
        }
      }
      const std::string first =
          n.shape.empty() ? "0" : Linear(Index::Multi(at), n.shape, DimKeys(n));
      if (lane_dim < 0) return {false, absl::StrCat("(int)(", first, ")")};
      std::vector<std::string> stride;
      const std::vector<std::string> keys = DimKeys(n);
      for (size_t d = static_cast<size_t>(lane_dim) + 1; d < n.shape.size(); ++d) {
        if (n.shape[d] != 1) stride.push_back(Sym(n.shape[d], keys[d]));
      }
      std::string v = Var();
      Line(absl::StrCat(
          "const int16 ", v, " = (int16)((int)(", first,
          ")) + (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)",
          stride.empty() ? "" : absl::StrCat(" * (int)(", absl::StrJoin(stride, " * "), ")"), ";"));
      return {true, v};
    }
    case Op::kExpand: {
      std::vector<std::string> in = coords;
      const Shape& s = n.operands[0]->shape;
      for (size_t d = 0; d < in.size(); ++d) {
        if (s[d] == 1) in[d] = "0";
      }
      return Lane(*n.operands[0], in);
    }
    case Op::kReshape: {
      const Shape& from = n.operands[0]->shape;
      const std::vector<int> map = UnitDimMap(from, n.shape);
      std::vector<std::string> in(from.size(), "0");
      for (size_t d = 0; d < n.shape.size(); ++d) {
        if (map[d] >= 0) in[map[d]] = coords[d];
      }
      return Lane(*n.operands[0], in);
    }
    case Op::kCast:
      return Lane(*n.operands[0], coords);
    default: {
      const char* op = CompareOperator(n.op);
      LAZYCL_CHECK(op != nullptr, "codegen: %s in a lane mask", ir::OpName(n.op));
      const LaneValue a = Lane(*n.operands[0], coords), b = Lane(*n.operands[1], coords);
      const std::string expr = absl::StrCat("(", a.expr, " ", op, " ", b.expr, ")");
      if (!a.vec && !b.vec) return {false, expr};
      std::string v = Var();
      Line(absl::StrCat("const int16 ", v, " = ", expr, ";"));
      return {true, v};
    }
  }
}

std::string Emitter::WhereVector(const Node& n, const Index& idx) {
  const Node& c = *n.operands[0];
  if (CompareOperator(c.op) != nullptr && c.operands[0]->dtype == DType::f32) {
    // Values compared at the element's own index (max's gradient: x == max): float16
    // comparisons give the int16 mask.
    const std::string x = Eval(*c.operands[0], idx), y = Eval(*c.operands[1], idx);
    const std::string a = Eval(*n.operands[1], idx), b = Eval(*n.operands[2], idx);
    std::string mask = Var();
    Line(absl::StrCat("const int16 ", mask, " = (", x, " ", CompareOperator(c.op), " ", y, ");"));
    return Assign(n.dtype, absl::StrCat("select(", b, ", ", a, ", ", mask, ")"));
  }
  // The row's own coordinates, the last dim (the reduced one) at the lanes.
  const Shape row_shape(n.shape.begin(), n.shape.end() - 1);
  std::vector<std::string> keys = DimKeys(n);
  keys.pop_back();
  std::vector<std::string> coords = row_shape.empty()
                                        ? std::vector<std::string>{}
                                        : Multi(Index::Linear(broadcast_row_), row_shape, keys);
  coords.push_back(kLaneCoord);
  const LaneValue cond = Lane(*n.operands[0], coords);
  const std::string a = Eval(*n.operands[1], idx);
  const std::string b = Eval(*n.operands[2], idx);
  if (cond.vec) return Assign(n.dtype, absl::StrCat("select(", b, ", ", a, ", ", cond.expr, ")"));
  return Assign(n.dtype, absl::StrCat("(", cond.expr, ") ? ", a, " : ", b));
}

// Operands are evaluated last first, except a compare's: the order in which GCC happened to
// evaluate the arguments of the expressions that op_expr.cpp's table replaced, kept so that
// generated sources (and the program caches keyed on them) stayed the same. Now it is explicit,
// and the same under every compiler.
std::string Emitter::EvalElementwise(const Node& n, const Index& idx) {
  LAZYCL_CHECK(ir::IsElementwise(n.op), "codegen: %s reached inside a fused kernel",
               ir::OpName(n.op));
  ExprArgs args;
  args.dtype = n.dtype;
  args.from = n.operands[0]->dtype;
  args.cpu = cpu_;
  args.vector = vec_;
  args.x.resize(n.operands.size());
  if (ir::Category(n.op) == ir::OpCategory::Compare) {
    for (size_t i = 0; i < n.operands.size(); ++i) args.x[i] = Eval(*n.operands[i], idx);
  } else {
    for (size_t i = n.operands.size(); i-- > 0;) args.x[i] = Eval(*n.operands[i], idx);
  }
  std::vector<CpuMath> calls;
  const std::string expr = OpExpr(n.op, args, &calls);
  for (CpuMath f : calls) {
    if (std::find(helpers_.begin(), helpers_.end(), f) == helpers_.end()) helpers_.push_back(f);
  }
  return Assign(n.dtype, expr);
}

std::string Emitter::Helpers() const {
  std::string text;
  for (CpuMath f : helpers_) absl::StrAppend(&text, CpuMathSource(f));
  absl::StrAppend(&text, kUncontracted);  // for the generated code that follows
  return text;
}

std::string Emitter::Pad(const Node& n, const Index& idx) {
  const Node& x = *n.operands[0];
  if (ir::NumElements(x.shape) == 0) return Literal(n.value, n.dtype);
  std::vector<std::string> in = Multi(idx, n);
  std::vector<std::string> conds;
  for (size_t d = 0; d < in.size(); ++d) {
    if (n.args[d] == 0 && x.shape[d] == n.shape[d]) continue;
    if (d + 1 == in.size() && in[d] == "col" && col_hi_ > col_lo_) {
      // The columns of this body lie wholly inside or wholly outside the operand
      // (SetColumnRange): no clamp and no select.
      const int64_t lo = n.args[d], hi = lo + x.shape[d];
      if (col_hi_ <= lo || col_lo_ >= hi) return Literal(n.value, n.dtype);
      if (col_lo_ >= lo && col_hi_ <= hi) {
        std::string t = Var();
        Line(absl::StrCat("const ", idx_, " ", t, " = col - ", Sym(n.args[d], NodeKey("pad", n, d)),
                          ";"));
        in[d] = t;
        continue;
      }
    }
    if (x.shape[d] == 1) {
      conds.push_back(absl::StrCat("(", in[d], " == ", Sym(n.args[d], NodeKey("pad", n, d)), ")"));
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
                                      Literal(n.value, n.dtype)));
}

Emitter::DimRef Emitter::Find(DimRef r) {
  while (true) {
    auto it = parent_.find(r);
    if (it == parent_.end() || it->second == r) return r;
    r = it->second;
  }
}

void Emitter::Union(DimRef a, DimRef b) {
  a = Find(a);
  b = Find(b);
  if (a != b) parent_[b] = a;
}

// Buffers bound at run-time offsets may be larger than any extent seen here: 64 bits.
std::string IndexType(const Node& root, const InputMap& inputs, const Target& target) {
  (void)target;  // run-time offsets (bind_offsets) are 64-bit arguments of their own
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

namespace {

// A comparison of f32 values at the element's own index, both vector friendly.
bool ValuesCompared(const Node& c, const InputMap& inputs, const Shape& x_shape,
                    size_t reduced_dims) {
  return !inputs.contains(&c) && CompareOperator(c.op) != nullptr &&
         c.operands[0]->dtype == DType::f32 &&
         VectorFriendly(*c.operands[0], inputs, x_shape, reduced_dims) &&
         VectorFriendly(*c.operands[1], inputs, x_shape, reduced_dims);
}

}  // namespace

bool LastDimBroadcast(const Node& n) {
  if (n.op != Op::kExpand || n.shape.empty()) return false;
  const Node* value = n.operands[0].get();
  while (value->op == Op::kReshape) value = value->operands[0].get();
  return value->op != Op::kConstant && value->op != Op::kScalar &&
         n.operands[0]->shape.back() == 1 && n.shape.back() != 1;
}

bool VectorFriendly(const Node& n, const InputMap& inputs, const Shape& x_shape,
                    size_t reduced_dims) {
  if (n.dtype != DType::f32) return false;
  if (inputs.contains(&n)) return true;
  switch (n.op) {
    case Op::kConstant:
    case Op::kScalar:
      return true;
    case Op::kAdd:
    case Op::kMul:
    case Op::kDiv:
    case Op::kMaximum:
    case Op::kMinimum:
    case Op::kExp:
    case Op::kSqrt:
    case Op::kAbs:
    case Op::kRelu:
    case Op::kSigmoid:
    case Op::kSilu:
    case Op::kReshape:
      for (const ir::NodePtr& o : n.operands) {
        if (!VectorFriendly(*o, inputs, x_shape, reduced_dims)) return false;
      }
      return true;
    case Op::kWhere: {
      // In an epilogue, f32 values compared at the element's own index (relu's gradient).
      if (reduced_dims == 0) {
        return n.shape == x_shape && ValuesCompared(*n.operands[0], inputs, x_shape, 0) &&
               VectorFriendly(*n.operands[1], inputs, x_shape, 0) &&
               VectorFriendly(*n.operands[2], inputs, x_shape, 0);
      }
      // A condition on positions alone (the causal mask), over rows of one reduced dim.
      return reduced_dims == 1 && !n.shape.empty() && !x_shape.empty() &&
             n.shape.back() == x_shape.back() &&
             ir::NumElements(n.shape) == ir::NumElements(x_shape) &&
             n.operands[0]->dtype == DType::boolean &&
             (LaneFriendly(*n.operands[0], inputs) ||
              ValuesCompared(*n.operands[0], inputs, x_shape, reduced_dims)) &&
             VectorFriendly(*n.operands[1], inputs, x_shape, reduced_dims) &&
             VectorFriendly(*n.operands[2], inputs, x_shape, reduced_dims);
    }
    case Op::kExpand: {
      // A broadcast constant.
      const Node* value = n.operands[0].get();
      while (value->op == Op::kReshape && !inputs.contains(value)) value = value->operands[0].get();
      if (!inputs.contains(value) && (value->op == Op::kConstant || value->op == Op::kScalar))
        return true;
      if (n.shape != x_shape) return false;
      const Shape& s = n.operands[0]->shape;
      // The column form: the last dim kept, the 16 elements in one row of it (at most one
      // reduced dim), so they are 16 elements of the operand too.
      if (reduced_dims <= 1 && !s.empty() && s.back() == x_shape.back())
        return VectorFriendly(*n.operands[0], inputs, s, 0);
      // The column form's 16 lanes share every coordinate but the last: a value broadcast
      // along the last dim is one scalar for all of them (Emitter::RowScalar).
      if (reduced_dims == 0 && LastDimBroadcast(n)) return true;
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

}  // namespace lazycl::kernels
