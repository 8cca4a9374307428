#!/usr/bin/env python3
"""Runs the shell commands of README.md and docs/runtime.md as a user would.

Every fenced ```sh / ```bash block of each document is executed in order, one
logical line (backslash continuations joined) at a time, in a scratch copy of
the checkout (examples/, scripts/, docs/ linked; profiles/ copied so that
`dtplan profile --out profiles/...` never touches the committed files; build/
linked to the real build; ../shared linked when present), with build/ and
build/runtime on PATH. A command must exit 0.

Changes made for CI, printed with each command:
  * --steps N (N > 3) runs as --steps 3 ("small step counts");
  * `dtplan profile` gets --quick;
  * steps of an `a && b` chain that are the install / build / test-suite
    commands themselves (scripts/install-deps.sh, cmake, scripts/run-tests.sh)
    are skipped: CI has just run them, and running the suite from inside the
    suite would recurse;
  * a command whose program is not installed here (srun: no Slurm) is
    skipped, saying so.
Exits 1 on the first failing command, or if no command ran at all.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

SKIP_SEGMENT = [
    (re.compile(r"^scripts/install-deps\.sh\b"), "the install step CI ran before this test"),
    (re.compile(r"^cmake\b"), "the build CI ran before this test"),
    (re.compile(r"^scripts/run-tests\.sh\b"), "the test suite this test is part of"),
]


def blocks(path):
    """Yields the logical command lines of the sh/bash fenced blocks of a markdown file."""
    lang, buf = None, []
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            m = re.match(r"^```\s*(\S*)\s*$", line)
            if m and lang is None:
                lang = m.group(1) or "-"
                continue
            if m and lang is not None:
                lang = None
                continue
            if lang in ("sh", "bash"):
                if buf and buf[-1].endswith("\\"):
                    buf[-1] = buf[-1][:-1] + " " + line.strip()
                else:
                    buf.append(line)
    for line in buf:
        s = line.strip()
        if s and not s.startswith("#"):
            yield s


def strip_comment(cmd):
    # A trailing comment is ' #' outside quotes (our docs never quote a '#').
    m = re.search(r"\s+#", cmd)
    return cmd[: m.start()] if m else cmd


def adapt(cmd):
    notes = []
    def steps(m):
        n = int(m.group(1))
        if n > 3:
            notes.append("--steps %d -> 3" % n)
            return "--steps 3"
        return m.group(0)
    cmd = re.sub(r"--steps (\d+)", steps, cmd)
    if re.search(r"\bdtplan profile\b", cmd) and "--quick" not in cmd:
        cmd += " --quick"
        notes.append("+ --quick")
    return cmd, notes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("docs", nargs="*", default=["README.md", "docs/runtime.md"])
    a = ap.parse_args()
    src = os.path.abspath(a.source_dir)
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    env["PATH"] = os.pathsep.join([os.path.join(a.build_dir), os.path.join(a.build_dir, "runtime"), env["PATH"]])
    ran = 0
    for doc in a.docs:
        work = os.path.join(a.work, os.path.basename(doc).replace(".", "_"))
        shutil.rmtree(work, ignore_errors=True)
        repo = os.path.join(work, "main")
        os.makedirs(repo)
        for d in ("examples", "scripts", "docs"):
            os.symlink(os.path.join(src, d), os.path.join(repo, d))
        shutil.copytree(os.path.join(src, "profiles"), os.path.join(repo, "profiles"))
        os.symlink(os.path.abspath(a.build_dir), os.path.join(repo, "build"))
        shared = os.path.join(os.path.dirname(src), "shared")
        if os.path.isdir(shared):
            os.symlink(shared, os.path.join(work, "shared"))
        for line in blocks(os.path.join(src, doc)):
            for seg in strip_comment(line).split(" && "):
                seg = seg.strip()
                why = next((w for r, w in SKIP_SEGMENT if r.search(seg)), None)
                prog = seg.split()[0]
                if why is None and "/" not in prog and shutil.which(prog, path=env["PATH"]) is None:
                    why = "'%s' is not installed here" % prog
                if why is None and "../shared" in seg and not os.path.isdir(shared):
                    why = "../shared is not beside this checkout"
                if why:
                    print("[%s] skip: %s  (%s)" % (doc, seg, why), flush=True)
                    continue
                cmd, notes = adapt(seg)
                print("[%s] $ %s%s" % (doc, cmd, ("   [" + ", ".join(notes) + "]") if notes else ""), flush=True)
                t0 = time.time()
                try:
                    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=repo, env=env, timeout=600,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                except subprocess.TimeoutExpired:
                    print("FAIL: timed out after 600 s: %s" % cmd)
                    return 1
                tail = "\n".join(p.stdout.strip().splitlines()[-6:])
                print("    exit %d in %.1f s\n    %s" % (p.returncode, time.time() - t0, tail.replace("\n", "\n    ")),
                      flush=True)
                if p.returncode != 0:
                    print("FAIL: `%s` (from %s) exited %d:\n%s" % (cmd, doc, p.returncode, p.stdout[-4000:]))
                    return 1
                ran += 1
    if ran == 0:
        print("FAIL: no documented command ran")
        return 1
    print("%d documented commands ran and exited 0" % ran)
    return 0


if __name__ == "__main__":
    sys.exit(main())
