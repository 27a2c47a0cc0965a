// save_safetensors / load_safetensors (lazycl/checkpoint.h): round trips of every dtype and shape
// on the device and the host, the file against the spec (and Python's reading of it), files
// written by hand, device results against the host interpreter, bad saves and broken files.
// Laziness is checkpoint_lazy_test.cpp.
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "checkpoint_test_util.h"

namespace lazycl {
namespace {

using test::BytesOf;
using test::C;
using test::CheckpointTest;
using test::ErrorOf;
using test::FileBytes;
using test::Has;
using test::Le64;
using test::Numel;
using test::RandomBool;
using test::RandomF32;
using test::RandomInt;
using test::Raw;
using test::ReadFile;
using test::Transposed;
using test::WriteFile;

// Tensors of every dtype and awkward shapes on `device`, with the bytes each must save as.
struct Case {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> bytes;
  std::map<std::string, std::vector<int64_t>> shapes;
};

Case MakeCase(Device device) {
  Case c;
  uint32_t seed = 1;
  auto add = [&](const std::string& name, Tensor t, std::string bytes) {
    c.shapes[name] = t.shape();
    c.tensors[name] = std::move(t);
    c.bytes[name] = std::move(bytes);
  };
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {1}, {1, 1}, {3, 0, 2}, {5, 7}, {33}};
  for (size_t s = 0; s < shapes.size(); ++s) {
    const std::vector<int64_t>& shape = shapes[s];
    const size_t n = static_cast<size_t>(Numel(shape));
    const std::string suffix = "." + std::to_string(s);
    auto f = RandomF32(n, seed++);
    add("f32" + suffix, tensor(f, shape, device), Raw(f));
    auto i = RandomInt<int32_t>(n, seed++);
    add("i32" + suffix, tensor(i, shape, device), Raw(i));
    auto l = RandomInt<int64_t>(n, seed++);
    add("i64" + suffix, tensor(l, shape, device), Raw(l));
    auto b = RandomBool(n, seed++);
    add("bool" + suffix, tensor_bool(b, shape, device), Raw(b));
    // f64: the f32 values, widened, plus a third so the low bits are not zero.
    std::vector<double> d(f.begin(), f.end());
    for (double& x : d) x += 1.0 / 3.0;
    add("f64" + suffix, tensor(d, shape, DType::f64, device), Raw(d));
    // f16 and bf16: cast from f32 (every special value included), saved as their bits.
    for (DType half : {DType::f16, DType::bf16}) {
      const Tensor h = cast(tensor(f, shape, device), half);
      add(std::string(dtype_name(half)) + suffix, h, Raw(h.to_vector<uint16_t>()));
    }
  }
  // Non-contiguous views save their values in row-major order.
  auto f = RandomF32(6 * 4, seed++);
  add("view.transposed_f32", transpose(tensor(f, {6, 4}, device), 0, 1), Raw(Transposed(f, 6, 4)));
  auto l = RandomInt<int64_t>(3 * 5, seed++);
  add("view.transposed_i64", transpose(tensor(l, {3, 5}, device), 0, 1), Raw(Transposed(l, 3, 5)));
  // A pending result.
  auto g = RandomF32(8, seed++);
  std::vector<float> doubled(g);
  for (float& x : doubled) x = x * 2;
  add("pending", tensor(g, {2, 4}, device) * 2, Raw(doubled));
  return c;
}

TEST_F(CheckpointTest, RoundTripsEveryDtypeAndShapeBitForBit) {
  for (Device from : {test::DefaultCl(), Device::host()}) {
    Case c = MakeCase(from);
    const std::string path = Path("roundtrip_" + from.str());
    save_safetensors(path, c.tensors);
    for (Device to : {test::DefaultCl(), Device::host()}) {
      SCOPED_TRACE(from.str() + " -> " + to.str());
      std::map<std::string, Tensor> loaded = load_safetensors(path, to);
      ASSERT_EQ(loaded.size(), c.tensors.size());
      for (const auto& [name, t] : loaded) {
        ASSERT_TRUE(c.bytes.contains(name)) << name;
        EXPECT_EQ(t.device(), to);
        EXPECT_FALSE(t.is_placeholder());
        EXPECT_EQ(t.shape(), c.shapes.at(name)) << name;
        EXPECT_EQ(t.dtype(), c.tensors.at(name).dtype()) << name;
        EXPECT_EQ(BytesOf(t), c.bytes.at(name)) << name;
      }
    }
  }
}

TEST_F(CheckpointTest, SavedFileFollowsTheSpec) {
  const Device cl = test::DefaultCl();
  const std::vector<float> w = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 7.0f};
  const std::vector<int64_t> ids = {-1, 1LL << 40};
  const std::vector<uint8_t> mask = {1, 0, 1};
  const std::string path = Path("layout");
  save_safetensors(path, {{"w", tensor(w, {2, 3}, cl)},
                          {"b.ids", tensor(ids, {2}, cl)},
                          {"a.mask", tensor_bool(mask, {3}, Device::host())}});
  const std::string file = ReadFile(path);
  ASSERT_GE(file.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(file[static_cast<size_t>(i)]);
  EXPECT_EQ(n % 8, 0u);
  ASSERT_EQ(file.size(), 8 + n + 3 + 16 + 24);
  const std::string json = file.substr(8, n);
  // Sorted by name, contiguous from 0, in the spec's spelling.
  EXPECT_TRUE(Has(json, R"("a.mask":{"data_offsets":[0,3],"dtype":"BOOL","shape":[3]})")) << json;
  EXPECT_TRUE(Has(json, R"("b.ids":{"data_offsets":[3,19],"dtype":"I64","shape":[2]})")) << json;
  EXPECT_TRUE(Has(json, R"("w":{"data_offsets":[19,43],"dtype":"F32","shape":[2,3]})")) << json;
  const std::string data = file.substr(8 + n);
  EXPECT_EQ(data, Raw(mask) + Raw(ids) + Raw(w));
  EXPECT_FALSE(::access((path + ".tmp").c_str(), F_OK) == 0);
  // Python's own json and struct read it the same way, where there is a python3.
  if (std::system("python3 -c 'import json, struct' >/dev/null 2>&1") == 0) {
    const std::string script = Path("check.py");
    WriteFile(script, R"(import json, struct, sys
f = open(sys.argv[1], 'rb').read()
n, = struct.unpack('<Q', f[:8])
h = json.loads(f[8:8 + n].decode('utf-8'))
d = f[8 + n:]
assert list(h) == ['a.mask', 'b.ids', 'w'], list(h)
assert h['w'] == {'dtype': 'F32', 'shape': [2, 3], 'data_offsets': [19, 43]}, h['w']
assert list(d[0:3]) == [1, 0, 1]
assert struct.unpack('<2q', d[3:19]) == (-1, 1 << 40)
assert struct.unpack('<6f', d[19:43]) == (1.5, -2.0, 3.25, 0.0, -0.0, 7.0)
assert str(struct.unpack('<6f', d[19:43])[4]) == '-0.0'
)");
    EXPECT_EQ(std::system(("python3 " + script + " " + path).c_str()), 0);
  }
}

TEST_F(CheckpointTest, ReadsAFileWrittenToTheSpecByHand) {
  const std::vector<float> w = {0.5f, -1.0f, 2.0f, 4.0f};
  const std::vector<int32_t> i = {7, -8};
  const std::vector<int64_t> s = {123456789012345LL};
  const std::vector<uint8_t> b = {0, 1, 1};
  const std::string path = Path("by_hand");
  // Keys in any order, whitespace, metadata, a size-0 tensor, a scalar; data in another order.
  WriteFile(path, FileBytes(R"( {"__metadata__": {"format": "pt"},
      "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [8, 24]},
      "i": {"shape": [2], "dtype": "I32", "data_offsets": [0, 8]},
      "empty": {"dtype": "F32", "shape": [0, 3], "data_offsets": [24, 24]},
      "s": {"dtype": "I64", "shape": [], "data_offsets": [24, 32]},
      "b": {"dtype": "BOOL", "shape": [3], "data_offsets": [32, 35]}} )",
                            Raw(i) + Raw(w) + Raw(s) + Raw(b)));
  for (Device d : {test::DefaultCl(), Device::host()}) {
    std::map<std::string, Tensor> t = load_safetensors(path, d);
    ASSERT_EQ(t.size(), 5u);
    EXPECT_EQ(t.at("w").to_vector<float>(), w);
    EXPECT_EQ(t.at("w").shape(), (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(t.at("i").to_vector<int32_t>(), i);
    EXPECT_EQ(t.at("s").item<int64_t>(), s[0]);
    EXPECT_EQ(t.at("s").shape(), std::vector<int64_t>{});
    EXPECT_EQ(t.at("b").to_vector<uint8_t>(), b);
    EXPECT_EQ(t.at("empty").shape(), (std::vector<int64_t>{0, 3}));
    EXPECT_TRUE(t.at("empty").to_vector<float>().empty());
  }
}

// Loaded tensors are ordinary operands: results on the device (both codegen strategies: the
// test also runs with LAZYCL_CODEGEN=gpu) match the host interpreter on the same file.
TEST_F(CheckpointTest, LoadedTensorsComputeLikeTheHost) {
  const std::string path = Path("compute");
  const Device host = Device::host();
  save_safetensors(path, {{"x", randn({5, 7}, 1, DType::f32, host)},
                          {"w", randn({7, 3}, 2, DType::f32, host)},
                          {"b", randn({3}, 3, DType::f32, host)},
                          {"one", randn({1}, 4, DType::f32, host)},
                          {"empty", zeros({0, 3}, DType::f32, host)},
                          {"k", tensor(std::vector<int64_t>{3, -2, 9, 0, 1}, {5}, host)}});
  auto run = [](const std::map<std::string, Tensor>& t) {
    const Tensor& x = t.at("x");
    Tensor y = tanh(matmul(x, t.at("w")) + t.at("b")) * t.at("one");  // broadcasts
    Tensor xt = transpose(x, 0, 1) + 1;                               // a non-contiguous read
    Tensor k = t.at("k") * 2 + 1;
    Tensor e = sum(t.at("empty"), {0});
    return std::vector<Tensor>{y, xt, cast(k, DType::f32), e, sum(x)};
  };
  std::vector<Tensor> device = run(load_safetensors(path, test::DefaultCl()));
  std::vector<Tensor> reference = run(load_safetensors(path, host));
  for (size_t i = 0; i < device.size(); ++i) test::ExpectNear(device[i], reference[i], 1e-5);
}

TEST_F(CheckpointTest, BadSavesAreClearErrors) {
  const Device cl = test::DefaultCl();
  const std::string path = Path("bad_save");
  save_safetensors(path, {{"keep", ones({2}, DType::f32, cl)}});
  const std::string before = ReadFile(path);
  std::string e = ErrorOf([&] {
    save_safetensors(path, {{"p", placeholder({4, 4}, DType::f32, cl)}, {"x", ones({2})}});
  });
  EXPECT_TRUE(Has(e, "save_safetensors") && Has(e, "placeholder") && Has(e, "'p'")) << e;
  e = ErrorOf([&] { save_safetensors(path, {{"", ones({2}, DType::f32, cl)}}); });
  EXPECT_TRUE(Has(e, "save_safetensors") && Has(e, "empty name")) << e;
  e = ErrorOf([&] { save_safetensors(path, {{"__metadata__", ones({2}, DType::f32, cl)}}); });
  EXPECT_TRUE(Has(e, "save_safetensors") && Has(e, "reserved")) << e;
  e = ErrorOf([&] { save_safetensors(path, {{"u", Tensor()}}); });
  EXPECT_TRUE(Has(e, "'u'") && Has(e, "undefined")) << e;
  e = ErrorOf([&] { save_safetensors(path, {{"bad\xff", ones({2}, DType::f32, cl)}}); });
  EXPECT_TRUE(Has(e, "UTF-8")) << e;
  // A pending tensor that needs a placeholder's data.
  e = ErrorOf([&] { save_safetensors(path, {{"q", placeholder({3}, DType::f32, cl) + 1}}); });
  EXPECT_TRUE(Has(e, "placeholder")) << e;
  EXPECT_EQ(ReadFile(path), before);  // a failed save leaves the file as it was
  const std::string nowhere = "/nonexistent-lazycl-dir/x.safetensors";
  e = ErrorOf([&] { save_safetensors(nowhere, {{"x", ones({2}, DType::f32, cl)}}); });
  EXPECT_TRUE(Has(e, "save_safetensors") && Has(e, nowhere) && Has(e, "No such file")) << e;
  e = ErrorOf([&] { save_safetensors(::testing::TempDir(), {{"x", ones({2})}}); });
  EXPECT_TRUE(Has(e, "save_safetensors") && Has(e, "cannot rename")) << e;
  EXPECT_FALSE(::access((path + ".tmp").c_str(), F_OK) == 0);
}

TEST_F(CheckpointTest, BrokenFilesAreClearErrorsNamingTheFile) {
  const Device cl = test::DefaultCl();
  const std::string path = Path("broken");
  const std::string w = R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
  const std::string good = FileBytes(w, std::string(8, '\0'));
  struct Broken {
    std::string bytes;
    std::vector<std::string> expected;
  };
  const std::vector<Broken> cases = {
      {"", {"0 bytes", "fewer than the 8"}},
      {"abc", {"3 bytes"}},
      {Le64(uint64_t{1} << 63) + "{}", {"9223372036854775808", "over the limit"}},
      {Le64(1000) + "{}      ", {"past the end of the file"}},
      {good.substr(0, good.size() - 1), {"tensor 'w'", "past the end of the file"}},
      {good.substr(0, 20), {"past the end of the file"}},
      {FileBytes("{\"w\": ", ""), {"not valid JSON"}},
      {FileBytes("[]", ""), {"not a JSON object"}},
      {FileBytes(R"({"w": {"dtype": "C64", "shape": [4], "data_offsets": [0, 32]}})",
                 std::string(32, '\0')),
       {"tensor 'w' has dtype C64, which lazycl cannot hold yet"}},
      {FileBytes(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                     "v": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                 std::string(12, '\0')),
       {"tensor 'v'", "overlap"}},
      {good + "extra", {"belong to no tensor"}},
  };
  for (const Broken& c : cases) {
    WriteFile(path, c.bytes);
    for (Device d : {cl, Device::host()}) {
      const std::string e = ErrorOf([&] { load_safetensors(path, d); });
      EXPECT_TRUE(Has(e, "load_safetensors") && Has(e, path)) << e;
      for (const std::string& part : c.expected)
        EXPECT_TRUE(Has(e, part)) << e << "\nwanted " << part;
    }
  }
  std::string e = ErrorOf([&] { load_safetensors(Path("missing"), cl); });
  EXPECT_TRUE(Has(e, "load_safetensors") && Has(e, "missing") && Has(e, "No such file")) << e;
  WriteFile(path, good);
  e = ErrorOf([&] { load_safetensors(path, Device::opencl(99)); });
  EXPECT_TRUE(Has(e, "99")) << e;
  e = ErrorOf([&] { load_safetensors(::testing::TempDir(), cl); });
  EXPECT_TRUE(Has(e, "not a regular file")) << e;
}

}  // namespace
}  // namespace lazycl
