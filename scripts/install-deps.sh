#!/usr/bin/env bash
# Installs the Debian packages dtplan needs, only those missing. Uses sudo
# when not root. Safe to run repeatedly.
set -euo pipefail
# chromium: headless screenshot test of dtplan --report (tests/cli/report_test.sh).
# libopenblas-pthread-dev: the CPU backend's GEMM (runtime/backend/blas.cmake; Eigen without it).
# libdnnl-dev: oneDNN, the CPU backend's bf16 GEMMs (runtime/backend/dnnl.cmake; emulated without it).
pkgs=(cmake g++ make libeigen3-dev libcli11-dev nlohmann-json3-dev libgtest-dev openmpi-bin libopenmpi-dev chromium
      libopenblas-pthread-dev libdnnl-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
