#!/usr/bin/env bash
# device-checks.sh: every GPU measurement this project takes on a lent GPU machine, in one command
# that fits one device call (about 4 minutes on an H200), with what comes back kept to at most
# 8 files in OUT_DIR.
#
#   scripts/device-checks.sh OUT_DIR [--stack]
#
# Prepare on the CPU machine first (the device machine has CUDA, PyTorch and Open MPI, but no
# Megatron-Core and no network):
#   cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
#         -DDT_NATIVE=OFF -DDT_BLAS=none -DDT_DNNL=OFF
#   cmake --build build-gpu -j2 --target dtplan dtplan-profile dtrun runtime_cuda_tests
#   mkdir -p .mcore && git -C <a fetch of NVIDIA/Megatron-LM> archive HEAD megatron/core | tar -x -C .mcore
#   echo /.mcore/ >> .git/info/exclude
# and carry .mcore, build-gpu/dtplan, build-gpu/planner/profiler/dtplan-profile,
# build-gpu/runtime/dtrun and build-gpu/tests/runtime/runtime_cuda_tests (the command runs from a
# copy of the working tree: a script under /tmp here does not travel).
#
# Steps (a failing step does not stop the later ones):
#   1. scripts/gpu-check.sh --prebuilt: CUDA tests, `dtplan profile --device cuda`, PyTorch
#      figures, dtrun's CUDA path against its CPU run -> gpu-check.txt, cuda-profile.json,
#      gpu-check.tgz (every log)
#   2. scripts/h100-host-overhead.py: an eager PyTorch GPT layer's host time -> dense-host.json
#   3. scripts/moe-host-overhead.py (with .mcore/): an eager Megatron-Core MoE block's host time
#      -> moe-host.json; with --stack also the stacked-layer check -> moe-stack.json
#   4. scripts/bench-vs-torch.py --device cuda: dtrun against PyTorch -> bench.txt
# Exit: 0 when every step ran and passed, 1 otherwise, 2 bad usage or no NVIDIA GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/device-checks.sh OUT_DIR [--stack]" >&2; exit 2; }
OUT_DIR=$1
stack=0
[ "${2:-}" = --stack ] && stack=1
mkdir -p "$OUT_DIR" || exit 2
export PYTHONUNBUFFERED=1
failed=0
step() { echo "== $*"; }

nvidia-smi -L || { echo "device-checks: no NVIDIA GPU (nvidia-smi -L failed)" >&2; exit 2; }
grep -m1 'model name' /proc/cpuinfo
python3 -c 'import torch; print("torch", torch.__version__)'

step "1. gpu-check --prebuilt"
GC=$(mktemp -d)
timeout 300 scripts/gpu-check.sh --prebuilt "$GC/gc" > "$OUT_DIR/gpu-check.txt" 2>&1 || failed=1
cat "$GC/gc/summary.txt" 2>/dev/null
cp "$GC/gc/cuda-profile.json" "$OUT_DIR/" 2>/dev/null
tar czf "$OUT_DIR/gpu-check.tgz" -C "$GC" gc
# The shared libraries gpu-check found outside the default path (NCCL inside a Python wheel).
LD_LIBRARY_PATH=$(cat "$GC/gc/ld_library_path" 2>/dev/null)
export LD_LIBRARY_PATH

step "2. dense host time"
timeout 60 python3 scripts/h100-host-overhead.py "$OUT_DIR/dense-host.json" 2>&1 | tail -3 || failed=1

step "3. MoE host time"
if [ -d .mcore/megatron/core ]; then
  timeout 150 python3 scripts/moe-host-overhead.py "$OUT_DIR/moe-host.json" 2>&1 | grep -v -i warn | tail -12 || failed=1
  if [ $stack = 1 ]; then
    timeout 150 python3 scripts/moe-host-overhead.py "$OUT_DIR/moe-stack.json" --stack 2>&1 | grep -v -i warn | tail -14 ||
      failed=1
  fi
else
  echo "skipped: no .mcore/megatron/core (see this script's header)"
fi

step "4. dtrun against PyTorch"
timeout 150 python3 scripts/bench-vs-torch.py --device cuda --ranks 1 --runs 3 --dtrun build-gpu/runtime/dtrun \
  --python python3 > "$OUT_DIR/bench.txt" 2>&1 || failed=1
tail -4 "$OUT_DIR/bench.txt"
exit $failed
