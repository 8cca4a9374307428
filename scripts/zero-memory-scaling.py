#!/usr/bin/env python3
"""ZeRO-3 model-state memory per rank versus DP size, measured by dtrun.

Usage: scripts/zero-memory-scaling.py [--dtrun build/runtime/dtrun] [--model FILE] [--zero 3]

For DP = 1, 2, 4 it writes a plan (global batch 8, micro-batch 1, the given ZeRO
stage), runs 2 steps under mpirun (oversubscribed) and prints dtrun's
"model states" line: the bytes each rank still holds after building the model
and optimizer (weights, gradients, Adam m and v, largest rank), next to
1/DP of the DP=1 figure.
"""
import argparse
import json
import os
import re
import subprocess
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--dtrun", default="build/runtime/dtrun")
ap.add_argument("--mpirun", default="mpirun")
ap.add_argument("--model", default="examples/models/gpt-small-cpu.json")
ap.add_argument("--zero", type=int, default=3)
a = ap.parse_args()
with open(a.model) as f:
    model = json.load(f)
env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
base = None
print("model %s, ZeRO-%d" % (model["name"], a.zero))
print("  dp   model states MiB/rank   DP=1 / dp   ratio")
with tempfile.TemporaryDirectory() as d:
    for dp in (1, 2, 4):
        plan = {"dp": dp, "tp": 1, "pp": 1, "cp": 1, "vpp": 1, "micro_batch": 1, "num_microbatches": 8 // dp,
                "seq_length": model["seq_length"], "schedule": "1f1b", "recompute": "none",
                "sequence_parallel": False, "zero_stage": a.zero, "flash_attention": False}
        path = os.path.join(d, "dp%d.json" % dp)
        with open(path, "w") as f:
            json.dump({"model": model, "cluster": {"nodes": 1, "gpus_per_node": dp, "device": "cpu"},
                       "plan": plan}, f)
        out = subprocess.run([a.mpirun, "--oversubscribe", "-np", str(dp), a.dtrun, "--plan", path, "--steps", "2",
                              "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=env, check=True).stdout
        mib = float(re.search(r"model states: ([0-9.]+) MiB", out).group(1))
        base = base or mib
        print("  %2d   %21.3f   %9.3f   %5.3f" % (dp, mib, base / dp, mib / (base / dp)))
