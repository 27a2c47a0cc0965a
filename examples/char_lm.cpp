// A Llama-style character language model (examples/llama/model.h) trained with AdamW on a text
// every Debian machine has, saved as a safetensors checkpoint, then loaded in a fresh process to
// check the logits bit for bit and sample text on the device.
//
//   char_lm [--text FILE] [--out DIR] [--steps N] [--expect-heldout LOSS]     train, save
//   char_lm --sample DIR [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--seed S]
//
// Training prints the loss, the held-out loss and the step time; --expect-heldout makes it exit
// 1 when the final held-out loss is not below LOSS (CI's check that it learns). --sample loads
// DIR/char_lm.safetensors, recomputes the logits of a probe batch, exits 1 unless they equal
// the ones training saved, bit for bit, then prints a sample.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "examples/llama/model.h"
#include "lazycl/lazycl.h"

namespace lc = lazycl;
using lc::examples::LlamaConfig;
using lc::examples::LlamaParams;

namespace {

struct Options {
  std::string text = "/usr/share/common-licenses/GPL-3";
  std::string out = "char_lm_out";
  std::string sample_dir;
  std::string prompt = "This License";
  int64_t steps = 500, tokens = 200, top_k = 8, batch = 16;
  double temperature = 0.8, expect_heldout = 0;
  uint64_t seed = 1;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw lc::Error("char_lm: cannot read '" + path + "'");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `batch` windows of seq + 1 bytes of `text` starting at random offsets: ids and targets.
std::pair<lc::Tensor, lc::Tensor> Batch(const std::string& text, int64_t batch, int64_t seq,
                                        std::mt19937_64& rng, lc::Device device) {
  std::vector<int32_t> ids, targets;
  const uint64_t span = text.size() - static_cast<size_t>(seq) - 1;
  for (int64_t b = 0; b < batch; ++b) {
    const size_t start = static_cast<size_t>(rng() % span);
    for (int64_t t = 0; t < seq; ++t) {
      ids.push_back(static_cast<unsigned char>(text[start + static_cast<size_t>(t)]));
      targets.push_back(static_cast<unsigned char>(text[start + static_cast<size_t>(t) + 1]));
    }
  }
  return {lc::tensor(ids, {batch, seq}, device), lc::tensor(targets, {batch, seq}, device)};
}

// The first `seq` bytes of `text`, left-padded with newlines: a [1, seq] batch.
lc::Tensor Window(const std::string& text, int64_t seq, lc::Device device) {
  std::vector<int32_t> ids(static_cast<size_t>(seq), '\n');
  const size_t n = std::min(text.size(), static_cast<size_t>(seq));
  for (size_t i = 0; i < n; ++i) {
    ids[static_cast<size_t>(seq) - n + i] = static_cast<unsigned char>(text[text.size() - n + i]);
  }
  return lc::tensor(ids, {1, seq}, device);
}

double HeldOutLoss(const LlamaConfig& c, const LlamaParams& p, const std::string& heldout,
                   lc::Device device) {
  lc::NoGradGuard no_grad;
  std::mt19937_64 rng(7);  // the same held-out windows at every evaluation
  double total = 0;
  constexpr int kBatches = 4;
  for (int i = 0; i < kBatches; ++i) {
    auto [ids, targets] = Batch(heldout, 16, c.seq, rng, device);
    total += lc::examples::LlamaLoss(c, p, ids, targets).item<float>();
  }
  return total / kBatches;
}

int Train(const Options& o) {
  const lc::Device device = lc::default_env().device();
  const LlamaConfig c = lc::examples::CharLmConfig();
  const std::string text = ReadFile(o.text);
  if (text.size() < 1000) throw lc::Error("char_lm: '" + o.text + "' is too short to train on");
  const size_t split = text.size() * 9 / 10;
  const std::string train = text.substr(0, split), heldout = text.substr(split);
  std::printf("char_lm: %zu bytes of %s (%zu held out), %lld parameters, on %s\n", text.size(),
              o.text.c_str(), heldout.size(), static_cast<long long>(c.num_parameters()),
              device.str().c_str());

  LlamaParams params = lc::examples::InitLlama(c, o.seed, device);
  params.requires_grad_();
  lc::optim::AdamWOptions adam;
  adam.lr = 3e-3;
  adam.weight_decay = 0.1;
  adam.beta2 = 0.99;
  lc::optim::AdamW optimizer(params.list(), adam);
  std::mt19937_64 rng(o.seed);
  const double initial = HeldOutLoss(c, params, heldout, device);
  std::printf("step %5d  held-out loss %.4f\n", 0, initial);
  double heldout_loss = initial, ms_total = 0;
  for (int64_t step = 1; step <= o.steps; ++step) {
    // Linear warm-up over 20 steps, then cosine decay to a tenth: a new lr every step, and no
    // new compile (the lr is a kernel argument).
    const double warm = std::min(1.0, static_cast<double>(step) / 20.0);
    const double progress = static_cast<double>(step) / static_cast<double>(o.steps);
    optimizer.set_lr(adam.lr * warm * (0.1 + 0.45 * (1 + std::cos(M_PI * progress))));
    const auto t0 = std::chrono::steady_clock::now();
    auto [ids, targets] = Batch(train, o.batch, c.seq, rng, device);
    lc::Tensor loss = lc::examples::LlamaLoss(c, params, ids, targets);
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();
    const float value = loss.item<float>();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (step > 1) ms_total += ms;  // the first step compiles
    if (step % 25 == 0 || step == o.steps) {
      heldout_loss = HeldOutLoss(c, params, heldout, device);
      std::printf("step %5lld  loss %.4f  held-out loss %.4f  %.1f ms/step\n",
                  static_cast<long long>(step), value, heldout_loss,
                  step > 1 ? ms_total / static_cast<double>(step - 1) : ms);
    }
  }

  std::filesystem::create_directories(o.out);
  const std::string ckpt = o.out + "/char_lm.safetensors";
  lc::save_safetensors(ckpt, params.named());
  // The logits of a probe window, for --sample to compare with after loading.
  const std::vector<float> probe =
      lc::examples::LlamaForward(c, params, Window(heldout, c.seq, device)).to_vector<float>();
  std::ofstream(o.out + "/probe_logits.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(probe.data()),
             static_cast<std::streamsize>(probe.size() * sizeof(float)));
  std::printf("saved %s; held-out loss %.4f -> %.4f\n", ckpt.c_str(), initial, heldout_loss);
  if (o.expect_heldout > 0 && !(heldout_loss < o.expect_heldout)) {
    std::fprintf(stderr, "char_lm: held-out loss %.4f is not below --expect-heldout %.4f\n",
                 heldout_loss, o.expect_heldout);
    return 1;
  }
  return 0;
}

// The next byte after `window` [1, seq]: top-k of the last position's logits, softmax at
// `temperature`, and inverse-CDF sampling with the host's uniform `u`, all on the device; one
// integer comes back.
int32_t NextToken(const LlamaConfig& c, const LlamaParams& p, const lc::Tensor& window, int64_t k,
                  double temperature, double u) {
  lc::Tensor logits = lc::examples::LlamaForward(c, p, window);  // [1, seq, V]
  lc::Tensor last = lc::reshape(lc::slice(logits, 1, c.seq - 1, c.seq), {c.vocab});
  if (k <= 1 || temperature <= 0) return static_cast<int32_t>(lc::argmax(last, 0).item<int64_t>());
  auto [values, indices] = lc::topk(last, k);
  lc::Tensor cdf = lc::cumsum(lc::softmax(values / temperature, 0), 0);
  lc::Tensor pick = lc::clamp(lc::sum(lc::cast(lc::lt(cdf, u), lc::DType::i64)), 0, double(k - 1));
  return static_cast<int32_t>(
      lc::gather(indices, 0, lc::reshape(pick, {1})).to_vector<int64_t>()[0]);
}

int Sample(const Options& o) {
  const lc::Device device = lc::default_env().device();
  const LlamaConfig c = lc::examples::CharLmConfig();
  const std::string ckpt = o.sample_dir + "/char_lm.safetensors";
  const LlamaParams params = LlamaParams::FromNamed(lc::load_safetensors(ckpt, device), c);
  lc::NoGradGuard no_grad;

  const std::string text = ReadFile(o.text);
  const std::string heldout = text.substr(text.size() * 9 / 10);
  const std::vector<float> probe =
      lc::examples::LlamaForward(c, params, Window(heldout, c.seq, device)).to_vector<float>();
  const std::string saved = ReadFile(o.sample_dir + "/probe_logits.bin");
  if (saved.size() != probe.size() * sizeof(float) ||
      std::memcmp(saved.data(), probe.data(), saved.size()) != 0) {
    std::fprintf(stderr, "char_lm: the loaded model's probe logits differ from the saved ones\n");
    return 1;
  }
  std::printf("loaded %s: %zu probe logits bit-identical to the training process's\n", ckpt.c_str(),
              probe.size());

  std::mt19937_64 rng(o.seed);
  std::string out = o.prompt;
  for (int64_t i = 0; i < o.tokens; ++i) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    out += static_cast<char>(
        NextToken(c, params, Window(out, c.seq, device), o.top_k, o.temperature, u));
  }
  std::printf("--- sample (top-k %lld, temperature %.2f) ---\n%s\n---\n",
              static_cast<long long>(o.top_k), o.temperature, out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines appear as they are printed
  Options o;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw lc::Error("char_lm: " + a + " needs a value");
        return argv[++i];
      };
      if (a == "--text")
        o.text = value();
      else if (a == "--out")
        o.out = value();
      else if (a == "--sample")
        o.sample_dir = value();
      else if (a == "--prompt")
        o.prompt = value();
      else if (a == "--steps")
        o.steps = std::stoll(value());
      else if (a == "--tokens")
        o.tokens = std::stoll(value());
      else if (a == "--top-k")
        o.top_k = std::stoll(value());
      else if (a == "--temperature")
        o.temperature = std::stod(value());
      else if (a == "--expect-heldout")
        o.expect_heldout = std::stod(value());
      else if (a == "--seed")
        o.seed = std::stoull(value());
      else
        throw lc::Error("char_lm: unknown argument '" + a + "' (see the top of char_lm.cpp)");
    }
    if (o.steps < 1 || o.tokens < 0 || o.top_k < 0)
      throw lc::Error("char_lm: --steps must be >= 1, --tokens and --top-k >= 0");
    return o.sample_dir.empty() ? Train(o) : Sample(o);
  } catch (const std::exception& e) {  // lc::Error, or std::stoll's invalid_argument
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
