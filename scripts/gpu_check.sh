#!/usr/bin/env bash
# The suite and the benchmarks on the OpenCL device LAZYCL_* selects (a GPU where there is one),
# from an existing Release build: what was run on a lent NVIDIA H200 (README, "On an NVIDIA
# GPU"). Where no ICD file names NVIDIA's driver but its library is installed (a container with
# the driver mounted), one is made in a temporary directory. Writes under OUT (default
# build/gpu-check): ctest.txt, ops.txt, models.txt, and jax.txt where JAX is importable.
# Environment: BUILD (build/release), OUT, CTEST_S / BENCH_S (time limits, seconds).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/release}
OUT=${OUT:-build/gpu-check}
mkdir -p "$OUT"
if ! grep -qs nvidia /etc/OpenCL/vendors/*.icd; then
  nv=$(find /usr/local/nvidia /usr/lib /usr/lib64 -name 'libnvidia-opencl.so*' 2>/dev/null | head -1)
  if [ -n "$nv" ]; then
    icd=$(mktemp -d)
    echo "$nv" > "$icd/nvidia.icd"
    export OCL_ICD_VENDORS=$icd
  fi
fi
"$BUILD/bench/lazycl-bench" devices
# Not here: the MPI runs, the install and README checks (a compiler and the sources' tools),
# the JAX fixtures (make_cases.sh creates a venv), PoCL's two-device run, the host-memory test
# (sized for the CI machine) and the micro-benchmarks (Google Benchmark's library).
timeout "${CTEST_S:-900}" ctest --test-dir "$BUILD" -j"$(nproc)" --output-on-failure -FA '.*' \
  -E 'dist|data_parallel|bench_scaling|check_install|check_readme|reference_cases|char_lm_case|char_lm_example|multi_device|host_alloc|microbench' \
  > "$OUT/ctest.txt" 2>&1
echo "ctest: exit $? ($OUT/ctest.txt)"
grep -E "tests passed|\*\*\*" "$OUT/ctest.txt"
timeout "${BENCH_S:-300}" "$BUILD/bench/lazycl-bench" ops --repeat 5 --json "$OUT/ops.json" > "$OUT/ops.txt" 2>&1
tail -20 "$OUT/ops.txt"
timeout "${BENCH_S:-300}" "$BUILD/bench/lazycl-bench" models --repeat 5 --json "$OUT/models.json" > "$OUT/models.txt" 2>&1
tail -20 "$OUT/models.txt"
if python3 -c 'import jax' 2>/dev/null; then
  # precision=highest: f32 products in f32, as lazycl computes them (JAX's default on a GPU is
  # TF32 where the GPU has it).
  JAX_DEFAULT_MATMUL_PRECISION=highest timeout "${BENCH_S:-300}" python3 bench/peers/models.py \
    --skip-numpy --repeat 5 --json-jax "$OUT/jax.json" > "$OUT/jax.txt" 2>&1
  tail -14 "$OUT/jax.txt"
fi
