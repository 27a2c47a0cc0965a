#include "examples/llama/model.h"

#include <cmath>
#include <string>
#include <utility>

namespace lazycl::examples {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void Require(bool ok, const std::string& what) {
  if (!ok) throw Error("LlamaConfig: " + what);
}

// Every parameter's shape, in LlamaParams::names() order.
std::vector<std::vector<int64_t>> Shapes(const LlamaConfig& c) {
  const int64_t l = c.layers, d = c.dim, q = c.heads * c.head_dim(), kv = c.kv_heads * c.head_dim();
  return {{c.vocab, d}, {l, d},        {l, d, q},     {l, d, kv},    {l, d, kv}, {l, q, d},
          {l, d},       {l, d, c.ffn}, {l, d, c.ffn}, {l, c.ffn, d}, {d},        {d, c.vocab}};
}

// Rotates the pairs (x[i], x[i + hd/2]) of the last dim of x [B, H, T, hd] by the angles of
// cos/sin [T, hd/2] (the "rotate half" layout of Hugging Face's Llama).
Tensor ApplyRope(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  const int64_t hd = x.shape().back(), half = hd / 2;
  Tensor x1 = slice(x, -1, 0, half);
  Tensor x2 = slice(x, -1, half, hd);
  return cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
}

// [B, T, n * hd] -> [B, n, T, hd]
Tensor SplitHeads(const Tensor& x, int64_t n, int64_t hd) {
  const std::vector<int64_t> s = x.shape();
  return transpose(reshape(x, {s[0], s[1], n, hd}), 1, 2);
}

// Key/value heads [B, KVH, T, hd] repeated to [B, H, T, hd] (grouped-query attention).
Tensor RepeatHeads(const Tensor& x, int64_t heads) {
  const std::vector<int64_t> s = x.shape();
  if (s[1] == heads) return x;
  const int64_t rep = heads / s[1];
  return reshape(broadcast_to(unsqueeze(x, 2), {s[0], s[1], rep, s[2], s[3]}),
                 {s[0], heads, s[2], s[3]});
}

}  // namespace

void LlamaConfig::Validate() const {
  Require(vocab > 0 && dim > 0 && layers > 0 && heads > 0 && kv_heads > 0 && ffn > 0 && seq > 0,
          "every size must be positive (vocab " + std::to_string(vocab) + ", dim " +
              std::to_string(dim) + ", layers " + std::to_string(layers) + ", heads " +
              std::to_string(heads) + ", kv_heads " + std::to_string(kv_heads) + ", ffn " +
              std::to_string(ffn) + ", seq " + std::to_string(seq) + ")");
  Require(dim % heads == 0,
          "dim " + std::to_string(dim) + " is not a multiple of heads " + std::to_string(heads));
  Require(head_dim() % 2 == 0,
          "the head dim " + std::to_string(head_dim()) + " must be even for rotary embeddings");
  Require(heads % kv_heads == 0, "heads " + std::to_string(heads) +
                                     " is not a multiple of kv_heads " + std::to_string(kv_heads));
  Require(is_floating(dtype), std::string("dtype ") + dtype_name(dtype) + " is not floating");
}

int64_t LlamaConfig::num_parameters() const {
  int64_t n = 0;
  for (const auto& shape : Shapes(*this)) {
    int64_t e = 1;
    for (int64_t d : shape) e *= d;
    n += e;
  }
  return n;
}

std::vector<Tensor> LlamaLayer::list() const {
  return {attn_norm, wq, wk, wv, wo, ffn_norm, w1, w3, w2};
}

LlamaLayer LlamaLayer::FromList(const std::vector<Tensor>& t) {
  if (t.size() != 9) throw Error("LlamaLayer: expected 9 tensors, got " + std::to_string(t.size()));
  return {t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8]};
}

std::vector<Tensor> LlamaParams::list() const {
  std::vector<Tensor> all = {tok_embeddings};
  for (const Tensor& t : layers.list()) all.push_back(t);
  all.push_back(norm);
  all.push_back(output);
  return all;
}

const std::vector<std::string>& LlamaParams::names() {
  static const std::vector<std::string> kNames = {"tok_embeddings.weight",
                                                  "layers.attention_norm.weight",
                                                  "layers.attention.wq.weight",
                                                  "layers.attention.wk.weight",
                                                  "layers.attention.wv.weight",
                                                  "layers.attention.wo.weight",
                                                  "layers.ffn_norm.weight",
                                                  "layers.feed_forward.w1.weight",
                                                  "layers.feed_forward.w3.weight",
                                                  "layers.feed_forward.w2.weight",
                                                  "norm.weight",
                                                  "output.weight"};
  return kNames;
}

std::map<std::string, Tensor> LlamaParams::named() const {
  std::map<std::string, Tensor> named;
  const std::vector<Tensor> all = list();
  for (size_t i = 0; i < all.size(); ++i) named[names()[i]] = all[i];
  return named;
}

LlamaParams LlamaParams::FromList(const std::vector<Tensor>& t) {
  if (t.size() != 12)
    throw Error("LlamaParams: expected 12 tensors, got " + std::to_string(t.size()));
  LlamaParams p;
  p.tok_embeddings = t[0];
  p.layers = LlamaLayer::FromList(std::vector<Tensor>(t.begin() + 1, t.begin() + 10));
  p.norm = t[10];
  p.output = t[11];
  return p;
}

LlamaParams LlamaParams::FromNamed(const std::map<std::string, Tensor>& named,
                                   const LlamaConfig& config) {
  config.Validate();
  const auto shapes = Shapes(config);
  std::vector<Tensor> list;
  for (size_t i = 0; i < names().size(); ++i) {
    auto it = named.find(names()[i]);
    if (it == named.end()) throw Error("Llama checkpoint: no tensor named '" + names()[i] + "'");
    const Tensor& t = it->second;
    if (t.shape() != shapes[i] || t.dtype() != config.dtype) {
      throw Error("Llama checkpoint: tensor '" + names()[i] + "' is " + dtype_name(t.dtype()) +
                  ShapeText(t.shape()) + ", expected " + dtype_name(config.dtype) +
                  ShapeText(shapes[i]));
    }
    list.push_back(t);
  }
  return LlamaParams::FromList(list);
}

void LlamaParams::requires_grad_() {
  for (Tensor t : list()) t.requires_grad_();  // handles share the parameter's TensorImpl
}

LlamaParams InitLlama(const LlamaConfig& config, uint64_t seed, Device device) {
  config.Validate();
  const auto shapes = Shapes(config);
  const double residual_scale = 1.0 / std::sqrt(2.0 * static_cast<double>(config.layers));
  std::vector<Tensor> list;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string& name = LlamaParams::names()[i];
    if (name.find("norm") != std::string::npos) {
      list.push_back(ones(shapes[i], config.dtype, device));
      continue;
    }
    double scale = 0.02;
    if (name.find("wo") != std::string::npos || name.find("w2") != std::string::npos) {
      scale *= residual_scale;
    }
    list.push_back(cast(randn(shapes[i], seed + i, DType::f32, device) * scale, config.dtype));
  }
  // Computed now, so each is a leaf holding data rather than a pending product.
  sync(list);
  std::vector<Tensor> leaves;
  for (const Tensor& t : list) leaves.push_back(t.detach());
  return LlamaParams::FromList(leaves);
}

LlamaParams PlaceholderLlama(const LlamaConfig& config, Device device, bool requires_grad) {
  config.Validate();
  std::vector<Tensor> list;
  for (const auto& shape : Shapes(config)) {
    list.push_back(placeholder(shape, config.dtype, device, requires_grad));
  }
  return LlamaParams::FromList(list);
}

std::pair<Tensor, Tensor> RopeTables(const LlamaConfig& config, int64_t positions, Device device) {
  const int64_t hd = config.head_dim(), half = hd / 2;
  const double step = -2.0 * std::log(config.rope_theta) / static_cast<double>(hd);
  Tensor inv_freq = exp(cast(arange(half, DType::i32, device), DType::f32) * step);
  Tensor pos = cast(arange(positions, DType::i32, device), DType::f32);
  Tensor angles = reshape(pos, {positions, 1}) * reshape(inv_freq, {1, half});
  return {cos(angles), sin(angles)};
}

Tensor DecoderLayer(const LlamaConfig& c, const Tensor& h, const LlamaLayer& w, const Tensor& cos,
                    const Tensor& sin) {
  const int64_t b = h.shape()[0], t = h.shape()[1], hd = c.head_dim();
  Tensor x = nn::rms_norm(h, w.attn_norm, c.norm_eps);
  // The tables are f32; a bf16 or f16 model rotates in its own dtype.
  const Tensor cos_x = cast(cos, c.dtype), sin_x = cast(sin, c.dtype);
  Tensor q = ApplyRope(SplitHeads(matmul(x, w.wq), c.heads, hd), cos_x, sin_x);
  Tensor k = ApplyRope(SplitHeads(matmul(x, w.wk), c.kv_heads, hd), cos_x, sin_x);
  Tensor v = SplitHeads(matmul(x, w.wv), c.kv_heads, hd);
  Tensor a = nn::scaled_dot_product_attention(q, RepeatHeads(k, c.heads), RepeatHeads(v, c.heads),
                                              /*causal=*/true);
  Tensor h2 = h + matmul(reshape(transpose(a, 1, 2), {b, t, c.heads * hd}), w.wo);
  Tensor y = nn::rms_norm(h2, w.ffn_norm, c.norm_eps);
  return h2 + matmul(silu(matmul(y, w.w1)) * matmul(y, w.w3), w.w2);
}

Tensor LlamaForward(const LlamaConfig& c, const LlamaParams& p, const Tensor& ids, LayerLoop loop,
                    ScanOptions scan_options) {
  c.Validate();
  const std::vector<int64_t> s = ids.shape();
  if (s.size() != 2 || s[1] > c.seq) {
    throw Error("LlamaForward: ids must be [batch, T] with T <= seq " + std::to_string(c.seq) +
                ", got " + ShapeText(s));
  }
  // On the parameters' device: ids on the host (a window a sampling loop builds there) made
  // host tables, uploaded into every layer of every call (4.4 ms a token instead of 0.1).
  auto [cos, sin] = RopeTables(c, s[1], p.tok_embeddings.device());
  Tensor h = nn::embedding(p.tok_embeddings, ids);
  if (loop == LayerLoop::kScan) {
    ScanFn body = [&c, &cos, &sin](const std::vector<Tensor>& carry,
                                   const std::vector<Tensor>& layer) {
      return std::make_pair(
          std::vector<Tensor>{DecoderLayer(c, carry[0], LlamaLayer::FromList(layer), cos, sin)},
          std::vector<Tensor>{});
    };
    h = scan(body, {h}, p.layers.list(), scan_options).carry[0];
  } else {
    const std::vector<Tensor> stacked = p.layers.list();
    for (int64_t l = 0; l < c.layers; ++l) {
      std::vector<Tensor> layer;
      for (const Tensor& t : stacked) layer.push_back(squeeze(slice(t, 0, l, l + 1), 0));
      h = DecoderLayer(c, h, LlamaLayer::FromList(layer), cos, sin);
    }
  }
  return matmul(nn::rms_norm(h, p.norm, c.norm_eps), p.output);
}

Tensor LlamaLoss(const LlamaConfig& c, const LlamaParams& p, const Tensor& ids,
                 const Tensor& targets, LayerLoop loop, ScanOptions scan_options) {
  Tensor logits = LlamaForward(c, p, ids, loop, scan_options);
  const int64_t n = ids.shape()[0] * ids.shape()[1];
  return nn::cross_entropy(reshape(logits, {n, c.vocab}), reshape(targets, {n}));
}

LlamaConfig CharLmConfig() {
  LlamaConfig c;
  c.vocab = 256;
  c.dim = 128;
  c.layers = 4;
  c.heads = 4;
  c.kv_heads = 2;
  c.ffn = 352;
  c.seq = 64;
  return c;
}

LlamaConfig Llama405BConfig(DType dtype) {
  LlamaConfig c;
  c.vocab = 128256;
  c.dim = 16384;
  c.layers = 126;
  c.heads = 128;
  c.kv_heads = 8;
  c.ffn = 53248;
  c.seq = 8192;
  c.rope_theta = 500000.0;
  c.dtype = dtype;
  return c;
}

Function TraceLlamaLayerStep(const LlamaConfig& c, int64_t batch, Device device) {
  c.Validate();
  const auto shapes = Shapes(c);
  const std::vector<int64_t> h = {batch, c.seq, c.dim};
  std::vector<TensorSpec> specs = {{h, c.dtype}};
  for (size_t i = 1; i <= 9; ++i) {
    specs.push_back({std::vector<int64_t>(shapes[i].begin() + 1, shapes[i].end()), c.dtype});
  }
  specs.push_back({{c.seq, c.head_dim() / 2}, DType::f32});
  specs.push_back({{c.seq, c.head_dim() / 2}, DType::f32});
  specs.push_back({h, c.dtype});
  Fn step = [c](const std::vector<Tensor>& args) {
    std::vector<Tensor> wrt(args.begin(), args.begin() + 10);
    for (Tensor& t : wrt) t.requires_grad_();
    const LlamaLayer layer = LlamaLayer::FromList(std::vector<Tensor>(wrt.begin() + 1, wrt.end()));
    Tensor out = DecoderLayer(c, wrt[0], layer, args[10], args[11]);
    std::vector<Tensor> results = {out};
    for (const Tensor& g : grad(out, wrt, args[12])) results.push_back(g);
    return results;
  };
  return trace(step, specs, device);
}

int64_t MaterializedScanUploadBytes(const LlamaConfig& c, int64_t batch) {
  const auto shapes = Shapes(c);
  int64_t elements = 0;
  for (size_t i = 1; i <= 9; ++i) {  // the stacked layer weights, one layer's slice each
    int64_t n = 1;
    for (size_t d = 1; d < shapes[i].size(); ++d) n *= shapes[i][d];
    elements += n;
  }
  elements += batch * c.seq * c.dim;  // the carry
  // The rotary tables the body captures are bound to the real tensors: not uploaded again.
  return elements * static_cast<int64_t>(dtype_size(c.dtype));
}

}  // namespace lazycl::examples
