#include "bench/args.h"

#include <algorithm>
#include <charconv>

namespace lazycl::bench {

Args::Args(const std::vector<std::string>& args, const std::vector<std::string>& flags,
           const std::vector<std::string>& options) {
  auto has = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  for (size_t i = 0; i < args.size() && error_.empty(); ++i) {
    const std::string& a = args[i];
    if (!a.starts_with("--")) {
      error_ = "unexpected argument '" + a + "'";
    } else if (has(flags, a.substr(2))) {
      flags_[a.substr(2)] = true;
    } else if (has(options, a.substr(2))) {
      if (i + 1 >= args.size()) {
        error_ = a + " needs a value";
      } else {
        options_[a.substr(2)] = args[++i];
      }
    } else {
      error_ = "unknown option '" + a + "'";
    }
  }
}

std::optional<std::string> Args::option(const std::string& name) const {
  auto it = options_.find(name);
  if (it == options_.end()) return std::nullopt;
  return it->second;
}

int64_t Args::positive(const std::string& name, int64_t fallback) {
  std::optional<std::string> text = option(name);
  if (!text) return fallback;
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size() || value <= 0) {
    if (error_.empty()) error_ = "--" + name + " expects a positive integer, got '" + *text + "'";
    return fallback;
  }
  return value;
}

}  // namespace lazycl::bench
