// The invariants of lazycl-bench transfer (SPEC.md, "Benchmarks"), on the default model and on
// the --sweep models with fewer steps (every invariant is per step).
#include "bench/transfer.h"

#include <gtest/gtest.h>

#include <map>

#include "examples/llama/model.h"

namespace lazycl::bench {
namespace {

std::map<std::string, Result> ByStrategy(const std::vector<Result>& results) {
  std::map<std::string, Result> by;
  for (const Result& r : results) by[r.strategy] = r;
  return by;
}

void ExpectInvariants(const Model& m) {
  SCOPED_TRACE(testing::Message() << "layers " << m.layers << " hidden " << m.hidden << " batch "
                                  << m.batch << " steps " << m.steps);
  auto r = ByStrategy(RunTransfer(m));
  ASSERT_EQ(r.size(), 3u);
  const Result& loop = r.at("for_loop");
  const Result& materialized = r.at("scan_materialized");
  const Result& placeholder = r.at("scan_placeholder");
  // Each step uploads its input batch once and reads the output once.
  EXPECT_EQ(loop.h2d_bytes, m.steps * m.batch * m.hidden * 4);
  EXPECT_EQ(loop.d2h_bytes, m.steps * m.batch * m.hidden * 4);
  // Placeholders move exactly what the C++ loop moves, and nothing while tracing.
  EXPECT_EQ(placeholder.h2d_bytes, loop.h2d_bytes);
  EXPECT_EQ(placeholder.h2d_count, loop.h2d_count);
  EXPECT_EQ(placeholder.d2h_bytes, loop.d2h_bytes);
  EXPECT_EQ(placeholder.trace_h2d_bytes, 0);
  // Tracing on materialized inputs uploads one layer's weights, its bias and the carry per call.
  const int64_t traced = (m.hidden * m.hidden + m.hidden + m.batch * m.hidden) * 4;
  EXPECT_EQ(materialized.h2d_bytes - loop.h2d_bytes, m.steps * traced);
  EXPECT_EQ(materialized.trace_h2d_bytes, m.steps * traced);
  // Same numbers every way.
  EXPECT_LE(materialized.max_abs_diff, 1e-4);
  EXPECT_LE(placeholder.max_abs_diff, 1e-4);
  // The scan body is compiled at most once, whatever the number of layers.
  EXPECT_LE(materialized.graph_compiles + placeholder.graph_compiles, 1);
  EXPECT_EQ(placeholder.setup_h2d_bytes, m.layers * (m.hidden * m.hidden + m.hidden) * 4);
}

TEST(TransferBenchTest, DefaultModelKeepsTheByteInvariants) {
  Model m;
  m.steps = 3;
  ExpectInvariants(m);
}

TEST(TransferBenchTest, SweepModelsKeepTheByteInvariants) {
  Model base;
  base.steps = 2;
  for (const Model& m : SweepModels(base)) ExpectInvariants(m);
}

TEST(TransferBenchTest, TrainingKeepsTheByteInvariants) {
  // Forward + backward + an SGD step on the device; only the loss comes back.
  const Model m{6, 48, 8, 3, /*train=*/true};
  auto r = ByStrategy(RunTransfer(m));
  const Result& loop = r.at("for_loop");
  const Result& materialized = r.at("scan_materialized");
  const Result& placeholder = r.at("scan_placeholder");
  EXPECT_EQ(loop.h2d_bytes, m.steps * m.batch * m.hidden * 4);
  EXPECT_EQ(loop.d2h_bytes, m.steps * 4);
  EXPECT_EQ(placeholder.h2d_bytes, loop.h2d_bytes);
  EXPECT_EQ(placeholder.d2h_bytes, loop.d2h_bytes);
  EXPECT_EQ(placeholder.trace_h2d_bytes, 0);
  // Only the forward scan traces on materialized inputs; its backward traces on placeholders.
  EXPECT_EQ(materialized.h2d_bytes - loop.h2d_bytes,
            m.steps * (m.hidden * m.hidden + m.hidden + m.batch * m.hidden) * 4);
  EXPECT_LE(materialized.max_abs_diff, 1e-4);
  EXPECT_LE(placeholder.max_abs_diff, 1e-4);
}

TEST(TransferBenchTest, ScanCompilesDoNotGrowWithLayers) {
  // A new width is a new body structure; more layers of it are not.
  const Model few{2, 48, 4, 2};
  const Model many{24, 48, 4, 2};
  auto compiles = [](const Model& m) {
    int64_t total = 0;
    for (const Result& r : RunTransfer(m)) {
      if (r.strategy != "for_loop") total += r.graph_compiles;
    }
    return total;
  };
  EXPECT_EQ(compiles(few), 1);
  EXPECT_EQ(compiles(many), 0);
}

// --model llama: the decoder layers of the example model (examples/llama/model.h), whose scan
// body captures the rotary tables. Same invariants: placeholders move what the loop moves.
examples::LlamaConfig LlamaConfigOf(const Model& m) {
  examples::LlamaConfig c;
  c.vocab = 256;
  c.dim = m.hidden;
  c.layers = m.layers;
  c.heads = m.hidden / 32;
  c.kv_heads = c.heads / 2;
  c.ffn = (8 * m.hidden / 3 + 31) / 32 * 32;
  c.seq = m.seq;
  return c;
}

TEST(TransferBenchTest, LlamaInferenceKeepsTheByteInvariants) {
  Model m{3, 64, 2, 2};
  m.arch = "llama";
  m.seq = 16;
  auto r = ByStrategy(RunTransfer(m));
  const Result& loop = r.at("for_loop");
  const Result& materialized = r.at("scan_materialized");
  const Result& placeholder = r.at("scan_placeholder");
  EXPECT_EQ(loop.h2d_bytes, m.steps * m.batch * m.seq * 4);        // token ids up
  EXPECT_EQ(loop.d2h_bytes, m.steps * m.batch * m.seq * 256 * 4);  // logits down
  EXPECT_EQ(placeholder.h2d_bytes, loop.h2d_bytes);
  EXPECT_EQ(placeholder.h2d_count, loop.h2d_count);
  EXPECT_EQ(placeholder.d2h_bytes, loop.d2h_bytes);
  EXPECT_EQ(placeholder.trace_h2d_bytes, 0);
  const int64_t traced = examples::MaterializedScanUploadBytes(LlamaConfigOf(m), m.batch);
  EXPECT_EQ(materialized.trace_h2d_bytes, m.steps * traced);
  EXPECT_EQ(materialized.h2d_bytes - loop.h2d_bytes, m.steps * traced);
  EXPECT_LE(materialized.max_abs_diff, 1e-4);
  EXPECT_LE(placeholder.max_abs_diff, 1e-4);
  EXPECT_EQ(placeholder.setup_h2d_bytes, LlamaConfigOf(m).num_parameters() * 4);
  // Per strategy, not per step: the layer body, and the rotary tables the body captures, which
  // the step loop computes once before the layers (runtime/step_loop.cpp, HoistInvariants).
  EXPECT_LE(materialized.graph_compiles + placeholder.graph_compiles, 4);
}

TEST(TransferBenchTest, LlamaTrainingKeepsTheByteInvariants) {
  Model m{2, 64, 2, 2, /*train=*/true};
  m.arch = "llama";
  m.seq = 8;
  auto r = ByStrategy(RunTransfer(m));
  const Result& loop = r.at("for_loop");
  const Result& placeholder = r.at("scan_placeholder");
  EXPECT_EQ(loop.h2d_bytes, m.steps * 2 * m.batch * m.seq * 4);  // ids and targets
  EXPECT_EQ(loop.d2h_bytes, m.steps * 4);                        // the loss
  EXPECT_EQ(placeholder.h2d_bytes, loop.h2d_bytes);
  EXPECT_EQ(placeholder.d2h_bytes, loop.d2h_bytes);
  EXPECT_EQ(placeholder.trace_h2d_bytes, 0);
  EXPECT_GT(r.at("scan_materialized").trace_h2d_bytes, 0);
  EXPECT_LE(placeholder.max_abs_diff, 1e-4);
}

}  // namespace
}  // namespace lazycl::bench
