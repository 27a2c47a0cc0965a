#!/usr/bin/env bash
# Installs the Debian 12 packages lazycl needs, if any is missing (run as root, or with sudo).
set -euo pipefail
packages=(cmake g++ make ocl-icd-opencl-dev opencl-clhpp-headers pocl-opencl-icd libabsl-dev
          libgtest-dev libbenchmark-dev nlohmann-json3-dev libopenmpi-dev openmpi-bin
          gdb)  # gdb: scripts/test.sh prints the stacks of a crashed test's core
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "lazycl: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi
