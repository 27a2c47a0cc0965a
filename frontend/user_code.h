#pragma once

#include <exception>
#include <string_view>

#include "lazycl/error.h"

// Calling the user's code (trace/call/scan bodies) from inside the library: whatever standard
// exception it throws leaves lazycl as a lazycl::Error that says where it came from, so that no
// std:: exception escapes a public entry point. No lazycl lock is held around user code.
namespace lazycl::frontend {

// Throws lazycl::Error "<where> threw <demangled type>: <what()>".
[[noreturn]] void ThrowFromUserCode(std::string_view where, const std::exception& e);

// Runs `body`, rethrowing a lazycl::Error as it is and any other std::exception through
// ThrowFromUserCode. Exceptions of other types are the user's own and pass through untouched.
template <class F>
decltype(auto) RunUserCode(std::string_view where, F&& body) {
  try {
    return body();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    ThrowFromUserCode(where, e);
  }
}

}  // namespace lazycl::frontend
