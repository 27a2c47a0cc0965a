// The external oracle: tests/reference/cases.py has JAX compute each op and its gradient on fixed
// inputs; this test runs the same op in lazycl on the host and on the OpenCL device (the codegen
// strategy is CTest's LAZYCL_CODEGEN) and compares. The cases file comes from the CTest fixture
// reference_cases (tests/reference/make_cases.sh); without it this test fails, never skips.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

struct HostTensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<double> values;  // exact for f32, f64 and integers up to 2^53
};

struct Case {
  std::string name;
  std::string op;
  std::map<std::string, std::string> attrs;
  std::vector<HostTensor> inputs;
  std::vector<HostTensor> outputs;
  std::vector<HostTensor> cotangents;
  std::vector<HostTensor> grads;
  double rtol = 0;
  double atol = 0;
};

DType ParseDType(const std::string& s) {
  if (s == "f32") return DType::f32;
  if (s == "i32") return DType::i32;
  if (s == "i64") return DType::i64;
  if (s == "bool") return DType::boolean;
  if (s == "f64") return DType::f64;
  if (s == "f16") return DType::f16;
  if (s == "bf16") return DType::bf16;
  ADD_FAILURE() << "unknown dtype in the cases file: " << s;
  return DType::f32;
}

HostTensor ParseTensor(std::istringstream& in, bool named) {
  HostTensor t;
  if (named) in >> t.name;
  std::string dtype;
  int rank = 0;
  in >> dtype >> rank;
  t.dtype = ParseDType(dtype);
  t.shape.resize(static_cast<size_t>(rank));
  int64_t n = 1;
  for (int64_t& d : t.shape) {
    in >> d;
    n *= d;
  }
  t.values.resize(static_cast<size_t>(n));
  for (double& v : t.values) {
    std::string word;
    in >> word;
    v = std::strtod(word.c_str(), nullptr);
  }
  EXPECT_FALSE(in.fail()) << "a short tensor line for " << t.name;
  return t;
}

std::vector<Case> LoadCases() {
  const char* path = std::getenv("LAZYCL_REFERENCE_CASES");
  if (path == nullptr) {
    ADD_FAILURE() << "LAZYCL_REFERENCE_CASES is not set: run this test through CTest, whose "
                     "fixture reference_cases writes the JAX oracle's cases";
    return {};
  }
  std::ifstream file(path);
  if (!file) {
    ADD_FAILURE() << "cannot read the JAX oracle's cases " << path
                  << " (did the reference_cases fixture fail? it needs python3 and PyPI)";
    return {};
  }
  std::vector<Case> cases;
  std::string line;
  while (std::getline(file, line)) {
    std::istringstream in(line);
    std::string tag;
    in >> tag;
    if (tag == "case") {
      cases.emplace_back();
      in >> cases.back().name >> cases.back().op;
      continue;
    }
    if (cases.empty()) continue;
    Case& c = cases.back();
    if (tag == "attr") {
      std::string key, value;
      in >> key >> value;
      c.attrs[key] = value;
    } else if (tag == "in") {
      c.inputs.push_back(ParseTensor(in, true));
    } else if (tag == "out") {
      c.outputs.push_back(ParseTensor(in, false));
    } else if (tag == "ct") {
      c.cotangents.push_back(ParseTensor(in, false));
    } else if (tag == "grad") {
      c.grads.push_back(ParseTensor(in, true));
    } else if (tag == "tol") {
      in >> c.rtol >> c.atol;
    }
  }
  return cases;
}

Tensor ToTensor(const HostTensor& h, Device device) {
  switch (h.dtype) {
    case DType::f32:
      return tensor(std::vector<float>(h.values.begin(), h.values.end()), h.shape, device);
    case DType::i32:
      return tensor(std::vector<int32_t>(h.values.begin(), h.values.end()), h.shape, device);
    case DType::i64:
      return tensor(std::vector<int64_t>(h.values.begin(), h.values.end()), h.shape, device);
    case DType::boolean:
      return tensor_bool(std::vector<uint8_t>(h.values.begin(), h.values.end()), h.shape, device);
    case DType::f64:
      return tensor(h.values, h.shape, DType::f64, device);
    case DType::f16:
    case DType::bf16:  // the values are exactly 16-bit ones: the cast keeps them
      return cast(tensor(std::vector<float>(h.values.begin(), h.values.end()), h.shape, device),
                  h.dtype);
    default:
      ADD_FAILURE() << "no host values for dtype " << dtype_name(h.dtype);
      return {};
  }
}

std::vector<double> Values(const Tensor& t) {
  switch (t.dtype()) {
    case DType::f32: {
      std::vector<float> v = t.to_vector<float>();
      return {v.begin(), v.end()};
    }
    case DType::i32: {
      std::vector<int32_t> v = t.to_vector<int32_t>();
      return {v.begin(), v.end()};
    }
    case DType::i64: {
      std::vector<int64_t> v = t.to_vector<int64_t>();
      return {v.begin(), v.end()};
    }
    case DType::boolean: {
      std::vector<uint8_t> v = t.to_vector<uint8_t>();
      return {v.begin(), v.end()};
    }
    case DType::f64:
      return t.to_vector<double>();
    case DType::f16:
    case DType::bf16: {
      std::vector<float> v = t.to_vector<float>();
      return {v.begin(), v.end()};
    }
    default:
      ADD_FAILURE() << "cannot read dtype " << dtype_name(t.dtype());
      return {};
  }
}

// The case's attributes, typed.
struct Attrs {
  const std::map<std::string, std::string>& map;
  const std::string& Get(const std::string& key) const {
    static const std::string kMissing;
    auto it = map.find(key);
    if (it == map.end()) {
      ADD_FAILURE() << "the case has no attribute '" << key << "'";
      return kMissing;
    }
    return it->second;
  }
  int64_t Int(const std::string& key) const { return std::stoll(Get(key)); }
  double Float(const std::string& key) const { return std::stod(Get(key)); }
  bool Bool(const std::string& key) const { return Int(key) != 0; }
  std::vector<int64_t> Ints(const std::string& key) const {
    std::vector<int64_t> out;
    const std::string& s = Get(key);
    if (s == "-") return out;
    std::istringstream in(s);
    std::string part;
    while (std::getline(in, part, ',')) out.push_back(std::stoll(part));
    return out;
  }
};

using Args = std::map<std::string, Tensor>;
using OpFn = std::function<std::vector<Tensor>(const Args&, const Attrs&)>;

OpFn Unary(Tensor (*f)(const Tensor&)) {
  return [f](const Args& a, const Attrs&) { return std::vector<Tensor>{f(a.at("x"))}; };
}
OpFn Binary(Tensor (*f)(const Tensor&, const Tensor&)) {
  return [f](const Args& a, const Attrs&) { return std::vector<Tensor>{f(a.at("a"), a.at("b"))}; };
}

// Each op the oracle names, by its lazycl name.
const std::map<std::string, OpFn>& Ops() {
  static const auto* ops = new std::map<std::string, OpFn>{
      {"exp", Unary(exp)},
      {"log", Unary(log)},
      {"sqrt", Unary(sqrt)},
      {"tanh", Unary(tanh)},
      {"sigmoid", Unary(sigmoid)},
      {"erf", Unary(erf)},
      {"abs", Unary(abs)},
      {"sin", Unary(sin)},
      {"cos", Unary(cos)},
      {"relu", Unary(relu)},
      {"neg", Unary(neg)},
      {"add", Binary(add)},
      {"sub", Binary(sub)},
      {"mul", Binary(mul)},
      {"div", Binary(div)},
      {"maximum", Binary(maximum)},
      {"minimum", Binary(minimum)},
      {"pow", Binary(static_cast<Tensor (*)(const Tensor&, const Tensor&)>(pow))},
      {"lt", Binary(lt)},
      {"le", Binary(le)},
      {"gt", Binary(gt)},
      {"ge", Binary(ge)},
      {"eq", Binary(eq)},
      {"ne", Binary(ne)},
      {"matmul", Binary(matmul)},
      {"where",
       [](const Args& a, const Attrs&) {
         return std::vector<Tensor>{where(a.at("cond"), a.at("a"), a.at("b"))};
       }},
      {"sum",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{sum(a.at("x"), at.Ints("dims"), at.Bool("keepdim"))};
       }},
      {"mean",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{mean(a.at("x"), at.Ints("dims"), at.Bool("keepdim"))};
       }},
      {"max",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{max(a.at("x"), at.Ints("dims"), at.Bool("keepdim"))};
       }},
      {"softmax",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{softmax(a.at("x"), at.Int("dim"))};
       }},
      {"log_softmax",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{log_softmax(a.at("x"), at.Int("dim"))};
       }},
      {"transpose_exp",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{exp(transpose(a.at("x"), at.Int("dim0"), at.Int("dim1")))};
       }},
      {"cat",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{cat({a.at("a"), a.at("b")}, at.Int("dim"))};
       }},
      {"gather",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{gather(a.at("x"), at.Int("dim"), a.at("index"))};
       }},
      {"index_select",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{index_select(a.at("x"), at.Int("dim"), a.at("ids"))};
       }},
      {"scatter_add",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{
             scatter_add(a.at("x"), at.Int("dim"), a.at("index"), a.at("src"))};
       }},
      {"embedding",
       [](const Args& a, const Attrs&) {
         return std::vector<Tensor>{nn::embedding(a.at("weight"), a.at("ids"))};
       }},
      {"one_hot",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{one_hot(a.at("ids"), at.Int("classes"))};
       }},
      {"linear",
       [](const Args& a, const Attrs&) {
         return std::vector<Tensor>{nn::linear(a.at("x"), a.at("weight"), a.at("bias"))};
       }},
      {"rms_norm",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{nn::rms_norm(a.at("x"), a.at("weight"), at.Float("eps"))};
       }},
      {"layer_norm",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{
             nn::layer_norm(a.at("x"), a.at("weight"), a.at("bias"), at.Float("eps"))};
       }},
      {"cross_entropy",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{
             nn::cross_entropy(a.at("logits"), a.at("labels"), at.Int("ignore_index"))};
       }},
      {"scaled_dot_product_attention",
       [](const Args& a, const Attrs& at) {
         std::optional<double> scale;
         if (at.map.contains("scale")) scale = at.Float("scale");
         return std::vector<Tensor>{nn::scaled_dot_product_attention(
             a.at("q"), a.at("k"), a.at("v"), at.Bool("causal"), scale)};
       }},
      {"rsqrt", Unary(rsqrt)},
      {"silu", Unary(silu)},
      {"gelu",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{gelu(a.at("x"), at.Bool("approximate_tanh"))};
       }},
      {"clamp",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{clamp(a.at("x"), at.Float("lo"), at.Float("hi"))};
       }},
      {"tril", [](const Args& a,
                  const Attrs& at) { return std::vector<Tensor>{tril(a.at("x"), at.Int("k"))}; }},
      {"triu", [](const Args& a,
                  const Attrs& at) { return std::vector<Tensor>{triu(a.at("x"), at.Int("k"))}; }},
      {"min",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{min(a.at("x"), at.Ints("dims"), at.Bool("keepdim"))};
       }},
      {"prod",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{prod(a.at("x"), at.Ints("dims"), at.Bool("keepdim"))};
       }},
      {"argmax",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{argmax(a.at("x"), at.Int("dim"), at.Bool("keepdim"))};
       }},
      {"argmin",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{argmin(a.at("x"), at.Int("dim"), at.Bool("keepdim"))};
       }},
      {"cumsum",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{cumsum(a.at("x"), at.Int("dim"))};
       }},
      {"topk",
       [](const Args& a, const Attrs& at) {
         auto [values, indices] = topk(a.at("x"), at.Int("k"), at.Int("dim"));
         return std::vector<Tensor>{values, indices};
       }},
      {"cast_bf16", [](const Args& a,
                       const Attrs&) { return std::vector<Tensor>{cast(a.at("x"), DType::bf16)}; }},
      {"cast_f16", [](const Args& a,
                      const Attrs&) { return std::vector<Tensor>{cast(a.at("x"), DType::f16)}; }},
      {"gt_scalar",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{gt(a.at("x"), at.Float("value"))};
       }},
      {"slice",
       [](const Args& a, const Attrs& at) {
         return std::vector<Tensor>{
             slice(a.at("x"), at.Int("dim"), at.Int("start"), at.Int("end"))};
       }},
  };
  return *ops;
}

bool SameBits(double got, double want) {
  const float g = static_cast<float>(got);
  const float w = static_cast<float>(want);
  return std::memcmp(&g, &w, sizeof(float)) == 0;
}

void ExpectMatches(const std::string& what, const Tensor& got, const HostTensor& want,
                   const Case& c) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(got.defined());
  ASSERT_EQ(got.shape(), want.shape);
  ASSERT_EQ(dtype_name(got.dtype()), dtype_name(want.dtype));
  const std::vector<double> values = Values(got);
  ASSERT_EQ(values.size(), want.values.size());
  const bool exact = !is_floating(want.dtype) || (c.rtol == 0 && c.atol == 0);
  int reported = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double g = values[i];
    const double w = want.values[i];
    bool ok;
    if (exact) {
      // f32 and the 16-bit floats (written as floats) by their float bits; NaN is any NaN.
      const bool as_float = want.dtype == DType::f32 || is_half(want.dtype);
      ok = (std::isnan(g) && std::isnan(w)) || (as_float ? SameBits(g, w) : g == w);
    } else if (std::isnan(w)) {
      ok = std::isnan(g);
    } else if (std::isinf(w)) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= c.rtol * std::fabs(w) + c.atol;
    }
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << "element " << i << ": lazycl " << g << ", JAX " << w << " (rtol " << c.rtol
                    << ", atol " << c.atol << (exact ? ", exact" : "") << ")";
    }
  }
}

void RunCase(const Case& c, Device device) {
  SCOPED_TRACE("case " + c.name + " (" + c.op + ") on " + device.str());
  auto op = Ops().find(c.op);
  ASSERT_NE(op, Ops().end()) << "the oracle names op '" << c.op
                             << "', which reference_test does not map to lazycl";
  Args args;
  std::map<std::string, Tensor> wrt;
  for (const HostTensor& h : c.inputs) {
    Tensor t = ToTensor(h, device);
    for (const HostTensor& g : c.grads) {
      if (g.name == h.name) t.requires_grad_();
    }
    args[h.name] = t;
  }
  const Attrs attrs{c.attrs};
  std::vector<Tensor> outs = op->second(args, attrs);
  ASSERT_EQ(outs.size(), c.outputs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    ExpectMatches("output " + std::to_string(i), outs[i], c.outputs[i], c);
  }
  if (c.grads.empty()) return;
  // d sum_i sum(out_i * ct_i) / d input, over the floating outputs in order.
  Tensor loss;
  size_t next_ct = 0;
  for (const Tensor& o : outs) {
    if (o.dtype() != DType::f32 && o.dtype() != DType::f64) continue;
    ASSERT_LT(next_ct, c.cotangents.size());
    Tensor term = sum(o * ToTensor(c.cotangents[next_ct++], device));
    loss = loss.defined() ? loss + term : term;
  }
  ASSERT_TRUE(loss.defined());
  std::vector<Tensor> inputs;
  for (const HostTensor& g : c.grads) inputs.push_back(args.at(g.name));
  std::vector<Tensor> grads = grad(loss, inputs);
  ASSERT_EQ(grads.size(), c.grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    ExpectMatches("d/d " + c.grads[i].name, grads[i], c.grads[i], c);
  }
}

class ReferenceTest : public ::testing::TestWithParam<Device> {};

TEST_P(ReferenceTest, EveryCaseMatchesJax) {
  const std::vector<Case> cases = LoadCases();
  ASSERT_FALSE(cases.empty()) << "no cases: the oracle wrote nothing";
  for (const Case& c : cases) RunCase(c, GetParam());
  std::cout << cases.size() << " JAX cases checked on " << GetParam().str() << "\n";
}

INSTANTIATE_TEST_SUITE_P(Devices, ReferenceTest,
                         ::testing::Values(Device::host(), Device::opencl(0)),
                         [](const auto& info) { return info.param.is_host() ? "host" : "opencl"; });

}  // namespace
}  // namespace lazycl
