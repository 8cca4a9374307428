#!/usr/bin/env python3
"""End-to-end checks of dtrun (registered as ctests in tests/runtime/CMakeLists.txt).

Usage: dtrun_check.py --dtrun BIN --mpirun BIN --source-dir DIR --work DIR <check> [args]

Checks
  parity NAME KEY=VAL...   the plan built from KEY=VALs (dp, tp, pp, vpp, mbs, schedule,
                           recompute, sp, zero) trains 10 steps to the same per-step losses
                           as 1 rank (relative difference <= 1e-4; global batch fixed at 8).
  resume_exact             10 steps == 5 steps + save, then a new process resumes 5 (bitwise).
  resume_replan            save under tp=2 at step 5, resume under pp=2 and dp=2: within 1e-4.
  resume_zero              resume_exact under dp=2 ZeRO-2 and ZeRO-3 (bitwise); save under dp=2
                           ZeRO-3, resume under tp=2 and under dp=2 ZeRO-2: within 1e-4 of 1 rank.
  kill                     a rank SIGKILLed mid-step: non-zero exit in < 30 s; resume from the
                           last checkpoint works.
  entropy                  1 rank on the Markov source reaches within 10% of its entropy rate.
  bad_input                wrong world size, corrupt checkpoint, truncated data, malformed plan,
                           unsupported plans: exit code 2, a clear message, nothing overwritten.
  predicted                a `dtplan --out` plan runs; the summary shows prediction vs measured.
  moe_resume               mixtral-tiny: bit-exact resume under dp=2 ep=2, ZeRO-0 and ZeRO-1; save under
                           dp=2 x ep=2 x tp=2, resume on 1 rank and under dp=2 ep=1; save under dp=2 x
                           ep=2 ZeRO-1, resume on 1 rank (rel 1e-4 against 1 rank).
  moe_dense                moe-shared-tiny on 4 layers with dense-MLP layers (the first; every other):
                           dp=2 x ep=2, with tp=2 (SP) and with pp=2, against 1 rank (rel 1e-4).
  moe_shared_gate          moe-shared-tiny with Qwen2-MoE's gated shared expert: dp=2 x ep=2, with
                           tp=2 (SP), pp=2 and full recompute, against 1 rank (rel 1e-4).
  moe_capacity             mixtral-tiny with an expert capacity (token dropping, capacity 0.75 and 1.0
                           padded): dp=2 x ep=2, ep=2 x pp=2, dp=2 ep=1, ep=4, ep=2 with full recompute
                           against 1 rank with the same microbatches (rel 1e-4); the capacity drops
                           (losses differ from dropless); tp=2 refused by name (exit 2).
  threads                  without OMP_NUM_THREADS, each rank runs min(the CPUs mpirun bound it to,
                           cores / ranks) OpenMP threads (as `dtplan profile` measures): 1 and 2 ranks.
  llama                    llama-tiny (GQA, untied head): dtplan's plans on 2 and 4 ranks, --tp 2 --sp,
                           --tp 4 (replicated KV heads), --pp 2 interleaved, and uneven pipeline
                           splits train 6 steps to the 1-rank losses (rel 1e-4); a checkpoint saved
                           under tp=4 (replicated KV heads) resumes under pp=2 x tp=2.
Every plan is written here from examples/models/gpt-tiny.json (4 layers, hidden 64, vocab 256,
seq 64). Exit 0 on success, 1 with a message on failure.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

GLOBAL_BATCH = 8
STEPS = 10
A = None  # parsed arguments


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def write_plan(path, dp=1, tp=1, pp=1, vpp=1, mbs=2, schedule="1f1b", recompute="none", sp=False,
               zero=0, model=None, global_batch=GLOBAL_BATCH, **extra):
    with open(model or os.path.join(A.source_dir, "examples/models/gpt-tiny.json")) as f:
        m = json.load(f)
    nmb = global_batch // (dp * mbs)
    plan = {"dp": dp, "tp": tp, "pp": pp, "cp": 1, "vpp": vpp, "micro_batch": mbs,
            "num_microbatches": nmb, "seq_length": m.get("seq_length", 64), "schedule": schedule,
            "recompute": recompute, "sequence_parallel": sp, "zero_stage": zero,
            "flash_attention": False, "dropout": False}
    plan.update(extra)
    world = dp * tp * pp * plan["cp"]
    with open(path, "w") as f:
        json.dump({"model": m, "cluster": {"nodes": 1, "gpus_per_node": world, "device": "cpu"},
                   "plan": plan}, f, indent=1)
    return world


def run(plan, nprocs, *args, timeout=240):
    """Runs dtrun under mpirun; returns (exit code, stdout+stderr, seconds)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    cmd = [A.mpirun, "--oversubscribe", "-np", str(nprocs), A.dtrun, "--plan", plan, "--quiet",
           "--step-timeout", "60"] + [str(a) for a in args]
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout, env=env)
    return p.returncode, p.stdout, time.time() - t0


def run_ok(plan, nprocs, *args):
    code, out, _ = run(plan, nprocs, *args)
    if code != 0:
        fail("dtrun exited %d on %s (%d ranks):\n%s" % (code, plan, nprocs, out))
    return out


def losses(metrics_path, key="loss"):
    """Per-step losses (or another per-step field, e.g. grad_norm) from a --metrics file (rank 0's
    lines; every rank has the same loss and norm)."""
    out = {}
    with open(metrics_path) as f:
        for line in f:
            r = json.loads(line)
            if r["rank"] == 0:
                out[r["step"]] = r[key]
    return [out[k] for k in sorted(out)]


def compare(name, ref, got, rel_tol):
    if len(ref) != len(got):
        fail("%s: %d losses vs %d in the reference" % (name, len(got), len(ref)))
    worst = 0.0
    for i, (a, b) in enumerate(zip(ref, got)):
        rel = abs(a - b) / max(abs(a), 1e-12)
        worst = max(worst, rel)
        if rel > rel_tol:
            fail("%s: step %d loss %.9g vs reference %.9g (rel diff %.3g > %.3g)" %
                 (name, i + 1, b, a, rel, rel_tol))
    print("%s: %d steps match (max rel diff %.3g, tolerance %.3g)" % (name, len(ref), worst, rel_tol))


def reference_losses(steps=STEPS, dropout=False):
    name = "ref_dropout" if dropout else "ref"
    plan = os.path.join(A.work, name + ".json")
    write_plan(plan, dropout=dropout)
    metrics = os.path.join(A.work, name + ".jsonl")
    run_ok(plan, 1, "--steps", steps, "--metrics", metrics)
    return losses(metrics)


def parse_kv(items):
    kv = {}
    for it in items:
        k, v = it.split("=", 1)
        if v.isdigit():
            v = int(v)
        elif v in ("true", "false"):
            v = v == "true"
        kv[k] = v
    return kv


def check_parity(name, items):
    kv = parse_kv(items)
    dropout = kv.get("dropout", False)
    ref = reference_losses(dropout=dropout)
    if dropout:
        # Dropout must change the run by well over the parity tolerance,
        # or a plan that skipped it would pass.
        plain = reference_losses()
        diff = max(abs(a - b) / abs(a) for a, b in zip(plain, ref))
        if diff < 1e-3:  # ten times the parity tolerance
            fail("dropout moved the 1-rank losses by only %.3g (rel): is it applied?" % diff)
        print("dropout moves the 1-rank losses by up to %.3g (rel)" % diff)
    plan = os.path.join(A.work, name + ".json")
    world = write_plan(plan, **kv)
    metrics = os.path.join(A.work, name + ".jsonl")
    run_ok(plan, world, "--steps", STEPS, "--metrics", metrics)
    compare("parity %s (%d ranks)" % (name, world), ref, losses(metrics), 1e-4)


def check_resume_exact(dims=None):
    plan = os.path.join(A.work, "exact.json")
    world = write_plan(plan, **(dims or {"tp": 2}))
    full = os.path.join(A.work, "exact_full.jsonl")
    run_ok(plan, world, "--steps", STEPS, "--metrics", full)
    ck = os.path.join(A.work, "exact_ckpt")
    shutil.rmtree(ck, ignore_errors=True)
    first = os.path.join(A.work, "exact_a.jsonl")
    second = os.path.join(A.work, "exact_b.jsonl")
    run_ok(plan, world, "--steps", STEPS, "--stop-at", 5, "--checkpoint-dir", ck, "--metrics", first)
    out = run_ok(plan, world, "--steps", STEPS, "--checkpoint-dir", ck, "--resume", "--metrics", second)
    if "resumed from" not in out:
        fail("second run did not resume:\n" + out)
    a, b, ref = losses(first), losses(second), losses(full)
    if len(a) != 5 or len(b) != 5 or a + b != ref:
        fail("resume is not bit-exact:\n  uninterrupted %r\n  interrupted   %r" % (ref, a + b))
    print("resume_exact %r: 5 + 5 steps == 10 steps bitwise" % (dims or {"tp": 2}))


def check_resume_replan(saved=None, targets=None):
    ref = reference_losses()
    saved = saved or {"tp": 2}
    save_plan = os.path.join(A.work, "replan_saved.json")
    save_world = write_plan(save_plan, **saved)
    for name, kv in (targets or (("pp2", {"pp": 2}), ("dp2", {"dp": 2}))):
        ck = os.path.join(A.work, "replan_ckpt_" + name)
        shutil.rmtree(ck, ignore_errors=True)
        first = os.path.join(A.work, "replan_a_%s.jsonl" % name)
        run_ok(save_plan, save_world, "--steps", STEPS, "--stop-at", 5, "--checkpoint-dir", ck, "--metrics", first)
        plan = os.path.join(A.work, "replan_%s.json" % name)
        world = write_plan(plan, **kv)
        second = os.path.join(A.work, "replan_b_%s.jsonl" % name)
        out = run_ok(plan, world, "--steps", STEPS, "--checkpoint-dir", ck, "--resume", "--metrics", second)
        if "resumed from" not in out:
            fail("did not resume under %s:\n%s" % (name, out))
        compare("resume %r -> %s" % (saved, name), ref, losses(first) + losses(second), 1e-4)


def check_cp_resume():
    """Context parallelism: bit-exact resume under cp=2, and cp=2 -> pp=2 / cp=1."""
    check_resume_exact({"cp": 2})
    check_resume_replan({"cp": 2}, (("cp2_to_pp2", {"pp": 2}), ("cp2_to_tp2", {"tp": 2})))


def check_cp_dtplan():
    """The issue's commands: dtplan --device cpu --cp 2 plans, run by dtrun, match 1 rank."""
    model = os.path.join(A.source_dir, "examples/models/gpt-tiny.json")
    steps = 6
    cases = (("cp2", ["--nodes", "1", "--gpus", "2", "--cp", "2"]),
             ("cp2xpp2", ["--nodes", "2", "--gpus", "2", "--cp", "2", "--pp", "2"]),
             ("cp2xtp2_sp", ["--nodes", "2", "--gpus", "2", "--cp", "2", "--tp", "2", "--sp"]))
    for name, dims in cases:
        plan = os.path.join(A.work, name + ".json")
        subprocess.run([A.dtplan, "--model", model, "--device", "cpu", "--global-batch", str(GLOBAL_BATCH),
                        "--out", plan] + dims, check=True, stdout=subprocess.DEVNULL)
        with open(plan) as f:
            p = json.load(f)["plan"]
        if p["cp"] != 2:
            fail("%s: dtplan wrote cp=%r" % (name, p["cp"]))
        ref_plan = os.path.join(A.work, name + "_ref.json")
        write_plan(ref_plan, mbs=GLOBAL_BATCH, seq_length=p["seq_length"], dropout=p["dropout"])
        ref_metrics = os.path.join(A.work, name + "_ref.jsonl")
        run_ok(ref_plan, 1, "--steps", steps, "--metrics", ref_metrics)
        metrics = os.path.join(A.work, name + ".jsonl")
        world = p["dp"] * p["tp"] * p["pp"] * p["cp"]
        run_ok(plan, world, "--steps", steps, "--metrics", metrics)
        compare("dtplan %s (%d ranks: %s)" % (name, world, " ".join(dims)), losses(ref_metrics), losses(metrics),
                1e-4)


def check_llama():
    """examples/models/llama-tiny.json (RMSNorm, SwiGLU, RoPE, GQA kv_heads=2 < 4 heads, untied head):
    dtplan --device cpu plans (its choice on 2 and 4 ranks, --tp 2 --sp, --tp 4 with replicated KV
    heads, --pp 2 interleaved, a sequence twice max_position) and hand-written uneven pipeline splits train to the 1-rank losses."""
    model = os.path.join(A.source_dir, "examples/models/llama-tiny.json")
    steps = 6
    cases = (("chosen_2ranks", ["--nodes", "1", "--gpus", "2"]),
             ("chosen_4ranks", ["--nodes", "2", "--gpus", "2"]),
             ("tp2_sp", ["--nodes", "1", "--gpus", "2", "--tp", "2", "--sp"]),
             ("tp4_kv_replicated", ["--nodes", "2", "--gpus", "2", "--tp", "4"]),
             ("pp2_interleaved", ["--nodes", "1", "--gpus", "2", "--pp", "2", "--schedule", "interleaved",
                                  "--vpp", "2"]),
             # Rotary positions have no table: a sequence beyond max_position (a context
             # extension) is planned, and dtrun once refused what dtplan planned.
             ("seq_beyond_max_position", ["--nodes", "1", "--gpus", "2", "--seq-length", "128"]))
    refs = {}

    def reference(seq):
        if seq not in refs:
            ref_plan = os.path.join(A.work, "ref_%d.json" % seq)
            write_plan(ref_plan, model=model, mbs=GLOBAL_BATCH, seq_length=seq)
            ref_metrics = os.path.join(A.work, "ref_%d.jsonl" % seq)
            run_ok(ref_plan, 1, "--steps", steps, "--metrics", ref_metrics)
            refs[seq] = losses(ref_metrics)
        return refs[seq]

    for name, dims in cases:
        plan = os.path.join(A.work, name + ".json")
        subprocess.run([A.dtplan, "--model", model, "--device", "cpu", "--global-batch", str(GLOBAL_BATCH),
                        "--out", plan] + dims, check=True, stdout=subprocess.DEVNULL)
        with open(plan) as f:
            p = json.load(f)["plan"]
        metrics = os.path.join(A.work, name + ".jsonl")
        world = p["dp"] * p["tp"] * p["pp"] * p["cp"]
        run_ok(plan, world, "--steps", steps, "--metrics", metrics)
        compare("llama dtplan %s (%d ranks: dp=%d tp=%d pp=%d vpp=%d sp=%s)" %
                (name, world, p["dp"], p["tp"], p["pp"], p["vpp"], p["sequence_parallel"]),
                reference(p["seq_length"]), losses(metrics), 1e-4)
    uneven = (("pp2_split_1_3", dict(pp=2, layers_per_chunk=[1, 3])),
              ("pp2xtp2_sp_split_3_1", dict(pp=2, tp=2, sp=True, layers_per_chunk=[3, 1])),
              ("pp2_interleaved_split_1_1_1_1_dp2", dict(dp=2, pp=2, vpp=2, mbs=1, schedule="interleaved",
                                                         zero=1, layers_per_chunk=[1, 1, 1, 1])),
              # Embedding alone in the first chunk, the head alone in the last
              # (Megatron-LM's layouts with the embedding and loss counted as layers).
              ("pp2_interleaved_split_0_2_2_0", dict(pp=2, vpp=2, mbs=1, schedule="interleaved",
                                                     layers_per_chunk=[0, 2, 2, 0])),
              ("dp2xtp2_zero3", dict(dp=2, tp=2, zero=3)),
              ("dp2xpp2_zero2", dict(dp=2, pp=2, zero=2)),
              # Gradient reduction after the whole backward (Megatron-LM
              # without --overlap-grad-reduce): GradSync moves in the schedule.
              ("dp2_grad_sync_after_backward", dict(dp=2, overlap_grad_reduce=False)),
              ("pp2_interleaved_dp2_zero1_grad_sync_after_backward",
               dict(dp=2, pp=2, vpp=2, mbs=1, schedule="interleaved", zero=1, layers_per_chunk=[1, 1, 1, 1],
                    overlap_grad_reduce=False)))
    for name, kv in uneven:
        plan = os.path.join(A.work, name + ".json")
        world = write_plan(plan, model=model, **kv)
        metrics = os.path.join(A.work, name + ".jsonl")
        run_ok(plan, world, "--steps", steps, "--metrics", metrics)
        compare("llama %s (%d ranks)" % (name, world), reference(64), losses(metrics), 1e-4)
    # Checkpoints stay plan-independent with replicated KV heads: save under tp=4 at step 3,
    # resume under pp=2 x tp=2 (KV heads split, not replicated).
    ck = os.path.join(A.work, "llama_ckpt")
    shutil.rmtree(ck, ignore_errors=True)
    save_plan = os.path.join(A.work, "llama_save_tp4.json")
    save_world = write_plan(save_plan, model=model, tp=4)
    first = os.path.join(A.work, "llama_resume_a.jsonl")
    run_ok(save_plan, save_world, "--steps", steps, "--stop-at", 3, "--checkpoint-dir", ck, "--metrics", first)
    load_plan = os.path.join(A.work, "llama_load_pp2xtp2.json")
    load_world = write_plan(load_plan, model=model, pp=2, tp=2)
    second = os.path.join(A.work, "llama_resume_b.jsonl")
    out = run_ok(load_plan, load_world, "--steps", steps, "--checkpoint-dir", ck, "--resume", "--metrics", second)
    if "resumed from" not in out:
        fail("llama: did not resume under pp=2 x tp=2:\n" + out)
    compare("llama resume tp4 -> pp2xtp2", reference(64), losses(first) + losses(second), 1e-4)


def check_resume_zero():
    """ZeRO-2/3: bit-exact resume under dp=2 ZeRO-2 and ZeRO-3, and ZeRO-3 dp=2 -> tp=2 / ZeRO-2."""
    check_resume_exact({"dp": 2, "zero": 2})
    check_resume_exact({"dp": 2, "zero": 3})
    check_resume_replan({"dp": 2, "zero": 3}, (("zero3_to_tp2", {"tp": 2}), ("zero3_to_dp2_zero2", {"dp": 2, "zero": 2})))


# Mixture-of-experts models: expert parallelism alone, with TP (attention and
# experts split over TP, sequence parallel), with PP, all experts per rank
# (ep=4 on 4 ranks), with CP (the expert-DP group spans cp), and plain DP (ep=1: experts replicated,
# ZeRO-1 too). Gradient norms are compared as well.
MOE_FLAG_SETS = {
    "mixtral-tiny": ((), ("--dp", "2", "--ep", "1"), ("--ep", "2"), ("--ep", "2", "--tp", "2", "--sp"),
                     ("--ep", "2", "--pp", "2"), ("--ep", "2", "--recompute", "full"), ("--ep", "4"),
                     ("--cp", "2", "--ep", "2"),
                     ("--dp", "2", "--ep", "1", "--zero", "1"), ("--ep", "2", "--zero", "1"),
                     ("--ep", "2", "--tp", "2", "--sp", "--zero", "1")),
    # A shared expert beside the routed ones (DeepSeek style; the gated one: moe_shared_gate).
    "moe-shared-tiny": ((), ("--ep", "2"), ("--ep", "2", "--tp", "2", "--sp"), ("--ep", "2", "--pp", "2"),
                        ("--ep", "2", "--recompute", "full"), ("--cp", "2", "--ep", "2"),
                        ("--dp", "2", "--ep", "1", "--zero", "1"), ("--ep", "2", "--zero", "1")),
}


def check_moe_shared_gate():
    """Qwen2-MoE's sigmoid-gated shared expert (examples/models/moe-shared-tiny.json with
    shared_expert_gate): dp=2 x ep=2, dp=2 x ep=2 x tp=2 (SP), ep=2 x pp=2 and ep=2 with full
    recompute train to 1 rank's losses and gradient norms (rel 1e-4, 6 steps)."""
    with open(os.path.join(A.source_dir, "examples/models/moe-shared-tiny.json")) as f:
        m = json.load(f)
    m["name"] = "moe-shared-gate-tiny"
    m["shared_expert_gate"] = True
    model = os.path.join(A.work, "moe-shared-gate-tiny.json")
    with open(model, "w") as f:
        json.dump(m, f)
    steps = 6
    ref_plan = os.path.join(A.work, "gate_ref.json")
    write_plan(ref_plan, model=model, mbs=GLOBAL_BATCH)
    ref_metrics = os.path.join(A.work, "gate_ref.jsonl")
    run_ok(ref_plan, 1, "--steps", steps, "--metrics", ref_metrics)
    for name, dims in (("dp2_ep2", dict(dp=2, ep=2)), ("dp2_ep2_tp2_sp", dict(dp=2, ep=2, tp=2, sp=True)),
                       ("dp2_ep2_pp2", dict(dp=2, ep=2, pp=2)), ("dp2_ep2_full", dict(dp=2, ep=2, recompute="full"))):
        plan = os.path.join(A.work, "gate_%s.json" % name)
        world = write_plan(plan, model=model, **dims)
        metrics = os.path.join(A.work, "gate_%s.jsonl" % name)
        run_ok(plan, world, "--steps", steps, "--metrics", metrics)
        compare("moe-shared-gate-tiny " + name, losses(ref_metrics), losses(metrics), 1e-4)
        compare("moe-shared-gate-tiny %s gradient norms" % name, losses(ref_metrics, "grad_norm"),
                losses(metrics, "grad_norm"), 1e-4)


def check_moe_capacity():
    """Expert capacity on CPU (runtime/model/moe_mlp.h): each rank drops among its own copies, so
    plans without TP or CP drop what 1 rank drops for the same microbatch (mbs 2 everywhere: rank r's
    microbatch j is 1 rank's microbatch r*nmb+j). Losses and gradient norms within 1e-4 of 1 rank;
    the dropping changes the losses against dropless; a tp=2 plan is refused with exit 2."""
    model = os.path.join(A.source_dir, "examples/models/mixtral-tiny.json")
    steps = 6
    dropless_plan = os.path.join(A.work, "cap_dropless.json")
    write_plan(dropless_plan, model=model)
    dropless = os.path.join(A.work, "cap_dropless.jsonl")
    run_ok(dropless_plan, 1, "--steps", steps, "--metrics", dropless)
    for tag, cap in (("c075", {"moe_capacity_factor": 0.75}),
                     ("c1pad", {"moe_capacity_factor": 1.0, "moe_pad_to_capacity": True})):
        ref_plan = os.path.join(A.work, "cap_%s_ref.json" % tag)
        write_plan(ref_plan, model=model, **cap)
        ref_metrics = os.path.join(A.work, "cap_%s_ref.jsonl" % tag)
        run_ok(ref_plan, 1, "--steps", steps, "--metrics", ref_metrics)
        # Dropping must move the losses by more than the parity tolerance below.
        diff = max(abs(a - b) / abs(b) for key in ("loss", "grad_norm")
                   for a, b in zip(losses(ref_metrics, key), losses(dropless, key)))
        print("moe_capacity %s: largest relative loss or gradient-norm difference against dropless %.3g" % (tag, diff))
        if diff < 1e-4:
            fail("moe_capacity %s: losses within %.2g of dropless; the capacity dropped nothing" % (tag, diff))
        for name, dims in (("dp2_ep2", dict(dp=2, ep=2)), ("ep2_pp2", dict(ep=2, pp=2, dp=2)),
                           ("dp2_ep1", dict(dp=2, ep=1)), ("dp4_ep4", dict(dp=4, ep=4)),
                           ("dp2_ep2_full", dict(dp=2, ep=2, recompute="full"))):
            plan = os.path.join(A.work, "cap_%s_%s.json" % (tag, name))
            world = write_plan(plan, model=model, **dict(dims, **cap))
            metrics = os.path.join(A.work, "cap_%s_%s.jsonl" % (tag, name))
            run_ok(plan, world, "--steps", steps, "--metrics", metrics)
            compare("moe_capacity %s %s" % (tag, name), losses(ref_metrics), losses(metrics), 1e-4)
            compare("moe_capacity %s %s gradient norms" % (tag, name), losses(ref_metrics, "grad_norm"),
                    losses(metrics, "grad_norm"), 1e-4)
    plan = os.path.join(A.work, "cap_tp2.json")
    world = write_plan(plan, model=model, dp=2, ep=2, tp=2, sp=True, moe_capacity_factor=1.0)
    code, out, _ = run(plan, world, "--steps", 1)
    if code != 2 or "moe_capacity_factor with tp=2" not in out:
        fail("moe_capacity: a tp=2 plan with a capacity should exit 2 naming it; got %d:\n%s" % (code, out))


def check_moe_dense():
    """MoE models with dense-MLP layers (examples/models/moe-shared-tiny.json on 4 layers): the
    first layer dense (DeepSeek's first_dense_layers 1), and every other layer dense
    (moe_layer_step 2: layers 0 and 2 dense, Llama 4 Maverick's layout). dp=2 x ep=2,
    dp=2 x ep=2 x tp=2 (SP) and dp=2 x ep=2 x pp=2 train to 1 rank's losses and gradient norms
    (rel 1e-4, 6 steps), and the checkpoint holds dense MLP weights exactly for the dense layers."""
    with open(os.path.join(A.source_dir, "examples/models/moe-shared-tiny.json")) as f:
        base = json.load(f)
    steps = 6
    for variant, extra in (("lead1", {"first_dense_layers": 1}), ("step2", {"moe_layer_step": 2})):
        m = dict(base, num_layers=4, name="moe-dense-" + variant, **extra)
        model = os.path.join(A.work, "moe-dense-%s.json" % variant)
        with open(model, "w") as f:
            json.dump(m, f)
        ref_plan = os.path.join(A.work, "dense_%s_ref.json" % variant)
        write_plan(ref_plan, model=model, mbs=GLOBAL_BATCH)
        ref_metrics = os.path.join(A.work, "dense_%s_ref.jsonl" % variant)
        ckpt = os.path.join(A.work, "dense_%s_ckpt" % variant)
        shutil.rmtree(ckpt, ignore_errors=True)
        run_ok(ref_plan, 1, "--steps", steps, "--metrics", ref_metrics, "--checkpoint-dir", ckpt)
        with open(os.path.join(ckpt, "step-%d" % steps, "manifest.json")) as f:
            names = {t["name"] for t in json.load(f)["tensors"]}
        dense = {l for l in range(4) if (l < extra.get("first_dense_layers", 0) or
                                         (extra.get("moe_layer_step", 1) > 1 and l % 2 != 1))}
        for l in range(4):
            has_dense = "param/layers.%d.mlp.gate.weight" % l in names
            has_router = "param/layers.%d.mlp.router.weight" % l in names
            if has_dense != (l in dense) or has_router == (l in dense):
                fail("moe-dense-%s: layer %d has dense MLP %s, router %s; want dense %s" %
                     (variant, l, has_dense, has_router, l in dense))
        for name, dims in (("dp2_ep2", dict(dp=2, ep=2)), ("dp2_ep2_tp2_sp", dict(dp=2, ep=2, tp=2, sp=True)),
                           ("dp2_ep2_pp2", dict(dp=2, ep=2, pp=2))):
            plan = os.path.join(A.work, "dense_%s_%s.json" % (variant, name))
            world = write_plan(plan, model=model, **dims)
            metrics = os.path.join(A.work, "dense_%s_%s.jsonl" % (variant, name))
            run_ok(plan, world, "--steps", steps, "--metrics", metrics)
            compare("moe-dense-%s %s" % (variant, name), losses(ref_metrics), losses(metrics), 1e-4)
            compare("moe-dense-%s %s gradient norms" % (variant, name), losses(ref_metrics, "grad_norm"),
                    losses(metrics, "grad_norm"), 1e-4)


def check_matrix(model_name):
    """Issue 8's matrix: for examples/models/<model_name>.json on 2 ranks (1 node x 2) and 4 ranks
    (2 nodes x 2), the plan dtplan --device cpu chooses with no dimension fixed and with each flag set
    below trains to the 1-rank losses (same global batch, fp32, rel 1e-4, 6 steps). Flag sets that
    fix more ranks than the world are not applicable there."""
    model = os.path.join(A.source_dir, "examples/models/%s.json" % model_name)
    steps = 6
    flag_sets = ((), ("--zero", "2"), ("--zero", "3"), ("--cp", "2"), ("--tp", "2", "--sp"),
                 ("--pp", "2", "--schedule", "interleaved", "--vpp", "2"), ("--dp", "2", "--tp", "2", "--zero", "3"),
                 ("--cp", "2", "--pp", "2"))
    if model_name in MOE_FLAG_SETS:
        flag_sets = MOE_FLAG_SETS[model_name]
    refs = {}
    ran = 0
    for world, shape in ((2, ["--nodes", "1", "--gpus", "2"]), (4, ["--nodes", "2", "--gpus", "2"])):
        for flags in flag_sets:
            fixed = 1
            for dim in ("--dp", "--tp", "--pp", "--cp"):
                if dim in flags:
                    fixed *= int(flags[flags.index(dim) + 1])
            if fixed > world:
                continue
            if "--ep" in flags:  # ep divides dp: ep * tp * pp * cp ranks at least
                ep = int(flags[flags.index("--ep") + 1])
                others = fixed // (int(flags[flags.index("--dp") + 1]) if "--dp" in flags else 1)
                if ep * others > world:
                    continue
            name = "w%d_%s" % (world, "_".join(f.strip("-") for f in flags) or "chosen")
            plan = os.path.join(A.work, name + ".json")
            r = subprocess.run([A.dtplan, "--model", model, "--device", "cpu", "--global-batch", str(GLOBAL_BATCH),
                                "--out", plan] + shape + list(flags), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            if r.returncode != 0:
                fail("%s: dtplan %s exited %d:\n%s" % (model_name, " ".join(shape + list(flags)), r.returncode,
                                                        r.stdout[-2000:]))
            with open(plan) as f:
                p = json.load(f)["plan"]
            # The reference trains as the plan does (with dropout for a GPT model: dtplan plans it).
            seq = (p["seq_length"], p["dropout"])
            ref_name = "ref_%d%s" % (seq[0], "_dropout" if seq[1] else "")
            if seq not in refs:
                ref_plan = os.path.join(A.work, ref_name + ".json")
                write_plan(ref_plan, model=model, mbs=GLOBAL_BATCH, seq_length=seq[0], dropout=seq[1])
                ref_metrics = os.path.join(A.work, ref_name + ".jsonl")
                run_ok(ref_plan, 1, "--steps", steps, "--metrics", ref_metrics)
                refs[seq] = losses(ref_metrics)
            metrics = os.path.join(A.work, name + ".jsonl")
            n = p["dp"] * p["tp"] * p["pp"] * p["cp"]
            run_ok(plan, n, "--steps", steps, "--metrics", metrics)
            if "--ep" in flags and p.get("ep", 1) != int(flags[flags.index("--ep") + 1]):
                fail("%s: dtplan %s wrote ep=%r" % (model_name, " ".join(flags), p.get("ep")))
            compare("%s %s (%d ranks: dp=%d ep=%d tp=%d pp=%d cp=%d vpp=%d zero=%d sp=%s %s)" %
                    (model_name, " ".join(flags) or "(nothing fixed)", n, p["dp"], p.get("ep", 1), p["tp"], p["pp"],
                     p["cp"], p["vpp"], p["zero_stage"], p["sequence_parallel"], p["schedule"]),
                    refs[seq], losses(metrics), 1e-4)
            if model_name in MOE_FLAG_SETS:  # AdamW hides gradient scale errors from the losses; the norm does not
                compare("%s %s gradient norms" % (model_name, " ".join(flags) or "(nothing fixed)"),
                        losses(os.path.join(A.work, ref_name + ".jsonl"), "grad_norm"),
                        losses(metrics, "grad_norm"), 1e-4)
            ran += 1
    print("%s: %d dtplan plans matched 1 rank" % (model_name, ran))


def check_sweep():
    """Every plan dtplan --device cpu emits runs under dtrun: random (seeded, so the same every run)
    sets of dtplan's flags over the CPU example models and 1-6 ranks. dtplan must either write a plan
    or exit 2 with an error line (never crash); each plan it writes must train 2 steps under dtrun
    with exit 0. The sweep found dtrun refusing Llama plans whose sequence exceeds
    max_position_embeddings, which dtplan (rightly: rotary positions have no table) had planned."""
    import random
    rng = random.Random(20261129)
    models = ("gpt-tiny", "llama-tiny", "mixtral-tiny", "moe-shared-tiny")
    flags = (("--precision", ("fp32", "bf16")), ("--framework", ("megatron", "torchtitan", "deepspeed")),
             ("--zero", ("0", "1", "2", "3")), ("--recompute", ("none", "selective", "full")),
             ("--schedule", ("gpipe", "1f1b", "interleaved")), ("--adam-moments", ("fp32", "bf16")),
             ("--global-batch", ("2", "4", "6", "8", "12", "16")), ("--seq-length", ("16", "32", "48", "64", "128")),
             ("--tp", ("1", "2")), ("--pp", ("1", "2")), ("--cp", ("1", "2")), ("--mbs", ("1", "2", "4")),
             ("--ep", ("1", "2", "4")), ("--moe-capacity-factor", ("1", "1.5")))
    ran = refused = 0
    for i in range(40):
        model = rng.choice(models)
        gpus, nodes = rng.choice((1, 2, 2)), rng.choice((1, 2, 3))
        plan = os.path.join(A.work, "sweep_%d.json" % i)
        args = [A.dtplan, "--model", os.path.join(A.source_dir, "examples/models/%s.json" % model), "--device", "cpu",
                "--nodes", str(nodes), "--gpus", str(gpus), "--out", plan]
        for flag, values in flags:
            if rng.random() < 0.12:
                args += [flag, rng.choice(values)]
        if rng.random() < 0.1:
            args.append("--sp")
        what = "dtplan " + " ".join(a.replace(A.source_dir + "/", "") for a in args[1:])
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        if r.returncode == 2 and "error:" in r.stdout:
            refused += 1
            continue
        if r.returncode != 0:
            fail("%s: exit %d (expected 0, or 2 with an error line):\n%s" % (what, r.returncode, r.stdout[-2000:]))
        with open(plan) as f:
            p = json.load(f)["plan"]
        code, out, _ = run(plan, p["dp"] * p["tp"] * p["pp"] * p["cp"], "--steps", 2)
        if code != 0:
            fail("%s wrote a plan dtrun refused (exit %d):\n%s" % (what, code, out[-2000:]))
        ran += 1
    if ran < 10:
        fail("only %d of 40 random flag sets gave a plan (%d refused): the sweep checks too little" % (ran, refused))
    print("sweep: %d random dtplan plans ran under dtrun, %d flag sets refused with exit 2" % (ran, refused))


def check_moe_resume():
    """Mixture of experts (mixtral-tiny): bit-exact resume under dp=2 ep=2 (experts split over 2 ranks),
    and a checkpoint saved under dp=2 x ep=2 x tp=2 (SP) resumed on 1 rank and under dp=2 ep=1 (experts
    replicated): the losses of the two halves match 1 rank's 10 steps (rel 1e-4)."""
    model = os.path.join(A.source_dir, "examples/models/mixtral-tiny.json")
    check_resume_exact({"dp": 2, "ep": 2, "model": model})
    check_resume_exact({"dp": 2, "ep": 2, "zero": 1, "model": model})  # Adam states sharded over dp / expert-DP
    ref_plan = os.path.join(A.work, "moe_ref.json")
    write_plan(ref_plan, model=model)
    ref_metrics = os.path.join(A.work, "moe_ref.jsonl")
    run_ok(ref_plan, 1, "--steps", STEPS, "--metrics", ref_metrics)
    ref = losses(ref_metrics)
    saved = {"dp": 2, "ep": 2, "tp": 2, "sp": True, "mbs": 1}
    save_plan = os.path.join(A.work, "moe_saved.json")
    save_world = write_plan(save_plan, model=model, **saved)
    for name, kv in (("one_rank", {}), ("dp2_ep1", {"dp": 2})):
        ck = os.path.join(A.work, "moe_ckpt_" + name)
        shutil.rmtree(ck, ignore_errors=True)
        first = os.path.join(A.work, "moe_a_%s.jsonl" % name)
        run_ok(save_plan, save_world, "--steps", STEPS, "--stop-at", 5, "--checkpoint-dir", ck, "--metrics", first)
        plan = os.path.join(A.work, "moe_%s.json" % name)
        world = write_plan(plan, model=model, **kv)
        second = os.path.join(A.work, "moe_b_%s.jsonl" % name)
        out = run_ok(plan, world, "--steps", STEPS, "--checkpoint-dir", ck, "--resume", "--metrics", second)
        if "resumed from" not in out:
            fail("did not resume under %s:\n%s" % (name, out))
        compare("moe resume %r -> %s" % (saved, name), ref, losses(first) + losses(second), 1e-4)
    # ZeRO-1 with EP: its sharded Adam states are saved whole and resumed on 1 rank.
    saved = {"dp": 2, "ep": 2, "zero": 1, "mbs": 1}
    save_plan = os.path.join(A.work, "moe_saved_zero1.json")
    save_world = write_plan(save_plan, model=model, **saved)
    ck = os.path.join(A.work, "moe_ckpt_zero1")
    shutil.rmtree(ck, ignore_errors=True)
    first = os.path.join(A.work, "moe_a_zero1.jsonl")
    run_ok(save_plan, save_world, "--steps", STEPS, "--stop-at", 5, "--checkpoint-dir", ck, "--metrics", first)
    second = os.path.join(A.work, "moe_b_zero1.jsonl")
    out = run_ok(ref_plan, 1, "--steps", STEPS, "--checkpoint-dir", ck, "--resume", "--metrics", second)
    if "resumed from" not in out:
        fail("did not resume the ZeRO-1 x EP checkpoint on 1 rank:\n" + out)
    compare("moe resume %r -> one_rank" % saved, ref, losses(first) + losses(second), 1e-4)


def check_kill():
    plan = os.path.join(A.work, "kill.json")
    write_plan(plan, pp=2)
    ck = os.path.join(A.work, "kill_ckpt")
    shutil.rmtree(ck, ignore_errors=True)
    code, out, secs = run(plan, 2, "--steps", STEPS, "--checkpoint-dir", ck, "--checkpoint-every", 2,
                          "--debug-kill-rank", 1, "--debug-kill-step", 6, timeout=60)
    if code == 0:
        fail("job survived a killed rank:\n" + out)
    if secs > 30:
        fail("job took %.1f s to exit after a rank was killed (> 30 s)" % secs)
    print("kill: exit code %d after %.1f s" % (code, secs))
    ref = reference_losses()
    metrics = os.path.join(A.work, "kill_resume.jsonl")
    out = run_ok(plan, 2, "--steps", STEPS, "--checkpoint-dir", ck, "--resume", "--metrics", metrics)
    if "at step 4" not in out:
        fail("expected to resume from the step-4 checkpoint:\n" + out)
    compare("kill then resume (steps 5-10)", ref[4:], losses(metrics), 1e-4)


def check_entropy():
    plan = os.path.join(A.work, "entropy.json")
    write_plan(plan, mbs=8, global_batch=16)  # 2 microbatches of 8 sequences per step
    metrics = os.path.join(A.work, "entropy.jsonl")
    steps = 300
    t0 = time.time()
    out = run_ok(plan, 1, "--steps", steps, "--lr", "1e-2", "--warmup-steps", 20, "--metrics", metrics)
    secs = time.time() - t0
    h = None
    for line in out.splitlines():
        if "entropy rate" in line and line.startswith("data:"):
            h = float(line.split("entropy rate")[1].split()[0])
    if h is None:
        fail("dtrun did not print the entropy rate:\n" + out)
    ls = losses(metrics)
    tail = sum(ls[-10:]) / 10
    print("entropy: rate %.4f nats, mean loss of the last 10 of %d steps %.4f (%.1f%% above), %.1f s" %
          (h, steps, tail, 100 * (tail / h - 1), secs))
    if tail > 1.10 * h:
        fail("loss %.4f not within 10%% of the entropy rate %.4f" % (tail, h))


def check_threads():
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_THREAD_LIMIT")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cores = os.cpu_count() or 1
    for nprocs in (1, 2):
        # nproc reports the CPUs of the affinity mask mpirun gives a rank.
        p = subprocess.run([A.mpirun, "--oversubscribe", "-np", str(nprocs), "nproc"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60, env=env)
        allowed = sorted({int(x) for x in p.stdout.split() if x.isdigit()})
        if p.returncode != 0 or not allowed:
            fail("mpirun -np %d nproc: exit %d:\n%s" % (nprocs, p.returncode, p.stdout))
        want = {max(1, min(a, cores // nprocs)) for a in allowed}
        plan = os.path.join(A.work, "threads%d.json" % nprocs)
        write_plan(plan, dp=nprocs, mbs=1)
        p = subprocess.run([A.mpirun, "--oversubscribe", "-np", str(nprocs), A.dtrun, "--plan", plan, "--steps", "2",
                            "--step-timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=120, env=env)
        head = [l for l in p.stdout.splitlines() if l.startswith("dtrun: %d ranks x " % nprocs)]
        if p.returncode != 0 or not head:
            fail("dtrun on %d ranks: exit %d, no 'dtrun: N ranks x T threads' line:\n%s" % (nprocs, p.returncode, p.stdout))
        got = int(head[0].split(" x ")[1].split()[0])
        if got not in want:
            fail("%d ranks on %d cores, %s CPUs allowed per rank: dtrun ran %d threads per rank, want %s" %
                 (nprocs, cores, allowed, got, sorted(want)))
        print("threads: %d rank(s) on %d cores, %s CPU(s) allowed per rank: %d thread(s) per rank" %
              (nprocs, cores, allowed, got))


def expect_bad(what, plan, nprocs, *args, must_say=""):
    code, out, _ = run(plan, nprocs, *args, timeout=60)
    if code != 2:
        fail("%s: exit code %d, expected 2:\n%s" % (what, code, out))
    if "dtrun: error:" not in out or must_say not in out:
        fail("%s: no clear message (expected '%s'):\n%s" % (what, must_say, out))
    msg = [l for l in out.splitlines() if "dtrun: error:" in l][0]
    print("%s: exit 2: %s" % (what, msg.strip()))


def snapshot(d):
    res = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            st = os.stat(p)
            res[p] = (st.st_size, st.st_mtime_ns)
    return res


def check_bad_input():
    good = os.path.join(A.work, "bad_good.json")
    write_plan(good, tp=2)
    expect_bad("wrong world size", good, 1, "--steps", 2, must_say="plan needs 2 ranks")
    expect_bad("wrong world size (4 ranks)", good, 4, "--steps", 2, must_say="mpirun -np 2")
    # malformed plan files
    broken = os.path.join(A.work, "bad_broken.json")
    with open(broken, "w") as f:
        f.write('{"model": {"name": "x", ')
    expect_bad("malformed plan (truncated JSON)", broken, 1)
    inconsistent = os.path.join(A.work, "bad_heads.json")
    write_plan(inconsistent, tp=3)  # 4 heads are not divisible by tp=3
    expect_bad("malformed plan (tp does not divide heads)", inconsistent, 3)
    expect_bad("missing plan file", os.path.join(A.work, "no_such_plan.json"), 1)
    too_long = os.path.join(A.work, "bad_positions.json")
    write_plan(too_long, seq_length=128)  # gpt-tiny has 64 learned positions
    expect_bad("sequence beyond the learned positions", too_long, 1, must_say="64 learned positions")
    plain = os.path.join(A.work, "bad_plain.json")
    write_plan(plain)
    expect_bad("--dropout on a plan without dropout", plain, 1, "--dropout", "0.2",
               must_say="trains without dropout")
    with_dropout = os.path.join(A.work, "bad_dropout.json")
    write_plan(with_dropout, dropout=True)
    expect_bad("--dropout 1", with_dropout, 1, "--dropout", "1", must_say="[0, 1)")
    expect_bad("--dropout -0.5", with_dropout, 1, "--dropout", "-0.5", must_say="[0, 1)")
    expect_bad("--warmup-steps beyond --steps", plain, 1, "--steps", 5, "--warmup-steps", 50,
               must_say="would never reach --lr")
    expect_bad("--clip nan", plain, 1, "--clip", "nan", must_say="--clip must be a number")
    # run() passes its own --step-timeout: this one runs dtrun directly.
    p = subprocess.run([A.mpirun, "--allow-run-as-root", "-np", "1", A.dtrun, "--plan", plain, "--steps", "2",
                        "--timeout", "nan"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    if p.returncode != 2 or "--timeout must be a number" not in p.stdout:
        fail("--timeout nan: exit %d, expected 2 with a clear message:\n%s" % (p.returncode, p.stdout))
    print("--timeout nan: exit 2")
    # features outside the CPU column of the capability table (dtplan capabilities):
    # refused with the table's words; supported ones are covered by the parity tests.
    table = json.loads(subprocess.run([A.dtplan, "capabilities", "--json"], check=True,
                                      stdout=subprocess.PIPE, text=True).stdout)["dtrun_executes"]
    cpu = {row["feature"]: row["cpu"] for row in table}
    def feature(prefix):
        names = [n for n in cpu if n.startswith(prefix)]
        if len(names) != 1:
            fail("capability table has no single feature starting with '%s': %s" % (prefix, sorted(cpu)))
        return names[0]
    cases = [("context parallelism", dict(cp=2), 2), ("ZeRO stage 2", dict(dp=2, zero=2), 2),
             ("ZeRO stage 3", dict(dp=2, zero=3), 2), ("fused (flash) attention", dict(flash_attention=True), 1),
             ("dropout", dict(dropout=True), 1)]
    mixtral = os.path.join(A.source_dir, "examples/models/mixtral-tiny.json")
    cases += [("ZeRO-1 with expert parallelism", dict(model=mixtral, dp=2, ep=2, zero=1, mbs=1), 2)]
    refused = 0
    for prefix, dims, n in cases:
        name = feature(prefix)
        path = os.path.join(A.work, "bad_%d.json" % refused)
        write_plan(path, **dims)
        if cpu[name]:
            print("%s: in the CPU column (covered by parity tests)" % name)
            continue
        expect_bad("unsupported " + name, path, n, must_say="does not execute " + name)
        refused += 1
    llama_name = feature("the Llama family")
    if not cpu[llama_name]:
        llama = os.path.join(A.work, "bad_llama.json")
        write_llama()
        write_plan(llama, model=os.path.join(A.work, "llama-tiny.json"))
        expect_bad("unsupported llama model", llama, 1, must_say="does not execute " + llama_name)
        refused += 1
    if refused == 0:
        print("every probed feature is in the CPU column")
    # data files
    one = os.path.join(A.work, "bad_one.json")
    write_plan(one)
    odd = os.path.join(A.work, "odd.bin")
    with open(odd, "wb") as f:
        f.write(b"\x01\x00" * 1000 + b"\x07")
    expect_bad("truncated .bin data", one, 1, "--data", odd, must_say="truncated")
    short = os.path.join(A.work, "short.txt")
    with open(short, "w") as f:
        f.write("too short")
    expect_bad("text data shorter than a sample", one, 1, "--data", short)
    # options that would otherwise do nothing, or train backwards
    nock = os.path.join(A.work, "bad_no_ckpt")
    expect_bad("--checkpoint-every without a directory", one, 1, "--steps", 4, "--checkpoint-every", 2,
               must_say="--checkpoint-every needs --checkpoint-dir")
    expect_bad("--stop-at without a directory", one, 1, "--steps", 4, "--stop-at", 2,
               must_say="--stop-at stops to resume later: it needs --checkpoint-dir")
    expect_bad("--stop-at beyond --steps", one, 1, "--steps", 4, "--stop-at", 5, "--checkpoint-dir", nock,
               must_say="--stop-at 5 is out of range")
    expect_bad("negative learning rate", one, 1, "--steps", 2, "--lr", "-1e-3", must_say="--lr must be")
    expect_bad("--min-lr above --lr", one, 1, "--steps", 2, "--lr", "1e-3", "--min-lr", "1e-2",
               must_say="--min-lr must lie in")
    expect_bad("negative weight decay", one, 1, "--steps", 2, "--weight-decay", "-0.1",
               must_say="--weight-decay must be")
    if os.path.exists(nock):
        fail("--stop-at beyond --steps: the refused run created its checkpoint directory")
    # corrupt checkpoint: nothing overwritten
    ck = os.path.join(A.work, "bad_ckpt")
    shutil.rmtree(ck, ignore_errors=True)
    run_ok(one, 1, "--steps", 2, "--checkpoint-dir", ck)
    blobs = [os.path.join(r, f) for r, _, fs in os.walk(ck) for f in fs if not f.startswith("latest")]
    victim = max(blobs, key=os.path.getsize)
    with open(victim, "r+b") as f:
        f.seek(os.path.getsize(victim) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    metrics = os.path.join(A.work, "bad_metrics.jsonl")
    with open(metrics, "w") as f:
        f.write("keep me\n")
    before = snapshot(ck)
    expect_bad("corrupt checkpoint", one, 1, "--steps", 4, "--checkpoint-dir", ck, "--resume",
               "--metrics", metrics)
    if snapshot(ck) != before:
        fail("corrupt checkpoint: the checkpoint directory changed")
    with open(metrics) as f:
        if f.read() != "keep me\n":
            fail("corrupt checkpoint: the metrics file was overwritten")
    print("corrupt checkpoint: nothing overwritten")


def check_diverge():
    """A step whose gradient norm is not finite: dtrun exits 4 naming the step; the optimizer
    skipped its update, so the checkpoint saved at the stop is the model of the step before, bit
    for bit the checkpoint of the same run stopped there (--stop-at)."""
    plan = os.path.join(A.work, "diverge.json")
    world = write_plan(plan, dp=2, mbs=1)
    ck = os.path.join(A.work, "diverge_ckpt")
    shutil.rmtree(ck, ignore_errors=True)
    args = ["--steps", 6, "--warmup-steps", 1, "--lr", "1e30"]
    code, out, _ = run(plan, world, "--checkpoint-dir", ck, *args)
    if code != 4 or "step 2 diverged" not in out or "update was skipped" not in out:
        fail("diverging run: exit %d (expected 4) or no clear message:\n%s" % (code, out))
    with open(os.path.join(ck, "latest")) as f:
        latest = f.read().strip()
    if latest != "step-1":
        fail("diverging run saved %r, expected step-1 (the last finite step)" % latest)
    ref = os.path.join(A.work, "diverge_ref_ckpt")
    shutil.rmtree(ref, ignore_errors=True)
    run_ok(plan, world, "--checkpoint-dir", ref, "--stop-at", 1, *args)
    with open(os.path.join(ck, "step-1", "tensors.bin"), "rb") as a, \
            open(os.path.join(ref, "step-1", "tensors.bin"), "rb") as b:
        if a.read() != b.read():
            fail("the checkpoint saved after the diverged step differs from the run stopped at step 1")
    print("diverge: exit 4 at step 2, its update skipped, step-1 saved = the run stopped at step 1 (bitwise)")


def write_llama():
    with open(os.path.join(A.work, "llama-tiny.json"), "w") as f:
        json.dump({"name": "llama-tiny", "family": "llama", "num_layers": 2, "hidden_size": 64,
                   "num_attention_heads": 4, "ffn_hidden_size": 172, "vocab_size": 256,
                   "seq_length": 64, "max_position": 64}, f)
    return True


def check_predicted():
    plan = os.path.join(A.work, "dtplan_tp2.json")
    subprocess.run([A.dtplan, "--model", os.path.join(A.source_dir, "examples/models/gpt-tiny.json"),
                    "--nodes", "1", "--gpus", "2", "--device", "cpu", "--tp", "2", "--pp", "1",
                    "--mbs", "2", "--global-batch", "8", "--out", plan], check=True,
                   stdout=subprocess.DEVNULL)
    out = run_ok(plan, 2, "--steps", 6)
    print(out)
    for want in ("predicted", "measured median", "stage 0"):
        if want not in out:
            fail("summary lacks '%s'" % want)


def check_deferred():
    """The device path's synchronisation, proven on CPU: every plan kind below runs twice, with the
    eager CPU backend and with DT_DEFERRED_KERNELS=1 (runtime/backend/deferred_backend.h: kernels
    queued as on a GPU stream, run only at a synchronisation). A host access without its
    synchronisation reads or overwrites data a queued kernel has not produced or consumed yet, so
    the two runs agree bit for bit (losses and gradient norms) only if none is missing."""
    gpt = os.path.join(A.source_dir, "examples/models/gpt-tiny.json")
    llama = os.path.join(A.source_dir, "examples/models/llama-tiny.json")
    mixtral = os.path.join(A.source_dir, "examples/models/mixtral-tiny.json")
    steps = 3
    cases = (("gpt_1rank", dict(model=gpt)),
             ("gpt_dp2_zero1", dict(model=gpt, dp=2, zero=1)),
             ("gpt_dp2_zero3", dict(model=gpt, dp=2, zero=3)),
             ("gpt_tp2_sp", dict(model=gpt, tp=2, sp=True)),
             ("gpt_pp2_interleaved", dict(model=gpt, pp=2, vpp=2, mbs=1, schedule="interleaved")),
             ("gpt_cp2", dict(model=gpt, cp=2)),
             ("gpt_recompute_full_dp2_zero2", dict(model=gpt, dp=2, zero=2, recompute="full")),
             ("gpt_bf16_dp2", dict(model=gpt, dp=2, precision="bf16")),
             ("gpt_bf16_dp2_zero3", dict(model=gpt, dp=2, zero=3, precision="bf16")),
             ("gpt_bf16_fp32_grads_dp2_zero2", dict(model=gpt, dp=2, zero=2, precision="bf16", grad_bytes=4)),
             ("gpt_dropout_tp2_sp", dict(model=gpt, tp=2, sp=True, dropout=True)),
             ("gpt_dropout_cp2_rc_selective", dict(model=gpt, cp=2, recompute="selective", dropout=True)),
             ("llama_tp2_sp", dict(model=llama, tp=2, sp=True)),
             ("llama_pp2", dict(model=llama, pp=2)),
             ("mixtral_dp2_ep2", dict(model=mixtral, dp=2, ep=2)),
             ("mixtral_dp2_ep2_tp2_sp", dict(model=mixtral, dp=2, ep=2, tp=2, sp=True)),
             ("mixtral_1rank", dict(model=mixtral)))
    for name, kv in cases:
        plan = os.path.join(A.work, "deferred_%s.json" % name)
        world = write_plan(plan, **kv)
        eager = os.path.join(A.work, "deferred_%s_eager.jsonl" % name)
        run_ok(plan, world, "--steps", steps, "--metrics", eager)
        deferred = os.path.join(A.work, "deferred_%s_deferred.jsonl" % name)
        os.environ["DT_DEFERRED_KERNELS"] = "1"
        try:
            out = run_ok(plan, world, "--steps", steps, "--metrics", deferred)
        finally:
            del os.environ["DT_DEFERRED_KERNELS"]
        if "kernels deferred" not in out:
            fail("deferred %s: dtrun did not run with DT_DEFERRED_KERNELS=1:\n%s" % (name, out))
        for key in ("loss", "grad_norm"):
            a, b = losses(eager, key), losses(deferred, key)
            if a != b or len(a) != steps:
                fail("deferred %s (%d ranks): %s differ from the eager run:\n  eager    %r\n  deferred %r" %
                     (name, world, key, a, b))
        print("deferred %s (%d ranks): %d steps, losses and gradient norms bit-identical to the eager backend" %
              (name, world, steps))
    # Checkpoints read parameters and moments: save deferred at step 2, resume deferred, same losses.
    plan = os.path.join(A.work, "deferred_ckpt.json")
    world = write_plan(plan, model=gpt, dp=2, zero=1)
    full = os.path.join(A.work, "deferred_ckpt_full.jsonl")
    run_ok(plan, world, "--steps", 4, "--metrics", full)
    ck = os.path.join(A.work, "deferred_ckpt_dir")
    shutil.rmtree(ck, ignore_errors=True)
    os.environ["DT_DEFERRED_KERNELS"] = "1"
    try:
        first = os.path.join(A.work, "deferred_ckpt_a.jsonl")
        if "kernels deferred" not in run_ok(plan, world, "--steps", 4, "--stop-at", 2, "--checkpoint-dir", ck,
                                            "--metrics", first):
            fail("deferred checkpoint: dtrun did not run with DT_DEFERRED_KERNELS=1")
        second = os.path.join(A.work, "deferred_ckpt_b.jsonl")
        run_ok(plan, world, "--steps", 4, "--checkpoint-dir", ck, "--resume", "--metrics", second)
    finally:
        del os.environ["DT_DEFERRED_KERNELS"]
    if losses(first) + losses(second) != losses(full):
        fail("deferred save + resume differs from the eager uninterrupted run:\n  %r\n  %r" %
             (losses(full), losses(first) + losses(second)))
    print("deferred checkpoint: save at step 2 and resume, bit-identical to the eager run")
    # The CUDA path (DT_RUN_ON_CUDA=1, runtime/cuda/managed_memory.h) without a usable GPU: exit 2
    # with the reason, every rank, no hang; with one it trains (scripts/gpu-check.sh compares it).
    os.environ["DT_RUN_ON_CUDA"] = "1"
    try:
        code, out, _ = run(plan, world, "--steps", 2)
    finally:
        del os.environ["DT_RUN_ON_CUDA"]
    if code == 0:
        print("DT_RUN_ON_CUDA=1: trained on a GPU here (compare with scripts/gpu-check.sh)")
    elif code != 2 or "DT_RUN_ON_CUDA=1 but" not in out:
        fail("DT_RUN_ON_CUDA=1 without a usable GPU: want exit 2 naming the reason, got %d:\n%s" % (code, out))
    else:
        print("DT_RUN_ON_CUDA=1 without a usable GPU: exit 2, " + [l for l in out.splitlines() if "DT_RUN_ON_CUDA" in l][0])


def parse_args():
    """The command line shared with dtrun_faults.py: binaries, source and work dirs, the check."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtrun", required=True)
    ap.add_argument("--dtplan", default="dtplan")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("check")
    ap.add_argument("rest", nargs="*")
    return ap.parse_args()


def main():
    global A
    A = parse_args()
    A.work = os.path.join(A.work, A.check + ("_" + A.rest[0] if A.rest else ""))
    os.makedirs(A.work, exist_ok=True)
    # Dropout too: its masks are keyed by the data seed the checkpoint keeps.
    checks = {"resume_exact": lambda: (check_resume_exact(), check_resume_exact({"tp": 2, "dropout": True})), "resume_replan": check_resume_replan, "resume_zero": check_resume_zero,
              "kill": check_kill, "entropy": check_entropy, "bad_input": check_bad_input,
              "predicted": check_predicted, "cp_resume": check_cp_resume, "cp_dtplan": check_cp_dtplan,
              "llama": check_llama, "moe_resume": check_moe_resume, "moe_shared_gate": check_moe_shared_gate,
              "deferred": check_deferred, "threads": check_threads, "moe_dense": check_moe_dense,
              "moe_capacity": check_moe_capacity, "diverge": check_diverge, "sweep": check_sweep}
    if A.check == "parity":
        check_parity(A.rest[0], A.rest[1:])
    elif A.check == "matrix":
        check_matrix(A.rest[0])
    elif A.check in checks:
        checks[A.check]()
    else:
        fail("unknown check " + A.check)


if __name__ == "__main__":
    main()
