#!/usr/bin/env bash
# dtplan --report and dtplan validate --report: self-contained HTML pages (no
# scripts, no external resources): the search report (ranking, rejections,
# timeline, memory bars) and the validation reports (predicted-vs-measured
# scatter plots for --cases and --execute); each rendered in headless
# chromium: the screenshot is not blank and the page logs no console error.
# Screenshots are kept when REPORT_SHOTS_DIR is set.
# Usage: report_test.sh <dtplan> <source dir>
set -u
DTPLAN=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$DTPLAN" --model "$SRC/examples/models/gpt3-175b.json" --nodes 8 --gpus 8 --top 4 --out "$T/plan.json" \
  --report "$T/report.html" > "$T/out.txt" 2>&1 || fail "dtplan --report exited $?: $(tail -2 "$T/out.txt")"
R=$T/report.html
[ -s "$R" ] || fail "no report written"
[ ! -e "$R.trace.tmp" ] || fail "temporary trace left behind"
grep -q "<script" "$R" && fail "report has a script"
grep -Eo '(src|href)="[^"]*"' "$R" | grep -q . && fail "report loads external resources"
grep -Eo 'https?://[^"]*' "$R" | grep -v '^http://www.w3.org/2000/svg$' | grep -q . && fail "report has external URLs"
# 4 ranked rows + header; the rejection, timeline and memory SVGs.
[ "$(grep -c '^<tr><td>' "$R")" -eq 4 ] || fail "ranked table has $(grep -c '^<tr><td>' "$R") rows, want 4"
[ "$(grep -c '<svg ' "$R")" -eq 3 ] || fail "want 3 SVG figures"
grep -q "does not fit in memory" "$R" || fail "rejection reasons missing"
grep -q "stage 7" "$R" || fail "memory bars of every stage missing"
echo "ok: report structure"

# Self-contained: no scripts, no loads, no URLs but the SVG namespace.
self_contained() {
  grep -q "<script" "$1" && fail "$1 has a script"
  grep -Eo '(src|href)="[^"]*"' "$1" | grep -q . && fail "$1 loads external resources"
  grep -Eo 'https?://[^"]*' "$1" | grep -v '^http://www.w3.org/2000/svg$' | grep -q . && fail "$1 has external URLs"
  return 0
}

# validate --cases --report: the scatter of every case, per-model table.
CASES=$SRC/../shared/validation/published-calibration.json
V=$T/validate.html
if [ -f "$CASES" ]; then
  "$DTPLAN" validate --cases "$CASES" --report "$V" > "$T/val.txt" 2>&1 || fail "validate --report exited $?: $(tail -2 "$T/val.txt")"
  [ -s "$V" ] || fail "no validate report written"
  self_contained "$V"
  [ "$(grep -c '<svg ' "$V")" -eq 1 ] || fail "validate report: want 1 SVG scatter"
  ncases=$(grep -Eo '^[0-9]+ cases scored: MAPE' "$T/val.txt" | grep -Eo '^[0-9]+')
  [ "$(grep -c '<title>[^<]*: measured' "$V")" -eq "${ncases:-0}" ] \
    || fail "validate report: $(grep -c '<title>[^<]*: measured' "$V") points for ${ncases:-no} cases"
  grep -q "predicted step time (s)" "$V" || fail "validate report: axis title missing"
  grep -q "Largest errors" "$V" || fail "validate report: error table missing"
  ! grep -q "Peak allocated memory" "$V" || fail "validate report: a memory table for cases that give no memory"
  echo "ok: validate --cases report structure"
else
  echo "SKIP: $CASES not found: validate --cases report not checked"
  V=
fi

# Cases that give the allocator's measured peak (measured.peak_allocated_gib)
# get a memory table with their error.
M=$T/moe.html
"$DTPLAN" validate --cases "$SRC/examples/validation/published-moe.json" --report "$M" > "$T/moe.txt" 2>&1 \
  || fail "validate --report (MoE cases) exited $?: $(tail -2 "$T/moe.txt")"
grep -q "Peak allocated memory (pipeline rank 0)" "$M" || fail "validate report: memory table missing"
sed -n '/Peak allocated memory/,/<\/table>/p' "$M" | grep -Eq '<td>[0-9.]+</td><td>[0-9.]+</td><td>[+-][0-9.]+%</td>' \
  || fail "validate report: no measured / predicted / error row in the memory table"
echo "ok: validate report memory table"

# validate --execute --report: step time per plan and memory per stage (2 real dtrun runs).
DTRUN=$(dirname "$DTPLAN")/runtime/dtrun
X=$T/execute.html
if [ -x "$DTRUN" ] && command -v mpirun > /dev/null; then
  "$DTPLAN" validate --execute --model "$SRC/examples/models/gpt-tiny.json" --nodes 1 --gpus 2 --device cpu \
    --top 2 --steps 3 --work-dir "$T/ex" --report "$X" > "$T/ex.txt" 2>&1 || fail "validate --execute --report exited $?: $(tail -2 "$T/ex.txt")"
  self_contained "$X"
  [ "$(grep -c '<svg ' "$X")" -eq 2 ] || fail "execute report: want 2 SVG scatters (time, memory)"
  [ "$(grep -c '<title>[^<]*stage [0-9]*: measured' "$X")" -ge 2 ] || fail "execute report: memory points missing"
  echo "ok: validate --execute report structure"
else
  echo "SKIP: $DTRUN or mpirun missing: validate --execute report not checked"
  X=
fi

CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
  echo "SKIP: chromium not installed (scripts/install-deps.sh installs it); structure checked only"
  exit 0
fi
# shot <html> <png>: render, then check the PNG is not blank and the page
# logged nothing to the console (errors, failed loads).
shot() {
  local html=$1 png=$2 log=$2.log
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1300,1700 \
    --enable-logging=stderr --v=0 --screenshot="$png" "file://$html" > "$log" 2>&1
  [ -s "$png" ] || fail "chromium wrote no screenshot of $html: $(tail -3 "$log")"
  grep -E 'CONSOLE|Uncaught|Failed to load' "$log" && fail "console messages while rendering $html"
  python3 - "$png" <<'PY' || fail "screenshot of $html is blank"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
pos, idat, w, h, bpp = 8, b"", 0, 0, 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, color = struct.unpack(">IIBB", body[:10])
        bpp = {2: 3, 6: 4}[color]
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
stride = w * bpp
prev = bytearray(stride)
colored = 0
for y in range(h):
    f = raw[y * (stride + 1)]
    line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    colored += sum(1 for x in range(0, stride, bpp) if line[x:x + 3] != b"\xff\xff\xff")
    prev = line
frac = colored / (w * h)
print("screenshot %dx%d, %.1f%% non-white pixels" % (w, h, 100 * frac))
sys.exit(0 if frac > 0.05 else 1)
PY
  [ -n "${REPORT_SHOTS_DIR:-}" ] && mkdir -p "$REPORT_SHOTS_DIR" && cp "$png" "$REPORT_SHOTS_DIR/"
  echo "ok: chromium screenshot of $(basename "$html") not blank, no console messages"
}
shot "$R" "$T/report.png"
[ -n "$V" ] && shot "$V" "$T/validate.png"
[ -n "$X" ] && shot "$X" "$T/execute.png"
exit 0
