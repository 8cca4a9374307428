#!/usr/bin/env python3
"""bf16 mixed precision versus fp32 in dtrun on one CPU rank: loss curve and throughput.

Usage: scripts/bf16-check.py [--dtrun build/runtime/dtrun] [--steps 200] [--bench-steps 30] [--runs 3]

1. Loss curve: gpt-tiny (examples/models/gpt-tiny.json), 1 rank, micro-batch 8, --steps
   200, once in fp32 and once with "precision": "bf16". Prints the per-step relative
   loss difference |bf16 - fp32| / fp32 (max, mean, at a few steps) and fails (exit 1)
   when the max exceeds --tolerance (default 1e-3).
2. Throughput: for gpt-tiny and gpt-small-cpu, --runs runs each of fp32 and bf16,
   interleaved (fp32, bf16, fp32, ...) in this one invocation, --bench-steps steps each;
   each run's figure is dtrun's median tokens/s (first step excluded); prints the
   median over runs and the bf16 / fp32 ratio. OMP_NUM_THREADS=1, one rank.
Peak memory versus the planner's bf16 prediction: ctest -R dtrun_bf16_memory.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--dtrun", default="build/runtime/dtrun")
ap.add_argument("--mpirun", default="mpirun")
ap.add_argument("--steps", type=int, default=200)
ap.add_argument("--bench-steps", type=int, default=30)
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--tolerance", type=float, default=1e-3)
a = ap.parse_args()
env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def write_plan(d, model_file, precision, mbs):
    with open(model_file) as f:
        model = json.load(f)
    plan = {"dp": 1, "tp": 1, "pp": 1, "cp": 1, "vpp": 1, "micro_batch": mbs, "num_microbatches": 8 // mbs,
            "seq_length": model["seq_length"], "schedule": "1f1b", "recompute": "none",
            "sequence_parallel": False, "zero_stage": 0, "flash_attention": False, "dropout": False,
            "precision": precision}
    path = os.path.join(d, "%s_%s.json" % (model["name"], precision))
    with open(path, "w") as f:
        json.dump({"model": model, "cluster": {"nodes": 1, "gpus_per_node": 1, "device": "cpu"}, "plan": plan}, f)
    return path


def run(plan, steps, metrics=None):
    cmd = [a.mpirun, "--oversubscribe", "-np", "1", a.dtrun, "--plan", plan, "--steps", str(steps), "--quiet"]
    if metrics:
        cmd += ["--metrics", metrics]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    if p.returncode != 0:
        sys.exit("dtrun failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stdout))
    return p.stdout


def losses(path):
    d = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r["rank"] == 0:
                d[r["step"]] = r["loss"]
    return [d[k] for k in sorted(d)]


with tempfile.TemporaryDirectory() as d:
    tiny = "examples/models/gpt-tiny.json"
    curves = {}
    for prec in ("fp32", "bf16"):
        m = os.path.join(d, "loss_%s.jsonl" % prec)
        run(write_plan(d, tiny, prec, 8), a.steps, m)
        curves[prec] = losses(m)
    rel = [abs(b - f) / abs(f) for f, b in zip(curves["fp32"], curves["bf16"])]
    print("loss curve, gpt-tiny, 1 rank, %d steps: max rel diff %.3g (step %d), mean %.3g; tolerance %.3g" %
          (len(rel), max(rel), rel.index(max(rel)) + 1, statistics.mean(rel), a.tolerance))
    for s in sorted({1, 10, 50, 100, a.steps // 2, a.steps}):
        if s <= len(rel):
            print("  step %4d  fp32 %.5f  bf16 %.5f  rel %.2g" % (s, curves["fp32"][s - 1], curves["bf16"][s - 1], rel[s - 1]))
    ok = max(rel) <= a.tolerance

    print("throughput, 1 rank x 1 thread, median tokens/s of %d interleaved runs x %d steps:" % (a.runs, a.bench_steps))
    for model, mbs in (("examples/models/gpt-tiny.json", 8), ("examples/models/gpt-small-cpu.json", 8)):
        plans = {p: write_plan(d, model, p, mbs) for p in ("fp32", "bf16")}
        tps = {"fp32": [], "bf16": []}
        for _ in range(a.runs):
            for prec in ("fp32", "bf16"):
                out = run(plans[prec], a.bench_steps)
                m = re.search(r"throughput\s+([\d.]+) ktok/s", out)
                if not m:
                    sys.exit("no throughput line:\n" + out)
                tps[prec].append(float(m.group(1)) * 1e3)
        f32, b16 = statistics.median(tps["fp32"]), statistics.median(tps["bf16"])
        print("  %-14s mbs %d  fp32 %8.0f tok/s  bf16 %8.0f tok/s  bf16/fp32 %.2f   (runs: fp32 %s, bf16 %s)" %
              (os.path.basename(model)[:-5], mbs, f32, b16, b16 / f32, [round(x) for x in tps["fp32"]],
               [round(x) for x in tps["bf16"]]))
sys.exit(0 if ok else 1)
