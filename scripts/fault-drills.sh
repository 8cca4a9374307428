#!/usr/bin/env bash
# Fault drills (issue 13): N times, kill -9 a rank of a 2-rank dtrun job
# during a checkpoint save (rank 1 at the save's start, rank 0 part-way
# through the blob, rank 0 just before "latest" moves; cycling), then check
# the job ended, the previous checkpoint is intact and resuming from it
# reproduces the uninterrupted losses. Prints "drills: N/N passed".
#
# Usage: scripts/fault-drills.sh [N=20] [BUILD_DIR=build]
# Exit status: 0 when every drill passed, 1 at the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-20}"
build="${2:-build}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for bin in "$build/runtime/dtrun" "$build/dtplan"; do
  [[ -x "$bin" ]] || { echo "fault-drills: $bin is missing; build first (cmake --build $build)" >&2; exit 2; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 tests/runtime/dtrun_faults.py --dtrun "$build/runtime/dtrun" --dtplan "$build/dtplan" \
  --mpirun "$(command -v mpirun)" --source-dir . --work "$work" drills "$n"
