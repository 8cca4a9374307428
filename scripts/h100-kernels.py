#!/usr/bin/env python3
"""Times the kernels dtplan's H100 profile prices, on the GPU this runs on: bf16 and FP8
(torch._scaled_mm, E4M3, per-tensor scales, bf16 out) GEMMs of the validation models' layer
shapes (forward, dgrad, wgrad), square GEMMs, causal flash attention (SDPA: flash and cuDNN
backends) forward and forward+backward, streaming bf16 kernels, and back-to-back tiny kernels.
Writes one JSON to argv[1]. CUDA events; random normal data; median of 5 timed batches.

  scripts/h100-kernels.py OUT.json      (on a machine with an NVIDIA GPU and PyTorch; about 40 s)
"""
import json, sys, time, math, statistics
import torch, torch.nn.functional as F
torch.manual_seed(0)
dev = "cuda"
torch.backends.cuda.matmul.allow_tf32 = False
out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
       "cuda": torch.version.cuda, "sm": torch.cuda.get_device_properties(0).multi_processor_count}
import os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_timing import seconds_per_call
def timeit(fn, target_s=0.004, batches=5):
    """Seconds per call, in batches of about target_s each (the first timed call sets the count)."""
    one = max(seconds_per_call(fn, 1, 1), 1e-6)
    return seconds_per_call(fn, max(1, min(200, int(target_s / one))), batches)
# --- layer GEMM shapes of the validation models (H100 cases) ---
models = [  # name, h, heads, kv, ffn, vocab, tokens per microbatch per rank, tp, gated
  ("llama31-8b", 4096, 32, 8, 14336, 128256, 8192 // 2, 1, True),
  ("llama31-70b", 8192, 64, 8, 28672, 128256, 8192 // 2, 4, True),
  ("gpt3-5b", 4096, 32, 32, 16384, 50257, 4 * 2048, 1, False),
  ("gpt3-20b", 6144, 48, 48, 24576, 50257, 2 * 2048, 2, False),
  ("llama2-7b", 4096, 32, 32, 11008, 32000, 4096, 1, True),
  ("llama2-13b", 5120, 40, 40, 13824, 32000, 4096, 1, True),
  ("llama2-70b", 8192, 64, 8, 28672, 32000, 4096, 4, True),
  ("llama2-7b-32k-tp2-cp2", 4096, 32, 32, 11008, 32000, 16384, 2, True),
  ("llama2-7b-64k-tp4-cp2", 4096, 32, 32, 11008, 32000, 32768, 4, True),
]
shapes = {}
for name, h, nh, kv, f, V, T, tp, gated in models:
    d = h // nh
    layer = {"qkv": ((nh + 2 * kv) * d // tp, h), "proj": (h, h // tp),
             "fc1": ((2 if gated else 1) * f // tp, h), "fc2": (h, f // tp),
             "logits": ((V + tp - 1) // tp, h)}
    for g, (n, k) in layer.items():
        for kind, (M, N, K) in {"fwd": (T, n, k), "dgrad": (T, k, n), "wgrad": (n, k, T)}.items():
            shapes.setdefault((M, N, K), []).append(name + ":" + g + ":" + kind)
for s in [256, 512, 1024, 2048, 4096, 8192, 16384]:
    shapes.setdefault((s, s, s), []).append("square")
for M in [512, 1024, 2048]:
    for n in [1024, 4096]:
        shapes.setdefault((M, n, n), []).append("small-m")
gemms = []
t0 = time.time()
for (M, N, K), tags in sorted(shapes.items(), key=lambda x: x[0][0] * x[0][1] * x[0][2]):
    a = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    b = torch.randn(K, N, device=dev, dtype=torch.bfloat16)
    tb = timeit(lambda: torch.matmul(a, b))
    r = {"m": M, "n": N, "k": K, "flops": 2 * M * N * K, "bf16_s": tb, "tags": tags}
    try:
        a8 = a.to(torch.float8_e4m3fn)
        b8 = torch.randn(N, K, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=dev, dtype=torch.float32)
        r["fp8_s"] = timeit(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
        del a8, b8
    except Exception as ex:
        r["fp8_error"] = str(ex)[:200]
    gemms.append(r)
    del a, b
out["gemms"] = gemms
out["gemm_seconds"] = time.time() - t0
# --- attention ---
att = []
try:
    from torch.nn.attention import sdpa_kernel, SDPBackend
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
except Exception:
    backends = {}
for heads, S in [(32, 2048), (32, 4096), (32, 8192), (8, 16384), (8, 32768), (16, 8192)]:
    for bname, be in backends.items():
        try:
            q, k, v = (torch.randn(1, heads, S, 128, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            with sdpa_kernel([be]):
                fwd = timeit(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
                def fb():
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    o.backward(torch.ones_like(o))
                fb_t = timeit(fb)
            # causal: half of the 4 * S^2 * d * heads forward FLOPs; backward 2.5x the forward (5 GEMMs vs 2)
            att.append({"backend": bname, "heads": heads, "seq": S, "head_dim": 128, "fwd_s": fwd, "fwd_bwd_s": fb_t,
                        "causal_fwd_flops": 2 * S * S * 128 * heads})
            del q, k, v
        except Exception as ex:
            att.append({"backend": bname, "heads": heads, "seq": S, "error": str(ex)[:200]})
out["attention"] = att
# --- streaming kernels ---
mem = []
x = torch.randn(8192 * 8192, device=dev, dtype=torch.bfloat16)
y = torch.randn_like(x)
mem.append({"op": "copy", "bytes": 2 * x.numel() * 2, "s": timeit(lambda: y.copy_(x))})
mem.append({"op": "add", "bytes": 3 * x.numel() * 2, "s": timeit(lambda: torch.add(x, y))})
X = x.view(8192 * 2, 4096)
w = torch.ones(4096, device=dev, dtype=torch.bfloat16)
mem.append({"op": "layer_norm", "bytes": 2 * X.numel() * 2, "s": timeit(lambda: F.layer_norm(X, (4096,), w, w))})
mem.append({"op": "rms_norm", "bytes": 2 * X.numel() * 2, "s": timeit(lambda: F.rms_norm(X, (4096,), w))})
G = x.view(8192, 2 * 4096)
mem.append({"op": "swiglu", "bytes": 3 * G.numel() // 2 * 2 * 1, "s": timeit(lambda: F.silu(G[:, :4096]) * G[:, 4096:])})
out["memory_bound"] = mem
small = torch.randn(1024, device=dev)
def tiny():
    for _ in range(100): small.add_(1.0)
out["tiny_kernel_s"] = timeit(tiny) / 100
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    for _ in range(100): small.add_(1.0)
out["tiny_kernel_graph_s"] = timeit(lambda: g.replay()) / 100
json.dump(out, open(sys.argv[1], "w"), indent=1)
print("gemms %d in %.1f s; attention %d; memory %s; tiny %.2f us (graph %.2f us)" % (
    len(gemms), out["gemm_seconds"], len(att), ["%s %.0f GB/s" % (m["op"], m["bytes"] / m["s"] / 1e9) for m in mem],
    1e6 * out["tiny_kernel_s"], 1e6 * out["tiny_kernel_graph_s"]))
