"""CUDA-event timing shared by the scripts/h100-*.py measurement scripts."""
import statistics

import torch


def _batch_seconds(fn, reps):
    """Seconds per call of `reps` back-to-back calls of fn(), between two CUDA events."""
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / 1e3 / reps


def tflops(fn, reps, flops):
    """TFLOP/s of `reps` back-to-back calls of fn(), `flops` per call."""
    return flops / _batch_seconds(fn, reps) / 1e12


def seconds_per_call(fn, reps, batches=3):
    """Median over `batches` batches of `reps` calls of the time per call, after one warm call."""
    fn()
    torch.cuda.synchronize()
    return statistics.median(_batch_seconds(fn, reps) for _ in range(batches))
