#include "frontend/user_code.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <typeinfo>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "base/string_view.h"

namespace lazycl::frontend {

void ThrowFromUserCode(std::string_view where, const std::exception& e) {
  const char* mangled = typeid(e).name();
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  const std::string type = status == 0 && demangled ? demangled.get() : mangled;
  base::Throw(
      absl::InvalidArgumentError(absl::StrCat(base::Sv(where), " threw ", type, ": ", e.what())));
}

}  // namespace lazycl::frontend
