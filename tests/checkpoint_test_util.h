#pragma once

// Helpers of the checkpoint tests (checkpoint_test.cpp, checkpoint_lazy_test.cpp).
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/fault.h"
#include "test_util.h"

namespace lazycl::test {

inline std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/lazycl_ckpt_" + std::to_string(::getpid()) + "_" + name;
}

inline std::string Le64(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A safetensors file: header `json` (padded to 8 bytes with spaces) then `data`.
inline std::string FileBytes(std::string json, const std::string& data) {
  json.append((8 - json.size() % 8) % 8, ' ');
  return Le64(json.size()) + json + data;
}

template <class T>
inline std::string Raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// Values of every kind a dtype holds: for f32 signed zeros, infinities and NaN too.
inline std::vector<float> RandomF32(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 3);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  const float specials[] = {-0.0f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), 1e-40f};
  for (size_t i = 0; i < n && i < 5; ++i) v[(i * 7) % n] = specials[i];
  return v;
}
template <class T>
std::vector<T> RandomInt(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(rng());
  if (n > 0) v[0] = std::numeric_limits<T>::min();
  if (n > 1) v[1] = std::numeric_limits<T>::max();
  return v;
}
inline std::vector<uint8_t> RandomBool(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& x : v) x = static_cast<uint8_t>(rng() % 2);
  return v;
}

// The bytes a tensor holds, read back, whatever its dtype.
inline std::string BytesOf(const Tensor& t) {
  switch (t.dtype()) {
    case DType::f32:
      return Raw(t.to_vector<float>());
    case DType::i32:
      return Raw(t.to_vector<int32_t>());
    case DType::i64:
      return Raw(t.to_vector<int64_t>());
    case DType::boolean:
      return Raw(t.to_vector<uint8_t>());
    case DType::f16:
    case DType::bf16:
      return Raw(t.to_vector<uint16_t>());
    case DType::f64:
      return Raw(t.to_vector<double>());
  }
  return "";
}

inline int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A [rows, cols] row-major matrix transposed.
template <class T>
std::vector<T> Transposed(const std::vector<T>& v, int64_t rows, int64_t cols) {
  std::vector<T> out(v.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(c * rows + r)] = v[static_cast<size_t>(r * cols + c)];
  return out;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void TearDown() override {
    base::fault::Reset();
    for (const std::string& p : paths_) {
      ::unlink(p.c_str());
      ::unlink((p + ".tmp").c_str());
    }
  }
  std::string Path(const std::string& name) {
    paths_.push_back(TempPath(name));
    return paths_.back();
  }
  std::vector<std::string> paths_;
};

}  // namespace lazycl::test
