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
# The collectives were also timed inside the runtime's tp 2 and dp 2 steps
# (measure_step_comm.h) and their ratios carried onto the series.
python3 -c '
import json, sys
note = json.load(open(sys.argv[1]))["network"]["note"]
assert "in-step / alone ratio" in note, note
print("ok: in-step collectives:", note[note.index("collectives near"):])' "$out"
DT_PROFILE_TO_CHECK="$out" "$tests" --gtest_filter='ProfilerWritten.*'
# --speed-check: the same 2 ranks re-measure the profile's whole-step checks
# and print one JSON line (speed > 0, one entry per gpt-tiny check); with
# another rank count it refuses, naming the count to use.
check=$(mpirun -np 2 $root --oversubscribe "$exe" --quick --speed-check "$out" --no-progress)
echo "$check" | python3 -c '
import json, sys
lines = [l for l in sys.stdin.read().splitlines() if l.startswith("{")]
assert len(lines) == 1, lines
sc = json.loads(lines[0])["speed_check"]
assert sc["speed"] > 0, sc
names = [c["what"] for c in sc["checks"]]
assert names and all(n.startswith("gpt-tiny training step mbs") for n in names), names
assert all(c["measured_s"] > 0 and c["recorded_s"] > 0 for c in sc["checks"]), sc
print("ok: speed check", sc["speed"], names)'
set +e
msg=$(mpirun -np 1 $root --oversubscribe "$exe" --quick --speed-check "$out" --no-progress 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] && echo "$msg" | grep -q "use --ranks 2" \
  || { echo "FAIL: --speed-check with 1 rank: rc=$rc: $msg"; exit 1; }
echo "ok: --speed-check refuses another rank count"
