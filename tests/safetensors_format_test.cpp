// The safetensors header parser and writer (frontend/safetensors.h), without files or devices:
// every malformed or hostile header is an error naming the file (and the tensor), and what the
// writer produces follows the format and parses back.
#include "frontend/safetensors.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lazycl::frontend::safetensors {
namespace {

constexpr const char* kPath = "/models/m.safetensors";

std::string Le64(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

// The error of ParseHeader, or "(ok)".
std::string ParseError(const std::string& json, uint64_t buffer_bytes) {
  absl::StatusOr<Header> h = ParseHeader(kPath, json, buffer_bytes);
  return h.ok() ? "(ok)" : std::string(h.status().message());
}

bool Has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(SafetensorsFormat, HeaderLengthChecksTheFile) {
  auto error = [](const std::string& first, uint64_t size) {
    absl::StatusOr<uint64_t> n = HeaderLength(kPath, first, size);
    return n.ok() ? "(ok)" : std::string(n.status().message());
  };
  EXPECT_EQ(*HeaderLength(kPath, Le64(16), 24), 16u);
  EXPECT_EQ(*HeaderLength(kPath, Le64(0), 8), 0u);
  for (uint64_t size : {0, 1, 7}) {
    const std::string e = error(std::string(size, 'x'), size);
    EXPECT_TRUE(Has(e, kPath) && Has(e, "fewer than the 8")) << e;
  }
  const std::string huge = error(Le64(uint64_t{1} << 63), 1000);
  EXPECT_TRUE(Has(huge, kPath) && Has(huge, "9223372036854775808") && Has(huge, "over the limit"))
      << huge;
  const std::string max = error(Le64(UINT64_MAX), 1000);
  EXPECT_TRUE(Has(max, "over the limit")) << max;
  EXPECT_TRUE(Has(error(Le64(0), 3), "fewer than the 8"));  // a size that contradicts the bytes
  const std::string past = error(Le64(100), 50);
  EXPECT_TRUE(Has(past, kPath) && Has(past, "past the end of the file")) << past;
  EXPECT_TRUE(Has(error(Le64(kMaxHeaderBytes + 1), kMaxHeaderBytes + 100), "over the limit"));
}

TEST(SafetensorsFormat, ValidHeaders) {
  absl::StatusOr<Header> h =
      ParseHeader(kPath,
                  R"({"b": {"dtype": "I64", "shape": [2], "data_offsets": [8, 24]},
          "__metadata__": {"format": "pt"},
          "a": {"dtype": "F32", "shape": [1, 2], "data_offsets": [0, 8]},
          "s": {"dtype": "BOOL", "shape": [], "data_offsets": [24, 25]},
          "z": {"dtype": "I32", "shape": [3, 0], "data_offsets": [25, 25]}}        )",
                  25);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->tensors.size(), 4u);
  EXPECT_EQ(h->tensors[0].name, "a");
  EXPECT_EQ(h->tensors[0].dtype, DType::f32);
  EXPECT_EQ(h->tensors[0].shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(h->tensors[1].begin, 8u);
  EXPECT_EQ(h->tensors[1].end, 24u);
  EXPECT_EQ(h->tensors[2].shape, std::vector<int64_t>{});
  EXPECT_EQ(h->tensors[2].dtype, DType::boolean);
  EXPECT_EQ(h->tensors[3].shape, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(h->metadata.at("format"), "pt");
  EXPECT_EQ(ParseError("{}", 0), "(ok)");
  EXPECT_EQ(ParseError(R"({"__metadata__": {}})", 0), "(ok)");
}

struct Hostile {
  const char* json;
  uint64_t buffer_bytes;
  std::vector<std::string> expected;  // parts of the message, besides the path
};

TEST(SafetensorsFormat, MalformedAndHostileHeadersAreClearErrors) {
  const std::vector<Hostile> cases = {
      {"", 0, {"not valid JSON"}},
      {"{", 0, {"not valid JSON"}},
      {"{\"a\": 1,}", 0, {"not valid JSON"}},
      {"\xff\xfe", 0, {"not valid JSON"}},
      {"{\"a\xff\": {}}", 0, {"not valid JSON"}},
      {"[1, 2]", 0, {"not a JSON object"}},
      {"\"text\"", 0, {"not a JSON object"}},
      {"null", 0, {"not a JSON object"}},
      {R"({"w": 3})", 0, {"tensor 'w'", "expected an object"}},
      {R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4, {"tensor 'w'", "no dtype"}},
      {R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", 4, {"tensor 'w'", "no shape"}},
      {R"({"w": {"dtype": "F32", "shape": [1]}})", 4, {"tensor 'w'", "no data_offsets"}},
      {R"({"w": {"dtype": 5, "shape": [1], "data_offsets": [0, 4]}})",
       4,
       {"tensor 'w'", "expected a string"}},
      {R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
       4,
       {"tensor 'w'", "-1", "negative"}},
      {R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})",
       4,
       {"tensor 'w'", "1.5", "expected an integer"}},
      {R"({"w": {"dtype": "F32", "shape": ["2"], "data_offsets": [0, 8]}})",
       8,
       {"tensor 'w'", "expected an integer"}},
      {R"({"w": {"dtype": "F32", "shape": 2, "data_offsets": [0, 8]}})",
       8,
       {"tensor 'w'", "expected an array"}},
      {R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 8], "data_offsets": [0, 8]}})",
       8,
       {"tensor 'w'", "overflows"}},
      {R"({"w": {"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 8]}})",
       8,
       {"tensor 'w'", "overflows"}},
      {R"({"w": {"dtype": "F32", "shape": [99999999999999999999], "data_offsets": [0, 8]}})",
       8,
       {"tensor 'w'", "expected an integer"}},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8, 9]}})",
       8,
       {"tensor 'w'", "two integers"}},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})",
       8,
       {"tensor 'w'", "two integers"}},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}})",
       8,
       {"tensor 'w'", "negative"}},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}})",
       8,
       {"tensor 'w'", "past the end of the file", "8 bytes"}},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 18446744073709551615]}})",
       8,
       {"tensor 'w'", "past the end of the file"}},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})",
       8,
       {"tensor 'w'", "end is before begin"}},
      {R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})",
       8,
       {"tensor 'w'", "need 12 bytes"}},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
       12,
       {"tensor 'b'", "overlap", "tensor 'a'"}},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
       8,
       {"overlap"}},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
           "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
       12,
       {"tensor 'b'", "[4, 8)", "to no tensor"}},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
       8,
       {"tensor 'a'", "[0, 4)", "to no tensor"}},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
       8,
       {"[4, 8)", "belong to no tensor"}},
      {R"({"w": {"dtype": "C64", "shape": [2], "data_offsets": [0, 16]}})",
       16,
       {"tensor 'w' has dtype C64, which lazycl cannot hold yet (supported: F32, I32, I64, "
        "BOOL, F16, BF16, F64)"}},
      {R"({"w": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})",
       2,
       {"tensor 'w'", "U8", "cannot hold yet"}},
      {R"({"w": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})",
       2,
       {"tensor 'w'", "cannot hold yet"}},
      {R"({"w": {"dtype": "float32", "shape": [2], "data_offsets": [0, 8]}})",
       8,
       {"tensor 'w'", "\"float32\"", "not a safetensors dtype"}},
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
           "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
       4,
       {"the key 'w' twice"}},
      {R"({"w": {"dtype": "F32", "dtype": "I32", "shape": [1], "data_offsets": [0, 4]}})",
       4,
       {"the key 'dtype' twice"}},
      {R"({"__metadata__": [1]})", 0, {"__metadata__", "expected an object"}},
      {R"({"__metadata__": {"k": 1}})", 0, {"__metadata__ 'k'", "expected a string"}},
  };
  for (const Hostile& c : cases) {
    const std::string e = ParseError(c.json, c.buffer_bytes);
    EXPECT_TRUE(Has(e, kPath)) << c.json << "\n-> " << e;
    for (const std::string& part : c.expected) {
      EXPECT_TRUE(Has(e, part)) << c.json << "\n-> " << e << "\nwanted: " << part;
    }
  }
  // A header nested a million deep is refused before it is parsed.
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  EXPECT_TRUE(Has(ParseError(deep, 0), "nests deeper")) << ParseError(deep, 0);
  const std::string deep_in_string =
      "{\"__metadata__\": {\"k\": \"" + std::string(100, '[') + "\"}}";
  EXPECT_EQ(ParseError(deep_in_string, 0), "(ok)");
}

TEST(SafetensorsFormat, SerializedHeadersFollowTheFormatAndParseBack) {
  std::vector<TensorInfo> infos = {
      {"alpha", DType::f32, {2, 3}, 0, 24},      {"beta", DType::i64, {}, 24, 32},
      {"empty", DType::boolean, {0, 5}, 32, 32}, {"gamma.weight", DType::i32, {1}, 32, 36},
      {"mask", DType::boolean, {3}, 36, 39},
  };
  absl::StatusOr<std::string> bytes = SerializeHeader(infos);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_GE(bytes->size(), 8u);
  absl::StatusOr<uint64_t> n = HeaderLength(kPath, bytes->substr(0, 8), bytes->size() + 39);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(8 + *n, bytes->size());
  EXPECT_EQ(*n % 8, 0u);  // the data buffer starts 8-byte aligned
  const std::string json = bytes->substr(8);
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.substr(json.rfind('}') + 1).find_first_not_of(' '), std::string::npos);
  // The spec's spelling, by hand.
  EXPECT_TRUE(Has(json, R"("alpha":{"data_offsets":[0,24],"dtype":"F32","shape":[2,3]})")) << json;
  EXPECT_TRUE(Has(json, R"("beta":{"data_offsets":[24,32],"dtype":"I64","shape":[]})")) << json;
  EXPECT_TRUE(Has(json, R"("mask":{"data_offsets":[36,39],"dtype":"BOOL","shape":[3]})")) << json;
  absl::StatusOr<Header> back = ParseHeader(kPath, json, 39);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->tensors.size(), infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    EXPECT_EQ(back->tensors[i].name, infos[i].name);
    EXPECT_EQ(back->tensors[i].dtype, infos[i].dtype);
    EXPECT_EQ(back->tensors[i].shape, infos[i].shape);
    EXPECT_EQ(back->tensors[i].begin, infos[i].begin);
    EXPECT_EQ(back->tensors[i].end, infos[i].end);
  }
  // Names are escaped as JSON strings.
  absl::StatusOr<std::string> quoted =
      SerializeHeader({{"a \"quoted\"\\name\n", DType::f32, {1}, 0, 4}});
  ASSERT_TRUE(quoted.ok());
  absl::StatusOr<Header> q = ParseHeader(kPath, quoted->substr(8), 4);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->tensors[0].name, "a \"quoted\"\\name\n");
  EXPECT_FALSE(SerializeHeader({{"bad\xff", DType::f32, {1}, 0, 4}}).ok());
}

// Random damage to a valid header never crashes the parser; it parses or is an error naming
// the file.
TEST(SafetensorsFormat, DamagedHeadersNeverCrash) {
  const std::string valid = R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},)"
                            R"( "b": {"dtype": "I64", "shape": [1], "data_offsets": [16, 24]}})";
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\",:0123456789-. aeE\\";
  for (int trial = 0; trial < 3000; ++trial) {
    std::string json = valid;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % json.size();
      switch (rng() % 3) {
        case 0:
          json[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          json.erase(at, 1 + rng() % 5);
          break;
        default:
          json.insert(at, 1, alphabet[rng() % alphabet.size()]);
      }
      if (json.empty()) json = "{";
    }
    const std::string e = ParseError(json, 24);
    if (e != "(ok)") {
      EXPECT_TRUE(Has(e, kPath)) << json << " -> " << e;
    }
  }
}

}  // namespace
}  // namespace lazycl::frontend::safetensors
