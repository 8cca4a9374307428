#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds in Release, runs
# ctest (unit, MPI and end-to-end tests). Exit status is ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."
#   scripts/run-tests.sh              Release build in build/
#   scripts/run-tests.sh --sanitize   AddressSanitizer + UBSan build in build-asan/
#                                     (no CUDA; Open MPI's leaks suppressed by
#                                     tests/fuzz/lsan.supp), same tests
scripts/install-deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=build
flags=(-DCMAKE_BUILD_TYPE=Release)
if [ "${1:-}" = "--sanitize" ]; then
  dir=build-asan
  flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DDT_SANITIZE=ON -DDT_CUDA=OFF)
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
  export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
elif [ -n "${1:-}" ]; then
  echo "usage: scripts/run-tests.sh [--sanitize]" >&2
  exit 2
fi
cmake -S . -B "$dir" "${flags[@]}"
cmake --build "$dir" -j"$(nproc)"
ctest --test-dir "$dir" --output-on-failure -j"$(nproc)" --timeout 600
