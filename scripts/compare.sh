#!/usr/bin/env bash
# lazycl beside JAX and numpy on the rows of `lazycl-bench models`, in the same run: builds
# lazycl-bench (Release), makes build/peers-venv (jax, numpy) on first use, then alternates
# ROUNDS rounds of lazycl and of the peers (bench/peers/models.py) and prints one table
# (bench/peers/join.py): each side's median over rounds and the median per-round speed ratio.
# Environment: ROUNDS (3), REPEAT (5, timed runs per row and round), ONLY (a row-name prefix),
# OUT (build/compare), INTERLEAVE (round or row). Extra arguments go to lazycl-bench models.
# INTERLEAVE=row alternates the sides row by row instead of round by round: each row of lazycl
# is followed at once by the same row of the peers, in processes of their own (after one
# untimed pass of lazycl that lists the rows and warms its caches), so that a ratio compares
# figures taken seconds apart, not minutes. On a VM whose speed drifts over minutes (a 2-core
# Zen 3 EPYC VM on 2026-12-07: the same row 1.5-2x apart between rounds, on every side) the
# round-by-round ratios mostly measured the drift; row by row costs ~2 minutes more a round
# (each row's process starts, loads its programs and, for JAX, compiles).
# ISA=avx2 measures as on an AVX2 machine, on a host with AVX-512: PoCL compiles for Haswell
# (POCL_LLVM_CPU_NAME=haswell and its avx2 kernel library; the device is then named
# pthread-haswell-..., and reports the host's 16-float vectors, which the matmul tuner's width
# probe corrects), OpenBLAS runs its Haswell kernels (OPENBLAS_CORETYPE=Haswell) and XLA
# generates AVX2 code (--xla_cpu_max_isa=AVX2). JAX's dots do not follow: XLA calls ynn's
# kernels, which pick AVX-512 from the CPU at run time, so its matmul-bound rows stay
# AVX-512's; numpy is the AVX2 reference for the matmul rows.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${ISA:-}" in
  "") ;;
  avx2)
    export POCL_LLVM_CPU_NAME=haswell POCL_KERNELLIB_NAME=avx2 OPENBLAS_CORETYPE=Haswell
    export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_cpu_max_isa=AVX2"
    echo "== ISA=avx2: PoCL for haswell, OpenBLAS Haswell, XLA at most AVX2 (its dots: AVX-512)"
    ;;
  *)
    echo "compare.sh: ISA='$ISA' is not supported: expected avx2 or nothing" >&2
    exit 2
    ;;
esac
ROUNDS=${ROUNDS:-3}
REPEAT=${REPEAT:-5}
ONLY=${ONLY:-}
OUT=${OUT:-build/compare}
INTERLEAVE=${INTERLEAVE:-round}
case "$INTERLEAVE" in
  round | row) ;;
  *)
    echo "compare.sh: INTERLEAVE='$INTERLEAVE' is not supported: expected round or row" >&2
    exit 2
    ;;
esac
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$(nproc)" --target lazycl-bench >/dev/null
if [ ! -x build/peers-venv/bin/python ] || ! build/peers-venv/bin/python -c 'import jax, numpy' 2>/dev/null; then
  python3 -m venv build/peers-venv
  build/peers-venv/bin/pip install -q jax numpy
fi
rm -rf "$OUT"
mkdir -p "$OUT"
# Merges the one-row files $1-*.json (in row order, as listed in $OUT/rows) into $1.json.
merge_rows() {
  python3 - "$1" "$OUT/rows" <<'PY'
import json, sys
prefix, rows = sys.argv[1], open(sys.argv[2]).read().split()
doc = None
for i in range(len(rows)):
    with open(f"{prefix}-{i}.json") as f:
        part = json.load(f)
    if doc is None:
        doc = dict(part, results=[])
    doc["results"] += part["results"]
with open(f"{prefix}.json", "w") as f:
    json.dump(doc, f, indent=1)
PY
}
if [ "$INTERLEAVE" = row ]; then
  mkdir -p "$OUT/parts"
  echo "== listing the rows (one untimed lazycl pass, --repeat 1)"
  build/release/bench/lazycl-bench models --json "$OUT/list.json" --repeat 1 \
    ${ONLY:+--only "$ONLY"} "$@" >/dev/null
  python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["results"]: print(r["name"])' "$OUT/list.json" >"$OUT/rows"
  for r in $(seq 1 "$ROUNDS"); do
    echo "== round $r of $ROUNDS, row by row: $(wc -l <"$OUT/rows") rows"
    i=0
    while read -r row; do
      build/release/bench/lazycl-bench models --json "$OUT/parts/lazycl-$r-$i.json" \
        --repeat "$REPEAT" --only "$row" "$@" | tail -n 1
      build/peers-venv/bin/python bench/peers/models.py --json-jax "$OUT/parts/jax-$r-$i.json" \
        --json-numpy "$OUT/parts/numpy-$r-$i.json" --repeat "$REPEAT" --only "$row" | tail -n +2
      i=$((i + 1))
    done <"$OUT/rows"
    for side in lazycl jax numpy; do
      # A peer without the row (numpy has only the matmul rows) writes no results for it.
      merge_rows "$OUT/parts/$side-$r"
      mv "$OUT/parts/$side-$r.json" "$OUT/$side-$r.json"
    done
  done
  echo
  python3 bench/peers/join.py "$OUT" --json "$OUT/table.json"
  exit 0
fi
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r of $ROUNDS: lazycl"
  build/release/bench/lazycl-bench models --json "$OUT/lazycl-$r.json" --repeat "$REPEAT" \
    ${ONLY:+--only "$ONLY"} "$@"
  echo "== round $r of $ROUNDS: jax, numpy"
  build/peers-venv/bin/python bench/peers/models.py --json-jax "$OUT/jax-$r.json" \
    --json-numpy "$OUT/numpy-$r.json" --repeat "$REPEAT" ${ONLY:+--only "$ONLY"}
done
echo
python3 bench/peers/join.py "$OUT" --json "$OUT/table.json"
