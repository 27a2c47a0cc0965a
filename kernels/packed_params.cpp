#include "kernels/packed_params.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"

namespace lazycl::kernels {
namespace {

constexpr size_t kMostPerVector = 16;  // long16

bool IsInteger(const KernelArgSpec& a) {
  return a.kind == KernelArgSpec::Kind::kInt32 || a.kind == KernelArgSpec::Kind::kInt64 ||
         a.kind == KernelArgSpec::Kind::kOffset;
}

// The OpenCL vector width that holds `n` longs (2, 4, 8 or 16; long3 takes long4's room).
size_t VectorWidth(size_t n) {
  size_t w = 2;
  while (w < n) w *= 2;
  return w;
}

}  // namespace

PackedParams PackIntegerParams(const std::vector<std::string>& decls,
                               const std::vector<KernelArgSpec>& args) {
  LAZYCL_CHECK(decls.size() == args.size(), "codegen: %zu parameters for %zu arguments",
               decls.size(), args.size());
  // The integers in order, kMostPerVector to a vector; each field 64 bits (the executor passes a
  // kPack's fields as longs: a narrow one's value converts back exactly where it is declared).
  std::vector<size_t> ints;
  for (size_t i = 0; i < args.size(); ++i) {
    if (IsInteger(args[i])) ints.push_back(i);
  }
  PackedParams out;
  if (ints.size() < 2) {
    out.params = absl::StrJoin(decls, ",\n    ");
    out.args = args;
    return out;
  }
  std::vector<std::string> params;
  for (size_t i = 0; i < decls.size(); ++i) {
    if (!IsInteger(args[i])) {
      params.push_back(decls[i]);
      out.args.push_back(args[i]);
    }
  }
  for (size_t v = 0, done = 0; done < ints.size(); ++v) {
    const size_t count = std::min(kMostPerVector, ints.size() - done);
    const size_t width = VectorWidth(count);
    const std::string name = absl::StrCat("lc_i", v);
    params.push_back(absl::StrCat("const long", width, " ", name));
    KernelArgSpec pack;
    pack.kind = KernelArgSpec::Kind::kPack;
    for (size_t lane = 0; lane < width; ++lane) {
      KernelArgSpec f;  // an unused lane: 0
      f.kind = KernelArgSpec::Kind::kInt64;
      if (lane < count) {
        const size_t i = ints[done + lane];
        f = args[i];
        if (f.kind == KernelArgSpec::Kind::kInt32) f.kind = KernelArgSpec::Kind::kInt64;
        if (f.kind == KernelArgSpec::Kind::kOffset) f.wide = true;
        absl::StrAppend(&out.unpack, "  ", decls[i], " = ", name, ".s", absl::Hex(lane), ";\n");
      }
      pack.fields.push_back(std::move(f));
    }
    out.args.push_back(std::move(pack));
    done += count;
  }
  out.params = absl::StrJoin(params, ",\n    ");
  return out;
}

}  // namespace lazycl::kernels
