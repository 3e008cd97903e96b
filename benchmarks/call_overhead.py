"""Per-call overhead of the frontends on tiny inputs: microseconds per call of 1x4x4 eigh, qr
and svd (CPU), for the torch and the MLX package (whichever is installed).

    python benchmarks/call_overhead.py [--calls 20000] [--repeats 5]

Prints the best of `repeats` runs of `calls` calls each (the least disturbed by other load), as
wall-clock and as this process's CPU time per call (the latter is steadier on a shared machine).
"""

import argparse
import time


def best_us(fn, calls: int, repeats: int) -> tuple:
    for _ in range(min(calls, 1000)):
        fn()
    wall = cpu = float("inf")
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(calls):
            fn()
        wall = min(wall, (time.perf_counter() - t0) / calls * 1e6)
        cpu = min(cpu, (time.process_time() - c0) / calls * 1e6)
    return wall, cpu


def torch_calls():
    import metal_linalg_torch as mlt
    import torch

    a = torch.randn(1, 4, 4)
    s = a @ a.mT
    return {"eigh": lambda: mlt.eigh(s), "qr": lambda: mlt.qr(a), "svd": lambda: mlt.svd(a)}


def mlx_calls():
    import metal_linalg as ml
    import mlx.core as mx

    a = mx.random.normal((1, 4, 4))
    s = a @ a.swapaxes(-1, -2)
    mx.eval(a, s)
    cpu = mx.cpu
    return {
        "eigh": lambda: mx.eval(*ml.eigh(s, stream=cpu)),
        "qr": lambda: mx.eval(*ml.qr(a, stream=cpu)),
        "svd": lambda: mx.eval(*ml.svd(a, stream=cpu)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    for package, make in (("torch", torch_calls), ("mlx", mlx_calls)):
        try:
            calls = make()
        except ImportError as e:
            print(f"{package}: not installed ({e})")
            continue
        for op, fn in calls.items():
            wall, cpu = best_us(fn, args.calls, args.repeats)
            print(f"{package} {op} 1x4x4: {wall:.2f} us/call wall, {cpu:.2f} us/call CPU")


if __name__ == "__main__":
    main()
