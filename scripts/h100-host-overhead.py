#!/usr/bin/env python3
"""Host time of an eager PyTorch GPT layer on this machine: layers so small that the GPU idles
(hidden 256, seq 128, mbs 1), forward + backward timed wall-clock over many steps; kernels per
layer counted with the profiler. Writes JSON to argv[1].

  scripts/h100-host-overhead.py OUT.json  (on a machine with an NVIDIA GPU and PyTorch; about 15 s)
"""
import json, sys, time, math, statistics
import torch, torch.nn as nn, torch.nn.functional as F
dev = "cuda"; torch.manual_seed(0)
class Block(nn.Module):
    def __init__(s, h, nh):
        super().__init__(); s.nh = nh
        s.ln1, s.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        s.qkv, s.proj, s.fc1, s.fc2 = nn.Linear(h, 3 * h), nn.Linear(h, h), nn.Linear(h, 4 * h), nn.Linear(4 * h, h)
    def forward(s, x):
        b, t, c = x.shape
        q, k, v = [z.view(b, t, s.nh, c // s.nh).transpose(1, 2) for z in s.qkv(s.ln1(x)).split(c, 2)]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
        x = x + F.dropout(s.proj(y), 0.1, s.training)
        return x + F.dropout(s.fc2(F.gelu(s.fc1(s.ln2(x)), approximate="tanh")), 0.1, s.training)
out = {}
for L in [8, 32]:
    m = nn.Sequential(*[Block(256, 4) for _ in range(L)]).to(dev).to(torch.bfloat16)
    x = torch.randn(1, 128, 256, device=dev, dtype=torch.bfloat16, requires_grad=True)
    def step():
        y = m(x); y.float().sum().backward()
    for _ in range(5): step()
    torch.cuda.synchronize()
    ts = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(10): step()
        torch.cuda.synchronize(); ts.append((time.perf_counter() - t0) / 10)
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(); torch.cuda.synchronize()
    kernels = sum(e.count for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA)
    out[L] = {"step_s": statistics.median(ts), "per_layer_s": statistics.median(ts) / L, "cuda_kernels_per_step": kernels,
              "kernels_per_layer": kernels / L}
    print(L, out[L], flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
