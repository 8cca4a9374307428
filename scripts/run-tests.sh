#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds in Release, runs
# ctest (unit, MPI and end-to-end tests). Exit status is ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 600
