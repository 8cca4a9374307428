#!/usr/bin/env python3
"""Times MoE expert GEMMs on this GPU: for each (hidden h, expert ffn f, local experts E) of the
MoE validation models and tokens per expert T, the six GEMMs of every local expert's SwiGLU MLP
(fc1 fwd (T,2f,h), fc2 fwd (T,h,f), their dgrad and wgrad), looped over E experts as Transformer
Engine's grouped linear does (one cuBLAS call per expert), bf16 and FP8 (_scaled_mm, E4M3), eager
(with the host's launch cost) and replayed from a CUDA graph (the GPU's time alone); and bf16
through torch._grouped_mm (one grouped kernel) where this PyTorch has it. Writes JSON to argv[1].

  scripts/h100-moe-gemms.py OUT.json  (on a machine with an NVIDIA GPU and PyTorch; about 60 s)
"""
import json, sys, statistics
import torch
dev = "cuda"; torch.manual_seed(0)
import os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_timing import seconds_per_call
def timed(fn, reps=5):
    return seconds_per_call(fn, reps, 3)
one = torch.ones((), device=dev)
rows = []
for h, f, E in [(2048, 768, 16), (4096, 1536, 4), (2880, 2880, 16), (7168, 2048, 4)]:
    for T in [64, 128, 256, 512, 1024, 2048]:
        # (M, N, K) of fc1 fwd, fc2 fwd, fc2 dgrad, fc1 dgrad, fc1 wgrad, fc2 wgrad
        shapes = [(T, 2 * f, h), (T, h, f), (T, f, h), (T, h, 2 * f), (2 * f, h, T), (h, f, T)]
        flops = sum(2 * m * n * k for m, n, k in shapes) * E
        r = {"h": h, "f": f, "experts": E, "tokens_per_expert": T, "flops": flops}
        for dt in ("bf16", "fp8"):
            ops = []
            for m, n, k in shapes:
                for _ in range(E):
                    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                    if dt == "bf16":
                        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
                        ops.append((lambda a=a, b=b: torch.matmul(a, b)))
                    else:
                        if m % 16 or n % 16 or k % 16: continue
                        a8 = a.to(torch.float8_e4m3fn); b8 = torch.randn(n, k, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn).t()
                        ops.append((lambda a8=a8, b8=b8: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)))
            def run():
                for op in ops: op()
            try:
                r[dt + "_eager_s"] = timed(run)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g): run()
                r[dt + "_graph_s"] = timed(g.replay)
            except Exception as ex:
                r[dt + "_error"] = str(ex)[:160]
            del ops
        if hasattr(torch, "_grouped_mm"):
            try:
                gops = []
                for m, n, k in shapes:
                    if m == T:  # token-major GEMMs: one grouped call over E experts, offsets along M
                        a = torch.randn(E * m, k, device=dev, dtype=torch.bfloat16)
                        b = torch.randn(E, k, n, device=dev, dtype=torch.bfloat16)
                        offs = torch.arange(1, E + 1, device=dev, dtype=torch.int32) * m
                        gops.append(lambda a=a, b=b, offs=offs: torch._grouped_mm(a, b, offs=offs))
                    else:
                        a = torch.randn(E, m, k, device=dev, dtype=torch.bfloat16)
                        b = torch.randn(E, k, n, device=dev, dtype=torch.bfloat16)
                        gops.append(lambda a=a, b=b: torch._grouped_mm(a, b))
                def grun():
                    for op in gops: op()
                r["bf16_grouped_s"] = timed(grun)
            except Exception as ex:
                r["grouped_error"] = str(ex)[:160]
        rows.append(r)
        print(h, f, E, T, {k: (round(flops / v / 1e12) if k.endswith("_s") else v) for k, v in r.items() if k.endswith("_s") or k.endswith("error")}, flush=True)
        torch.cuda.empty_cache()
json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, open(sys.argv[1], "w"), indent=1)
