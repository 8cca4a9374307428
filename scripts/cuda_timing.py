"""CUDA-event timing shared by the scripts/h100-*.py measurement scripts."""
import torch


def tflops(fn, reps, flops):
    """Runs fn() reps times between two CUDA events; returns TFLOP/s for `flops` per call."""
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    e.synchronize()
    return flops * reps / (s.elapsed_time(e) / 1e3) / 1e12
