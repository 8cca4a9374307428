#!/usr/bin/env python3
"""Host time of an eager Megatron-Core MoE layer on one NVIDIA GPU (issue #11, docs/validation.md).

The MoE rows that dtplan prices too fast are eager bf16 runs (no CUDA graphs) with little device
work per layer. The candidate cause is the host: an eager MoE layer issues many small kernels from
Python and synchronises once per dispatch on the token counts (the alltoall dispatcher copies
them to the host), so the host cannot run ahead of the device across it. This script measures it
with Megatron-Core's own MoELayer (router, alltoall token dispatcher, permutation, combine) on one
GPU (EP 1, TP 1), forward + backward, at per-rank shapes of the validation rows:

  - experts "sequential": Megatron's local spec (SequentialMLP, one Python MLP per expert: what
    Megatron runs without Transformer Engine);
  - experts "grouped": the same layer with its experts replaced by two torch._grouped_mm calls
    (one kernel each way for all experts: the lower bound of a grouped GEMM's host cost; Transformer
    Engine's GroupedLinear launches one cuBLAS GEMM per expert from C++, in between).

For each: the wall time per forward + backward at the row's tokens per rank and at 64 tokens (the
device idles there: the wall time is the host's), the device's busy time (union of the kernels'
intervals from torch.profiler), kernels and host synchronisations per layer, the forward alone,
and one profiled forward + backward cut at its host synchronisations (host time and kernel
launches of each stretch, each synchronisation's wait; the profiler slows the host, so the
stretches give proportions, the unprofiled walls the totals). Exposed host time = wall - device
busy. Writes JSON to argv[1].

  scripts/moe-host-overhead.py OUT.json   (GPU machine with PyTorch; Megatron-Core's source in
                                           $MCORE_PATH, default .mcore/; about a minute)
  scripts/moe-host-overhead.py OUT.json --stack   (stacks of four layers with a dense stand-in of
                                           0-8 ms of GEMMs before each: the exposed host time per
                                           layer as the device gets more to hide it behind)
Megatron-Core is not installed on the GPU image: carry its source (git archive of
NVIDIA/Megatron-LM's megatron/core into .mcore/megatron/core). Transformer Engine is absent there.
"""
import json
import os
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.environ.get("MCORE_PATH", os.path.join(ROOT, ".mcore")))
DEV = "cuda"

# (name, hidden, expert ffn, local experts, top-k, tokens per rank): per-rank MoE work of the rows
# (experts per rank = experts / EP; with top-k <= local experts the tokens per expert match the
# row's: tokens x top-k / local experts).
SHAPES = [
    ("gpt-oss-120b (EP 8: 16 local experts, top-4, 4096 tokens)", 2880, 2880, 16, 4, 4096),
    ("qwen3-30b-a3b (EP 16: 8 local experts, top-8, 4096 tokens)", 2048, 768, 8, 8, 4096),
    ("qwen3-235b-a22b (EP 32: 4 local experts, 8192 routed copies as top-4 of 2048 tokens)",
     4096, 1536, 4, 4, 2048),
]


def device_busy_s(prof):
    """Union of the CUDA kernels' and copies' intervals, in seconds."""
    spans = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            spans.append((e.time_range.start, e.time_range.end))
    spans.sort()
    busy, cur_s, cur_e = 0.0, None, None
    for s, e in spans:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    return busy * 1e-6, len(spans)


def host_syncs(prof):
    return sum(1 for e in prof.events()
               if e.device_type != torch.autograd.DeviceType.CUDA and "Synchronize" in e.name)


def measure(step, reps=7, inner=5):
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            step()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) / inner)
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    busy, kernels = device_busy_s(prof)
    wall = statistics.median(ts)
    return {"wall_s": wall, "wall_runs_s": ts, "device_busy_s": busy,
            "exposed_host_s": max(0.0, wall - busy), "device_ops": kernels,
            "host_syncs": host_syncs(prof)}


class GroupedExperts(torch.nn.Module):
    """All local experts' SwiGLU MLPs as two torch._grouped_mm calls (probabilities applied to the
    activation, as Megatron's SequentialMLP does by default)."""

    def __init__(self, E, h, f):
        super().__init__()
        self.w1 = torch.nn.Parameter(0.02 * torch.randn(E, 2 * f, h, device=DEV, dtype=torch.bfloat16))
        self.w2 = torch.nn.Parameter(0.02 * torch.randn(E, h, f, device=DEV, dtype=torch.bfloat16))

    def forward(self, x, tokens_per_expert, probs):
        offs = torch.cumsum(tokens_per_expert.to(DEV, non_blocking=True), 0).to(torch.int32)
        a = torch._grouped_mm(x, self.w1.transpose(-2, -1), offs=offs)
        g, u = a.chunk(2, -1)
        y = (F.silu(g) * u * probs.unsqueeze(-1).to(a.dtype)).contiguous()
        return torch._grouped_mm(y, self.w2.transpose(-2, -1), offs=offs), None


def trace(layer, tokens, h):
    """One profiled forward + backward: the host's time between its synchronisations, the kernel
    launches in each stretch, and the time each synchronisation waited, per direction."""
    from torch.profiler import ProfilerActivity, profile, record_function
    x = torch.randn(tokens, 1, h, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(tokens, 1, h, device=DEV, dtype=torch.bfloat16)
    for _ in range(3):
        out = layer(x)
        torch.autograd.backward(out[0] if isinstance(out, tuple) else out, g)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function("dt_fwd"):
            out = layer(x)
            out = out[0] if isinstance(out, tuple) else out
        with record_function("dt_bwd"):
            torch.autograd.backward(out, g)
        torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type != torch.autograd.DeviceType.CUDA]
    rng = {e.name: (e.time_range.start, e.time_range.end) for e in ev if e.name in ("dt_fwd", "dt_bwd")}
    syncs = sorted((e.time_range.start, e.time_range.end) for e in ev if "Synchronize" in e.name)
    launches = sorted(e.time_range.start for e in ev
                      if e.name.startswith(("cudaLaunch", "cuLaunch", "cudaMemcpy", "cudaMemset")))
    res = {}
    for name, (a, b) in rng.items():
        cuts = [s for s in syncs if a <= s[0] < b]
        stretches, t0 = [], a
        for s0, s1 in cuts + [(b, b)]:
            stretches.append({"host_us": s0 - t0, "launches": sum(1 for l in launches if t0 <= l < s0),
                              "then_sync_wait_us": s1 - s0})
            t0 = s1
        res[name] = {"total_us": b - a, "stretches": stretches}
    return res


def megatron_setup():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29561")
    torch.cuda.set_device(0)
    torch.distributed.init_process_group("nccl", rank=0, world_size=1)
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    parallel_state.initialize_model_parallel(1, 1, expert_model_parallel_size=1)
    model_parallel_cuda_manual_seed(1234)
    import megatron.core.package_info as pi
    return pi.__version__


def megatron_layer(h, f, E, k):
    from megatron.core.models.gpt.moe_module_specs import get_moe_module_spec
    from megatron.core.transformer.transformer_config import TransformerConfig
    cfg = TransformerConfig(
        num_layers=1, hidden_size=h, num_attention_heads=16, ffn_hidden_size=f,
        moe_ffn_hidden_size=f, num_moe_experts=E, moe_router_topk=k,
        moe_token_dispatcher_type="alltoall", moe_router_load_balancing_type="aux_loss",
        moe_aux_loss_coeff=1e-3, gated_linear_unit=True, activation_func=F.silu,
        add_bias_linear=False, bf16=True, params_dtype=torch.bfloat16,
        pipeline_dtype=torch.bfloat16, moe_grouped_gemm=False)
    spec = get_moe_module_spec(use_te=False, num_experts=E, moe_grouped_gemm=False)
    if callable(spec) and not hasattr(spec, "module"):
        layer = spec(config=cfg)
    else:
        from megatron.core.transformer.spec_utils import build_module
        layer = build_module(spec, config=cfg)
    if hasattr(layer, "set_layer_number"):
        layer.set_layer_number(1)
    return layer.cuda().train()


def layer_step(layer, tokens, h):
    x = torch.randn(tokens, 1, h, device=DEV, dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(tokens, 1, h, device=DEV, dtype=torch.bfloat16)

    def step():
        out = layer(x)
        out = out[0] if isinstance(out, tuple) else out
        torch.autograd.backward(out, g)
    return step


def stack_exposure(h, f, E, k, tokens, layers=4):
    """A stack of MoE layers (grouped experts) with a dense stand-in of D ms of device work before
    each (bf16 GEMMs with a residual, as an attention block would sit there): the host time left
    exposed per layer, forward + backward, as D grows. The pricing's claim (docs/simulator.md):
    the synchronisation in every layer exposes the host time the device cannot hide behind."""
    torch.manual_seed(0)
    blocks = []
    for _ in range(layers):
        layer = megatron_layer(h, f, E, k)
        layer.experts = GroupedExperts(E, h, f)
        blocks.append(layer)
    w = torch.nn.Parameter(0.01 * torch.randn(h, h, device=DEV, dtype=torch.bfloat16))
    x0 = torch.randn(tokens, 1, h, device=DEV, dtype=torch.bfloat16)
    # one GEMM's forward time, to size the stand-in
    a = x0.view(tokens, h)
    for _ in range(3):
        a @ w
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(50):
        a @ w
    torch.cuda.synchronize()
    gemm_s = (time.perf_counter() - t0) / 50
    out = {"gemm_fwd_s": gemm_s, "rows": []}
    for dense_ms in [0, 1, 2, 4, 8]:
        reps = int(round(dense_ms * 1e-3 / gemm_s))
        x = x0.clone().requires_grad_(True)
        g = torch.randn_like(x0)

        def step():
            y = x
            for layer in blocks:
                for _ in range(reps):
                    y = y + torch.matmul(y, w)
                o = layer(y)
                y = y + (o[0] if isinstance(o, tuple) else o)
            torch.autograd.backward(y, g)
        r = measure(step, reps=5, inner=3)
        row = {"dense_forward_ms": dense_ms, "gemms_per_layer": reps, "wall_s": r["wall_s"],
               "device_busy_s": r["device_busy_s"], "exposed_per_layer_s": r["exposed_host_s"] / layers}
        print("stack of %d, dense stand-in %d ms (%d GEMMs): wall %.2f ms, busy %.2f ms, exposed %.2f ms per layer"
              % (layers, dense_ms, reps, 1e3 * r["wall_s"], 1e3 * r["device_busy_s"],
                 1e3 * row["exposed_per_layer_s"]), flush=True)
        out["rows"].append(row)
    return out


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "moe-host-overhead.json"
    if len(sys.argv) > 2 and sys.argv[2] == "--stack":
        res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "megatron_core": megatron_setup(),
               "stacks": []}
        for name, h, f, E, k, tokens in SHAPES[:2]:
            print(name, flush=True)
            res["stacks"].append(dict(stack_exposure(h, f, E, k, tokens), shape=name))
        with open(out_path, "w") as fh:
            json.dump(res, fh, indent=1)
        print("wrote", out_path)
        return
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cases": [],
           "errors": []}
    try:
        res["cpu"] = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                      if l.startswith("model name")][0]
    except Exception:
        pass
    try:
        res["megatron_core"] = megatron_setup()
    except Exception:
        res["errors"].append("megatron setup: " + traceback.format_exc())
        print(res["errors"][-1], flush=True)
    if "megatron_core" in res:
        for name, h, f, E, k, tokens in SHAPES:
            for experts in ["sequential", "grouped"]:
                try:
                    torch.manual_seed(0)
                    layer = megatron_layer(h, f, E, k)
                    if experts == "grouped":
                        layer.experts = GroupedExperts(E, h, f)
                    row = {"shape": name, "hidden": h, "ffn": f, "local_experts": E, "topk": k,
                           "experts": experts}
                    for label, n in [("row_tokens", tokens), ("tiny_64_tokens", 64)]:
                        row[label] = dict(measure(layer_step(layer, n, h)), tokens=n)
                        xf = torch.randn(n, 1, h, device=DEV, dtype=torch.bfloat16, requires_grad=True)
                        row[label]["forward_only"] = measure(lambda: layer(xf))
                        row[label]["trace"] = trace(layer, n, h)
                        print(label, n, "forward only: wall %.2f ms" % (1e3 * row[label]["forward_only"]["wall_s"]),
                              json.dumps(row[label]["trace"]), flush=True)
                    r, t = row["row_tokens"], row["tiny_64_tokens"]
                    print("%-90s %-10s wall %.2f ms  busy %.2f ms  exposed %.2f ms  | 64 tokens: wall "
                          "%.2f ms busy %.2f ms, %d device ops, %d syncs" % (
                              name, experts, 1e3 * r["wall_s"], 1e3 * r["device_busy_s"],
                              1e3 * r["exposed_host_s"], 1e3 * t["wall_s"], 1e3 * t["device_busy_s"],
                              t["device_ops"], t["host_syncs"]), flush=True)
                    res["cases"].append(row)
                    del layer
                    torch.cuda.empty_cache()
                except Exception:
                    res["errors"].append("%s / %s: %s" % (name, experts, traceback.format_exc()))
                    print(res["errors"][-1], flush=True)
    with open(out_path, "w") as fh:
        json.dump(res, fh, indent=1)
    print("wrote", out_path)


if __name__ == "__main__":
    main()
