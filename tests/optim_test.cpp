// Optimizers (lazycl/optim.h) against PyTorch's formulas written out here in double, on the
// device and the host; in-place updates (buffer donation, runtime/donation.h): taken when nothing
// else reads the old values, declined (and still right) when something does; the peak memory of
// an AdamW step; and a changing learning rate that compiles nothing.
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"
#include "test_util.h"

namespace lazycl {
namespace {

using test::C;
using test::ErrorOf;
using test::Has;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Size-1 and size-0 dims included.
const std::vector<std::vector<int64_t>> kShapes = {{3, 4}, {1}, {5}, {2, 0, 3}, {1, 1, 7}};

std::vector<Tensor> MakeParams(Device device) {
  std::vector<Tensor> params;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    params.push_back(
        tensor(Random(static_cast<size_t>(Numel(kShapes[i])), 7 + i), kShapes[i], device)
            .requires_grad_());
  }
  return params;
}

// Gives every parameter but the last a fresh gradient (the last has none: it is skipped).
std::vector<std::vector<float>> SetGrads(const std::vector<Tensor>& params, int step) {
  std::vector<std::vector<float>> grads;
  for (size_t i = 0; i + 1 < params.size(); ++i) {
    const auto shape = params[i].shape();
    grads.push_back(Random(static_cast<size_t>(Numel(shape)), 1000 * step + i));
    params[i].impl()->grad = tensor(grads.back(), shape, params[i].device());
  }
  return grads;
}

// Runs `steps` steps of `step` (one optimizer) and of `reference` (per element, in double) and
// compares every parameter after each.
using ElementStep = std::function<double(size_t param, size_t elem, double p, double g, int t)>;
void ExpectSteps(const std::vector<Tensor>& params, const std::function<void()>& step,
                 const ElementStep& reference, int steps) {
  std::vector<std::vector<double>> want;
  for (const Tensor& p : params) {
    const std::vector<float> v = p.to_vector<float>();
    want.emplace_back(v.begin(), v.end());
  }
  for (int t = 1; t <= steps; ++t) {
    const std::vector<std::vector<float>> grads = SetGrads(params, t);
    step();
    for (size_t i = 0; i < params.size(); ++i) {
      const std::vector<float> got = params[i].to_vector<float>();
      ASSERT_EQ(got.size(), want[i].size());
      for (size_t e = 0; e < got.size(); ++e) {
        if (i < grads.size()) want[i][e] = reference(i, e, want[i][e], grads[i][e], t);
        EXPECT_NEAR(got[e], want[i][e], 1e-5 * (1 + std::fabs(want[i][e])))
            << "param " << i << " element " << e << " step " << t;
      }
    }
  }
}

class OptimTest : public ::testing::TestWithParam<Device> {};

TEST_P(OptimTest, SGDMatchesPyTorch) {
  struct Case {
    optim::SGDOptions o;
  };
  for (const optim::SGDOptions& o :
       {optim::SGDOptions{0.1, 0, 0, 0, false}, optim::SGDOptions{0.1, 0.9, 0, 0, false},
        optim::SGDOptions{0.05, 0.9, 0.3, 0.01, false},
        optim::SGDOptions{0.05, 0.8, 0, 0.02, true}}) {
    SCOPED_TRACE(testing::Message() << "momentum " << o.momentum << " dampening " << o.dampening
                                    << " wd " << o.weight_decay << " nesterov " << o.nesterov);
    std::vector<Tensor> params = MakeParams(GetParam());
    optim::SGD sgd(params, o);
    std::map<std::pair<size_t, size_t>, double> buf;
    ExpectSteps(
        params, [&] { sgd.step(); },
        [&](size_t i, size_t e, double p, double g, int t) {
          g += o.weight_decay * p;
          if (o.momentum != 0) {
            double& b = buf[{i, e}];
            b = t == 1 ? g : o.momentum * b + (1 - o.dampening) * g;
            g = o.nesterov ? g + o.momentum * b : b;
          }
          return p - o.lr * g;
        },
        4);
    EXPECT_EQ(sgd.momentum_buffer(0).defined(), o.momentum != 0);
    EXPECT_FALSE(sgd.momentum_buffer(params.size() - 1).defined());  // never had a gradient
  }
}

TEST_P(OptimTest, AdamWMatchesPyTorch) {
  std::vector<Tensor> params = MakeParams(GetParam());
  const optim::AdamWOptions o{0.01, 0.9, 0.99, 1e-6, 0.1};
  optim::AdamW adamw(params, o);
  std::map<std::pair<size_t, size_t>, std::pair<double, double>> mv;
  ExpectSteps(
      params, [&] { adamw.step(); },
      [&](size_t i, size_t e, double p, double g, int t) {
        auto& [m, v] = mv[{i, e}];
        p *= 1 - o.lr * o.weight_decay;
        m = o.beta1 * m + (1 - o.beta1) * g;
        v = o.beta2 * v + (1 - o.beta2) * g * g;
        const double c1 = 1 - std::pow(o.beta1, t), c2 = 1 - std::pow(o.beta2, t);
        return p - o.lr * (m / c1) / (std::sqrt(v / c2) + o.eps);
      },
      5);
  EXPECT_EQ(adamw.step_count(), 5);
  EXPECT_EQ(adamw.exp_avg(0).shape(), params[0].shape());
  EXPECT_FALSE(adamw.exp_avg_sq(params.size() - 1).defined());
  // zero_grad: every gradient undefined; a step then changes nothing.
  adamw.zero_grad();
  for (const Tensor& p : params) EXPECT_FALSE(p.grad().defined());
  const std::vector<float> before = params[0].to_vector<float>();
  adamw.step();
  EXPECT_EQ(params[0].to_vector<float>(), before);
}

TEST_P(OptimTest, BadInputsAreErrors) {
  const Device d = GetParam();
  Tensor p = zeros({2}, DType::f32, d).requires_grad_();
  EXPECT_TRUE(Has(ErrorOf([] { optim::SGD({}); }), "empty"));
  EXPECT_TRUE(Has(ErrorOf([&] { optim::SGD({p, p}); }), "more than once"));
  EXPECT_TRUE(Has(ErrorOf([&] { optim::SGD({p * 2}); }), "computed from other tensors"));
  EXPECT_TRUE(Has(ErrorOf([&] { optim::SGD({zeros({2}, DType::i32, d)}); }), "i32"));
  EXPECT_TRUE(Has(ErrorOf([&] { optim::SGD({p}, {-1.0}); }), "lr must be"));
  EXPECT_TRUE(Has(ErrorOf([&] { optim::SGD({p}, {0.1, 0, 0, 0, true}); }), "nesterov"));
  EXPECT_TRUE(Has(ErrorOf([&] {
                    optim::AdamW({p}, {0.1, 1.0});
                  }),
                  "beta1 must be in [0, 1), got 1"));
  EXPECT_TRUE(Has(ErrorOf([&] { optim::AdamW({p}, {0.1, 0.9, -0.5}); }), "beta2"));
  EXPECT_TRUE(Has(ErrorOf([&] { optim::AdamW({p}, {0.1, 0.9, 0.9, std::nan("")}); }), "eps"));
  optim::AdamW adamw({p});
  EXPECT_TRUE(Has(ErrorOf([&] { adamw.set_lr(-0.1); }), "-0.1"));
  p.impl()->grad = zeros({3}, DType::f32, d);
  EXPECT_TRUE(Has(ErrorOf([&] { adamw.step(); }), "gradient is"));
  if (d.is_opencl()) {
    Tensor ph = placeholder({2}, DType::f32, d, true);
    EXPECT_TRUE(Has(ErrorOf([&] { optim::SGD({ph}); }), "placeholder"));
  }
}

TEST_P(OptimTest, CopyAndSetGradWorkInPlace) {
  const Device d = GetParam();
  Tensor t = zeros({2, 3}, DType::f32, d);
  sync({t});
  const Tensor alias = t;
  t.copy_(tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, Device::host()));
  EXPECT_EQ(alias.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  Tensor i = zeros({2}, DType::i64, d);
  i.copy_(tensor(std::vector<int64_t>{7, -8}, {2}, d));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{7, -8}));
  EXPECT_TRUE(Has(ErrorOf([&] { t.copy_(zeros({3, 2}, DType::f32, d)); }), "one shape and dtype"));
  EXPECT_TRUE(Has(ErrorOf([&] { t.copy_(zeros({2, 3}, DType::i32, d)); }), "i32"));
  Tensor w = zeros({2}, DType::f32, d).requires_grad_();
  w.set_grad(ones({2}, DType::f32, d));
  EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(2, 1.0f));
  EXPECT_TRUE(Has(ErrorOf([&] { w.set_grad(ones({3}, DType::f32, d)); }), "[3]"));
  w.set_grad(Tensor());
  EXPECT_FALSE(w.grad().defined());
}

INSTANTIATE_TEST_SUITE_P(Devices, OptimTest, ::testing::Values(Device::opencl(0), Device::host()),
                         [](const auto& info) { return info.param.is_host() ? "host" : "cl"; });

// A small MLP on the device: parameters, a batch, and its loss.
struct Mlp {
  std::vector<Tensor> params;
  Tensor x, y;
  explicit Mlp(int64_t width) {
    const Device cl = Device::opencl(0);
    for (int l = 0; l < 3; ++l) {
      params.push_back(
          tensor(Random(static_cast<size_t>(width * width), 20 + l), {width, width}, cl) * 0.1);
      params.push_back(zeros({width}, DType::f32, cl));
    }
    sync(params);
    for (Tensor& p : params) p = p.detach().requires_grad_();
    x = tensor(Random(static_cast<size_t>(16 * width), 3), {16, width}, cl);
    y = tensor(Random(static_cast<size_t>(16 * width), 4), {16, width}, cl);
  }
  Tensor Loss() const {
    Tensor h = x;
    for (size_t l = 0; l < params.size(); l += 2) h = tanh(matmul(h, params[l]) + params[l + 1]);
    return mean((h - y) * (h - y));
  }
  int64_t Bytes() const {
    int64_t n = 0;
    for (const Tensor& p : params) n += p.numel() * 4;
    return n;
  }
};

TEST(OptimDonationTest, AdamWUpdatesInPlaceAndItsPeakIsTheStateOnce) {
  Mlp mlp(256);
  optim::AdamW adamw(mlp.params, {1e-3});
  for (int step = 0; step < 2; ++step) {  // warm: state allocated, programs built
    mlp.Loss().backward();
    adamw.step();
    adamw.zero_grad();
  }
  const int64_t p = mlp.Bytes();
  mlp.Loss().backward();  // grads: the step below holds p + g + 2 state
  metrics::reset();
  const int64_t alloc = C("DeviceAllocBytes"), donated = C("DonatedBytes");
  const int64_t live = C("DeviceLiveBytes");
  EXPECT_GE(live, 4 * p);  // parameters, gradients, m and v
  adamw.step();
  EXPECT_EQ(C("DonatedBytes") - donated, 3 * p);  // every p, m and v in place
  EXPECT_EQ(C("DonationsDeclined"), 0);
  EXPECT_LE(C("DevicePeakBytes"), live + p / 20) << "peak within 5% of the state held once";
  EXPECT_EQ(C("DeviceAllocBytes"), alloc);
}

TEST(OptimDonationTest, AnotherReaderOfTheOldValueDeclinesAndKeepsIt) {
  Mlp mlp(32);
  optim::SGD sgd(mlp.params, {0.5});
  mlp.Loss().backward();
  // A detached alias of the first weight and a pending product of the second still want the
  // old values: their buffers are not reused, and they keep reading them.
  const Tensor alias = mlp.params[0].detach();
  const Tensor pending = mlp.params[2] * 1.0;
  const std::vector<float> old0 = alias.to_vector<float>();
  const std::vector<float> old2 = mlp.params[2].to_vector<float>();
  const int64_t declined = C("DonationsDeclined");
  sgd.step();
  EXPECT_EQ(C("DonationsDeclined") - declined, 2);
  EXPECT_EQ(alias.to_vector<float>(), old0);
  EXPECT_EQ(pending.to_vector<float>(), old2);
  EXPECT_NE(mlp.params[0].to_vector<float>(), old0);
  // The peak then holds a second copy of those two: the 5% bound above would fail.
}

TEST(OptimDonationTest, TheUserSeesTheUpdateThroughEveryHandle) {
  Tensor w = ones({4}, DType::f32, Device::opencl(0)).requires_grad_();
  sync({w});
  Tensor same = w;  // the same tensor, as in PyTorch
  optim::SGD sgd({w}, {0.5});
  sum(w * 2.0).backward();  // d/dw = 2
  sgd.step();
  EXPECT_EQ(same.to_vector<float>(), std::vector<float>(4, 0.0f));
}

TEST(OptimDonationTest, ALearningRateScheduleCompilesNothing) {
  Mlp mlp(32);
  optim::AdamW adamw(mlp.params, {1e-3});
  for (int step = 0; step < 2; ++step) {
    mlp.Loss().backward();
    adamw.step();
    adamw.zero_grad();
  }
  const int64_t compiles = C("GraphCompiles"), builds = C("ProgramBuilds");
  for (int step = 0; step < 5; ++step) {
    adamw.set_lr(1e-3 * (step + 2));
    mlp.Loss().backward();
    adamw.step();
    adamw.zero_grad();
  }
  EXPECT_EQ(C("GraphCompiles"), compiles);
  EXPECT_EQ(C("ProgramBuilds"), builds);
}

TEST(OptimDonationTest, BackwardFreesTheGraphAsPyTorchDoes) {
  Tensor w = ones({3}, DType::f32, Device::opencl(0)).requires_grad_();
  Tensor loss = sum(w * w);
  loss.backward();
  EXPECT_FALSE(loss.is_leaf());
  EXPECT_TRUE(Has(ErrorOf([&] { loss.backward(); }), "freed"));
  EXPECT_TRUE(Has(ErrorOf([&] { (loss * 2.0).backward(); }), "freed"));
  EXPECT_FLOAT_EQ(loss.item<float>(), 3.0f);  // its value stays
}

}  // namespace
}  // namespace lazycl
