#include "kernels/cpu_math.h"

#include <array>
#include <cctype>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "kernels/templates.h"

namespace lazycl::kernels {
namespace {

constexpr const char* kNames[] = {"lc_exp", "lc_exp16", "lc_log", "lc_tanh", "lc_erf"};

// The definition of `static inline float <name>(` in cpu_math.cl, through its closing line.
std::string Definition(std::string_view name) {
  const std::string_view text = Template("cpu_math.cl");
  const std::string head = "static inline float " + std::string(name) + "(";
  const size_t begin = text.find(head);
  LAZYCL_CHECK(begin != std::string_view::npos && (begin == 0 || text[begin - 1] == '\n'),
               "cpu_math.cl defines no %s", head.c_str());
  const size_t end = text.find("\n}\n", begin);
  LAZYCL_CHECK(end != std::string_view::npos, "cpu_math.cl: %s has no closing line", head.c_str());
  return std::string(text.substr(begin, end + 3 - begin));
}

// `text` with each identifier that `from` names replaced by the matching `to`; words that
// start with a digit (literals such as 1.0f and 0x4B400000) are left alone.
std::string RenameIdentifiers(std::string_view text, const std::vector<std::string_view>& from,
                              const std::vector<std::string_view>& to) {
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (!word_char(text[i])) {
      out.push_back(text[i++]);
      continue;
    }
    size_t j = i;
    while (j < text.size() && word_char(text[j])) ++j;
    std::string_view word = text.substr(i, j - i);
    if (!std::isdigit(static_cast<unsigned char>(word[0]))) {
      for (size_t k = 0; k < from.size(); ++k) {
        if (word == from[k]) {
          word = to[k];
          break;
        }
      }
    }
    out.append(word);
    i = j;
  }
  return out;
}

}  // namespace

const char* CpuMathName(CpuMath f) { return kNames[static_cast<int>(f)]; }

const std::string& CpuMathSource(CpuMath f) {
  static const std::array<std::string, 5>* sources = [] {
    const std::string exp = Definition("lc_exp");
    return new std::array<std::string, 5>{
        exp,
        RenameIdentifiers(exp, {"lc_exp", "float", "int", "as_float", "as_int"},
                          {"lc_exp16", "float16", "int16", "as_float16", "as_int16"}),
        Definition("lc_log"),
        Definition("lc_tanh"),
        Definition("lc_erf"),
    };
  }();
  return (*sources)[static_cast<int>(f)];
}

}  // namespace lazycl::kernels
