// The bad-input catalogue: each entry is a call a user could make with a wrong argument. Each
// must throw a lazycl::Error (nothing else) whose message holds the listed words (what was
// wrong, and what the user passed), and afterwards a computation on the device and on the host
// still gives the right value, with the device memory back at its level (nothing leaked).
// Each entry runs as its own test case: BadInput/Catalogue.ThrowsAClearError/<name>.
#include <cctype>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <typeinfo>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace lazycl {
namespace {

const Device kCl = Device::opencl(0);
const Device kHost = Device::host();
constexpr int64_t kBig = int64_t{1} << 40;

struct Bad {
  std::string name;
  std::function<void()> call;
  std::vector<std::string> words;
};

Tensor F(std::vector<int64_t> shape, Device d = kCl) {
  return ones(std::move(shape), DType::f32, d);
}
Tensor I(std::vector<int64_t> shape, Device d = kCl) {
  return ones(std::move(shape), DType::i32, d);
}
Tensor B(std::vector<int64_t> shape, Device d = kCl) {
  return ones(std::move(shape), DType::boolean, d);
}

using Unary = Tensor (*)(const Tensor&);
using Binary = Tensor (*)(const Tensor&, const Tensor&);

std::vector<Bad> Entries() {
  std::vector<Bad> c;
  auto entry = [&](std::string name, std::function<void()> f, std::vector<std::string> words) {
    c.push_back({std::move(name), std::move(f), std::move(words)});
  };

  // ---- Factories: data and shape disagree, negative or overflowing shapes.
  for (Device d : {kCl, kHost}) {
    const std::string on = d.is_host() ? "_host" : "_cl";
    entry("tensor_f32_size" + on,
          [d] {
            tensor(std::vector<float>{1, 2, 3}, {2, 2}, d);
          },
          {"3", "[2,2]"});
    entry("tensor_i32_size" + on, [d] { tensor(std::vector<int32_t>{1}, {2}, d); }, {"1", "[2]"});
    entry("tensor_i64_size" + on,
          [d] {
            tensor(std::vector<int64_t>{1, 2}, {3}, d);
          },
          {"2", "[3]"});
    entry("tensor_bool_size" + on, [d] { tensor_bool(std::vector<uint8_t>{1}, {0}, d); },
          {"1", "[0]"});
    entry("tensor_negative_dim" + on, [d] { tensor(std::vector<float>{}, {-1}, d); }, {"-1"});
    entry("zeros_negative_dim" + on, [d] { zeros({2, -3}, DType::f32, d); }, {"[2,-3]"});
    entry("ones_negative_dim" + on, [d] { ones({-2}, DType::i32, d); }, {"[-2]"});
    entry("full_negative_dim" + on, [d] { full({-5, 1}, 1.0, DType::f32, d); }, {"[-5,1]"});
    entry("arange_negative" + on, [d] { arange(-4, DType::f32, d); }, {"arange", "-4"});
    entry("randn_negative_dim" + on, [d] { randn({3, -1}, 1, DType::f32, d); }, {"[3,-1]"});
    entry("rand_negative_dim" + on, [d] { rand({-7}, 1, 0, 1, DType::f32, d); }, {"[-7]"});
    entry("zeros_overflow" + on,
          [d] {
            zeros({kBig, kBig}, DType::f32, d);
          },
          {"1099511627776", "overflow"});
    entry("full_overflow" + on,
          [d] {
            full({7, std::numeric_limits<int64_t>::max() / 3}, 1.0, DType::f32, d);
          },
          {"overflow"});
    entry("randn_overflow" + on, [d] { randn({kBig, kBig, 4}, 1, DType::f32, d); }, {"overflow"});
    entry("randn_bool" + on, [d] { randn({2}, 1, DType::boolean, d); }, {"randn", "bool"});
    entry("rand_low_above_high" + on, [d] { rand({2}, 1, 3.0, 1.0, DType::f32, d); },
          {"rand", "3", "1"});
  }
  entry("placeholder_negative_dim", [] { placeholder({-1, 2}, DType::f32, kCl); }, {"[-1,2]"});
  entry("placeholder_overflow",
        [] {
          placeholder({kBig, kBig, 8}, DType::f32, kCl);
        },
        {"overflow"});
  entry("placeholder_read", [] { placeholder({2}, DType::f32, kCl).to_vector<float>(); },
        {"no data"});
  entry("placeholder_plus_one_read",
        [] { (placeholder({2}, DType::f32, kCl) + 1.0).to_vector<float>(); }, {"no data"});

  // ---- Devices.
  for (const char* text : {"", "gpu", "cl:", "cl:-1", "cl:abc", "opencl:1x", "cl:0:1", "CL0",
                           "host:1", "cl:99999999999999999999"}) {
    entry(std::string("device_parse_") + (text[0] ? text : "empty"),
          [text] { Device::parse(text); }, {"\"" + std::string(text) + "\""});
  }
  entry("device_index_missing",
        [] { zeros({2}, DType::f32, Device::opencl(57)).to_vector<float>(); }, {"57"});
  entry("device_negative_index", [] { Device::opencl(-2); }, {"-2"});

  // ---- Tensor methods.
  entry("undefined_shape", [] { Tensor().shape(); }, {"undefined"});
  entry("undefined_dtype", [] { Tensor().dtype(); }, {"undefined"});
  entry("undefined_to_vector", [] { Tensor().to_vector<float>(); }, {"undefined"});
  entry("undefined_to", [] { Tensor().to(kCl); }, {"undefined"});
  entry("undefined_in_add", [] { F({2}) + Tensor(); }, {"undefined"});
  entry("undefined_in_sync", [] { sync({F({2}), Tensor()}); }, {"undefined"});
  entry("size_dim_out_of_range", [] { F({2, 3}).size(2); }, {"dim 2", "rank 2"});
  entry("size_negative_dim_out_of_range", [] { F({2, 3}).size(-3); }, {"dim -3", "rank 2"});
  entry("to_vector_wrong_type_f32_as_i32", [] { F({2}).to_vector<int32_t>(); },
        {"to_vector<int32_t>", "f32", "to_vector<float>"});
  entry("to_vector_wrong_type_i32_as_f32", [] { I({2}).to_vector<float>(); },
        {"to_vector<float>", "i32", "int32_t"});
  entry("to_vector_wrong_type_bool_as_i64", [] { B({2}).to_vector<int64_t>(); },
        {"to_vector<int64_t>", "bool", "uint8_t"});
  entry("item_of_many", [] { F({2, 2}).item<float>(); }, {"item", "[2,2]"});
  entry("item_of_none", [] { F({0}).item<float>(); }, {"item", "[0]"});
  entry("item_wrong_type", [] { F({1}).item<int32_t>(); }, {"item<int32_t>", "f32", "item<float>"});
  entry("requires_grad_on_int", [] { I({2}).requires_grad_(); }, {"i32", "grad"});
  entry("requires_grad_on_bool", [] { B({2}).requires_grad_(); }, {"bool", "grad"});
  entry("backward_without_grad", [] { F({1}).backward(); }, {"grad"});
  entry("backward_of_many", [] { (F({3}).requires_grad_() * 2).backward(); }, {"[3]"});
  entry("backward_gradient_shape", [] { (F({3}).requires_grad_() * 2).backward(F({4})); },
        {"[3]", "[4]"});

  // ---- Elementwise ops: shapes that do not broadcast, for every binary op and both devices.
  const std::vector<std::pair<const char*, Binary>> binaries = {{"add", static_cast<Binary>(add)},
                                                                {"sub", sub},
                                                                {"mul", mul},
                                                                {"div", div},
                                                                {"maximum", maximum},
                                                                {"minimum", minimum},
                                                                {"pow", static_cast<Binary>(pow)},
                                                                {"lt", lt},
                                                                {"le", le},
                                                                {"gt", gt},
                                                                {"ge", ge},
                                                                {"eq", eq},
                                                                {"ne", ne}};
  for (const auto& [name, f] : binaries) {
    for (Device d : {kCl, kHost}) {
      entry(std::string(name) + "_no_broadcast" + (d.is_host() ? "_host" : "_cl"),
            [f = f, d] {
              f(F({2, 3}, d), F({4, 3}, d));
            },
            {name, "[2,3]", "[4,3]"});
    }
  }
  const std::vector<std::pair<const char*, Unary>> unaries = {
      {"exp", exp},         {"log", log},   {"sqrt", sqrt}, {"tanh", tanh},
      {"sigmoid", sigmoid}, {"relu", relu}, {"abs", abs},   {"sin", sin},
      {"cos", cos},         {"erf", erf},   {"neg", neg}};
  for (const auto& [name, f] : unaries) {
    entry(std::string(name) + "_undefined", [f = f] { f(Tensor()); }, {name, "undefined"});
  }
  // exp, log, ... of bool compute in f32 as PyTorch does; relu and abs refuse bool, as PyTorch.
  entry("relu_on_bool", [] { relu(B({2})); }, {"relu", "bool"});
  entry("abs_on_bool", [] { abs(B({2})); }, {"abs", "bool"});
  entry("where_cond_not_bool", [] { where(F({2}), F({2}), F({2})); }, {"where", "f32"});
  entry("where_shapes", [] { where(B({2}), F({3}), F({2})); }, {"where", "[3]"});
  entry("where_scalar_shapes", [] { where(B({2, 2}), F({3}), 1.0); }, {"where", "[3]"});
  entry("i32_plus_huge_scalar", [] { I({2}) + 3e9; }, {"3000000000", "i32"});
  entry("i32_times_huge_scalar", [] { I({2}) * -1e12; }, {"i32"});

  // ---- Reductions.
  for (const char* name : {"sum", "mean", "max"}) {
    auto f = std::string(name) == "sum"
                 ? +[](const Tensor& x, std::vector<int64_t> d) { return sum(x, d); }
             : std::string(name) == "mean"
                 ? +[](const Tensor& x, std::vector<int64_t> d) { return mean(x, d); }
                 : +[](const Tensor& x, std::vector<int64_t> d) { return max(x, d); };
    entry(std::string(name) + "_dim_out_of_range",
          [f] {
            f(F({2, 3}), {2});
          },
          {name, "dim 2", "rank 2"});
    entry(std::string(name) + "_negative_dim_out_of_range",
          [f] {
            f(F({2, 3}), {-3});
          },
          {name, "dim -3", "rank 2"});
    entry(std::string(name) + "_repeated_dim", [f] { f(F({2, 3}), {1, -1}); }, {name, "repeat"});
    entry(std::string(name) + "_undefined", [f] { f(Tensor(), {}); }, {name, "undefined"});
  }
  entry("max_of_empty", [] { max(F({0, 3}), {0}); }, {"max", "[0,3]"});
  entry("max_of_empty_all", [] { max(F({2, 0})); }, {"max", "[2,0]"});
  entry("softmax_dim_out_of_range", [] { softmax(F({2, 3}), 2); }, {"softmax", "2"});
  entry("log_softmax_dim_out_of_range", [] { log_softmax(F({2, 3}), -3); }, {"log_softmax", "-3"});
  entry("softmax_of_rank0", [] { softmax(F({}), 0); }, {"softmax"});

  // ---- Matmul.
  entry("matmul_inner", [] { matmul(F({2, 3}), F({4, 5})); }, {"matmul", "[2,3]", "[4,5]"});
  entry("matmul_rank1_left", [] { matmul(F({3}), F({3, 2})); }, {"matmul", "[3]"});
  entry("matmul_rank1_right", [] { matmul(F({2, 3}), F({3})); }, {"matmul", "[3]"});
  entry("matmul_rank0", [] { matmul(F({}), F({})); }, {"matmul", "[]"});
  entry("matmul_batch",
        [] {
          matmul(F({2, 4, 3}), F({3, 3, 5}));
        },
        {"matmul", "[2,4,3]", "[3,3,5]", "batch"});
  entry("matmul_bool", [] { matmul(B({2, 2}), B({2, 2})); }, {"matmul", "bool"});
  entry("matmul_inner_host",
        [] {
          matmul(F({2, 3}, kHost), F({2, 3}, kHost));
        },
        {"matmul", "[2,3]"});

  // ---- Views.
  entry("reshape_count", [] { reshape(F({2, 3}), {4, 2}); }, {"reshape", "[2,3]", "[4,2]"});
  entry("reshape_two_inferred", [] { reshape(F({2, 3}), {-1, -1}); }, {"reshape", "-1"});
  entry("reshape_inferred_not_divisible",
        [] {
          reshape(F({2, 3}), {-1, 4});
        },
        {"reshape", "[2,3]"});
  entry("reshape_negative", [] { reshape(F({2, 3}), {-2, -3}); }, {"reshape", "-2"});
  entry("reshape_overflow", [] { reshape(F({7}), {7, 7905747460161236407, 6}); }, {"reshape"});
  entry("reshape_inferred_from_zero", [] { reshape(F({0, 3}), {-1, 0}); }, {"reshape", "-1"});
  entry("transpose_dim", [] { transpose(F({2, 3}), 0, 2); }, {"transpose", "2"});
  entry("transpose_negative_dim", [] { transpose(F({2, 3}), -3, 0); }, {"transpose", "-3"});
  entry("permute_length", [] { permute(F({2, 3}), {0}); }, {"permute", "rank 2"});
  entry("permute_repeated", [] { permute(F({2, 3}), {0, 0}); }, {"permute", "0"});
  entry("permute_out_of_range", [] { permute(F({2, 3}), {0, 5}); }, {"permute", "5"});
  entry("broadcast_to_incompatible",
        [] {
          broadcast_to(F({2, 3}), {2, 4});
        },
        {"broadcast", "[2,3]", "[2,4]"});
  entry("broadcast_to_fewer_dims", [] { broadcast_to(F({2, 3}), {3}); }, {"broadcast", "[2,3]"});
  entry("broadcast_to_negative", [] { broadcast_to(F({1}), {-4}); }, {"broadcast", "-4"});
  entry("broadcast_to_overflow", [] { broadcast_to(F({1, 1}), {kBig, kBig}); }, {"overflow"});
  entry("slice_dim", [] { slice(F({2, 3}), 2, 0, 1); }, {"slice", "2"});
  entry("slice_negative_dim", [] { slice(F({2, 3}), -3, 0, 1); }, {"slice", "-3"});
  entry("unsqueeze_dim", [] { unsqueeze(F({2, 3}), 4); }, {"unsqueeze", "4"});
  entry("unsqueeze_negative_dim", [] { unsqueeze(F({2, 3}), -5); }, {"unsqueeze", "-5"});
  entry("squeeze_not_one", [] { squeeze(F({2, 3}), 1); }, {"squeeze", "[2,3]"});
  entry("squeeze_dim", [] { squeeze(F({2, 1}), 3); }, {"squeeze", "3"});
  entry("cat_empty", [] { cat({}, 0); }, {"cat"});
  entry("cat_rank", [] { cat({F({2, 3}), F({3})}, 0); }, {"cat", "[3]"});
  entry("cat_dims", [] { cat({F({2, 3}), F({2, 4})}, 0); }, {"cat", "[2,4]", "[2,3]"});
  entry("cat_dim_out_of_range", [] { cat({F({2}), F({2})}, 1); }, {"cat", "1"});
  entry("cat_rank0", [] { cat({F({}), F({})}, 0); }, {"cat", "rank-0"});
  entry("cat_undefined", [] { cat({F({2}), Tensor()}, 0); }, {"cat", "undefined"});
  entry("stack_shapes", [] { stack({F({2}), F({3})}, 0); }, {"stack", "[3]"});
  entry("stack_empty", [] { stack({}, 0); }, {"stack"});
  entry("stack_dim", [] { stack({F({2}), F({2})}, 3); }, {"stack", "3"});
  entry("cast_undefined", [] { cast(Tensor(), DType::f32); }, {"cast", "undefined"});

  // ---- Autograd.
  entry("grad_loss_without_grad", [] { grad(F({1}), {F({1})}); }, {"grad"});
  entry("grad_wrt_without_grad",
        [] {
          Tensor x = F({2}).requires_grad_();
          grad(sum(x), {F({2})});
        },
        {"grad"});
  entry("grad_wrt_not_in_graph",
        [] {
          Tensor x = F({2}).requires_grad_();
          Tensor y = F({2}).requires_grad_();
          grad(sum(x), {y});
        },
        {"not in the graph"});
  entry("grad_loss_of_many",
        [] {
          Tensor x = F({2}).requires_grad_();
          grad(x * 2, {x});
        },
        {"f32[2]", "not a scalar"});
  entry("grad_output_shape",
        [] {
          Tensor x = F({2}).requires_grad_();
          grad(x * 2, {x}, F({3}));
        },
        {"[2]", "[3]"});
  entry("grad_undefined_wrt",
        [] {
          Tensor x = F({2}).requires_grad_();
          grad(sum(x), {Tensor()});
        },
        {"undefined"});

  // ---- trace, call and scan.
  auto identity = [](const std::vector<Tensor>& a) { return a; };
  entry("trace_call_arity",
        [identity] {
          trace(identity, {{{2}, DType::f32}}, kCl)({F({2}), F({2})});
        },
        {"2", "1"});
  entry("trace_call_shape",
        [identity] {
          trace(identity, {{{2}, DType::f32}}, kCl)({F({3})});
        },
        {"[2]", "[3]"});
  entry("trace_call_dtype",
        [identity] {
          trace(identity, {{{2}, DType::f32}}, kCl)({I({2})});
        },
        {"f32", "i32"});
  entry("trace_on_host",
        [identity] {
          trace(identity, {{{2}, DType::f32}}, kHost);
        },
        {"trace", "host"});
  entry("trace_negative_shape",
        [identity] {
          trace(identity, {{{-2}, DType::f32}}, kCl);
        },
        {"[-2]"});
  entry("trace_body_indexes_past_args",
        [] {
          trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a.at(3)}; },
                {{{2}, DType::f32}}, kCl);
        },
        {"trace"});
  entry("trace_body_throws_error",
        [] {
          trace([](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] + F({3})}; },
                {{{2}, DType::f32}}, kCl);
        },
        {"add", "[2]", "[3]"});
  entry("call_body_shape_error",
        [] {
          call([](const std::vector<Tensor>& a) { return std::vector<Tensor>{matmul(a[0], a[0])}; },
               {F({2, 3})});
        },
        {"matmul", "[2,3]"});
  auto step = [](const std::vector<Tensor>& carry, const std::vector<Tensor>& x) {
    return std::make_pair(std::vector<Tensor>{carry[0] + x[0]}, std::vector<Tensor>{x[0]});
  };
  entry("scan_xs_length", [step] { scan(step, {F({2})}, {F({3, 2}), F({4, 2})}); }, {"scan"});
  entry("scan_carry_shape_changes",
        [] {
          scan(
              [](const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
                return std::make_pair(std::vector<Tensor>{unsqueeze(c[0], 0)},
                                      std::vector<Tensor>{x[0]});
              },
              {F({2})}, {F({3, 2})});
        },
        {"carry", "[2]"});
  entry("scan_carry_count_changes",
        [] {
          scan(
              [](const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
                return std::make_pair(std::vector<Tensor>{c[0], c[0]}, std::vector<Tensor>{x[0]});
              },
              {F({2})}, {F({3, 2})});
        },
        {"carry"});
  entry("scan_rank0_xs", [step] { scan(step, {F({})}, {F({})}); }, {"scan"});
  entry("scan_body_throws",
        [] {
          scan(
              [](const std::vector<Tensor>& c, const std::vector<Tensor>& x) {
                return std::make_pair(std::vector<Tensor>{c[0] + x[0]},
                                      std::vector<Tensor>{matmul(x[0], x[0])});
              },
              {F({2})}, {F({3, 2})});
        },
        {"matmul"});
  entry("scan_undefined_init", [step] { scan(step, {Tensor()}, {F({3, 2})}); }, {"undefined"});
  // ---- nn.
  entry("linear_shapes", [] { nn::linear(F({2, 3}), F({4, 5})); }, {"linear", "[2,3]", "[4,5]"});
  entry("linear_bias", [] { nn::linear(F({2, 3}), F({4, 3}), F({5})); }, {"linear", "bias", "[5]"});
  entry("rms_norm_weight", [] { nn::rms_norm(F({2, 3}), F({4}), 1e-6); }, {"rms_norm", "[4]"});
  entry("rms_norm_int", [] { nn::rms_norm(I({2, 3}), F({3}), 1e-6); }, {"rms_norm", "i32"});
  entry("layer_norm_bias",
        [] {
          nn::layer_norm(F({2, 3}), F({3}), F({2}));
        },
        {"layer_norm", "bias", "[2]"});
  entry("layer_norm_negative_eps",
        [] {
          nn::layer_norm(F({2, 3}), {}, {}, -1);
        },
        {"layer_norm", "eps", "-1"});
  entry("cross_entropy_float_labels",
        [] {
          nn::cross_entropy(F({4, 3}), F({4}));
        },
        {"cross_entropy", "labels", "f32[4]"});
  entry("cross_entropy_label_shape",
        [] {
          nn::cross_entropy(F({4, 3}), I({3}));
        },
        {"cross_entropy", "i32[3]", "[4]"});
  entry("cross_entropy_rank1_logits", [] { nn::cross_entropy(F({4}), I({4})); },
        {"cross_entropy", "f32[4]"});
  entry("sdpa_shapes",
        [] {
          nn::scaled_dot_product_attention(F({2, 3, 4}), F({2, 5, 3}), F({2, 5, 4}));
        },
        {"scaled_dot_product_attention", "[2,3,4]", "[2,5,3]"});
  entry("sdpa_int",
        [] {
          nn::scaled_dot_product_attention(I({3, 4}), F({3, 4}), F({3, 4}));
        },
        {"scaled_dot_product_attention", "i32"});
  entry("dropout_p", [] { nn::dropout(F({3}), 1.5, 1); }, {"dropout", "1.5"});
  entry("dropout_nan_p", [] { nn::dropout(F({3}), std::nan(""), 1); }, {"dropout", "nan"});
  entry("embedding_float_ids", [] { nn::embedding(F({5, 3}), F({2})); }, {"embedding", "f32[2]"});
  entry("embedding_weight_rank", [] { nn::embedding(F({5}), I({2})); }, {"embedding", "[5]"});
  entry("gather_float_index", [] { gather(F({3, 4}), 1, F({3, 2})); }, {"gather", "f32"});
  entry("gather_rank", [] { gather(F({3, 4}), 1, I({3})); }, {"gather", "[3]"});
  entry("gather_dim", [] { gather(F({3, 4}), 2, I({3, 4})); }, {"gather", "2"});
  entry("index_select_2d_ids",
        [] {
          index_select(F({3, 4}), 0, I({2, 2}));
        },
        {"index_select", "[2,2]"});
  entry("scatter_add_dtype", [] { scatter_add(F({3}), 0, I({2}), I({2})); }, {"scatter_add"});
  entry("one_hot_negative_classes", [] { one_hot(I({3}), -2); }, {"one_hot", "-2"});
  return c;
}

class Catalogue : public ::testing::TestWithParam<size_t> {};

TEST_P(Catalogue, ThrowsAClearError) {
  const std::vector<Bad> entries = Entries();
  const Bad& bad = entries[GetParam()];
  // Settle the device's own state (first use, pools) before taking the level.
  (F({3}) * 2).to_vector<float>();
  const int64_t live = metrics::counter("DeviceLiveBytes");
  std::string message;
  try {
    bad.call();
    ADD_FAILURE() << bad.name << ": no lazycl::Error; expected one naming "
                  << testing::PrintToString(bad.words);
  } catch (const Error& e) {
    message = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << bad.name << ": a " << typeid(e).name() << " escaped (" << e.what()
                  << "), not a lazycl::Error";
  }
  for (const std::string& w : bad.words) {
    EXPECT_NE(message.find(w), std::string::npos)
        << bad.name << ": missing \"" << w << "\" in: " << message;
  }
  for (Device d : {kCl, kHost}) {
    Tensor x = tensor(std::vector<float>{1, 2, 3}, {3}, d);
    EXPECT_EQ((x * 2 + 1).to_vector<float>(), (std::vector<float>{3, 5, 7}))
        << "after " << bad.name;
  }
  empty_cache();
  EXPECT_LE(metrics::counter("DeviceLiveBytes"), live) << "after " << bad.name;
}

INSTANTIATE_TEST_SUITE_P(BadInput, Catalogue, ::testing::Range<size_t>(0, Entries().size()),
                         [](const auto& info) {
                           std::string name = Entries()[info.param].name;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(BadInputCatalogue, HasAtLeast150Entries) { EXPECT_GE(Entries().size(), 150u); }

}  // namespace
}  // namespace lazycl
