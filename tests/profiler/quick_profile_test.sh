#!/bin/sh
# Runs `dtplan-profile --quick` on 2 ranks under mpirun, then checks the
# written profile loads and prices a plan (ProfilerWritten.* in
# profiler_tests, pointed at the file by DT_PROFILE_TO_CHECK).
set -e
exe="$1"; tests="$2"; out="$3"
root=""
[ "$(id -u)" = "0" ] && root="--allow-run-as-root"
rm -f "$out"
start=$(date +%s)
mpirun -np 2 $root --oversubscribe "$exe" --quick --out "$out" --no-progress
end=$(date +%s)
echo "quick profile took $((end - start)) s"
[ -s "$out" ] || { echo "no profile written to $out"; exit 1; }
DT_PROFILE_TO_CHECK="$out" "$tests" --gtest_filter='ProfilerWritten.*'
