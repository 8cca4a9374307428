#!/usr/bin/env bash
# gpu-check.sh: the GPU path in one command, for any machine with an NVIDIA
# GPU and the CUDA toolkit (nvcc, cuBLAS, NCCL) under /usr/local/cuda.
#
#   scripts/gpu-check.sh [--prebuilt] [OUT_DIR]     (default OUT_DIR: gpu-check-out)
#
# --prebuilt: skip step 1 and use the binaries already in build-gpu/ (built
# elsewhere with -DCMAKE_CUDA_ARCHITECTURES for this GPU, e.g. on a machine
# with the CUDA toolkit but no GPU; their shared libraries on LD_LIBRARY_PATH).
#
# Steps, each reported as PASS / FAIL / SKIP with its reason (a failing step
# does not stop the later ones; the exit status is 1 if any step failed):
#   1. build with CUDA for this GPU's architecture (build-gpu/)
#   2. every CUDA test: per-op parity with the CPU backend, 1-rank NCCL
#   3. `dtplan profile --device cuda` -> OUT_DIR/cuda-profile.json
#   4. PyTorch on the same GPU, the GPT shapes of the CPU benchmark in bf16:
#      tokens/s and MFU (needs python3 with torch built for CUDA)
#   5. dtrun's CUDA path (DT_RUN_ON_CUDA=1) against dtrun on CPU, the same
#      plans: losses within 1e-3 over 10 steps, step times side by side
#      (the dtrun-vs-PyTorch figure needs bf16 and fused kernels first).
# Exit: 0 all ran steps passed, 1 a step failed, 2 no NVIDIA GPU here.
set -uo pipefail
cd "$(dirname "$0")/.."
prebuilt=0
[ "${1:-}" = --prebuilt ] && { prebuilt=1; shift; }
OUT=${1:-gpu-check-out}
mkdir -p "$OUT"
failed=0
report() { printf '%-5s %s\n' "$1" "$2" | tee -a "$OUT/summary.txt"; [ "$1" = FAIL ] && failed=1; return 0; }
: > "$OUT/summary.txt"

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA GPU visible (nvidia-smi -L failed); run this on a GPU machine" >&2
  exit 2
fi
nvidia-smi -L | tee "$OUT/gpu.txt"
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
[ -n "$cc" ] || cc=native

# 1. Build.
if [ $prebuilt = 1 ]; then
  for b in dtplan planner/profiler/dtplan-profile runtime/dtrun tests/runtime/runtime_cuda_tests; do
    [ -x "build-gpu/$b" ] || { report FAIL "--prebuilt: build-gpu/$b missing"; exit 1; }
  done
  # Shared libraries the binaries were linked against but this machine keeps elsewhere (e.g.
  # NCCL only inside a Python wheel): find them and put their folders on LD_LIBRARY_PATH.
  for lib in $(ldd build-gpu/runtime/dtrun build-gpu/tests/runtime/runtime_cuda_tests 2>/dev/null |
               awk '/not found/{print $1}' | sort -u); do
    dir=$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -1 | xargs -r dirname)
    if [ -n "$dir" ]; then
      export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      echo "gpu-check: $lib found in $dir (added to LD_LIBRARY_PATH)" | tee -a "$OUT/summary.txt"
    else
      report FAIL "--prebuilt: $lib (needed by the binaries) not found on this machine"
    fi
  done
  # For later commands on this machine (e.g. scripts/bench-vs-torch.py --device cuda):
  # `export LD_LIBRARY_PATH=$(cat OUT_DIR/ld_library_path)`.
  echo "${LD_LIBRARY_PATH:-}" > "$OUT/ld_library_path"
  report SKIP "build: --prebuilt binaries in build-gpu/"
elif cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$cc" >"$OUT/build.log" 2>&1 &&
   cmake --build build-gpu -j"$(nproc)" >>"$OUT/build.log" 2>&1; then
  report PASS "build with CUDA (sm_$cc)"
else
  report FAIL "build with CUDA: see $OUT/build.log"
  exit 1
fi
[ -f "$OUT/build.log" ] && grep -q "dt_runtime_cuda built without NCCL" "$OUT/build.log" && report FAIL "NCCL not found: collectives untested"

# 2. CUDA tests (they skip with a message when no GPU is usable: a skip here is a failure).
if timeout 300 build-gpu/tests/runtime/runtime_cuda_tests >"$OUT/cuda-tests.log" 2>&1; then
  if grep -q "SKIPPED" "$OUT/cuda-tests.log"; then
    report FAIL "CUDA tests skipped on a GPU machine: see $OUT/cuda-tests.log"
  else
    report PASS "CUDA tests: $(grep -E '^\[  PASSED  \]' "$OUT/cuda-tests.log" | tail -1)"
  fi
else
  report FAIL "CUDA tests: see $OUT/cuda-tests.log"
fi

# 3. Profile.
if timeout 300 build-gpu/dtplan profile --device cuda --ranks 1 --out "$OUT/cuda-profile.json" >"$OUT/profile.log" 2>&1; then
  report PASS "dtplan profile --device cuda -> $OUT/cuda-profile.json"
else
  report FAIL "dtplan profile --device cuda: see $OUT/profile.log"
fi

# 4. PyTorch peer on the GPU (bf16, same GPT as shared/peers/torch_gpt.py).
peer() {  # layers hidden heads seq mbs
  python3 - "$@" <<'PY'
import sys, math, time, torch, torch.nn as nn, torch.nn.functional as F
L, h, nh, T, B = map(int, sys.argv[1:6]); V = 1024
dev = "cuda"; torch.manual_seed(0)
class Block(nn.Module):
    def __init__(s):
        super().__init__(); s.ln1 = nn.LayerNorm(h); s.qkv = nn.Linear(h, 3 * h); s.proj = nn.Linear(h, h)
        s.ln2 = nn.LayerNorm(h); s.fc1 = nn.Linear(h, 4 * h); s.fc2 = nn.Linear(4 * h, h)
    def forward(s, x):
        b, t, c = x.shape
        q, k, v = [z.view(b, t, nh, c // nh).transpose(1, 2) for z in s.qkv(s.ln1(x)).split(c, 2)]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
        x = x + s.proj(y)
        return x + s.fc2(F.gelu(s.fc1(s.ln2(x)), approximate="tanh"))
class GPT(nn.Module):
    def __init__(s):
        super().__init__(); s.wte = nn.Embedding(V, h); s.wpe = nn.Embedding(T, h)
        s.blocks = nn.ModuleList([Block() for _ in range(L)]); s.lnf = nn.LayerNorm(h)
    def forward(s, i):
        x = s.wte(i) + s.wpe(torch.arange(i.shape[1], device=dev))
        for b in s.blocks: x = b(x)
        return s.lnf(x) @ s.wte.weight.t()
m = GPT().to(dev); opt = torch.optim.AdamW(m.parameters(), lr=3e-4, fused=True)
times = []
for step in range(30):
    x = torch.randint(0, V, (B, T + 1), device=dev)
    torch.cuda.synchronize(); t0 = time.perf_counter()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(m(x[:, :-1]).float().reshape(-1, V), x[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    torch.cuda.synchronize(); times.append(time.perf_counter() - t0)
med = sorted(times[5:])[len(times[5:]) // 2]
flops = 6 * (12 * L * h * h + V * h) * B * T + 12 * L * T * T * h * B
peak = {9: 989e12, 8: 312e12}.get(torch.cuda.get_device_capability()[0], 0)
print("torch %s L=%d h=%d seq=%d mbs=%d: %.0f tokens/s, step %.2f ms%s" % (
    torch.cuda.get_device_name(), L, h, T, B, B * T / med, 1e3 * med,
    (", MFU %.1f%% of the dense bf16 peak" % (100 * flops / med / peak)) if peak else ""))
PY
}
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  for shape in "2 768 12 256 4" "4 256 4 128 8" "12 768 12 1024 8"; do
    if line=$(peer $shape 2>>"$OUT/torch.log"); then report PASS "$line"; else report FAIL "torch peer ($shape): see $OUT/torch.log"; fi
  done
else
  report SKIP "PyTorch with CUDA not importable (python3 -c 'import torch'): no peer figures"
fi

# 5. dtrun's CUDA path (DT_RUN_ON_CUDA=1: the plan's compute on this GPU, tensors in CUDA managed
#    memory, host-loop ops on the host after a device sync) against the CPU oracle: the same CPU
#    plans, 10 steps each way, losses within 1e-3 (fp32 both; summation orders differ), and the
#    step rates side by side. The capability table keeps CUDA training off until this passes on a
#    GPU and the table is flipped in the same change.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for model in gpt-tiny llama-tiny mixtral-tiny; do
  plan="$OUT/cuda-path-$model.json"
  if ! build-gpu/dtplan --model "examples/models/$model.json" --nodes 1 --gpus 1 --device cpu --out "$plan" \
       >"$OUT/cuda-path-$model.log" 2>&1; then
    report FAIL "dtrun CUDA path ($model): planning failed, see $OUT/cuda-path-$model.log"; continue
  fi
  timeout 120 mpirun --oversubscribe -np 1 build-gpu/runtime/dtrun --plan "$plan" --steps 10 --quiet \
    --metrics "$OUT/cuda-path-$model-cpu.jsonl" >>"$OUT/cuda-path-$model.log" 2>&1
  DT_RUN_ON_CUDA=1 timeout 120 mpirun --oversubscribe -np 1 -x DT_RUN_ON_CUDA build-gpu/runtime/dtrun --plan "$plan" --steps 10 \
    --quiet --metrics "$OUT/cuda-path-$model-cuda.jsonl" >>"$OUT/cuda-path-$model.log" 2>&1
  if line=$(python3 - "$OUT/cuda-path-$model-cpu.jsonl" "$OUT/cuda-path-$model-cuda.jsonl" <<'PY'
import json, sys
def read(p):
    steps = {}
    for l in open(p):
        r = json.loads(l)
        if r.get("rank") == 0 and "step" in r: steps[r["step"]] = (r["loss"], r["step_time_s"])
    return [steps[k] for k in sorted(steps)]
cpu, cuda = read(sys.argv[1]), read(sys.argv[2])
if len(cpu) != 10 or len(cuda) != 10: sys.exit("missing steps: cpu %d, cuda %d" % (len(cpu), len(cuda)))
worst = max(abs(a[0] - b[0]) / abs(a[0]) for a, b in zip(cpu, cuda))
med = lambda v: sorted(v)[len(v) // 2]
tc, tg = med([t for _, t in cpu[1:]]), med([t for _, t in cuda[1:]])
print("max rel loss diff %.2e over 10 steps; median step CPU %.1f ms, CUDA %.1f ms" % (worst, 1e3 * tc, 1e3 * tg))
sys.exit(0 if worst < 1e-3 else 1)
PY
  ); then
    report PASS "dtrun CUDA path ($model) vs CPU: $line"
  else
    report FAIL "dtrun CUDA path ($model) vs CPU: ${line:-no metrics} (see $OUT/cuda-path-$model.log)"
  fi
done
exit $failed
