#!/usr/bin/env python3
"""Burst vs sustained GEMM rates on this GPU with SM clock and power (NVML), and FP8 _scaled_mm
with and without fast accumulation on layer shapes, bf16 alongside in the same thermal state;
attention fwd+bwd in the planner's FLOP convention (causal and non-causal, cuDNN and FA2).

  scripts/h100-clock-probe.py OUT.json  (on a machine with an NVIDIA GPU and PyTorch; about 35 s)
"""
import json, sys, time, statistics
import torch
try:
    import pynvml; pynvml.nvmlInit(); H = pynvml.nvmlDeviceGetHandleByIndex(0)
    def state(): return {"sm_mhz": pynvml.nvmlDeviceGetClockInfo(H, pynvml.NVML_CLOCK_SM),
                         "power_w": pynvml.nvmlDeviceGetPowerUsage(H) / 1e3, "temp_c": pynvml.nvmlDeviceGetTemperature(H, 0)}
except Exception as ex:
    def state(): return {"nvml": str(ex)[:80]}
dev = "cuda"; torch.manual_seed(0)
out = {"idle": state()}
N = 8192
a = torch.randn(N, N, device=dev, dtype=torch.bfloat16); b = torch.randn(N, N, device=dev, dtype=torch.bfloat16)
import os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_timing import tflops as rate
torch.matmul(a, b); torch.cuda.synchronize()
out["cold_bf16_tflops"] = rate(lambda: torch.matmul(a, b), 10, 2 * N**3); out["cold_state"] = state()
trace = []
t0 = time.time()
while time.time() - t0 < 20:
    r = rate(lambda: torch.matmul(a, b), 100, 2 * N**3)
    trace.append(dict(t=round(time.time() - t0, 2), tflops=round(r, 1), **state()))
out["sustained_trace"] = trace
# layer shapes in the sustained state: bf16, fp8 (slow accum), fp8 (fast accum)
shapes = [(4096, 4096, 4096), (4096, 6144, 4096), (4096, 28672, 4096), (4096, 4096, 14336), (28672, 4096, 4096),
          (8192, 16384, 4096), (8192, 4096, 16384), (4096, 14336, 8192), (4096, 8192, 7168), (16384, 11008, 4096),
          (4096, 12288, 4096), (2048, 4096, 4096), (1024, 4096, 4096), (2048, 2048, 2048), (8192, 8192, 8192)]
one = torch.ones((), device=dev)
rows = []
for M, Nn, K in shapes:
    x = torch.randn(M, K, device=dev, dtype=torch.bfloat16); w = torch.randn(K, Nn, device=dev, dtype=torch.bfloat16)
    x8 = x.to(torch.float8_e4m3fn); w8 = torch.randn(Nn, K, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn).t()
    f = 2 * M * Nn * K
    reps = max(3, int(0.05 / (f / 6e14)))
    for fn in (lambda: torch.matmul(x, w),):
        fn()
    r = {"m": M, "n": Nn, "k": K, "flops": f}
    for name, fn in [("bf16", lambda: torch.matmul(x, w)),
                     ("fp8", lambda: torch._scaled_mm(x8, w8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)),
                     ("fp8_fast", lambda: torch._scaled_mm(x8, w8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True))]:
        fn(); torch.cuda.synchronize()
        r[name + "_tflops"] = statistics.median([rate(fn, reps, f) for _ in range(3)])
    r.update(state()); rows.append(r)
    print("%6d %6d %6d bf16 %.0f fp8 %.0f fp8fast %.0f TF/s  %s MHz" % (M, Nn, K, r["bf16_tflops"], r["fp8_tflops"], r["fp8_fast_tflops"], r.get("sm_mhz")), flush=True)
out["layer_shapes_sustained"] = rows
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
att = []
for heads, S, causal in [(16, 8192, True), (16, 8192, False), (8, 16384, False), (16, 4096, False), (16, 2048, False)]:
    for bname, be in [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]:
        q, k, v = (torch.randn(1, heads, S, 128, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        g = torch.randn(1, heads, S, 128, device=dev, dtype=torch.bfloat16)
        with sdpa_kernel([be]):
            def fb():
                o = F.scaled_dot_product_attention(q, k, v, is_causal=causal); o.backward(g)
            fb(); torch.cuda.synchronize()
            full = 3 * 4 * heads * S * S * 128  # planner convention: full square, backward 2x forward
            tf = statistics.median([rate(fb, 5, full) for _ in range(3)])
        att.append({"backend": bname, "heads": heads, "seq": S, "causal": causal, "planner_convention_tflops": tf,
                    "planner_efficiency": tf / 989})
        print(att[-1], flush=True)
out["attention_planner_convention"] = att
json.dump(out, open(sys.argv[1], "w"), indent=1)
print("cold %.0f TF/s %s; sustained first/last %s / %s" % (out["cold_bf16_tflops"], out["cold_state"], trace[0], trace[-1]))
