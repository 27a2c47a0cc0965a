#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

// A small "--name value" / "--flag" parser for lazycl-bench subcommands.
namespace lazycl::bench {

class Args {
 public:
  // `flags` take no value; `options` take one. Anything else is an error (see error()).
  Args(const std::vector<std::string>& args, const std::vector<std::string>& flags,
       const std::vector<std::string>& options);

  const std::string& error() const { return error_; }  // empty when the arguments parsed
  bool flag(const std::string& name) const { return flags_.contains(name); }
  std::optional<std::string> option(const std::string& name) const;
  // The option as a positive integer, `fallback` when absent; sets error() when malformed.
  int64_t positive(const std::string& name, int64_t fallback);

 private:
  absl::flat_hash_map<std::string, bool> flags_;
  absl::flat_hash_map<std::string, std::string> options_;
  std::string error_;
};

}  // namespace lazycl::bench
