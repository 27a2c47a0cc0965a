// Seed 000 at Llama scale: one step of the scan over Llama-3-405B-shaped layers (the decoder
// layer that scan traces, and its backward) is traced entirely on placeholders on the 24 GiB CI
// machine. One layer's weights alone are ~6 GB in bf16 and the model ~810 GB: nothing may be
// allocated on the device or moved, while tracing or after.

#include <string>
#include <vector>

#include "examples/llama/model.h"
#include "gtest/gtest.h"

namespace lazycl::examples {
namespace {

constexpr DType kDtype = DType::bf16;

TEST(Llama405BTraceTest, ScanStepTracesOnPlaceholdersWithoutMemoryOrTransfers) {
  const LlamaConfig config = Llama405BConfig(kDtype);
  EXPECT_GT(config.num_parameters(), int64_t{400'000'000'000});
  const Device device = Device::opencl(0);
  metrics::reset();
  Function step = TraceLlamaLayerStep(config, /*batch=*/1, device);
  EXPECT_EQ(metrics::counter("DeviceAllocBytes"), 0);
  EXPECT_EQ(metrics::counter("DeviceLiveBytes"), 0);
  EXPECT_EQ(metrics::counter("TraceTransferBytes"), 0);
  EXPECT_EQ(metrics::counter("TransferToDeviceBytes"), 0);
  EXPECT_EQ(metrics::counter("TransferFromDeviceBytes"), 0);
  // Every argument is used: the carry, 9 weights, cos, sin and the cotangent.
  EXPECT_EQ(step.num_parameters(), 13);

  // Calling it on placeholders (what scan does with a layer's slices) records the step and
  // still moves nothing; reading a result is the placeholder error, not an attempt to allocate.
  std::vector<Tensor> args;
  for (const TensorSpec& spec : step.arguments())
    args.push_back(placeholder(spec.shape, spec.dtype, device));
  std::vector<Tensor> out = step(args);
  ASSERT_EQ(out.size(), 11u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].shape(), args[i == 0 ? 0 : i - 1].shape()) << i;
    EXPECT_EQ(out[i].dtype(), kDtype) << i;
  }
  try {
    sync({out[0]});
    ADD_FAILURE() << "computing a layer of placeholders did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("placeholder"), std::string::npos) << e.what();
  }
  EXPECT_EQ(metrics::counter("DeviceAllocBytes"), 0);
  EXPECT_EQ(metrics::counter("TraceTransferBytes"), 0);
  EXPECT_EQ(metrics::counter("TransferToDeviceBytes"), 0);
}

TEST(Llama405BTraceTest, MaterializedTracingWouldUploadALayerPerCall) {
  const LlamaConfig config = Llama405BConfig(kDtype);
  const int64_t size = static_cast<int64_t>(dtype_size(kDtype));
  const int64_t d = config.dim, kv = config.kv_heads * config.head_dim();
  const int64_t layer = 2 * d + 2 * d * d + 2 * d * kv + 3 * d * config.ffn;
  const int64_t carry = config.seq * d;
  EXPECT_EQ(MaterializedScanUploadBytes(config, 1), (layer + carry) * size);
}

}  // namespace
}  // namespace lazycl::examples
