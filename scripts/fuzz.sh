#!/usr/bin/env bash
# Fuzzes every parser with libFuzzer (clang, AddressSanitizer + UBSan):
#   scripts/fuzz.sh [SECONDS_PER_HARNESS] [HARNESS...]      (default 60 s, all)
# Builds build-fuzz/ (-DDT_FUZZ=ON -DDT_CUDA=OFF), runs each tests/fuzz/*_fuzz.cc
# harness for the given time on a copy of its checked-in corpus (new inputs go
# to build-fuzz/corpus/<name>/; `-merge=1` them into tests/fuzz/corpus/<name>/
# to keep the interesting ones), and prints the executions per harness. Any
# crash, leak or sanitizer report stops that harness and leaves its input as
# build-fuzz/crash-*; the script exits 1 if any harness failed.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
command -v clang++ >/dev/null || { echo "fuzz.sh: needs clang++ (apt-get install clang)" >&2; exit 2; }
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDT_FUZZ=ON -DDT_CUDA=OFF >/dev/null || exit 1
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in tests/fuzz/*_fuzz.cc; do n=$(basename "$f" _fuzz.cc); names+=("$n"); done
fi
cmake --build build-fuzz -j"$(nproc)" --target $(printf 'fuzz_%s ' "${names[@]}") >build-fuzz/build.log 2>&1 \
  || { echo "fuzz.sh: build failed, see build-fuzz/build.log" >&2; exit 1; }
# Open MPI's own allocations at init are not ours: suppress its leaks.
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
failed=0 total=0
for n in "${names[@]}"; do
  mkdir -p "build-fuzz/corpus/$n"
  cp -n tests/fuzz/corpus/"$n"/* "build-fuzz/corpus/$n/" 2>/dev/null
  log="build-fuzz/fuzz_$n.log"
  (cd build-fuzz && ./tests/fuzz/fuzz_"$n" -max_total_time="$secs" -rss_limit_mb=4096 -timeout=10 \
      -print_final_stats=1 "corpus/$n" >"fuzz_$n.log" 2>&1)
  rc=$?
  execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)
  total=$((total + ${execs:-0}))
  if [ $rc -eq 0 ]; then
    printf 'ok    %-12s %12s executions in %ss\n' "$n" "${execs:-?}" "$secs"
  else
    printf 'FAIL  %-12s after %s executions: see %s\n' "$n" "${execs:-?}" "$log"
    failed=1
  fi
done
echo "total: $total executions"
exit $failed
