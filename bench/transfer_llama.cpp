// lazycl-bench transfer --model llama: the transfer benchmark's three strategies on the decoder
// layers of the Llama-style example model (examples/llama/model.h).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/transfer.h"
#include "examples/llama/model.h"

namespace lazycl::bench {
namespace {

constexpr DType kLlama405BDtype = DType::bf16;

examples::LlamaConfig ConfigOf(const Model& m) {
  examples::LlamaConfig c;
  c.vocab = 256;
  c.dim = m.hidden;
  c.layers = m.layers;
  c.heads = m.hidden % 32 == 0 ? m.hidden / 32 : 1;
  c.kv_heads = c.heads % 2 == 0 ? c.heads / 2 : c.heads;
  c.ffn = (8 * m.hidden / 3 + 31) / 32 * 32;
  c.seq = m.seq;
  return c;
}

class LlamaWorkload : public Workload {
 public:
  explicit LlamaWorkload(const Model& m) : m_(m), config_(ConfigOf(m)) { config_.Validate(); }

  void Setup(Device device) override {
    device_ = device;
    const examples::LlamaParams host = examples::InitLlama(config_, 1, Device::host());
    std::vector<Tensor> on_device;
    for (const Tensor& t : host.list()) on_device.push_back(t.to(device));
    params_ = examples::LlamaParams::FromList(on_device);
  }

  std::vector<float> Step(const std::string& strategy, int64_t step) override {
    Tensor ids = Tokens(step, 0);
    const examples::LayerLoop loop =
        strategy == "for_loop" ? examples::LayerLoop::kForLoop : examples::LayerLoop::kScan;
    ScanOptions options;
    options.trace_on_materialized_inputs = strategy == "scan_materialized";
    if (!m_.train) {
      return examples::LlamaForward(config_, params_, ids, loop, options).to_vector<float>();
    }
    params_.requires_grad_();
    Tensor loss = examples::LlamaLoss(config_, params_, ids, Tokens(step, 1), loop, options);
    const std::vector<Tensor> list = params_.list();
    const std::vector<Tensor> g = grad(loss, list);
    constexpr double kLearningRate = 0.05;
    std::vector<Tensor> updated;
    for (size_t i = 0; i < list.size(); ++i) {
      updated.push_back(list[i].detach() - g[i] * kLearningRate);
    }
    updated.push_back(loss);
    sync(updated);
    updated.pop_back();
    params_ = examples::LlamaParams::FromList(updated);
    return {loss.item<float>()};
  }

 private:
  // A fresh host batch of token ids [batch, seq], uploaded: the step's input (and, training,
  // its targets).
  Tensor Tokens(int64_t step, int which) const {
    std::mt19937_64 rng(static_cast<uint64_t>(step + 1000) * 2 + static_cast<uint64_t>(which));
    std::vector<int32_t> ids(static_cast<size_t>(m_.batch * m_.seq));
    for (int32_t& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(config_.vocab));
    return tensor(ids, {m_.batch, m_.seq}, Device::host()).to(device_);
  }

  Model m_;
  examples::LlamaConfig config_;
  examples::LlamaParams params_;
  Device device_ = Device::host();
};

}  // namespace

void PrintLlama405B() {
  const examples::LlamaConfig config = examples::Llama405BConfig(kLlama405BDtype);
  const int64_t alloc = metrics::counter("DeviceAllocBytes");
  const int64_t h2d = metrics::counter("TransferToDeviceBytes");
  const int64_t trace = metrics::counter("TraceTransferBytes");
  const auto t0 = std::chrono::steady_clock::now();
  const Function step = examples::TraceLlamaLayerStep(config, 1, Device::opencl());
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const double gib = 1024.0 * 1024.0 * 1024.0;
  std::printf(
      "\nLlama-3-405B-shaped layers (D %lld, %lld heads / %lld kv heads, FFN %lld, %s, %lld "
      "layers, seq %lld; %.1f B parameters):\n"
      "  one scan step (layer forward + backward) traced on placeholders in %.0f ms, %d "
      "arguments: %lld B allocated, %lld B uploaded, %lld B moved while tracing\n"
      "  scan_materialized would upload %.2f GiB per layer-scan call (one layer's weights and the "
      "carry [1, %lld, %lld]), every call\n"
      "  seed 000 (PyTorch/XLA, Llama 405B): scan with torch.empty fake tensors moved 23 GiB, the "
      "for loop 182 MiB\n",
      static_cast<long long>(config.dim), static_cast<long long>(config.heads),
      static_cast<long long>(config.kv_heads), static_cast<long long>(config.ffn),
      dtype_name(config.dtype), static_cast<long long>(config.layers),
      static_cast<long long>(config.seq), config.num_parameters() / 1e9, ms, step.num_parameters(),
      static_cast<long long>(metrics::counter("DeviceAllocBytes") - alloc),
      static_cast<long long>(metrics::counter("TransferToDeviceBytes") - h2d),
      static_cast<long long>(metrics::counter("TraceTransferBytes") - trace),
      static_cast<double>(examples::MaterializedScanUploadBytes(config, 1)) / gib,
      static_cast<long long>(config.seq), static_cast<long long>(config.dim));
}

std::unique_ptr<Workload> MakeLlamaWorkload(const Model& model) {
  return std::make_unique<LlamaWorkload>(model);
}

}  // namespace lazycl::bench
