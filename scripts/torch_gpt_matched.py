#!/usr/bin/python3
"""The PyTorch side of scripts/bench-vs-torch.py: the GPT dtrun trains (pre-LayerNorm
blocks, fused QKV with biases, tanh GeLU MLP, learned positions, causal MHA, LM head tied to
the token embedding), trained on CPU with dtrun's optimizer settings: AdamW betas (0.9, 0.95),
weight decay 0.1 (not on biases and norms), eps 1e-8, global-norm clipping at 1.0. One process,
or DistributedDataParallel over gloo when started by torchrun/mpirun-style environment
(--ddp; each rank then trains --mbs sequences per step, as a dtrun DP rank does). --bf16 runs
the forward under torch.autocast("cpu", bfloat16): PyTorch's bf16 mixed precision (bf16
matmuls through its bundled oneDNN, fp32 weights and optimizer), the counterpart of a dtrun
plan with precision bf16.

Based on the shape of ../shared/peers/torch_gpt.py (that script's AdamW and clipping differ
from dtrun's, so this copy matches them). Prints one JSON line on rank 0:
{"median_step_s", "tokens_per_s" (all ranks), "world", "last_loss"}; the median skips the
first --skip steps."""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ap = argparse.ArgumentParser()
for name, default in [("layers", 4), ("hidden", 256), ("heads", 4), ("vocab", 256), ("seq", 128),
                      ("mbs", 8), ("steps", 10), ("skip", 2), ("threads", 1)]:
    ap.add_argument("--" + name, type=int, default=default)
ap.add_argument("--ddp", action="store_true")
ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                help="cuda: the same model on GPU 0 (fp32 with TF32 off, as dtrun's cuBLAS SGEMM; "
                     "--bf16: CUDA autocast); times taken after torch.cuda.synchronize()")
ap.add_argument("--bf16", action="store_true",
                help="bf16 autocast (CPU: oneDNN bf16 matmuls; fp32 weights, optimizer and loss)")
args = ap.parse_args()
torch.set_num_threads(args.threads)
dev = torch.device(args.device)
if args.device == "cuda":
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def sync():
    if args.device == "cuda":
        torch.cuda.synchronize()


torch.manual_seed(0)
rank, world = 0, 1
if args.ddp:
    import torch.distributed as dist
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()


class Block(nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.fc1, self.fc2 = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(c, dim=2))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), 1)
        y = (scores.masked_fill(mask, float("-inf")).softmax(-1) @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(args.vocab, args.hidden), nn.Embedding(args.seq, args.hidden)
        self.blocks = nn.ModuleList(Block(args.hidden, args.heads) for _ in range(args.layers))
        self.lnf = nn.LayerNorm(args.hidden)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.lnf(x) @ self.wte.weight.t()


model = Gpt().to(dev)
decay = [p for n, p in model.named_parameters() if p.dim() > 1]
no_decay = [p for n, p in model.named_parameters() if p.dim() <= 1]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                         {"params": no_decay, "weight_decay": 0.0}],
                        lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
net = nn.parallel.DistributedDataParallel(model) if args.ddp else model
gen = torch.Generator().manual_seed(1 + rank)
times, loss = [], None
for step in range(args.steps):
    batch = torch.randint(0, args.vocab, (args.mbs, args.seq + 1), generator=gen).to(dev)
    sync()
    t0 = time.perf_counter()
    with torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.bf16):
        logits = net(batch[:, :-1])
    loss = F.cross_entropy(logits.float().reshape(-1, args.vocab), batch[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sync()
    times.append(time.perf_counter() - t0)
timed = sorted(times[args.skip:] if len(times) > args.skip else times)
median = timed[len(timed) // 2]
if rank == 0:
    print(json.dumps({"median_step_s": median, "tokens_per_s": world * args.mbs * args.seq / median,
                      "world": world, "last_loss": loss.item()}))
