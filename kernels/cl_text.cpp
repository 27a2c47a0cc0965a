#include "kernels/cl_text.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/dtype_table.h"
#include "base/half.h"

namespace lazycl::kernels {

std::string CType(DType d) { return base::Info(d).opencl; }

std::string Literal(double v, DType d) {
  switch (d) {
    case DType::f32:
      if (std::isnan(v)) return "NAN";
      if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
      return absl::StrFormat("%.9ef", v);
    case DType::i32:
      return absl::StrCat("((int)", static_cast<int64_t>(v), "L)");
    case DType::i64: {
      int64_t i = static_cast<int64_t>(v);
      if (i == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807L - 1L)";
      return absl::StrCat("(", i, "L)");
    }
    case DType::boolean:
      return v != 0 ? "((uchar)1)" : "((uchar)0)";
    case DType::f16:
      return absl::StrCat("((ushort)", base::FloatToF16(static_cast<float>(v)), ")");
    case DType::bf16:
      return absl::StrCat("((ushort)", base::FloatToBf16(static_cast<float>(v)), ")");
    case DType::f64:
      if (std::isnan(v)) return "((double)NAN)";
      if (std::isinf(v)) return v > 0 ? "((double)INFINITY)" : "((double)-INFINITY)";
      return absl::StrFormat("%.17e", v);
  }
  return "0";
}

std::string Zero(DType d) { return Literal(0, d); }

bool IsInt(DType d) { return d == DType::i32 || d == DType::i64; }

}  // namespace lazycl::kernels
