// A failing graph as a C++ program (graph.h, CppReproducer): the same calls Interpret makes,
// written out, so that a report can be pasted into a test.
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/graph.h"

namespace lazycl::fuzz {
namespace {

std::string Ints(const std::vector<int64_t>& v) {
  std::string out = "{";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "}";
}

std::string Num(double v) {
  std::ostringstream o;
  o.precision(17);
  o << v;
  std::string s = o.str();
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string V(int i) { return "v" + std::to_string(i); }

// "DType::f32"; bool's enumerator is `boolean`.
std::string DTypeName(DType t) {
  return std::string("DType::") + (t == DType::boolean ? "boolean" : dtype_name(t));
}

using Names = std::function<std::string(int)>;

std::string Expr(const Step& s, uint64_t seed, int palette, const Names& name = V);

// Kind::kScan as a scan() call with its body as a lambda.
std::string ScanExpr(const Step& s, uint64_t seed, int palette, const Names& name) {
  const auto [binary, unary] = ScanBodyOf(s);
  const std::string c =
      Expr(binary, seed, palette, [](int i) { return i == 0 ? "carry[0]" : "x[0]"; });
  return "scan([&](const std::vector<Tensor>& carry, const std::vector<Tensor>& x) {\n"
         "      Tensor c = tanh(" +
         c + (s.b >= 0 ? " + " + name(s.b) + " * 0.5" : "") +
         ");\n      return std::make_pair(std::vector<Tensor>{c}, std::vector<Tensor>{" +
         Expr(unary, seed, palette, [](int) { return "c"; }) + "});\n    }, {" + name(s.c) +
         "}, {" + name(s.a) + "})" + (s.keepdim ? ".carry[0]" : ".ys[0]");
}

// A step in call() on the device; plainly on the host, as Interpret runs it.
std::string CallExpr(const Step& s, uint64_t seed, int palette) {
  Step inner = s;
  inner.in_call = false;
  std::vector<std::string> args;
  for (int* o : {&inner.a, &inner.b, &inner.c}) {
    if (*o < 0) continue;
    args.push_back(V(*o));
    *o = static_cast<int>(args.size()) - 1;
  }
  std::string list;
  for (const std::string& arg : args) list += (list.empty() ? "" : ", ") + arg;
  Step plain = s;
  plain.in_call = false;
  return "dev.is_host() ? " + Expr(plain, seed, palette) +
         " : call([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{" +
         Expr(inner, seed, palette, [](int i) { return "a[" + std::to_string(i) + "]"; }) +
         "}; }, {" + list + "})[0]";
}

std::string Expr(const Step& step, uint64_t seed, int palette, const Names& name) {
  if (step.in_call) return CallExpr(step, seed, palette);
  const Step& s = step;
  const std::string a = s.a >= 0 ? name(s.a) : "";
  const std::string b = s.b >= 0 ? name(s.b) : "";
  switch (s.kind) {
    case Kind::kInput: {
      const std::string shape = Ints(Concrete(s.shape, palette));
      const std::string input_seed =
          std::to_string(seed * 1000 + static_cast<uint64_t>(s.input_id));
      if (s.dtype == DType::boolean) {
        return "lt(rand(" + shape + ", " + input_seed +
               ", 0, 1, DType::f32, host), full({}, 0.5, DType::f32, host)).to(dev)";
      }
      if (s.dtype == DType::i32 || s.dtype == DType::i64) {
        return "cast(rand(" + shape + ", " + input_seed + ", -6, 6, DType::f32, host), " +
               DTypeName(s.dtype) + ").to(dev)";
      }
      if (is_half(s.dtype)) {
        return "cast(randn(" + shape + ", " + input_seed + ", DType::f32, host), " +
               DTypeName(s.dtype) + ").to(dev)";
      }
      return "randn(" + shape + ", " + input_seed + ", " + DTypeName(s.dtype) + ", host).to(dev)";
    }
    case Kind::kUnary: {
      static const char* forms[] = {"neg(%)",
                                    "exp(tanh(%))",
                                    "log(abs(%) + 1.0)",
                                    "sqrt(abs(%))",
                                    "tanh(%)",
                                    "sigmoid(%)",
                                    "relu(%)",
                                    "abs(%)",
                                    "sin(%)",
                                    "cos(%)",
                                    "erf(%)",
                                    "nn::dropout(cast(%, DType::f32), 0.3, 17)",
                                    "% + randn(%.shape(), 23, DType::f32, %.device())",
                                    "gelu(%)",
                                    "silu(%)",
                                    "rsqrt(abs(%) + 0.5)",
                                    "clamp(%, -0.5, 0.8)",
                                    "clamp_min(%, 0.1)",
                                    "clamp_max(%, 0.3)",
                                    "gelu(%, true)"};
      std::string f = forms[s.which];
      for (size_t at = f.find('%'); at != std::string::npos; at = f.find('%', at + a.size()))
        f.replace(at, 1, a);
      return f;
    }
    case Kind::kBinary: {
      switch (s.which) {
        case 0:
          return a + " + " + b;
        case 1:
          return a + " - " + b;
        case 2:
          return a + " * " + b;
        case 3:
          return a + " / (abs(" + b + ") + 0.5)";
        case 4:
          return "maximum(" + a + ", " + b + ")";
        case 5:
          return "minimum(" + a + ", " + b + ")";
        default:
          return "pow(abs(" + a + ") + 0.5, tanh(" + b + "))";
      }
    }
    case Kind::kScalar: {
      const std::string c = Num(s.scalar);
      switch (s.which) {
        case 0:
          return a + " + " + c;
        case 1:
          return c + " - " + a;
        case 2:
          return c + " * " + a;
        case 3:
          return a + " / " + c;
        default: {
          static const char* names[] = {"lt", "le", "gt", "ge", "eq", "ne"};
          return std::string(names[s.which - 4]) + "(" + a + ", " + c + ")";
        }
      }
    }
    case Kind::kCompare: {
      static const char* names[] = {"lt", "le", "gt", "ge", "eq", "ne"};
      return std::string(names[s.which]) + "(" + a + ", " + b + ")";
    }
    case Kind::kWhere:
      return "where(" + a + ", " + b + ", " + name(s.c) + ")";
    case Kind::kReduce: {
      static const char* names[] = {"sum", "mean", "max", "min", "prod"};
      return std::string(names[s.which]) + "(" + a + ", " + Ints(s.dims) + ", " +
             (s.keepdim ? "true" : "false") + ")";
    }
    case Kind::kTranspose:
      return "transpose(" + a + ", " + std::to_string(s.dims[0]) + ", " +
             std::to_string(s.dims[1]) + ")";
    case Kind::kPermute:
      return "permute(" + a + ", " + Ints(s.dims) + ")";
    case Kind::kSlice:
      return "slice(" + a + ", " + std::to_string(s.dims[0]) + ", " + std::to_string(s.dims[1]) +
             ", " + std::to_string(s.dims[2]) + ")";
    case Kind::kFlatten:
      return "reshape(" + a + ", {-1})";
    case Kind::kUnsqueeze:
      return "unsqueeze(" + a + ", " + std::to_string(s.dims[0]) + ")";
    case Kind::kBroadcast:
      return "broadcast_to(" + a + ", " + Ints(Concrete(s.shape, palette)) + ")";
    case Kind::kCat:
      return "cat({" + a + ", " + b + "}, " + std::to_string(s.dims[0]) + ")";
    case Kind::kSoftmax:
      return std::string(s.which ? "log_softmax(" : "softmax(") + a + ", " +
             std::to_string(s.dims[0]) + ")";
    case Kind::kMatmul:
      return "matmul(" + a + ", " + b + ")";
    case Kind::kGather:
      return "gather(" + a + ", " + std::to_string(s.dims[0]) + ", " + b + ")";
    case Kind::kIndexSelect:
      return "index_select(" + a + ", " + std::to_string(s.dims[0]) + ", " + b + ")";
    case Kind::kScatterAdd:
      return "scatter_add(" + a + ", " + std::to_string(s.dims[0]) + ", " + b + ", " + name(s.c) +
             ")";
    case Kind::kArg:
      return std::string(s.which ? "argmin(" : "argmax(") + a + ", " + std::to_string(s.dims[0]) +
             ", " + (s.keepdim ? "true" : "false") + ")";
    case Kind::kCumsum:
      return "cumsum(" + a + ", " + std::to_string(s.dims[0]) + ")";
    case Kind::kTri:
      return std::string(s.which ? "triu(" : "tril(") + a + ", " + std::to_string(s.dims[0]) + ")";
    case Kind::kTopk:
      return "topk(" + a + ", " + std::to_string(s.dims[0]) + ", " + std::to_string(s.dims[1]) +
             (s.which ? ").second" : ").first");
    case Kind::kStack:
      return "stack({" + a + ", " + b + "}, " + std::to_string(s.dims[0]) + ")";
    case Kind::kSqueeze:
      return "squeeze(" + a + ", " + std::to_string(s.dims[0]) + ")";
    case Kind::kCast:
      return "cast(" + a + ", " + DTypeName(s.dtype) + ")";
    case Kind::kNorm:
      if (s.which == 0) return "nn::rms_norm(" + a + ", " + b + ")";
      return s.which == 1 ? "nn::layer_norm(" + a + ", " + b + ", " + name(s.c) + ")"
                          : "nn::layer_norm(" + a + ")";
    case Kind::kLinear:
      return "nn::linear(" + a + ", " + b + (s.c >= 0 ? ", " + name(s.c) : "") + ")";
    case Kind::kEmbedding:
      return "nn::embedding(" + b + ", " + a + ")";
    case Kind::kOneHot:
      return "one_hot(" + a + ", " + std::to_string(s.dims[0]) + ")";
    case Kind::kCrossEntropy:
      return "nn::cross_entropy(" + a + ", " + b + ")";
    case Kind::kAttention:
      return "nn::scaled_dot_product_attention(" + a + ", " + b + ", " + name(s.c) + ", " +
             (s.keepdim ? "true" : "false") + ")";
    case Kind::kTakeAlongDim:
      return "take_along_dim(" + a + ", " + b + ", " + std::to_string(s.dims[0]) + ")";
    case Kind::kIndex2:
    case Kind::kIndexPut: {
      // {Slice(), ..., ids, ...}: the entries up to the last indexed dim.
      const int64_t last = s.kind == Kind::kIndex2 ? s.dims[1] : s.dims[0];
      std::string entries;
      for (int64_t d = 0; d <= last; ++d) {
        const std::string e = d == s.dims[0]                              ? b
                              : s.kind == Kind::kIndex2 && d == s.dims[1] ? name(s.c)
                                                                          : "Slice()";
        entries += (d == 0 ? "" : ", ") + e;
      }
      if (s.kind == Kind::kIndex2) return a + ".index({" + entries + "})";
      return "index_put(" + a + ", {" + entries + "}, " + name(s.c) + ", " +
             (s.keepdim ? "true" : "false") + ")";
    }
    case Kind::kMaskedFill:
      return "masked_fill(" + a + ", " + b + ", " + Num(s.scalar) + ")";
    case Kind::kScan:
      return ScanExpr(s, seed, palette, name);
  }
  return "Tensor()";
}

}  // namespace

std::string CppReproducer(const Graph& graph, uint64_t data_seed, int palette) {
  std::ostringstream o;
  o << "// lazycl-fuzz reproducer: build against the installed lazycl and run; it prints the\n"
       "// last value computed on the host and on the device.\n"
       "#include <iostream>\n#include <utility>\n#include <vector>\n#include "
       "\"lazycl/lazycl.h\"\n\n"
       "int main() {\n  using namespace lazycl;\n";
  for (const char* d : {"host", "dev"}) {
    o << "  {\n    const Device host = Device::host();\n"
      << "    const Device dev = " << (std::string(d) == "host" ? "host" : "Device::opencl()")
      << ";\n";
    for (size_t i = 0; i < graph.size(); ++i) {
      o << "    Tensor " << V(static_cast<int>(i)) << " = " << Expr(graph[i], data_seed, palette)
        << ";\n";
    }
    o << "    std::cout << \"" << d << ":\";\n"
      << "    for (float x : cast(" << V(static_cast<int>(graph.size()) - 1)
      << ", DType::f32).to_vector<float>()) std::cout << ' ' << x;\n"
      << "    std::cout << '\\n';\n  }\n";
  }
  o << "}\n";
  return o.str();
}

}  // namespace lazycl::fuzz
