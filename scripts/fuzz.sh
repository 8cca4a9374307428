#!/usr/bin/env bash
# Fuzzes every parser with libFuzzer (clang, AddressSanitizer + UBSan).
#   scripts/fuzz.sh [SECONDS] [HARNESS[=SECONDS]...]   run (default 60 s each, all harnesses)
#   scripts/fuzz.sh --merge [HARNESS...]              keep what the runs found
# Builds build-fuzz/ (-DDT_FUZZ=ON -DDT_CUDA=OFF; DT_BUILD_JOBS sets -j,
# default nproc) and runs each tests/fuzz/<name>_fuzz.cc harness for its time
# budget (SECONDS, or the harness's own "=SECONDS") on a copy of its
# checked-in corpus, one harness at a time, one process each. New inputs go to
# build-fuzz/corpus/<name>/. Prints the executions and executions per second
# per harness (from libFuzzer's final stat::number_of_executed_units) and the
# total, and appends one line per harness to build-fuzz/fuzz-runs.tsv (date,
# harness, seconds, executions, result) so several runs can be added up.
# Any crash, leak, timeout or sanitizer report stops that harness and leaves
# its input as build-fuzz/crash-* (or leak-*, timeout-*); the script then
# exits 1.
# --merge runs each harness with -merge=1 to add to tests/fuzz/corpus/<name>/
# only the inputs of build-fuzz/corpus/<name>/ that reach new edges
# (-use_counters=0: edge coverage, not hit counts, keeps the corpora small).
set -uo pipefail
cd "$(dirname "$0")/.."
merge=0
if [ "${1:-}" = "--merge" ]; then
  merge=1
  shift
fi
secs=60
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  secs=$1
  shift
fi
command -v clang++ >/dev/null || { echo "fuzz.sh: needs clang++ (apt-get install clang)" >&2; exit 2; }
names=() budgets=()
for a in "$@"; do
  n=${a%%=*} b=$secs
  [ "$n" != "$a" ] && b=${a#*=}
  [ -f "tests/fuzz/${n}_fuzz.cc" ] || { echo "fuzz.sh: no harness tests/fuzz/${n}_fuzz.cc" >&2; exit 2; }
  [[ "$b" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: '$a': the time budget must be whole seconds" >&2; exit 2; }
  names+=("$n") budgets+=("$b")
done
if [ ${#names[@]} -eq 0 ]; then
  for f in tests/fuzz/*_fuzz.cc; do names+=("$(basename "$f" _fuzz.cc)") budgets+=("$secs"); done
fi
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDT_FUZZ=ON -DDT_CUDA=OFF >/dev/null || exit 1
cmake --build build-fuzz -j"${DT_BUILD_JOBS:-$(nproc)}" --target $(printf 'fuzz_%s ' "${names[@]}") >build-fuzz/build.log 2>&1 \
  || { echo "fuzz.sh: build failed, see build-fuzz/build.log" >&2; exit 1; }
# Open MPI's own allocations at init are not ours: suppress its leaks.
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

if [ $merge -eq 1 ]; then
  for n in "${names[@]}"; do
    before=$(ls "tests/fuzz/corpus/$n" | wc -l)
    ./build-fuzz/tests/fuzz/fuzz_"$n" -merge=1 -use_counters=0 "tests/fuzz/corpus/$n" "build-fuzz/corpus/$n" \
      >"build-fuzz/merge_$n.log" 2>&1 || { echo "fuzz.sh: merge of $n failed, see build-fuzz/merge_$n.log" >&2; exit 1; }
    printf 'merged %-12s %4d -> %4d files in tests/fuzz/corpus/%s\n' "$n" "$before" \
      "$(ls "tests/fuzz/corpus/$n" | wc -l)" "$n"
  done
  exit 0
fi

failed=0 total=0
for i in "${!names[@]}"; do
  n=${names[$i]} b=${budgets[$i]}
  mkdir -p "build-fuzz/corpus/$n"
  cp -n tests/fuzz/corpus/"$n"/* "build-fuzz/corpus/$n/" 2>/dev/null
  log="build-fuzz/fuzz_$n.log"
  (cd build-fuzz && ./tests/fuzz/fuzz_"$n" -max_total_time="$b" -rss_limit_mb=4096 -timeout=10 \
      -print_final_stats=1 "corpus/$n" >"fuzz_$n.log" 2>&1)
  rc=$?
  # Executions: the final stats line; a run cut short has only "#N ..." lines.
  execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)
  [ -z "$execs" ] && execs=$(grep -Eo '^#[0-9]+' "$log" | tr -d '#' | tail -1)
  execs=${execs:-0}
  total=$((total + execs))
  result=ok
  [ $rc -eq 0 ] || { result=FAIL; failed=1; }
  printf '%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$n" "$b" "$execs" "$result" >>build-fuzz/fuzz-runs.tsv
  if [ $rc -eq 0 ]; then
    printf 'ok    %-12s %12d executions in %5ss (%d/s), corpus %d files\n' "$n" "$execs" "$b" \
      "$((execs / (b > 0 ? b : 1)))" "$(ls "build-fuzz/corpus/$n" | wc -l)"
  else
    printf 'FAIL  %-12s after %d executions: see %s\n' "$n" "$execs" "$log"
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" | head -3 | sed 's/^/      /'
  fi
done
echo "total: $total executions"
exit $failed
