#!/usr/bin/env python3
"""Causal attention fwd+bwd on this GPU by head dim (64 / 128 / 256, heads x dim = 4096) and sequence,
FlashAttention-2 and cuDNN through SDPA, plus the unfused (math) path at 4k; planner FLOP convention
(full square, backward twice the forward). Writes JSON to argv[1].

  scripts/h100-attention-dims.py OUT.json  (on a machine with an NVIDIA GPU and PyTorch; about 20 s)
"""
import json, sys, statistics
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
dev = "cuda"; torch.manual_seed(0)
import os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_timing import tflops as rate
rows = []
for S in [2048, 4096, 8192]:
    for d in [64, 128, 256]:
        heads = 4096 // d
        for bname, be in [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION), ("math", SDPBackend.MATH)]:
            if bname == "math" and S > 4096: continue
            try:
                q, k, v = (torch.randn(1, heads, S, d, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
                g = torch.randn(1, heads, S, d, device=dev, dtype=torch.bfloat16)
                with sdpa_kernel([be]):
                    def fb():
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=True); o.backward(g)
                    fb(); torch.cuda.synchronize()
                    full = 3 * 4 * heads * S * S * d
                    tf = statistics.median([rate(fb, 5, full) for _ in range(3)])
                rows.append({"backend": bname, "seq": S, "head_dim": d, "heads": heads, "planner_tflops": tf, "planner_efficiency": tf / 989})
                print(rows[-1], flush=True)
                del q, k, v, g
            except Exception as ex:
                rows.append({"backend": bname, "seq": S, "head_dim": d, "error": str(ex)[:200]}); print(rows[-1], flush=True)
json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, open(sys.argv[1], "w"), indent=1)
