#!/usr/bin/env bash
# dtplan --report: a self-contained HTML page (no scripts, no external
# resources) with the ranking, rejections, timeline and memory bars, and a
# headless chromium screenshot of it that is not blank.
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

CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
  echo "SKIP: chromium not installed (scripts/install-deps.sh installs it); structure checked only"
  exit 0
fi
timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1300,1700 \
  --screenshot="$T/shot.png" "file://$R" > "$T/chromium.log" 2>&1
[ -s "$T/shot.png" ] || fail "chromium wrote no screenshot: $(tail -3 "$T/chromium.log")"
# Not blank: decode the PNG (stdlib only) and count non-white pixels.
python3 - "$T/shot.png" <<'PY' || fail "screenshot is blank"
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
echo "ok: chromium screenshot not blank"
