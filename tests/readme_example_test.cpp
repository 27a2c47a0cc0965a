// The README's example, run as a test. tests/readme_example.inc is quoted verbatim in README.md
// between markers; edit it there and here at once.
#include <cmath>
#include <cstdio>
#include <vector>

#include "gtest/gtest.h"
#include "lazycl/lazycl.h"

namespace {

TEST(ReadmeExampleTest, RunsAsWrittenInTheReadme) {
#include "readme_example.inc"
}

}  // namespace
