#!/usr/bin/env bash
# Builds lazycl in Release and runs the main job: the transfer-size benchmark on the default
# device (extra arguments go to lazycl-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$(nproc)" --target lazycl-bench
exec build/release/bench/lazycl-bench transfer "$@"
