#include "kernels/merge_rows.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "kernels/emitter.h"
#include "kernels/memory.h"
#include "kernels/packed_params.h"

namespace lazycl::kernels {
namespace {

bool Mergeable(const KernelSpec& a, const KernelSpec& b) {
  if (a.rows_fn.empty() || b.rows_fn != a.rows_fn || a.launches.size() != 1 ||
      b.launches.size() != 1 || a.options != b.options || a.text() != b.text()) {
    return false;
  }
  const Launch &la = a.launches[0], &lb = b.launches[0];
  if (la.global.size() != 2 || lb.global.size() != 2 || la.global[0] != lb.global[0] ||
      la.local.size() != 2 || lb.local.size() != 2 || la.local[0] != lb.local[0]) {
    return false;
  }
  // Neither reads or writes a buffer the other writes: the two may run in any order.
  for (const KernelArgSpec& x : a.args) {
    if (x.kind != KernelArgSpec::Kind::kBuffer) continue;
    for (const KernelArgSpec& y : b.args) {
      if (y.kind == KernelArgSpec::Kind::kBuffer && x.buffer == y.buffer &&
          (x.written || y.written))
        return false;
    }
  }
  return true;
}

// `decl` ("const int s0") with its parameter `name` renamed to name + suffix.
std::string Renamed(const std::string& decl, const std::string& name, const std::string& suffix) {
  LAZYCL_CHECK(
      decl.size() >= name.size() && decl.compare(decl.size() - name.size(), name.size(), name) == 0,
      "merge_rows: parameter %s does not end with %s", decl.c_str(), name.c_str());
  return decl + suffix;
}

KernelSpec Merge(const KernelSpec& a, const KernelSpec& b) {
  const std::string entry = absl::StrCat(a.launches[0].name, "_x2");
  std::vector<std::string> decls;
  std::vector<std::string> names[2];
  const KernelSpec* parts[2] = {&a, &b};
  for (int k = 0; k < 2; ++k) {
    const std::string suffix = absl::StrCat("_p", k);
    for (size_t i = 0; i < parts[k]->rows_decls.size(); ++i) {
      decls.push_back(Renamed(parts[k]->rows_decls[i], parts[k]->rows_names[i], suffix));
      names[k].push_back(parts[k]->rows_names[i] + suffix);
    }
  }
  // Built, not a literal: GCC 12 -O3 warned of an out-of-bounds memcpy (-Warray-bounds, a false
  // positive) for push_back of this 17-character literal here.
  decls.emplace_back(absl::StrCat("const idx_t ", "rows0"));
  std::vector<KernelArgSpec> args;
  for (const KernelSpec* part : parts) {
    args.insert(args.end(), part->rows_args.begin(), part->rows_args.end());
    args.insert(args.end(), part->launches[0].extra_args.begin(),
                part->launches[0].extra_args.end());
  }
  KernelArgSpec rows0;
  rows0.kind = a.rows_wide ? KernelArgSpec::Kind::kInt64 : KernelArgSpec::Kind::kInt32;
  rows0.value = static_cast<int64_t>(a.launches[0].global[1]);
  args.push_back(rows0);
  // Both parts' integers (and rows0) packed as one kernel's are (kernels/packed_params.h).
  const PackedParams packed = PackIntegerParams(decls, args);
  KernelSpec m;
  m.source =
      absl::StrCat(a.text(), "__kernel void ", entry, "(", packed.params, ") {\n", packed.unpack,
                   "  const idx_t row = (idx_t)get_global_id(1);\n"
                   "  const idx_t c = (idx_t)get_global_id(0);\n  if (row < rows0) {\n    ",
                   a.rows_fn, "(", absl::StrJoin(names[0], ", "), ", row, c);\n  } else {\n    ",
                   a.rows_fn, "(", absl::StrJoin(names[1], ", "), ", row - rows0, c);\n  }\n}\n");
  m.options = a.options;
  m.args = packed.args;
  const size_t width = a.launches[0].global[0], local = a.launches[0].local[0];
  const size_t rows = a.launches[0].global[1] + b.launches[0].global[1];
  m.launches.push_back(
      Launch{entry, {width, rows}, {local, RowsPerGroup(static_cast<int64_t>(rows), local)}, {}});
  m.summary = absl::StrCat(a.summary, " and ", b.summary, " in one launch");
  m.fused_ops = a.fused_ops;
  m.bytes = a.bytes + b.bytes;
  m.flops = a.flops + b.flops;
  return m;
}

}  // namespace

void MergeRowKernels(Plan* plan, const Target& target) {
  std::vector<KernelSpec>& kernels = plan->kernels;
  for (size_t i = 0; i + 1 < kernels.size(); ++i) {
    if (!Mergeable(kernels[i], kernels[i + 1])) continue;
    KernelSpec merged = Merge(kernels[i], kernels[i + 1]);
    if (ArgsTooBig(merged, target)) continue;
    kernels[i] = std::move(merged);
    kernels.erase(kernels.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    for (int& last : plan->temp_last_use) {
      if (last > static_cast<int>(i)) --last;  // kernel i + 1 is now kernel i
    }
  }
}

}  // namespace lazycl::kernels
