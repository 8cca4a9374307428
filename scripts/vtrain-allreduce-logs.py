#!/usr/bin/env python3
"""Turn vTrain's measured A100 all-reduce tables into nccl-tests logs.

vTrain (VIA-Research/vTrain, MIT licence) ships the all-reduce times it
measured on the A100 node that produced shared/validation/vtrain's ground
truth: trace/a100/AR_GPU{n}_1M_1024M_LUT, n = 2..8, one row per MiB from
1 MiB to 1 GiB with nccl-tests' columns (size, count, type, time in ns,
busbw, then the in-place pair). This script keeps the power-of-two sizes
of the out-of-place columns and writes one all_reduce_perf-style log per
group size, which `dtplan profile --from-nccl-tests` reads:

    scripts/vtrain-allreduce-logs.py VTRAIN_CHECKOUT profiles/sources/vtrain-a100
    build/dtplan profile --from-nccl-tests profiles/sources/vtrain-a100 \
        --base A100-SXM4-80GB --name A100-SXM4-80GB-vTrain \
        --out profiles/A100-SXM4-80GB-vTrain.json

VTRAIN_CHECKOUT is a clone of the vTrain repository (or a directory holding
the AR_GPU*_LUT files). Exit 2 with a message when a table is missing or
malformed.
"""
import os
import sys


def find_lut(root, n):
    for cand in (os.path.join(root, "trace", "a100", f"AR_GPU{n}_1M_1024M_LUT"),
                 os.path.join(root, f"AR_GPU{n}_1M_1024M_LUT")):
        if os.path.isfile(cand):
            return cand
    return None


def read_lut(path):
    rows = {}
    with open(path, encoding="utf-8-sig") as f:
        header = f.readline().strip().split(",")
        if header[:4] != ["size(B)", "count", "type", "time(ns)"]:
            raise ValueError(f"{path}: unexpected header {header[:4]}")
        for i, line in enumerate(f, start=2):
            cells = line.strip().split(",")
            if len(cells) < 4:
                raise ValueError(f"{path}:{i}: expected >= 4 columns")
            size, count, dtype, ns = int(cells[0]), int(cells[1]), cells[2], float(cells[3])
            if size <= 0 or ns <= 0 or dtype != "float":
                raise ValueError(f"{path}:{i}: bad row {line.strip()}")
            rows[size] = (count, ns)
    return rows


def write_log(out_dir, n, rows, source):
    factor = 2.0 * (n - 1) / n
    lines = [
        f"# Converted by scripts/vtrain-allreduce-logs.py from {source}",
        "# (vTrain's measured all-reduce LUT of its A100 node; out-of-place times; in-place columns repeat them).",
        f"# nThread 1 nGpus {n} minBytes 1048576 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for r in range(n):
        lines.append(f"#   Rank  {r} Pid  1000 on vtrain-a100 device  {r} [0x{r:02x}] NVIDIA A100-SXM4-80GB")
    lines += [
        "#",
        "#                                                              out-of-place                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ",
    ]
    size = 1 << 20
    while size <= 1 << 30:
        if size not in rows:
            raise ValueError(f"{source}: no row for {size} bytes")
        count, ns = rows[size]
        us = ns / 1000.0
        algbw = size / (us * 1e-6) / 1e9
        busbw = algbw * factor
        cols = f"{us:8.2f} {algbw:7.2f} {busbw:7.2f}      0"
        lines.append(f"{size:12d} {count:13d}     float     sum      -1 {cols} {cols}")
        size *= 2
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0", "#"]
    path = os.path.join(out_dir, f"all_reduce_{n}gpu.log")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: vtrain-allreduce-logs.py VTRAIN_CHECKOUT OUT_DIR", file=sys.stderr)
        return 2
    root, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    try:
        for n in range(2, 9):
            lut = find_lut(root, n)
            if lut is None:
                raise ValueError(f"{root}: AR_GPU{n}_1M_1024M_LUT not found (expected under trace/a100/)")
            print(write_log(out_dir, n, read_lut(lut), f"vTrain trace/a100/AR_GPU{n}_1M_1024M_LUT"))
    except (OSError, ValueError) as e:
        print(f"vtrain-allreduce-logs: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
