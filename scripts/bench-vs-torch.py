#!/usr/bin/env python3
"""dtrun vs PyTorch tokens/s on CPU, side by side (docs/runtime.md, "Speed").

For each shape (A: 2 layers, hidden 768, 12 heads, seq 256, microbatch 4, vocab 1024;
B: 4 layers, hidden 256, 4 heads, seq 128, microbatch 8, vocab 256) and each world size
(1 rank; 2 ranks = dtrun DP=2 vs PyTorch DDP over gloo), runs dtrun and
scripts/torch_gpt_matched.py alternately --runs times with 1 thread per process
(OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1), and prints each side's median tokens/s and the
ratio dtrun / PyTorch. Both sides: the same GPT shapes, AdamW (0.9, 0.95, wd 0.1) with
global-norm clipping, microbatch per rank and tokens per step; the step-time median skips the
first 2 steps of each run.

Needs python3-torch (Debian: apt-get install python3-torch; not part of install-deps.sh) and a
Release build (build/runtime/dtrun). PyTorch's BLAS is Debian's OpenBLAS (libblas.so.3), whose
kernels follow OPENBLAS_CORETYPE. --torch-coretypes lists the PyTorch variants to run, each
interleaved with dtrun in every round: `inherit` (the environment as it is: PyTorch as installed)
and/or an OPENBLAS_CORETYPE value such as SkylakeX (the kernels dtrun picks on AMD AVX-512 CPUs,
runtime/backend/blas_gemm.cc: the same GEMM on both sides).

--precision bf16 runs dtrun's bf16 mixed-precision plans (GEMMs on bf16 operands: oneDNN's
AVX512-BF16 kernel where the CPU has one) and PyTorch under bf16 autocast (its bundled oneDNN);
--torch-precisions adds PyTorch in the other precision (e.g. fp32, the issue's baseline).

--device cuda (on a GPU machine, a dtrun built with CUDA): dtrun's CUDA path (DT_RUN_ON_CUDA=1:
cuBLAS SGEMM without TF32, our kernels, tensors in managed memory, the optimizer on the host)
against PyTorch on the same GPU (fp32 with TF32 off; bf16 = CUDA autocast).

  scripts/bench-vs-torch.py [--runs 3] [--steps 8] [--shapes A,B] [--ranks 1,2]
                            [--torch-coretypes inherit,SkylakeX] [--precision fp32|bf16]
                            [--torch-precisions fp32,bf16]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = {
    "A": dict(layers=2, hidden=768, heads=12, seq=256, mbs=4, vocab=1024),
    "B": dict(layers=4, hidden=256, heads=4, seq=128, mbs=8, vocab=256),
}
SKIP = 2  # leading steps left out of each median (both sides)


def env_1thread(extra=None):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.update(extra or {})
    return env


def write_plan(path, shape, dp, precision):
    s = SHAPES[shape]
    model = {"name": "bench-" + shape, "family": "gpt", "num_layers": s["layers"],
             "hidden_size": s["hidden"], "num_attention_heads": s["heads"],
             "ffn_hidden_size": 4 * s["hidden"], "vocab_size": s["vocab"],
             "seq_length": s["seq"], "max_position": s["seq"], "tie_word_embeddings": True}
    plan = {"dp": dp, "tp": 1, "pp": 1, "cp": 1, "vpp": 1, "micro_batch": s["mbs"],
            "num_microbatches": 1, "seq_length": s["seq"], "schedule": "1f1b",
            "recompute": "none", "sequence_parallel": False, "zero_stage": 0,
            "flash_attention": False, "dropout": False, "precision": precision}
    with open(path, "w") as f:
        json.dump({"model": model, "cluster": {"nodes": 1, "gpus_per_node": dp, "device": "cpu"},
                   "plan": plan}, f, indent=1)
    return dp * s["mbs"] * s["seq"]


def run_dtrun(a, shape, ranks, work):
    plan = os.path.join(work, "plan-%s-%d.json" % (shape, ranks))
    tokens = write_plan(plan, shape, ranks, a.precision)
    metrics = os.path.join(work, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [a.mpirun, "--oversubscribe", "--bind-to", "none", "-np", str(ranks)] + (
        ["-x", "DT_RUN_ON_CUDA"] if a.device == "cuda" else []) + [a.dtrun,
           "--plan", plan, "--steps", str(a.steps), "--quiet", "--metrics", metrics]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=env_1thread({"DT_RUN_ON_CUDA": "1"} if a.device == "cuda" else {}))
    if p.returncode != 0:
        sys.exit("dtrun failed:\n" + p.stdout)
    per_step = {}
    with open(metrics) as f:
        for line in f:
            r = json.loads(line)
            per_step[r["step"]] = max(per_step.get(r["step"], 0.0), r["step_time_s"])
    times = [per_step[k] for k in sorted(per_step)][SKIP:]
    return tokens / statistics.median(times)


def run_torch(a, shape, ranks, variant):
    coretype, precision = variant
    s = SHAPES[shape]
    cmd = [a.python, os.path.join(ROOT, "scripts/torch_gpt_matched.py"),
           "--steps", str(a.steps), "--skip", str(SKIP), "--device", a.device] + (["--bf16"] if precision == "bf16" else [])
    for k, v in s.items():
        cmd += ["--" + k, str(v)]
    extra = {} if coretype == "inherit" else {"OPENBLAS_CORETYPE": coretype}
    if ranks == 1:
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=env_1thread(extra))]
    else:
        port = str(29500 + os.getpid() % 1000)
        procs = [subprocess.Popen(cmd + ["--ddp"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True,
                                  env=env_1thread(dict(extra, RANK=str(r), WORLD_SIZE=str(ranks),
                                                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port)))
                 for r in range(ranks)]
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode != 0 for p in procs):
        sys.exit("PyTorch failed:\n" + "\n".join(outs))
    line = [l for l in outs[0].splitlines() if l.startswith("{")][-1]
    return json.loads(line)["tokens_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--shapes", default="A,B")
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--dtrun", default=os.path.join(ROOT, "build/runtime/dtrun"))
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--python", default="/usr/bin/python3", help="a Python with torch")
    ap.add_argument("--torch-coretypes", default="inherit",
                    help="comma list: inherit and/or OPENBLAS_CORETYPE values for PyTorch")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: dtrun with DT_RUN_ON_CUDA=1 and PyTorch on the GPU")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="dtrun's plan precision")
    ap.add_argument("--torch-precisions", default=None,
                    help="comma list of fp32 / bf16 (autocast) for PyTorch; default: --precision")
    a = ap.parse_args()
    if a.steps <= SKIP:
        sys.exit("--steps must exceed %d" % SKIP)
    precisions = (a.torch_precisions or a.precision).split(",")
    if any(p not in ("fp32", "bf16") for p in precisions):
        sys.exit("--torch-precisions: expected fp32 and/or bf16")
    variants = [(c, p) for c in a.torch_coretypes.split(",") for p in precisions]
    names = {v: "%s %s" % v for v in variants}
    print("dtrun precision %s; PyTorch variants: %s (inherit = OPENBLAS_CORETYPE=%s from the environment)"
          % (a.precision, ", ".join(names.values()),
             os.environ.get("OPENBLAS_CORETYPE", "unset: OpenBLAS detects")), flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for shape in a.shapes.split(","):
            for ranks in [int(r) for r in a.ranks.split(",")]:
                dt, pt = [], {v: [] for v in variants}
                for i in range(a.runs):  # interleaved: every side sees the same machine load
                    dt.append(run_dtrun(a, shape, ranks, work))
                    for v in variants:
                        pt[v].append(run_torch(a, shape, ranks, v))
                    print("  shape %s, %d rank(s), run %d: dtrun %.0f tok/s, %s" % (
                        shape, ranks, i + 1, dt[-1],
                        ", ".join("PyTorch[%s] %.0f tok/s" % (names[v], pt[v][-1]) for v in variants)),
                        flush=True)
                for v in variants:
                    rows.append((shape, ranks, names[v], statistics.median(dt), statistics.median(pt[v])))
    print("\nshape ranks  PyTorch (BLAS kernels, precision)  dtrun %s tok/s  PyTorch tok/s  dtrun/PyTorch"
          "   (medians of %d runs, %d steps each)" % (a.precision, a.runs, a.steps))
    for shape, ranks, v, d, p in rows:
        print("%-5s %5d  %-32s %16.0f  %13.0f  %13.2f" % (shape, ranks, v, d, p, d / p))


if __name__ == "__main__":
    main()
