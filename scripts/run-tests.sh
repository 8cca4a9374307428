#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds in Release, runs
# ctest (unit, MPI and end-to-end tests). Exit status is ctest's.
#   scripts/run-tests.sh              Release build in build/
#   scripts/run-tests.sh --sanitize   AddressSanitizer + UBSan build in build-asan/,
#                                     same tests (docs/testing.md)
# DT_BUILD_JOBS sets the build's and ctest's parallelism (default nproc).
#
# --sanitize builds without CUDA (-DDT_CUDA=OFF): ASan does not instrument
# device code and the CUDA driver's own allocations are reported as leaks, so
# the CUDA backend and its tests (runtime_cuda_tests) are not built, and says
# so. Open MPI's allocations at init are suppressed by the checked-in
# tests/fuzz/lsan.supp (each entry says why); any other leak, any ASan or
# UBSan report aborts the test that hit it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
jobs=${DT_BUILD_JOBS:-$(nproc)}
dir=build
flags=(-DCMAKE_BUILD_TYPE=Release)
if [ "${1:-}" = "--sanitize" ]; then
  dir=build-asan
  flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DDT_SANITIZE=ON -DDT_CUDA=OFF)
  echo "run-tests: --sanitize: ASan + UBSan build in $dir/; CUDA backend and CUDA tests skipped" \
       "(DT_CUDA=OFF: ASan cannot instrument device code)"
  # Open MPI's leaks are suppressed by library name, which needs whole stacks:
  # the slow unwinder (Open MPI is built without frame pointers) and its MCA
  # plugins kept loaded at exit (after dlclose their frames are "<unknown
  # module>" and match no suppression).
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0"
  export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0"
  export OMPI_MCA_mca_base_component_disable_dlclose=1
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
elif [ -n "${1:-}" ]; then
  echo "usage: scripts/run-tests.sh [--sanitize]" >&2
  exit 2
fi
cmake -S . -B "$dir" "${flags[@]}"
cmake --build "$dir" -j"$jobs"
ctest --test-dir "$dir" --output-on-failure -j"$jobs" --timeout 600
