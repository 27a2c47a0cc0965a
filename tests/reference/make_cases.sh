#!/usr/bin/env bash
# Writes the JAX oracle's cases: make_cases.sh VENV OUT [SCRIPT] runs SCRIPT (default cases.py,
# for reference_test; char_lm.py for char_lm_reference_test) with OUT as its argument.
# Creates VENV (python3 -m venv) with the pinned JAX and numpy from PyPI when it lacks them,
# then runs cases.py. Any failure (no python3, no network, no wheel) fails the test that needs
# the cases: the oracle is never skipped.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$1"
out="$2"
script="${3:-cases.py}"
if ! "$venv/bin/python" -c "import jax, numpy" >/dev/null 2>&1; then
  echo "reference: creating $venv with the versions in tests/reference/requirements.txt"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
fi
JAX_PLATFORMS=cpu "$venv/bin/python" "$here/$script" "$out"
