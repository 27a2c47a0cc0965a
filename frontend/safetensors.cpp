#include "frontend/safetensors.h"

#include <algorithm>
#include <array>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_view.h"
#include "nlohmann/json.hpp"

namespace lazycl::frontend::safetensors {
namespace {

using Json = nlohmann::json;

// The dtypes lazycl holds, by safetensors name. A new DType is one row here.
struct FormatDType {
  const char* name;
  DType dtype;
};
constexpr FormatDType kFormatDTypes[] = {
    {"F32", DType::f32}, {"I32", DType::i32},   {"I64", DType::i64}, {"BOOL", DType::boolean},
    {"F16", DType::f16}, {"BF16", DType::bf16}, {"F64", DType::f64},
};

// Every other dtype of the format: known, but lazycl cannot hold them yet.
constexpr const char* kOtherFormatDTypes[] = {
    "U8",      "I8",      "U16",     "I16",     "U32",     "U64", "F4",
    "F6_E2M3", "F6_E3M2", "F8_E4M3", "F8_E5M2", "F8_E8M0", "C64",
};

constexpr int kMaxDepth = 16;  // a header is 3 deep; a hostile one must not exhaust the stack

absl::Status Bad(std::string_view path, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("safetensors file '", base::Sv(path), "': ", base::Sv(what)));
}

absl::Status BadTensor(std::string_view path, const std::string& name, std::string_view what) {
  return Bad(path, absl::StrCat("tensor '", name, "' ", base::Sv(what)));
}

// A short quote of a JSON value for an error message.
std::string Quote(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

// The deepest nesting of brackets outside strings, stopping once past kMaxDepth.
int NestingDepth(std::string_view json) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : json) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
      if (deepest > kMaxDepth) break;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

// Parses `json`; the first key repeated inside one object, if any, goes to `duplicate`.
absl::StatusOr<Json> ParseJson(std::string_view path, std::string_view json,
                               std::optional<std::string>* duplicate) {
  if (NestingDepth(json) > kMaxDepth) {
    return Bad(path, absl::StrCat("the header nests deeper than ", kMaxDepth, " levels"));
  }
  std::array<std::set<std::string>, kMaxDepth + 2> keys;
  Json::parser_callback_t callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    // An object that starts at depth d has its keys at depth d + 1.
    if (depth < 0 || depth + 1 >= static_cast<int>(keys.size())) return true;
    if (event == Json::parse_event_t::object_start) {
      keys[static_cast<size_t>(depth) + 1].clear();
    } else if (event == Json::parse_event_t::key) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!keys[static_cast<size_t>(depth)].insert(key).second && !duplicate->has_value()) {
        *duplicate = key;
      }
    }
    return true;
  };
  try {
    return Json::parse(json.begin(), json.end(), callback);
  } catch (const Json::exception& e) {
    return Bad(path, absl::StrCat("the header is not valid JSON: ", e.what()));
  }
}

absl::StatusOr<uint64_t> NonNegativeInteger(std::string_view path, const std::string& name,
                                            const Json& value, std::string_view field) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer()) {
    return BadTensor(path, name,
                     absl::StrCat("has ", base::Sv(field), " ", Quote(value), ": negative"));
  }
  return BadTensor(
      path, name,
      absl::StrCat("has ", base::Sv(field), " ", Quote(value), ": expected an integer"));
}

absl::StatusOr<TensorInfo> ParseTensor(std::string_view path, const std::string& name,
                                       const Json& entry, uint64_t buffer_bytes) {
  TensorInfo info;
  info.name = name;
  if (!entry.is_object()) {
    return BadTensor(path, name,
                     absl::StrCat("is ", Quote(entry),
                                  ": expected an object with dtype, shape and data_offsets"));
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(field)) return BadTensor(path, name, absl::StrCat("has no ", field));
  }
  const Json& dtype = entry.at("dtype");
  if (!dtype.is_string()) {
    return BadTensor(path, name, absl::StrCat("has dtype ", Quote(dtype), ": expected a string"));
  }
  const std::string& dtype_name = dtype.get_ref<const std::string&>();
  std::optional<DType> ours = FromFormatName(dtype_name);
  if (!ours.has_value()) {
    const bool known = std::find_if(std::begin(kOtherFormatDTypes), std::end(kOtherFormatDTypes),
                                    [&](const char* n) { return dtype_name == n; }) !=
                       std::end(kOtherFormatDTypes);
    return BadTensor(
        path, name,
        known ? absl::StrCat("has dtype ", dtype_name,
                             ", which lazycl cannot hold yet (supported: ", SupportedNames(), ")")
              : absl::StrCat("has dtype ", Quote(dtype),
                             ", which is not a safetensors dtype (supported: ", SupportedNames(),
                             ")"));
  }
  info.dtype = *ours;

  const Json& shape = entry.at("shape");
  if (!shape.is_array()) {
    return BadTensor(path, name,
                     absl::StrCat("has shape ", Quote(shape), ": expected an array of integers"));
  }
  uint64_t numel = 1;
  bool overflow = false;
  for (const Json& d : shape) {
    absl::StatusOr<uint64_t> size = NonNegativeInteger(path, name, d, "a shape entry");
    if (!size.ok()) return size.status();
    if (*size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) overflow = true;
    overflow = overflow || __builtin_mul_overflow(numel, *size, &numel);
    info.shape.push_back(static_cast<int64_t>(*size));
  }
  uint64_t bytes = 0;
  overflow = overflow || __builtin_mul_overflow(numel, dtype_size(info.dtype), &bytes) ||
             bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (overflow) {
    return BadTensor(path, name,
                     absl::StrCat("has shape ", Quote(shape), " whose size in bytes overflows"));
  }

  const Json& offsets = entry.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2) {
    return BadTensor(
        path, name,
        absl::StrCat("has data_offsets ", Quote(offsets), ": expected [begin, end], two integers"));
  }
  absl::StatusOr<uint64_t> begin = NonNegativeInteger(path, name, offsets[0], "data_offsets begin");
  if (!begin.ok()) return begin.status();
  absl::StatusOr<uint64_t> end = NonNegativeInteger(path, name, offsets[1], "data_offsets end");
  if (!end.ok()) return end.status();
  info.begin = *begin;
  info.end = *end;
  const std::string range = absl::StrCat("data_offsets [", info.begin, ", ", info.end, "]");
  if (info.end < info.begin) {
    return BadTensor(path, name, absl::StrCat("has ", range, ": end is before begin"));
  }
  if (info.end > buffer_bytes) {
    return BadTensor(path, name,
                     absl::StrCat("has ", range, ", past the end of the file (its data buffer has ",
                                  buffer_bytes, " bytes)"));
  }
  if (info.end - info.begin != bytes) {
    return BadTensor(
        path, name,
        absl::StrCat("has ", range, " (", info.end - info.begin, " bytes) but dtype ", dtype_name,
                     " and shape ", Quote(shape), " need ", bytes, " bytes"));
  }
  return info;
}

// The reference implementation's rule: sorted by offset, the tensors cover the data buffer
// from 0 to its end with neither overlap nor gap.
absl::Status CheckCoverage(std::string_view path, const std::vector<TensorInfo>& tensors,
                           uint64_t buffer_bytes) {
  std::vector<const TensorInfo*> order;
  for (const TensorInfo& t : tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  uint64_t covered = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo* t : order) {
    if (t->begin < covered) {
      return BadTensor(path, t->name,
                       absl::StrCat("has data_offsets [", t->begin, ", ", t->end,
                                    "], which overlap those of tensor '", previous->name, "' [",
                                    previous->begin, ", ", previous->end, "]"));
    }
    if (t->begin > covered) {
      return BadTensor(
          path, t->name,
          absl::StrCat("has data_offsets [", t->begin, ", ", t->end, "], leaving bytes [", covered,
                       ", ", t->begin, ") of the data buffer to no tensor"));
    }
    covered = t->end;
    previous = t;
  }
  if (covered != buffer_bytes) {
    return Bad(path, absl::StrCat("bytes [", covered, ", ", buffer_bytes,
                                  ") of the data buffer belong to no tensor (the tensors must "
                                  "cover it contiguously)"));
  }
  return absl::OkStatus();
}

}  // namespace

const char* FormatName(DType dtype) {
  for (const FormatDType& d : kFormatDTypes) {
    if (d.dtype == dtype) return d.name;
  }
  return nullptr;
}

std::optional<DType> FromFormatName(std::string_view name) {
  for (const FormatDType& d : kFormatDTypes) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

std::string SupportedNames() {
  std::vector<std::string> names;
  for (const FormatDType& d : kFormatDTypes) names.emplace_back(d.name);
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<uint64_t> HeaderLength(std::string_view path, std::string_view first_bytes,
                                      uint64_t file_size) {
  if (first_bytes.size() < 8 || file_size < 8) {
    return Bad(path, absl::StrCat("the file has ", file_size,
                                  " bytes, fewer than the 8 of the header length"));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(first_bytes[i]);
  if (n > kMaxHeaderBytes) {
    return Bad(path, absl::StrCat("the header length is ", n, " bytes, over the limit of ",
                                  kMaxHeaderBytes, " bytes"));
  }
  if (n > file_size - 8) {
    return Bad(path, absl::StrCat("the header length is ", n, " bytes, past the end of the file (",
                                  file_size, " bytes: truncated?)"));
  }
  return n;
}

absl::StatusOr<Header> ParseHeader(std::string_view path, std::string_view json,
                                   uint64_t buffer_bytes) {
  std::optional<std::string> duplicate;
  absl::StatusOr<Json> parsed = ParseJson(path, json, &duplicate);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_object()) {
    return Bad(path, absl::StrCat("the header is ", Quote(*parsed), ", not a JSON object"));
  }
  if (duplicate.has_value()) {
    return Bad(path, absl::StrCat("the header has the key '", *duplicate, "' twice"));
  }
  Header header;
  for (const auto& [name, entry] : parsed->items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) {
        return Bad(path, absl::StrCat("__metadata__ is ", Quote(entry),
                                      ": expected an object of strings"));
      }
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          return Bad(path, absl::StrCat("__metadata__ '", key, "' is ", Quote(value),
                                        ": expected a string"));
        }
        header.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    absl::StatusOr<TensorInfo> info = ParseTensor(path, name, entry, buffer_bytes);
    if (!info.ok()) return info.status();
    header.tensors.push_back(*std::move(info));
  }
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  if (absl::Status s = CheckCoverage(path, header.tensors, buffer_bytes); !s.ok()) return s;
  return header;
}

absl::StatusOr<std::string> SerializeHeader(const std::vector<TensorInfo>& tensors) {
  Json header = Json::object();
  for (const TensorInfo& t : tensors) {
    const char* dtype = FormatName(t.dtype);
    if (dtype == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' has dtype ",
                                                     dtype_name(t.dtype),
                                                     ", which safetensors cannot hold"));
    }
    header[t.name] = {{"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("a tensor name is not valid UTF-8: ", e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

}  // namespace lazycl::frontend::safetensors
