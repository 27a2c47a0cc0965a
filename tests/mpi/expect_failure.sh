#!/usr/bin/env bash
# expect_failure.sh SECONDS PATTERN COMMAND...: passes when COMMAND ends within SECONDS with a
# non-zero status (not a timeout: a hang is the failure this guards against) and its output
# contains PATTERN (grep -E).
set -u
seconds="$1"
pattern="$2"
shift 2
out="$(timeout "$seconds" "$@" 2>&1)"
rc=$?
printf '%s\n' "$out"
if [ "$rc" -eq 124 ]; then echo "expect_failure: timed out after ${seconds}s (a hang)"; exit 1; fi
if [ "$rc" -eq 0 ]; then echo "expect_failure: exited 0, expected a failure"; exit 1; fi
if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
  echo "expect_failure: exit $rc, but the output lacks: $pattern"
  exit 1
fi
echo "expect_failure: exit $rc with the expected message"
