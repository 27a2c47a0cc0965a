#!/usr/bin/env bash
# Builds lazycl with -Werror and runs the whole test suite twice: in Release, then under
# AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer on). LAZYCL_TEST_SANITIZE=0 skips
# the second pass. Kernel caches live in build/cache so that runs are hermetic.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

jobs=$(nproc)
export POCL_CACHE_DIR="$PWD/build/cache/pocl"
export LAZYCL_KERNEL_CACHE_DIR="$PWD/build/cache/lazycl"
mkdir -p "$POCL_CACHE_DIR" "$LAZYCL_KERNEL_CACHE_DIR"

run_suite() {  # name, extra cmake args...
  local dir="build/$1"
  shift
  echo "== lazycl: $dir"
  cmake -S . -B "$dir" -DLAZYCL_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  ctest --test-dir "$dir" --output-on-failure -j"$jobs"
}

run_suite release -DCMAKE_BUILD_TYPE=Release
if [ "${LAZYCL_TEST_SANITIZE:-1}" != 0 ]; then
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    run_suite asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLAZYCL_SANITIZE=ON -DLAZYCL_BUILD_BENCH=OFF
fi
