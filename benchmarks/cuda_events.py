"""CUDA-event timing shared by the GPU-machine benchmark scripts (gemm_bench.py, qr_panels.py)."""

from __future__ import annotations

import statistics


def best_and_median_ms(fn, reps: int) -> tuple[float, float]:
    """reps calls of fn, each timed by CUDA events on the current stream and waited for: the
    shortest and the median time in milliseconds."""
    import torch

    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return min(times), statistics.median(times)
