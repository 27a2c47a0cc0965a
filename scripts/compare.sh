#!/usr/bin/env bash
# lazycl beside JAX and numpy on the rows of `lazycl-bench models`, in the same run: builds
# lazycl-bench (Release), makes build/peers-venv (jax, numpy) on first use, then alternates
# ROUNDS rounds of lazycl and of the peers (bench/peers/models.py) and prints one table
# (bench/peers/join.py): each side's median over rounds and the median per-round speed ratio.
# Environment: ROUNDS (3), REPEAT (5, timed runs per row and round), ONLY (a row-name prefix),
# OUT (build/compare). Extra arguments go to lazycl-bench models.
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
