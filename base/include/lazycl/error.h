#pragma once

#include <stdexcept>
#include <string>

namespace lazycl {

// Every user-facing failure of lazycl is thrown as this one type. Inside the library, fallible
// functions return absl::Status; the public API converts at its boundary (frontend/throw.h).
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace lazycl
