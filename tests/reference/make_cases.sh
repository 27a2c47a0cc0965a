#!/usr/bin/env bash
# Writes the JAX oracle's cases for reference_test: make_cases.sh VENV OUT.
# Creates VENV (python3 -m venv) with the pinned JAX and numpy from PyPI when it lacks them,
# then runs cases.py. Any failure (no python3, no network, no wheel) fails the test that needs
# the cases: the oracle is never skipped.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$1"
out="$2"
if ! "$venv/bin/python" -c "import jax, numpy" >/dev/null 2>&1; then
  echo "reference: creating $venv with the versions in tests/reference/requirements.txt"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
fi
JAX_PLATFORMS=cpu "$venv/bin/python" "$here/cases.py" "$out"
