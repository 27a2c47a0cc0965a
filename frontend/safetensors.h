#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lazycl/dtype.h"

// The safetensors format (https://github.com/huggingface/safetensors), pure: bytes in, a
// validated header out, and the header of a file to write. No file or device is touched here.
// A file is an 8-byte little-endian header length N, N bytes of UTF-8 JSON
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value"}}
// (maybe padded with spaces), then the data buffer; offsets are relative to its start.
namespace lazycl::frontend::safetensors {

// The reference implementation's cap on N.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // [begin, end) of the data buffer
  uint64_t end = 0;
};

struct Header {
  std::vector<TensorInfo> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
};

// The safetensors name of `dtype` ("F32"), or nullptr for a dtype the format cannot hold.
const char* FormatName(DType dtype);
// Our dtype of safetensors dtype `name`: nullopt for a name not in the table (the error says
// whether the format knows it).
std::optional<DType> FromFormatName(std::string_view name);
// "F32, I32, I64, BOOL": what FromFormatName accepts.
std::string SupportedNames();

// N, from the file's first bytes (`first_bytes`: up to 8 of them) and its size. Errors
// (InvalidArgument, naming `path`): fewer than 8 bytes, N over kMaxHeaderBytes, or the header
// running past the end of the file.
absl::StatusOr<uint64_t> HeaderLength(std::string_view path, std::string_view first_bytes,
                                      uint64_t file_size);

// Parses and validates the N header bytes, for a data buffer of `buffer_bytes`. Every error is
// InvalidArgument naming `path` and, where there is one, the tensor: JSON that does not parse,
// is not an object, nests too deep or repeats a key; a tensor entry without a string dtype, a
// shape of non-negative integers or two non-negative integer data_offsets; a dtype that is not
// a safetensors dtype or that lazycl cannot hold; a size (elements times element size) that
// overflows or differs from end - begin; end < begin; a range past the end of the buffer;
// ranges that overlap, leave a gap, or do not reach the end of the buffer (the reference
// implementation's rule: the tensors cover the buffer contiguously); metadata that is not an
// object of strings.
absl::StatusOr<Header> ParseHeader(std::string_view path, std::string_view json,
                                   uint64_t buffer_bytes);

// The first 8 + N bytes of a file holding `tensors` (their offsets must be set), N a multiple
// of 8 (spaces pad the JSON, as the reference does). Tensor names must be valid UTF-8.
absl::StatusOr<std::string> SerializeHeader(const std::vector<TensorInfo>& tensors);

}  // namespace lazycl::frontend::safetensors
