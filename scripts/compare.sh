#!/usr/bin/env bash
# lazycl beside JAX and numpy on the rows of `lazycl-bench models`, in the same run: builds
# lazycl-bench (Release), makes build/peers-venv (jax, numpy) on first use, then alternates
# ROUNDS rounds of lazycl and of the peers (bench/peers/models.py) and prints one table
# (bench/peers/join.py): each side's median over rounds and the median per-round speed ratio.
# Environment: ROUNDS (3), REPEAT (5, timed runs per row and round), ONLY (a row-name prefix),
# OUT (build/compare). Extra arguments go to lazycl-bench models.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
REPEAT=${REPEAT:-5}
ONLY=${ONLY:-}
OUT=${OUT:-build/compare}
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j"$(nproc)" --target lazycl-bench >/dev/null
if [ ! -x build/peers-venv/bin/python ] || ! build/peers-venv/bin/python -c 'import jax, numpy' 2>/dev/null; then
  python3 -m venv build/peers-venv
  build/peers-venv/bin/pip install -q jax numpy
fi
rm -rf "$OUT"
mkdir -p "$OUT"
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
