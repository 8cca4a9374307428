#!/usr/bin/env python3
"""Elastic dtrun: when a rank dies, re-plan for the survivors and continue from the last checkpoint.

Usage:
  scripts/dtrun-elastic.py --model examples/models/gpt-tiny.json --ranks 4 --global-batch 8 \\
      --steps 40 --checkpoint-dir ckpt --checkpoint-every 5 [--metrics run.jsonl] [-- extra dtrun args]

Loop: `dtplan --device cpu --nodes W/2 --gpus 2 (odd W: --nodes W --gpus 1) --global-batch B
--out D/plan-W.json` for the current world W (the global batch stays B, so tokens per step and the LR schedule are unchanged), then
`mpirun -np W dtrun --plan plan-W.json --checkpoint-dir D --checkpoint-every K --resume ...`.
Exit 0: done. A non-zero exit: the ranks mpirun reports dead ("process rank R ... exited on
signal" / "killed") are dropped (at least one per failure); the new world is the largest W' <=
the survivors for which dtplan finds a plan; dtrun resumes from D/latest (checkpoints are
plan-independent), and the supervisor prints what changed (world, dp/tp/pp/cp, microbatches).
Exit codes: 0 finished; 1 gave up (no plan for the survivors, --max-restarts reached, or a
failure that is not a dead rank: bad input, exit 2, is never retried); 2 bad usage.

Drill: --inject "ARGS" appends dtrun ARGS to the first launch only (e.g. "--debug-kill-rank 3
--debug-kill-step 12" kills rank 3 during step 12).
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys


def log(msg):
    print("dtrun-elastic: " + msg, flush=True)


def make_plan(a, world, path):
    """dtplan's best CPU plan for `world` ranks, or None when there is none."""
    # The CPU profiles describe nodes of 2 ranks: W = 2 x W/2, or W nodes of 1 rank when W is odd.
    nodes, gpus = (world // 2, 2) if world % 2 == 0 else (world, 1)
    cmd = [a.dtplan, "--model", a.model, "--device", "cpu", "--nodes", str(nodes), "--gpus", str(gpus),
           "--global-batch", str(a.global_batch), "--out", path] + shlex.split(a.dtplan_args)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        log("no plan for %d ranks: %s" % (world, p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.returncode))
        return None
    with open(path) as f:
        return json.load(f)["plan"]


def describe(plan):
    keys = ("dp", "tp", "pp", "cp", "vpp", "micro_batch", "num_microbatches", "schedule", "zero_stage")
    return {k: plan.get(k) for k in keys}


def dead_ranks(output):
    """World ranks mpirun reports as dead in its output."""
    dead = set()
    for m in re.finditer(r"process rank (\d+) with PID \d+ on node \S+ (?:exited on signal|was killed|killed)",
                         output):
        dead.add(int(m.group(1)))
    for m in re.finditer(r"\[rank (\d+)\] fault drill: SIGKILL", output):
        dead.add(int(m.group(1)))
    return dead


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    build = os.path.join(os.path.dirname(here), "build")
    ap.add_argument("--model", required=True)
    ap.add_argument("--ranks", type=int, required=True, help="initial world size")
    ap.add_argument("--min-ranks", type=int, default=1)
    ap.add_argument("--global-batch", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--checkpoint-dir", required=True)
    ap.add_argument("--checkpoint-every", type=int, required=True)
    ap.add_argument("--metrics", default="")
    ap.add_argument("--max-restarts", type=int, default=3)
    ap.add_argument("--dtrun", default=os.path.join(build, "runtime", "dtrun"))
    ap.add_argument("--dtplan", default=os.path.join(build, "dtplan"))
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--dtplan-args", default="", help="extra dtplan arguments (quoted)")
    ap.add_argument("--inject", default="", help=argparse.SUPPRESS)
    ap.add_argument("dtrun_args", nargs="*", help="extra dtrun arguments (after --)")
    a = ap.parse_args()
    if a.ranks < 1 or a.min_ranks < 1 or a.checkpoint_every < 1:
        ap.error("--ranks, --min-ranks and --checkpoint-every must be >= 1")
    os.makedirs(a.checkpoint_dir, exist_ok=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    world, prev, restarts = a.ranks, None, 0
    while True:
        plan = None
        while world >= a.min_ranks:
            path = os.path.join(a.checkpoint_dir, "plan-%d.json" % world)
            plan = make_plan(a, world, path)
            if plan is not None:
                break
            world -= 1
        if plan is None:
            log("giving up: no plan for %d..%d ranks" % (a.min_ranks, a.ranks))
            return 1
        if prev is not None:
            changed = {k: (prev[k], v) for k, v in describe(plan).items() if prev[k] != v}
            log("restart %d on %d ranks, global batch %d kept; plan changes: %s" %
                (restarts, world, a.global_batch,
                 ", ".join("%s %s -> %s" % (k, o, n) for k, (o, n) in changed.items()) or "none"))
        else:
            log("starting on %d ranks: %s" % (world, describe(plan)))
        prev = describe(plan)
        cmd = [a.mpirun, "--oversubscribe", "-np", str(world), a.dtrun, "--plan", path, "--steps", str(a.steps),
               "--checkpoint-dir", a.checkpoint_dir, "--checkpoint-every", str(a.checkpoint_every), "--resume"]
        if a.metrics:
            cmd += ["--metrics", a.metrics]
        cmd += a.dtrun_args
        if restarts == 0 and a.inject:
            cmd += shlex.split(a.inject)
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        output = []
        for line in p.stdout:
            sys.stdout.write(line)
            output.append(line)
        code = p.wait()
        if code == 0:
            log("finished %d steps on %d ranks after %d restart(s)" % (a.steps, world, restarts))
            return 0
        text = "".join(output)
        dead = dead_ranks(text)
        if code == 2 or not dead:
            log("dtrun failed with exit %d and no rank reported dead: not retrying" % code)
            return 1
        restarts += 1
        if restarts > a.max_restarts:
            log("giving up after %d restarts" % a.max_restarts)
            return 1
        log("rank(s) %s died (exit %d); re-planning for %d survivor(s)" %
            (sorted(dead), code, world - len(dead)))
        world -= len(dead)


if __name__ == "__main__":
    sys.exit(main())
