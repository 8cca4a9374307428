#!/usr/bin/env python3
"""bf16 mixed precision in dtrun, end to end (ctests dtrun_bf16_*; tests/runtime/CMakeLists.txt).

Usage: dtrun_bf16.py --dtrun BIN --dtplan BIN --mpirun BIN --source-dir DIR --work DIR <check>

Checks (gpt-tiny, global batch 8, OMP_NUM_THREADS=1)
  parity     precision=bf16 plans (dp=2 ZeRO-0, 1, 2 and 3, tp=2 + SP, pp=2 1F1B, dp=2 x pp=2
             ZeRO-1 and ZeRO-3, dp=2 x tp=2 ZeRO-3, cp=2, tp=2 full recompute, pp=2 selective
             recompute; llama-tiny dp=2 and tp=2; mixtral-tiny dp=2 x ep=2; with fp32 main
             gradients (grad_bytes 4) dp=2 ZeRO-0 to 3, tp=2 + SP, pp=2 interleaved, mixtral-tiny
             dp=2 x ep=2 ZeRO-1; bf16 Adam moments dp=2 ZeRO-1 and 3, tp=2 + SP) train 10 steps to the 1-rank bf16 losses within a relative 1e-3 per step
             (bf16 keeps 8 significant bits, 2^-8 = 3.9e-3; plans round gradients after
             different partial sums, so they agree to bf16 accuracy, not bitwise; observed
             <= 2e-5).
  fp32       1 rank, 20 steps: bf16 losses track the fp32 oracle within a relative 1e-3 per
             step (observed 8e-5; 3.1e-4 over 200 steps, docs/runtime.md); they are not
             identical (the bf16 path ran); bf16 peak memory is below 80% of fp32's
             (one microbatch of 8; observed 74%).
  memory     dtplan --device cpu --precision bf16 plans on 1 and 2 ranks (dp=2 ZeRO-0 to 3,
             tp=2, pp=2, full and selective recompute; llama-tiny on 1 rank, tp=2 and dp=2
             ZeRO-3; mixtral-tiny pp=2 GPipe, 8 microbatches in flight; --framework megatron's
             fp32 main gradients on 1 rank, dp=2 ZeRO-1 and ZeRO-3, pp=2): measured peak per stage
             within 5% of the predicted bytes (without the framework reserve, which the CPU
             runtime does not have). (Until 2026-11-27 the MoE block's stash stayed fp32 under
             bf16: the GPipe plan measured 19-22% above its prediction.)
  resume     bf16 checkpoints hold the fp32 master weights: 5 steps + save + resume 5 equals
             10 uninterrupted steps bitwise (1 rank, dp=2 ZeRO-1, 2 and 3, pp=2 interleaved, fp32
             main gradients under ZeRO-1 and ZeRO-3); saved under bf16 tp=2 and resumed under
             bf16 pp=2, bf16 ZeRO-3 -> bf16 tp=2, and across precisions (bf16 -> fp32, fp32 ->
             bf16, bf16 ZeRO-1 -> fp32 ZeRO-3), the 10 losses stay within 1e-3 of the
             uninterrupted run of the resuming plan's precision.
  bad_input  precision "fp16": exit code 2 and a message naming the problem.
Exit 0 on success, 1 with a message on failure. Mutation check: with bf16 gradient accumulation
overwriting instead of adding (runtime/tensor/bf16.h AccumulateIntoBf16), parity fails at step 3
(rel 3.3e-3) and fp32 at step 4 (rel 1.1e-3). (A missing 1/dp gradient scale is not visible in
the losses: AdamW and global-norm clipping are scale-invariant.)
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dtrun_check as dc  # noqa: E402  (helpers: write_plan, run, run_ok, losses, compare, fail)

fail = dc.fail
PARITY_TOL = 1e-3
FP32_TOL = 1e-3
MEMORY_TOL = 0.05


def train(name, nprocs_plan, steps, *args, **plan_kw):
    plan = os.path.join(dc.A.work, name + ".json")
    world = dc.write_plan(plan, **plan_kw)
    metrics = os.path.join(dc.A.work, name + ".jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    out = dc.run_ok(plan, world, "--steps", steps, "--metrics", metrics, *args)
    return dc.losses(metrics), out, metrics


def peak_bytes(metrics):
    with open(metrics) as f:
        return max(json.loads(line)["peak_bytes"] for line in f)


def check_parity():
    ref, _, _ = train("bf16_1rank", 1, 10, precision="bf16")
    for name, kw in [("dp2", dict(dp=2)), ("dp2_zero1", dict(dp=2, zero=1)),
                     ("dp2_zero2", dict(dp=2, zero=2)), ("dp2_zero3", dict(dp=2, zero=3)),
                     ("dp2xpp2_zero3", dict(dp=2, pp=2, mbs=1, zero=3)),
                     ("dp2xtp2_zero3_rc_full", dict(dp=2, tp=2, mbs=1, zero=3, recompute="full")),
                     ("tp2_sp", dict(tp=2, sp=True)), ("pp2", dict(pp=2)),
                     ("dp2xpp2_zero1", dict(dp=2, pp=2, mbs=1, zero=1)), ("cp2", dict(cp=2)),
                     ("tp2_rc_full", dict(tp=2, recompute="full")), ("pp2_rc_selective", dict(pp=2, recompute="selective"))]:
        got, _, _ = train("bf16_" + name, 0, 10, precision="bf16", **kw)
        dc.compare("bf16 " + name + " vs 1-rank bf16", ref, got, PARITY_TOL)
    # Dropout under bf16: its masks stay bytes, the dropped probabilities are narrowed with the stash.
    ref, _, _ = train("bf16_dropout_1rank", 1, 10, precision="bf16", dropout=True)
    for name, kw in [("tp2_sp", dict(tp=2, sp=True)), ("cp2_rc_selective", dict(cp=2, recompute="selective"))]:
        got, _, _ = train("bf16_dropout_" + name, 0, 10, precision="bf16", dropout=True, **kw)
        dc.compare("bf16 dropout " + name + " vs 1-rank bf16 dropout", ref, got, PARITY_TOL)
    llama = os.path.join(dc.A.source_dir, "examples/models/llama-tiny.json")
    ref, _, _ = train("bf16_llama_1rank", 1, 10, precision="bf16", model=llama)
    for name, kw in [("dp2", dict(dp=2)), ("tp2", dict(tp=2, sp=True))]:
        got, _, _ = train("bf16_llama_" + name, 0, 10, precision="bf16", model=llama, **kw)
        dc.compare("bf16 llama-tiny " + name + " vs 1-rank bf16", ref, got, PARITY_TOL)
    # MoE: the experts' bf16 gradients are reduced over the expert-DP group.
    mixtral = os.path.join(dc.A.source_dir, "examples/models/mixtral-tiny.json")
    ref, _, _ = train("bf16_moe_1rank", 1, 10, precision="bf16", model=mixtral)
    got, _, _ = train("bf16_moe_dp2_ep2", 0, 10, precision="bf16", model=mixtral, dp=2, ep=2)
    dc.compare("bf16 mixtral-tiny dp2 ep2 vs 1-rank bf16", ref, got, PARITY_TOL)
    # fp32 main gradients (grad_bytes 4, Megatron-LM's default under bf16): reduced in fp32, the
    # tied embedding's sum included (pp 2), the experts' over the expert-DP group.
    ref, _, _ = train("g4_1rank", 1, 10, precision="bf16", grad_bytes=4)
    for name, kw in [("dp2", dict(dp=2)), ("dp2_zero1", dict(dp=2, zero=1)), ("dp2_zero2", dict(dp=2, zero=2)),
                     ("dp2xpp2_zero3", dict(dp=2, pp=2, mbs=1, zero=3)), ("tp2_sp", dict(tp=2, sp=True)),
                     ("pp2_interleaved", dict(pp=2, vpp=2, schedule="interleaved", mbs=1))]:
        got, _, _ = train("g4_" + name, 0, 10, precision="bf16", grad_bytes=4, **kw)
        dc.compare("bf16 fp32-grads " + name + " vs 1-rank", ref, got, PARITY_TOL)
    # bf16 Adam moments (adam_moment_bytes 2): elementwise, so every sharding rounds alike.
    ref, _, _ = train("moments_1rank", 1, 10, precision="bf16", adam_moment_bytes=2)
    for name, kw in [("dp2_zero1", dict(dp=2, zero=1)), ("dp2_zero3", dict(dp=2, zero=3)),
                     ("tp2_sp", dict(tp=2, sp=True))]:
        got, _, _ = train("moments_" + name, 0, 10, precision="bf16", adam_moment_bytes=2, **kw)
        dc.compare("bf16 moments " + name + " vs 1-rank", ref, got, PARITY_TOL)
    ref, _, _ = train("g4_moe_1rank", 1, 10, precision="bf16", grad_bytes=4, model=mixtral)
    got, _, _ = train("g4_moe_dp2_ep2_zero1", 0, 10, precision="bf16", grad_bytes=4, model=mixtral, dp=2, ep=2, zero=1)
    dc.compare("bf16 fp32-grads mixtral-tiny dp2 ep2 ZeRO-1 vs 1-rank", ref, got, PARITY_TOL)


def check_fp32():
    # One microbatch of 8: activations, which bf16 halves, dominate the peak.
    fp32, _, m32 = train("fp32_1rank", 1, 20, mbs=8)
    bf16, out, m16 = train("bf16_1rank", 1, 20, mbs=8, precision="bf16")
    if "precision: bf16" not in out:
        fail("dtrun did not report the bf16 path:\n" + out)
    dc.compare("bf16 vs fp32 (1 rank, 20 steps)", fp32, bf16, FP32_TOL)
    if fp32 == bf16:
        fail("bf16 losses are bitwise the fp32 ones: the bf16 path did not run")
    p32, p16 = peak_bytes(m32), peak_bytes(m16)
    print("peak memory: fp32 %d B, bf16 %d B (%.1f%%)" % (p32, p16, 100.0 * p16 / p32))
    if p16 > 0.8 * p32:
        fail("bf16 peak %d B is not below 80%% of fp32's %d B" % (p16, p32))
    # fp32 main gradients: tracks fp32 too, and is not the bf16-gradient run (no rounding of
    # the accumulated gradients).
    g4, out, _ = train("g4_1rank", 1, 20, mbs=8, precision="bf16", grad_bytes=4)
    if "fp32 main gradients" not in out:
        fail("dtrun did not report fp32 main gradients:\n" + out)
    dc.compare("bf16 with fp32 main gradients vs fp32 (1 rank, 20 steps)", fp32, g4, FP32_TOL)
    if g4 == bf16:
        fail("fp32 main gradients give the bf16-gradient losses bitwise: grad_bytes 4 was ignored")
    # bf16 Adam moments on fp32 weights: tracks fp32, and the rounding of the moments is real.
    mo, out, _ = train("moments_fp32_1rank", 1, 20, mbs=8, adam_moment_bytes=2)
    if "bf16 Adam moments" not in out:
        fail("dtrun did not report bf16 Adam moments:\n" + out)
    dc.compare("fp32 with bf16 Adam moments vs fp32 (1 rank, 20 steps)", fp32, mo, FP32_TOL)
    if mo == fp32:
        fail("bf16 Adam moments give the fp32 losses bitwise: adam_moment_bytes 2 was ignored")


UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
STAGE = re.compile(r"stage (\d+): measured ([\d.]+) (B|KiB|MiB|GiB) \| predicted [\d.]+ \S+ "
                   r"\(([\d.]+) (B|KiB|MiB|GiB) without")


def check_memory():
    models = os.path.join(dc.A.source_dir, "examples/models")
    worst = 0.0
    for name, ranks, dims in [("1rank", 1, []), ("dp2", 2, ["--dp", "2", "--zero", "0"]),
                              ("dp2_zero1", 2, ["--dp", "2", "--zero", "1"]), ("tp2", 2, ["--tp", "2"]),
                              ("pp2", 2, ["--pp", "2"]), ("rc_full", 1, ["--recompute", "full"]),
                              ("rc_selective", 1, ["--recompute", "selective"]), ("llama_1rank", 1, []),
                              ("llama_tp2", 2, ["--tp", "2"]),
                              ("mixtral_pp2_gpipe", 2, ["--pp", "2", "--schedule", "gpipe", "--mbs", "1"]),
                              # fp32 main gradients (Megatron-LM's grad_bytes 4)
                              ("megatron_1rank", 1, ["--framework", "megatron"]),
                              ("megatron_dp2_zero1", 2, ["--dp", "2", "--zero", "1", "--framework", "megatron"]),
                              ("megatron_pp2", 2, ["--pp", "2", "--framework", "megatron"]),
                              # ZeRO-2/3: bf16 shards, the unit's fp32 working copy and gradient buffer
                              ("dp2_zero2", 2, ["--dp", "2", "--zero", "2"]),
                              ("dp2_zero3", 2, ["--dp", "2", "--zero", "3"]),
                              ("megatron_dp2_zero3", 2, ["--dp", "2", "--zero", "3", "--framework", "megatron"]),
                              ("llama_dp2_zero3", 2, ["--dp", "2", "--zero", "3"]),
                              # bf16 Adam moments (2 + 2 B per owned element)
                              ("moments_dp2_zero1", 2, ["--dp", "2", "--zero", "1", "--adam-moments", "bf16"]),
                              ("moments_dp2_zero3", 2, ["--dp", "2", "--zero", "3", "--adam-moments", "bf16"])]:
        model = os.path.join(models, {"llama": "llama-tiny.json", "mixtral": "mixtral-tiny.json"}.get(
            name.split("_")[0], "gpt-tiny.json"))
        plan = os.path.join(dc.A.work, "mem_" + name + ".json")
        cmd = [dc.A.dtplan, "--model", model, "--device", "cpu", "--gpus", str(ranks), "--global-batch", "8",
               "--precision", "bf16", "--top", "1", "--out", plan] + dims
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            fail("dtplan failed: %s\n%s" % (" ".join(cmd), p.stdout))
        with open(plan) as f:
            written = json.load(f)["plan"]
            if written.get("precision") != "bf16":
                fail("dtplan --precision bf16 wrote no precision into " + plan)
            if name.startswith("megatron") and written.get("grad_bytes") != 4:
                fail("dtplan --framework megatron --precision bf16 did not plan fp32 main gradients: " + plan)
        out = dc.run_ok(plan, ranks, "--steps", 4)
        stages = STAGE.findall(out)
        if len(stages) == 0:
            fail("no per-stage memory lines in dtrun's summary:\n" + out)
        for st, meas, mu, pred, pu in stages:
            m, pr = float(meas) * UNITS[mu], float(pred) * UNITS[pu]
            err = m / pr - 1.0
            worst = max(worst, abs(err))
            print("%s stage %s: measured %.0f B, predicted %.0f B (%+.2f%%)" % (name, st, m, pr, 100 * err))
            if abs(err) > MEMORY_TOL:
                fail("%s stage %s: measured peak %.0f B is %.1f%% from the bf16 prediction %.0f B (> %.0f%%)" %
                     (name, st, m, 100 * err, pr, 100 * MEMORY_TOL))
    print("memory: every stage within %.2f%% of the bf16 prediction (tolerance %.0f%%)" % (100 * worst, 100 * MEMORY_TOL))


def check_resume():
    for dims in ({}, {"dp": 2, "zero": 1}, {"pp": 2, "vpp": 2, "schedule": "interleaved", "mbs": 1},
                 {"dp": 2, "zero": 1, "grad_bytes": 4}, {"dp": 2, "zero": 2}, {"dp": 2, "zero": 3},
                 {"dp": 2, "zero": 3, "grad_bytes": 4}, {"dp": 2, "zero": 1, "adam_moment_bytes": 2},
                 {"dp": 2, "zero": 3, "adam_moment_bytes": 2}):
        dc.check_resume_exact(dict(dims, precision="bf16"))
    # Across plans and precisions: the first 5 steps under `saved`, the last 5 resumed under
    # `target`, against 10 uninterrupted steps of the target's precision on 1 rank.
    refs = {p: train("resume_ref_" + p, 1, 10, precision=p)[0] for p in ("bf16", "fp32")}
    for name, saved, target in [("bf16_tp2_to_bf16_pp2", dict(tp=2, precision="bf16"), dict(pp=2, precision="bf16")),
                                ("bf16_to_fp32_dp2", dict(precision="bf16"), dict(dp=2, precision="fp32")),
                                ("fp32_tp2_to_bf16", dict(tp=2, precision="fp32"), dict(precision="bf16")),
                                ("bf16_zero3_to_bf16_tp2", dict(dp=2, zero=3, precision="bf16"), dict(tp=2, precision="bf16")),
                                ("bf16_zero1_to_fp32_zero3", dict(dp=2, zero=1, precision="bf16"),
                                 dict(dp=2, zero=3, precision="fp32"))]:
        ck = os.path.join(dc.A.work, "ckpt_" + name)
        shutil.rmtree(ck, ignore_errors=True)
        first, _, _ = train(name + "_a", 0, 10, "--stop-at", 5, "--checkpoint-dir", ck, **saved)
        second, out, _ = train(name + "_b", 0, 10, "--checkpoint-dir", ck, "--resume", **target)
        if "resumed from" not in out:
            fail("%s: the second run did not resume:\n%s" % (name, out))
        dc.compare("resume " + name, refs[target["precision"]], first + second, PARITY_TOL)


def expect_bad(plan, nprocs, words, *args):
    code, out, _ = dc.run(plan, nprocs, "--steps", 2, *args)
    if code != 2:
        fail("expected exit code 2, got %d on %s:\n%s" % (code, plan, out))
    for w in words:
        if w not in out:
            fail("message lacks '%s':\n%s" % (w, out))
    lines = [l for l in out.splitlines() if "error" in l] or out.strip().splitlines()
    print("refused as expected: " + lines[0])


def check_bad_input():
    plan = os.path.join(dc.A.work, "fp16.json")
    dc.write_plan(plan, precision="fp16")
    expect_bad(plan, 1, ["precision", "fp16"])


def main():
    dc.A = dc.parse_args()
    dc.A.work = os.path.join(dc.A.work, "bf16_" + dc.A.check)
    os.makedirs(dc.A.work, exist_ok=True)
    checks = {"parity": check_parity, "fp32": check_fp32, "memory": check_memory, "resume": check_resume,
              "bad_input": check_bad_input}
    if dc.A.check not in checks:
        fail("unknown check " + dc.A.check)
    checks[dc.A.check]()


if __name__ == "__main__":
    main()
