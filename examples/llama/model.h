#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lazycl/lazycl.h"

// A Llama-style decoder-only language model written against lazycl's public API: token
// embedding; N decoder layers (RMSNorm, rotary embeddings, causal multi-head attention with
// grouped key/value heads, RMSNorm, SwiGLU feed-forward) whose weights are stacked along a
// leading layer dim and applied with `scan` (traced and compiled once, whatever N); a final
// RMSNorm and an output head. Used by examples/char_lm.cpp, its tests, the JAX oracle test and
// `lazycl-bench transfer --model llama`. Linear weights are stored [in, out] (x @ W), as in JAX.
namespace lazycl::examples {

struct LlamaConfig {
  int64_t vocab = 256;
  int64_t dim = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t ffn = 172;
  int64_t seq = 64;  // the context length: the rotary tables cover positions [0, seq)
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  DType dtype = DType::f32;

  int64_t head_dim() const { return dim / heads; }
  // Throws lazycl::Error naming the field when the sizes do not fit together.
  void Validate() const;
  // Number of parameters (elements) of the model.
  int64_t num_parameters() const;
};

// One decoder layer's weights, or all layers' stacked along a leading dim of size `layers`.
struct LlamaLayer {
  Tensor attn_norm;  // [D]
  Tensor wq;         // [D, H * hd]
  Tensor wk;         // [D, KVH * hd]
  Tensor wv;         // [D, KVH * hd]
  Tensor wo;         // [H * hd, D]
  Tensor ffn_norm;   // [D]
  Tensor w1;         // [D, F] (gate)
  Tensor w3;         // [D, F] (up)
  Tensor w2;         // [F, D] (down)

  std::vector<Tensor> list() const;
  static LlamaLayer FromList(const std::vector<Tensor>& tensors);  // in list() order
};

struct LlamaParams {
  Tensor tok_embeddings;  // [V, D]
  LlamaLayer layers;      // each [L, ...]
  Tensor norm;            // [D]
  Tensor output;          // [D, V]

  // Every parameter, in a fixed order (the order of names()).
  std::vector<Tensor> list() const;
  static const std::vector<std::string>& names();
  static LlamaParams FromList(const std::vector<Tensor>& list);  // in list() order
  std::map<std::string, Tensor> named() const;
  // From a checkpoint's tensors (load_safetensors): Error naming the missing tensor or the
  // one whose shape or dtype does not match `config`.
  static LlamaParams FromNamed(const std::map<std::string, Tensor>& named,
                               const LlamaConfig& config);
  // Leaves that require grad (for training).
  void requires_grad_();
};

// Weights ~ N(0, 0.02^2) (the output head and wo/w2 scaled by 1/sqrt(2L), as GPT-2), norms 1.
LlamaParams InitLlama(const LlamaConfig& config, uint64_t seed, Device device);
// Every parameter a placeholder: shapes and dtypes, no memory (for tracing at any scale).
LlamaParams PlaceholderLlama(const LlamaConfig& config, Device device, bool requires_grad);

// cos and sin of the rotary angles, [T, hd / 2] f32 each, computed on `device` from arange (no
// upload): angle(t, i) = t * theta^(-2i / hd).
std::pair<Tensor, Tensor> RopeTables(const LlamaConfig& config, int64_t positions, Device device);

// One decoder layer on h [B, T, D] with one layer's weights.
Tensor DecoderLayer(const LlamaConfig& config, const Tensor& h, const LlamaLayer& layer,
                    const Tensor& cos, const Tensor& sin);

// How the stacked layers are applied: scan (one traced body) or a C++ loop over slices.
enum class LayerLoop { kScan, kForLoop };

// Logits [B, T, V] of ids [B, T] (i32), T <= config.seq. `scan_options` applies to kScan
// (lazycl-bench transfer traces the body on materialized inputs through it).
Tensor LlamaForward(const LlamaConfig& config, const LlamaParams& params, const Tensor& ids,
                    LayerLoop loop = LayerLoop::kScan, ScanOptions scan_options = {});
// Mean cross-entropy of predicting targets [B, T] from ids [B, T].
Tensor LlamaLoss(const LlamaConfig& config, const LlamaParams& params, const Tensor& ids,
                 const Tensor& targets, LayerLoop loop = LayerLoop::kScan,
                 ScanOptions scan_options = {});

// The model of examples/char_lm.cpp (and of lazycl-bench models' charlm rows): bytes as tokens
// (vocabulary 256), D 128, 4 layers, 4 heads with 2 key/value heads, FFN 352, context 64.
LlamaConfig CharLmConfig();

// Llama 3 405B's shapes (D 16384, 128 heads with 8 key/value heads, FFN 53248, 126 layers,
// vocabulary 128256, sequence 8192) in `dtype`.
LlamaConfig Llama405BConfig(DType dtype);

// One step of the layer scan, forward and backward, traced with `trace` on placeholders: the
// body that scan traces (one decoder layer on the carry h [batch, seq, D], with one layer's
// weights and the rotary tables) and its vector-Jacobian product (the body of the backward
// scan). Arguments: h, the layer's 9 weights (LlamaLayer::list() order), cos, sin, and the
// cotangent of the layer's output; results: the output, then the gradients of h and the 9
// weights. Nothing is allocated or moved.
Function TraceLlamaLayerStep(const LlamaConfig& config, int64_t batch, Device device);

// What `scan_materialized` (ScanOptions::trace_on_materialized_inputs) uploads at each forward
// call of the layer scan for this model: one layer's slice of every stacked weight and the carry
// [batch, seq, D], in bytes (tensors the body captures, such as the rotary tables, are bound to
// the real tensors).
int64_t MaterializedScanUploadBytes(const LlamaConfig& config, int64_t batch);

}  // namespace lazycl::examples
