#!/usr/bin/env python3
"""Issue 13 ("nothing lost, nothing hangs, nothing crashes"): dtrun under faults.
Registered as ctests in tests/runtime/CMakeLists.txt; scripts/fault-drills.sh runs the drills.

Usage: dtrun_faults.py --dtrun BIN --dtplan BIN --mpirun BIN --source-dir DIR --work DIR <check> [N]

Checks
  ckpt_integrity     edited manifest (CRC), resealed manifest with optimizer_step -5, data_position
                     != step, an Adam-moment entry removed (manifest only, and manifest + blob):
                     each resume exits 2 naming the entry; nothing is trained or written.
  keep_checkpoints   --keep-checkpoints 2 leaves the newest 2 step directories, "latest" intact;
                     --keep-checkpoints -1 exits 2.
  output_errors      --metrics /dev/full, a checkpoint write failing part-way (DT_FAULT_WRITE_LIMIT_BYTES),
                     dtplan --out / --trace failing part-way: non-zero exit, a clear message, no
                     partial output, the previous checkpoint intact.
  watchdog           a rank SIGSTOPped at startup, in a step, during a checkpoint save and during
                     resume: the job exits non-zero within the --timeout (+ slack), naming the phase
                     and the rank that noticed.
  drills N           N kill -9 drills during checkpoint saves (rank 1 at the save's start, rank 0
                     part-way through writing the blob, rank 0 before "latest" moves): the job exits
                     non-zero, the previous checkpoint is intact, and resuming from it reproduces the
                     uninterrupted losses. Prints "drills: N/N passed".
  elastic            scripts/dtrun-elastic.py starts 4 ranks, rank 3 is killed in step 6; the job
                     re-plans for 3 ranks (global batch kept), resumes from step 4 and finishes 12
                     steps with the 1-rank losses (rel 1e-4).
"""
import json
import os
import random
import shutil
import subprocess
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dtrun_check as dc  # noqa: E402  (helpers: write_plan, losses, compare, fail)

fail = dc.fail


def run(plan, nprocs, *args, env=None, timeout_flag=60, timeout=120):
    """dtrun under mpirun with extra environment; returns (exit code, output, seconds)."""
    e = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
             OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    e.update(env or {})
    cmd = [dc.A.mpirun, "--oversubscribe", "-np", str(nprocs), dc.A.dtrun, "--plan", plan, "--quiet",
           "--step-timeout", str(timeout_flag)] + [str(a) for a in args]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, env=e)
    except subprocess.TimeoutExpired as ex:
        fail("dtrun hung for %d s: %s\n%s" % (timeout, " ".join(cmd), ex.stdout))
    return p.returncode, p.stdout, time.time() - t0


def run_ok(plan, nprocs, *args, **kw):
    code, out, _ = run(plan, nprocs, *args, **kw)
    if code != 0:
        fail("dtrun exited %d on %s (%d ranks):\n%s" % (code, plan, nprocs, out))
    return out


def expect_exit(what, code_want, out_must_say, plan, nprocs, *args, **kw):
    code, out, secs = run(plan, nprocs, *args, **kw)
    if code != code_want:
        fail("%s: exit code %d, expected %d:\n%s" % (what, code, code_want, out))
    for s in out_must_say:
        if s not in out:
            fail("%s: the output does not say '%s':\n%s" % (what, s, out))
    line = [l for l in out.splitlines() if "error" in l or "FATAL" in l]
    print("%s: exit %d in %.1f s: %s" % (what, code, secs, line[0].strip() if line else ""))
    return out, secs


def snapshot(d):
    return {os.path.join(r, f): open(os.path.join(r, f), "rb").read() for r, _, fs in os.walk(d) for f in fs}


# ---- 1. checksummed, cross-checked manifest ----

def reseal(step_dir, manifest):
    text = json.dumps(manifest, indent=1)
    with open(os.path.join(step_dir, "manifest.json"), "w") as f:
        f.write(text)
    with open(os.path.join(step_dir, "manifest.crc32"), "w") as f:
        f.write("%08x\n" % (zlib.crc32(text.encode()) & 0xFFFFFFFF))


def check_ckpt_integrity():
    plan = os.path.join(dc.A.work, "one.json")
    dc.write_plan(plan)
    base = os.path.join(dc.A.work, "ckpt_base")
    shutil.rmtree(base, ignore_errors=True)
    run_ok(plan, 1, "--steps", 8, "--stop-at", 4, "--checkpoint-dir", base)
    with open(os.path.join(base, "step-4", "manifest.json")) as f:
        text = f.read()
    original = json.loads(text)
    adam = [t["name"] for t in original["tensors"] if t["name"].startswith("adam_m/")][1]

    def case(what, edit, must_say):
        ck = os.path.join(dc.A.work, "ckpt_case")
        shutil.rmtree(ck, ignore_errors=True)
        shutil.copytree(base, ck)
        edit(os.path.join(ck, "step-4"))
        before = snapshot(ck)
        expect_exit(what, 2, ["dtrun: error: cannot resume"] + must_say, plan, 1, "--steps", 8,
                    "--checkpoint-dir", ck, "--resume")
        if snapshot(ck) != before:
            fail("%s: the checkpoint directory changed" % what)

    def edit_step(d):  # the case: a changed step resumed silently elsewhere
        with open(os.path.join(d, "manifest.json"), "w") as f:
            f.write(text.replace('"step": 4', '"step": 2'))
    case("manifest step edited", edit_step, ["manifest.json' fails its CRC-32"])

    def neg_opt(d):  # the case: aborted with rc 134
        m = json.loads(text)
        m["meta"]["optimizer_step"] = -5
        reseal(d, m)
    case("optimizer_step -5 (resealed)", neg_opt, ["'meta.optimizer_step' is -5 (allowed: >= 0)"])

    def data_pos(d):
        m = json.loads(text)
        m["meta"]["data_position"] = 3
        reseal(d, m)
    case("data_position 3 at step 4 (resealed)", data_pos, ["'meta.data_position' is 3"])

    def drop_entry(d):  # the case: resumed silently with zero moments
        m = json.loads(text)
        m["tensors"] = [t for t in m["tensors"] if t["name"] != adam]
        reseal(d, m)
    case("%s removed from the manifest" % adam, drop_entry, ["belong to no entry (an entry was removed?)"])

    def drop_entry_and_bytes(d):  # a careful forger: blob and offsets rewritten too
        m = json.loads(text)
        blob_path = os.path.join(d, "tensors.bin")
        with open(blob_path, "rb") as f:
            blob = f.read()
        kept, out, off = [], b"", 0
        for t in m["tensors"]:
            if t["name"] == adam:
                continue
            out += blob[t["offset"]:t["offset"] + t["bytes"]]
            t["offset"] = off
            off += t["bytes"]
            kept.append(t)
        m["tensors"], m["blob_bytes"] = kept, len(out)
        with open(blob_path, "wb") as f:
            f.write(out)
        reseal(d, m)
    case("%s removed from manifest and blob" % adam, drop_entry_and_bytes,
         ["lacks the optimizer state '%s'" % adam])
    # the untouched copy still resumes
    run_ok(plan, 1, "--steps", 8, "--checkpoint-dir", base, "--resume")
    print("ckpt_integrity: every forged manifest refused with exit 2")


# ---- 2. --keep-checkpoints ----

def check_keep_checkpoints():
    plan = os.path.join(dc.A.work, "one.json")
    dc.write_plan(plan)
    ck = os.path.join(dc.A.work, "keep")
    shutil.rmtree(ck, ignore_errors=True)
    run_ok(plan, 1, "--steps", 6, "--checkpoint-dir", ck, "--checkpoint-every", 1, "--keep-checkpoints", 2)
    dirs = sorted(d for d in os.listdir(ck) if d.startswith("step-"))
    if dirs != ["step-5", "step-6"]:
        fail("--keep-checkpoints 2 left %r" % dirs)
    with open(os.path.join(ck, "latest")) as f:
        if f.read().strip() != "step-6":
            fail("latest does not name step-6")
    out = run_ok(plan, 1, "--steps", 8, "--checkpoint-dir", ck, "--resume", "--checkpoint-every", 1,
                 "--keep-checkpoints", 1)
    if "at step 6" not in out:
        fail("did not resume at step 6:\n" + out)
    dirs = sorted(d for d in os.listdir(ck) if d.startswith("step-"))
    if dirs != ["step-8"]:
        fail("--keep-checkpoints 1 left %r" % dirs)
    print("keep_checkpoints: kept %r" % dirs)
    expect_exit("--keep-checkpoints -1", 2, ["--keep-checkpoints -1 is out of range"], plan, 1, "--steps", 2,
                "--checkpoint-dir", ck, "--keep-checkpoints", -1)


# ---- 3. checked output writes ----

def check_output_errors():
    plan = os.path.join(dc.A.work, "one.json")
    dc.write_plan(plan)
    # metrics on a full disk: used to leave a 0-byte file and exit 0
    expect_exit("--metrics /dev/full", 1, ["--metrics: writing '/dev/full' failed: No space left on device"],
                plan, 1, "--steps", 4, "--metrics", "/dev/full")
    metrics = os.path.join(dc.A.work, "m.jsonl")
    ck = os.path.join(dc.A.work, "ck_full")
    shutil.rmtree(ck, ignore_errors=True)
    out, _ = expect_exit("--metrics failing after 300 bytes", 1, ["No space left on device", "stopping after step"],
                         plan, 1, "--steps", 6, "--metrics", metrics, "--checkpoint-dir", ck,
                         env={"DT_FAULT_WRITE_LIMIT_BYTES": "300", "DT_FAULT_WRITE_PATH": "m.jsonl"})
    if not os.path.exists(os.path.join(ck, "latest")):
        fail("metrics failed: the steps done were not checkpointed:\n" + out)
    # checkpoint writes failing part-way: exit 1, the previous checkpoint intact
    ck = os.path.join(dc.A.work, "ck_fail")
    shutil.rmtree(ck, ignore_errors=True)
    run_ok(plan, 1, "--steps", 6, "--stop-at", 2, "--checkpoint-dir", ck)
    expect_exit("checkpoint write failing part-way", 1,
                ["checkpoint save failed", "tensors.bin' failed: No space left on device"],
                plan, 1, "--steps", 6, "--checkpoint-dir", ck, "--resume",
                env={"DT_FAULT_WRITE_LIMIT_BYTES": "100000", "DT_FAULT_WRITE_PATH": "step-6.tmp"})
    with open(os.path.join(ck, "latest")) as f:
        if f.read().strip() != "step-2":
            fail("latest moved although the save failed")
    out = run_ok(plan, 1, "--steps", 6, "--checkpoint-dir", ck, "--resume")
    if "at step 2" not in out:
        fail("previous checkpoint not usable:\n" + out)
    # dtplan's plan and trace files
    model = os.path.join(dc.A.source_dir, "examples/models/gpt-tiny.json")
    for flag, name in (("--out", "p.json"), ("--trace", "t.json")):
        target = os.path.join(dc.A.work, name)
        if os.path.exists(target):
            os.remove(target)
        args = [dc.A.dtplan, "--model", model, "--nodes", "1", "--gpus", "2", "--device", "cpu",
                "--global-batch", "8", "--out", os.path.join(dc.A.work, "p.json"), flag, target]
        if flag == "--out":
            args = args[:-2]
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=dict(os.environ, DT_FAULT_WRITE_LIMIT_BYTES="64", DT_FAULT_WRITE_PATH=name))
        if p.returncode == 0 or "No space left on device" not in p.stdout:
            fail("dtplan %s on a full disk: exit %d:\n%s" % (flag, p.returncode, p.stdout))
        if os.path.exists(target) or os.path.exists(target + ".tmp"):
            fail("dtplan %s on a full disk left a partial file" % flag)
        print("dtplan %s on a full disk: exit %d: %s" % (flag, p.returncode, p.stdout.strip().splitlines()[-1]))
    with open("/dev/full", "w") as full:
        p = subprocess.run([dc.A.dtplan, "capabilities"], stdout=full, stderr=subprocess.PIPE, text=True)
    if p.returncode == 0 or "writing standard output failed" not in p.stderr:
        fail("dtplan capabilities > /dev/full: exit %d: %s" % (p.returncode, p.stderr))
    print("dtplan capabilities > /dev/full: exit %d: %s" % (p.returncode, p.stderr.strip()))


# ---- 4. job watchdog ----

def check_watchdog():
    plan = os.path.join(dc.A.work, "pp2.json")
    dc.write_plan(plan, pp=2)
    ck = os.path.join(dc.A.work, "wd_ckpt")
    shutil.rmtree(ck, ignore_errors=True)
    run_ok(plan, 2, "--steps", 8, "--stop-at", 2, "--checkpoint-dir", ck)
    timeout = 5
    cases = (("startup", [], "phase 'startup'"),
             ("step", ["--debug-stall-step", 2], "phase 'step 2'"),
             ("save", ["--checkpoint-every", 2], "phase 'save step 2'"),
             ("resume", ["--checkpoint-dir", ck, "--resume"], "phase 'resume'"))
    for phase, extra, says in cases:
        args = ["--steps", 8, "--debug-stall-rank", 1, "--debug-stall-phase", phase] + extra
        if phase == "save":
            args += ["--checkpoint-dir", os.path.join(dc.A.work, "wd_save")]
        code, out, secs = run(plan, 2, *args, timeout_flag=timeout, timeout=90)
        if code == 0:
            fail("stall in %s: the job exited 0:\n%s" % (phase, out))
        if "FATAL [rank 0] " + says not in out:
            fail("stall in %s: no message naming the phase and rank ('%s'):\n%s" % (phase, says, out))
        if secs > timeout + 25:
            fail("stall in %s: the job took %.1f s to end (timeout %d s)" % (phase, secs, timeout))
        print("stall of rank 1 in %s: exit %d after %.1f s (timeout %d s)" % (phase, code, secs, timeout))
        for line in out.splitlines():  # the stopped rank, continued by mpirun's kill, names itself (best effort)
            if line.startswith("FATAL [rank 1]"):
                print("  " + line)
    # the resume checkpoint was not harmed
    run_ok(plan, 2, "--steps", 4, "--checkpoint-dir", ck, "--resume")


# ---- 5. kill -9 during checkpoint saves ----

def drill(i, plan, ref, rng, save_bytes):
    """One kill during the save of step 4 (step 2 saved before). Returns a description."""
    ck = os.path.join(dc.A.work, "drill_ckpt")
    shutil.rmtree(ck, ignore_errors=True)
    mode = i % 3
    env, args = {}, []
    if mode == 0:
        args = ["--debug-kill-rank", 1, "--debug-kill-phase", "save", "--debug-kill-step", 4]
        what = "rank 1 at the start of the save"
    elif mode == 1:
        limit = rng.randrange(0, save_bytes - 64)  # blob, manifest or CRC (the manifest's length varies a little)
        env = {"DT_FAULT_WRITE_LIMIT_BYTES": str(limit), "DT_FAULT_WRITE_KILL": "1",
               "DT_FAULT_WRITE_PATH": "step-4.tmp"}
        what = "rank 0 after writing %d bytes of step-4" % limit
    else:
        # "step-2\n" (7 bytes) may pass; the pointer to step-4 may not
        env = {"DT_FAULT_WRITE_LIMIT_BYTES": "7", "DT_FAULT_WRITE_KILL": "1", "DT_FAULT_WRITE_PATH": "latest.tmp"}
        what = "rank 0 before 'latest' names step-4"
    code, out, secs = run(plan, 2, "--steps", 6, "--checkpoint-dir", ck, "--checkpoint-every", 2, *args,
                          env=env, timeout_flag=30, timeout=90)
    if code == 0:
        fail("drill %d (%s): the job survived:\n%s" % (i, what, out))
    if secs > 40:
        fail("drill %d (%s): the job took %.1f s to end" % (i, what, secs))
    with open(os.path.join(ck, "latest")) as f:
        if f.read().strip() != "step-2":
            fail("drill %d (%s): 'latest' does not name step-2" % (i, what))
    metrics = os.path.join(dc.A.work, "drill.jsonl")
    out = run_ok(plan, 2, "--steps", 6, "--checkpoint-dir", ck, "--resume", "--metrics", metrics)
    if "at step 2" not in out:
        fail("drill %d (%s): did not resume from step 2:\n%s" % (i, what, out))
    dc.compare("drill %d (%s): exit %d in %.1f s; resumed" % (i, what, code, secs), ref[2:], dc.losses(metrics),
               1e-4)


def check_drills(n):
    plan = os.path.join(dc.A.work, "pp2.json")
    dc.write_plan(plan, pp=2)
    ref = dc.reference_losses(6)
    # the bytes one save writes into step-N.tmp/ (blob, manifest, CRC): where a kill can land
    probe = os.path.join(dc.A.work, "drill_probe")
    shutil.rmtree(probe, ignore_errors=True)
    run_ok(plan, 2, "--steps", 6, "--stop-at", 2, "--checkpoint-dir", probe)
    step2 = os.path.join(probe, "step-2")
    save_bytes = sum(os.path.getsize(os.path.join(step2, f)) for f in os.listdir(step2))
    rng = random.Random(13)
    for i in range(n):
        drill(i, plan, ref, rng, save_bytes)
    print("drills: %d/%d passed" % (n, n))


# ---- 6. elastic restart ----

def check_elastic():
    # dtplan plans gpt-tiny with its dropout: the masks must survive the re-plan and the resume too.
    ref = dc.reference_losses(12, dropout=True)
    ck = os.path.join(dc.A.work, "elastic_ckpt")
    shutil.rmtree(ck, ignore_errors=True)
    metrics = os.path.join(dc.A.work, "elastic.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    script = os.path.join(dc.A.source_dir, "scripts", "dtrun-elastic.py")
    cmd = [sys.executable, script, "--model", os.path.join(dc.A.source_dir, "examples/models/gpt-tiny.json"),
           "--ranks", 4, "--global-batch", 8, "--steps", 12, "--checkpoint-dir", ck, "--checkpoint-every", 4,
           "--metrics", metrics, "--dtrun", dc.A.dtrun, "--dtplan", dc.A.dtplan, "--mpirun", dc.A.mpirun,
           "--inject", "--debug-kill-rank 3 --debug-kill-step 6", "--", "--quiet", "--timeout", "60"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    t0 = time.time()
    p = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=280, env=env)
    if p.returncode != 0:
        fail("dtrun-elastic exited %d:\n%s" % (p.returncode, p.stdout))
    for want in ("starting on 4 ranks", "rank(s) [3] died", "restart 1 on 3 ranks, global batch 8 kept",
                 "resumed from", "at step 4", "finished 12 steps on 3 ranks"):
        if want not in p.stdout:
            fail("dtrun-elastic output lacks '%s':\n%s" % (want, p.stdout))
    print("\n".join(l for l in p.stdout.splitlines() if l.startswith("dtrun-elastic")))
    dc.compare("elastic 4 -> 3 ranks (%.1f s)" % (time.time() - t0), ref, dc.losses(metrics), 1e-4)


def main():
    dc.A = dc.parse_args()
    dc.A.work = os.path.join(dc.A.work, "faults_" + dc.A.check)
    os.makedirs(dc.A.work, exist_ok=True)
    checks = {"ckpt_integrity": check_ckpt_integrity, "keep_checkpoints": check_keep_checkpoints,
              "output_errors": check_output_errors, "watchdog": check_watchdog, "elastic": check_elastic}
    if dc.A.check == "drills":
        check_drills(int(dc.A.rest[0]) if dc.A.rest else 3)
    elif dc.A.check in checks:
        checks[dc.A.check]()
    else:
        fail("unknown check " + dc.A.check)


if __name__ == "__main__":
    main()
