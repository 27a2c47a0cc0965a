# Fails when README.md no longer quotes tests/readme_example.inc verbatim, so the example that
# users read is the one that is compiled and run.
# Usage: cmake -DROOT=<source dir> -P check_readme.cmake
file(READ ${ROOT}/README.md readme)
file(READ ${ROOT}/tests/readme_example.inc example)
string(FIND "${readme}" "${example}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not quote tests/readme_example.inc verbatim")
endif()
message(STATUS "README example OK")
