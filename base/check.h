#pragma once

#include <cstdio>
#include <cstdlib>

// Internal invariants. A failed check is a bug in lazycl, not bad user input: it aborts with a
// message. User errors are absl::Status inside the library and lazycl::Error at the API.
#define LAZYCL_CHECK(cond, ...)                                                                \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::fprintf(stderr, "lazycl: internal check failed at %s:%d: %s\n", __FILE__, __LINE__, \
                   #cond);                                                                     \
      std::fprintf(stderr, "lazycl: " __VA_ARGS__);                                            \
      std::fprintf(stderr, "\n");                                                              \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)
