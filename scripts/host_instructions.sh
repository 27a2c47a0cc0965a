#!/usr/bin/env bash
# The host's instructions per step of one `lazycl-bench models` row: what the thread that runs
# the steps executes (building graphs, planning, launching; PoCL's enqueue code included, its
# worker threads not), counted by Callgrind, which counts the same on a busy machine as on a
# quiet one where times do not. Two runs, FEW and MANY steps after warm-up; their difference
# over MANY - FEW steps leaves out loading programs and the warm-up. Repeated runs of one build
# differ by up to ~6% (what the device has finished when the host looks differs): compare
# changes larger than that, or repeat.
#
#   bash scripts/host_instructions.sh ROW [FEW MANY]   (default 5 25; ~2 minutes a row)
#
# ROW is a prefix as `lazycl-bench models --only` takes it (one row). Needs valgrind
# (apt-get install valgrind) and a Release build in build/release. The kernel caches are
# LAZYCL_KERNEL_CACHE_DIR and POCL_CACHE_DIR as set (warm them with one plain run first).
set -euo pipefail
cd "$(dirname "$0")/.."
row=${1:?usage: host_instructions.sh ROW [FEW MANY]}
few=${2:-5}
many=${3:-25}
bench=build/release/bench/lazycl-bench
command -v valgrind >/dev/null || { echo "host_instructions.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
[ -x "$bench" ] || { echo "host_instructions.sh: build $bench first" >&2; exit 2; }
[ "$many" -gt "$few" ] || { echo "host_instructions.sh: MANY ($many) must be above FEW ($few)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Idle-priority spinners and polling reads would be counted as work under Callgrind's one
# thread at a time: both off.
export LAZYCL_KEEP_AWAKE_US=0 LAZYCL_HOST_SPIN_US=0
count() {  # steps -> instructions inside TimeStep on the main thread
  valgrind --tool=callgrind --callgrind-out-file="$out/$1.out" --collect-atstart=no \
    "--toggle-collect=lazycl::bench::(anonymous namespace)::TimeStep*" \
    "$bench" models --only "$row" --repeat "$1" >"$out/$1.log" 2>&1 ||
    { cat "$out/$1.log" >&2; exit 1; }
  grep -E "refs:" "$out/$1.log" | awk '{gsub(",", "", $4); print $4}'
}
count "$few" >"$out/few" &
count "$many" >"$out/many"
wait
a=$(cat "$out/few")
b=$(cat "$out/many")
echo "$row: $(((b - a) / (many - few))) host instructions a step (Callgrind, $few and $many steps)"
