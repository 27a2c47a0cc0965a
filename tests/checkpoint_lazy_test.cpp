// Laziness of load_safetensors (lazycl/checkpoint.h), measured by the counters: a 1 GiB
// checkpoint of which one tensor is read, host loading, threads reading once, a file truncated
// or replaced after loading, injected faults during the first upload, saving unread tensors.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "backend/pool_bins.h"
#include "checkpoint_test_util.h"

namespace lazycl {
namespace {

using test::C;
using test::CheckpointTest;
using test::ErrorOf;
using test::FileBytes;
using test::Has;
using test::RandomF32;
using test::RandomInt;
using test::Raw;
using test::ReadFile;

// The acceptance test: a 1 GiB checkpoint (a sparse file) of 65 tensors, one of them used.
TEST_F(CheckpointTest, OneGiBCheckpointReadsOnlyTheTensorItUses) {
  const Device cl = test::DefaultCl();
  const std::string path = Path("gib");
  constexpr int64_t kBig = 4 << 20;  // elements: 16 MiB of f32
  constexpr int64_t kUsed = 300001;  // elements of the used tensor, not a pool-bin size
  std::string json = "{";
  uint64_t offset = 0;
  uint64_t used_offset = 0;
  for (int k = 0; k < 64; ++k) {
    const std::string name = "layer" + std::to_string(k);
    json += "\"" + name + "\": {\"dtype\": \"F32\", \"shape\": [" + std::to_string(kBig) +
            "], \"data_offsets\": [" + std::to_string(offset) + ", " +
            std::to_string(offset + kBig * 4) + "]}, ";
    offset += kBig * 4;
    if (k == 31) {
      used_offset = offset;
      json += "\"used\": {\"dtype\": \"F32\", \"shape\": [" + std::to_string(kUsed) +
              "], \"data_offsets\": [" + std::to_string(offset) + ", " +
              std::to_string(offset + kUsed * 4) + "]}, ";
      offset += kUsed * 4;
    }
  }
  json += "\"__metadata__\": {}}";
  const std::string head = FileBytes(json, "");
  const uint64_t data_start = head.size();
  ASSERT_GE(offset, uint64_t{1} << 30);
  const std::vector<float> used = RandomF32(kUsed, 99);
  {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
    const std::string bytes = Raw(used);
    ASSERT_EQ(
        ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(data_start + used_offset)),
        static_cast<ssize_t>(bytes.size()));
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(data_start + offset)), 0);  // sparse zeros
    ::close(fd);
  }
  empty_cache();
  metrics::reset();
  std::map<std::string, Tensor> t = load_safetensors(path, cl);
  ASSERT_EQ(t.size(), 65u);
  EXPECT_EQ(C("CheckpointReadBytes"), 0);
  EXPECT_EQ(C("TransferToDeviceBytes"), 0);
  EXPECT_EQ(C("DeviceAllocBytes"), 0);
  EXPECT_EQ(C("DeviceLiveBytes"), 0);
  EXPECT_EQ(t.at("layer7").shape(), std::vector<int64_t>{kBig});

  const size_t bytes = kUsed * 4;
  Tensor y = t.at("used") * 2;
  sync({y});
  EXPECT_EQ(C("CheckpointReadBytes"), static_cast<int64_t>(bytes));
  EXPECT_EQ(C("TransferToDeviceBytes"), static_cast<int64_t>(bytes));
  // The tensor's storage and the result's, each rounded up to its pool bin.
  EXPECT_EQ(C("DeviceAllocBytes"), 2 * static_cast<int64_t>(backend::PoolBinBytes(bytes)));
  EXPECT_EQ(C("TransferFromDeviceBytes"), 0);

  // A second use reads and uploads nothing more.
  metrics::reset();
  std::vector<float> back = t.at("used").to_vector<float>();
  Tensor z = sum(t.at("used"));
  sync({z});
  EXPECT_EQ(C("CheckpointReadBytes"), 0);
  EXPECT_EQ(C("TransferToDeviceBytes"), 0);
  EXPECT_EQ(Raw(back), Raw(used));
  std::vector<float> twice = y.to_vector<float>();
  for (size_t i = 0; i < used.size(); ++i) {
    if (!std::isnan(used[i])) {
      EXPECT_EQ(twice[i], used[i] * 2) << i;
    }
  }
  // Unused tensors are still unread: reading one now costs exactly its bytes (zeros).
  metrics::reset();
  EXPECT_EQ(sum(t.at("layer40")).item<float>(), 0.0f);
  EXPECT_EQ(C("CheckpointReadBytes"), kBig * 4);
}

TEST_F(CheckpointTest, HostLoadingIsLazyToo) {
  const std::string path = Path("host_lazy");
  const std::vector<float> a = RandomF32(1000, 5), b = RandomF32(10, 6);
  save_safetensors(
      path, {{"a", tensor(a, {1000}, Device::host())}, {"b", tensor(b, {10}, Device::host())}});
  metrics::reset();
  std::map<std::string, Tensor> t = load_safetensors(path, Device::host());
  EXPECT_EQ(C("CheckpointReadBytes"), 0);
  EXPECT_EQ(Raw(t.at("b").to_vector<float>()), Raw(b));
  EXPECT_EQ(C("CheckpointReadBytes"), 40);
  EXPECT_EQ(C("TransferToDeviceBytes"), 0);
  // A host tensor moved to the device is read from the file, then uploaded.
  Tensor on_cl = t.at("a").to(test::DefaultCl());
  EXPECT_EQ(C("CheckpointReadBytes"), 40 + 4000);
  EXPECT_EQ(C("TransferToDeviceBytes"), 4000);
  EXPECT_EQ(Raw(on_cl.to_vector<float>()), Raw(a));
}

TEST_F(CheckpointTest, ThreadsFirstReadingOneTensorReadItOnce) {
  const std::string path = Path("threads");
  const std::vector<float> a = RandomF32(100000, 8);
  save_safetensors(path, {{"a", tensor(a, {100000}, Device::host())}});
  for (Device d : {test::DefaultCl(), Device::host()}) {
    std::map<std::string, Tensor> t = load_safetensors(path, d);
    metrics::reset();
    std::atomic<int> same{0};
    std::vector<std::thread> threads;
    for (int k = 0; k < 4; ++k) {
      threads.emplace_back([&, k] {
        const std::vector<float> v =
            k % 2 == 0 ? t.at("a").to_vector<float>() : (t.at("a") * 1).to_vector<float>();
        if (Raw(v) == Raw(a)) ++same;
      });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(same.load(), 4) << d.str();
    EXPECT_EQ(C("CheckpointReadBytes"), 400000) << d.str();
  }
}

TEST_F(CheckpointTest, AFileTruncatedAfterLoadingIsAnErrorNotACrash) {
  const std::string path = Path("truncated_later");
  save_safetensors(path, {{"a", ones({64}, DType::f32, Device::host())},
                          {"b", ones({64}, DType::f32, Device::host())}});
  for (Device d : {test::DefaultCl(), Device::host()}) {
    std::map<std::string, Tensor> t = load_safetensors(path, d);
    ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(ReadFile(path).size() - 100)), 0);
    const std::string e = ErrorOf([&] { (t.at("b") * 2).to_vector<float>(); });
    EXPECT_TRUE(Has(e, path) && Has(e, "tensor 'b'") && Has(e, "truncated")) << e;
    // The tensor keeps its source: it fails again, the same way, and nothing else is hurt.
    EXPECT_TRUE(Has(ErrorOf([&] { t.at("b").to_vector<float>(); }), "truncated"));
    EXPECT_EQ(sum(t.at("a")).item<float>(), 64.0f);
    save_safetensors(path, {{"a", ones({64}, DType::f32, Device::host())},
                            {"b", ones({64}, DType::f32, Device::host())}});
  }
}

TEST_F(CheckpointTest, ReplacingTheFileKeepsTheBytesThatWereLoaded) {
  const std::string path = Path("replaced");
  const std::vector<float> a = {1, 2, 3}, b = {4, 5, 6};
  save_safetensors(path,
                   {{"a", tensor(a, {3}, Device::host())}, {"b", tensor(b, {3}, Device::host())}});
  std::map<std::string, Tensor> t = load_safetensors(path, test::DefaultCl());
  // Saving over the file renames a new one into place: the loaded tensors read the old one.
  save_safetensors(path, {{"a", t.at("a") + 10}});
  EXPECT_EQ(t.at("b").to_vector<float>(), b);
  EXPECT_EQ(t.at("a").to_vector<float>(), a);
  EXPECT_EQ(load_safetensors(path, Device::host()).at("a").to_vector<float>(),
            (std::vector<float>{11, 12, 13}));
}

TEST_F(CheckpointTest, FaultsDuringTheFirstUploadLeaveTheTensorLoadable) {
  const std::string path = Path("faults");
  const std::vector<float> a = RandomF32(5000, 3);
  save_safetensors(path, {{"a", tensor(a, {5000}, Device::host())}});
  for (base::fault::Site site : {base::fault::Site::kTransfer, base::fault::Site::kAlloc}) {
    SCOPED_TRACE(base::fault::SiteName(site));
    std::map<std::string, Tensor> t = load_safetensors(path, test::DefaultCl());
    empty_cache();  // the allocation must reach the device
    metrics::reset();
    // Sticky: a single failed copy or allocation of fresh storage is retried once (drivers that
    // commit memory late), and the retry would succeed.
    base::fault::FailFrom(site, 1);
    const std::string e = ErrorOf([&] { (t.at("a") * 3).to_vector<float>(); });
    EXPECT_TRUE(Has(e, "injected fault") && Has(e, "tensor 'a'") && Has(e, path)) << e;
    EXPECT_EQ(C("CheckpointReadBytes"), 0);
    EXPECT_EQ(C("DeviceLiveBytes"), 0);  // no storage kept
    base::fault::Reset();
    EXPECT_EQ(Raw(t.at("a").to_vector<float>()), Raw(a));
    EXPECT_EQ(C("CheckpointReadBytes"), 20000);
  }
}

TEST_F(CheckpointTest, SavingAnUnreadLoadedTensorCopiesItsFileWithoutTransfers) {
  const std::string path = Path("copy_src"), copy = Path("copy_dst");
  const std::vector<int64_t> a = RandomInt<int64_t>(777, 4);
  save_safetensors(path, {{"a", tensor(a, {7, 111}, Device::host())}});
  std::map<std::string, Tensor> t = load_safetensors(path, test::DefaultCl());
  metrics::reset();
  save_safetensors(copy, t);
  EXPECT_EQ(C("TransferToDeviceBytes"), 0);
  EXPECT_EQ(C("TransferFromDeviceBytes"), 0);
  EXPECT_EQ(C("CheckpointReadBytes"), 0);  // still unread
  EXPECT_EQ(ReadFile(copy), ReadFile(path));
  // Once read, saving it is a download.
  sync({t.at("a") + 1});
  metrics::reset();
  save_safetensors(copy, t);
  EXPECT_EQ(C("TransferFromDeviceBytes"), 777 * 8);
  EXPECT_EQ(ReadFile(copy), ReadFile(path));
}

// Figures for the README (not run by default): `checkpoint_lazy_test
// --gtest_also_run_disabled_tests --gtest_filter='*Measure*'`. A 1 GiB file of 16 tensors
// (written for real, so the reads come from the page cache after the first), loading its header,
// then the first and second use of one 64 MiB tensor, beside uploading the same bytes from a
// host vector.
TEST_F(CheckpointTest, DISABLED_MeasureLoadAndFirstUse) {
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  const Device cl = test::DefaultCl();
  const std::string path = Path("measure");
  constexpr int64_t kN = 16 << 20;  // 64 MiB of f32
  {
    std::map<std::string, Tensor> tensors;
    for (int k = 0; k < 16; ++k) {
      tensors["t" + std::to_string(k)] = full({kN}, k, DType::f32, Device::host());
    }
    save_safetensors(path, tensors);
  }
  ReadFile(path);  // warm the page cache
  const std::vector<float> host(kN, 1.0f);
  tensor(host, {kN}, cl).to_vector<float>();  // warm the pool and the copy paths
  for (int rep = 0; rep < 3; ++rep) {
    empty_cache();
    const auto t0 = Clock::now();
    std::map<std::string, Tensor> t = load_safetensors(path, cl);
    const auto t1 = Clock::now();
    sync({t.at("t5") + 0});  // first use: allocate, read 64 MiB, upload, one kernel
    const auto t2 = Clock::now();
    sync({t.at("t5") + 0});  // second use: the kernel only
    const auto t3 = Clock::now();
    empty_cache();
    const auto t4 = Clock::now();
    Tensor up = tensor(host, {kN}, cl);  // the same bytes uploaded from host memory
    sync({up + 0});
    const auto t5 = Clock::now();
    std::printf(
        "load header (16 x 64 MiB): %.3f ms | first use of 64 MiB: %.1f ms | second use: %.1f "
        "ms | tensor() upload + use: %.1f ms\n",
        ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t4, t5));
  }
}

}  // namespace
}  // namespace lazycl
