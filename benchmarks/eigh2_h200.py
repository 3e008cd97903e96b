"""eigh (with eigenvectors) of large matrices on CUDA: the blocked one-stage tridiagonalisation
against the two-stage one (dense -> band -> tridiagonal, the chase's and stage 1's reflectors
applied to the tridiagonal's eigenvectors, core/src/blocked_eigh2.cpp) and torch.linalg.eigh, in
one run. Each configuration runs in its own process (the CUDA backend reads METAL_LINALG_EIGH_*
once).

    python3 benchmarks/eigh2_h200.py --out DIR [--points 1024x1,2048x1] [--configs one,two,torch]
    python3 benchmarks/eigh2_h200.py --split 2048x1,4096x1   # where two-stage eigh's time goes

Times: wall clock around one call with a device synchronisation after a warm-up call, best and
median of up to 3 calls. Each two-stage point also records LAPACK's ratios of the result in
float64: |A Z - Z W|_1 / (n |A|_1 ulp) and |Z^T Z - I|_1 / (n ulp).
--split: one call under torch.profiler, its kernels cut into the phases by the steps that open
them (stage 1 up to the chase, the chase sb_sweeps / sb_chase .. sb_extract, the tridiagonal
solver, Q2 Z sb_back_t .. sb_back, Q1 Z up to the stores): the GPU time of each phase's kernels.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

TWO = {"METAL_LINALG_EIGH_VEC_TWO_STAGE_MIN_N": "1"}
CONFIGS = {
    "one": {"METAL_LINALG_EIGH_VEC_TWO_STAGE_MIN_N": "0"},
    "two": dict(TWO),
    "two-k32": {**TWO, "METAL_LINALG_EIGH_BACK_SWEEPS": "32"},
    "two-c32": {**TWO, "METAL_LINALG_EIGH_BACK_COLS": "32"},
    "two-c64": {**TWO, "METAL_LINALG_EIGH_BACK_COLS": "64"},
    "two-c128": {**TWO, "METAL_LINALG_EIGH_BACK_COLS": "128"},
    "two-b8": {**TWO, "METAL_LINALG_EIGH_BAND": "8"},
    "torch": {},
}
ULP = 2.0**-23


def _matrix(n: int, batch: int):
    import torch

    g = torch.Generator().manual_seed(n + batch)
    a = torch.randn(batch, n, n, generator=g)
    return ((a + a.mT) / 2).cuda()


def _ratios(a, w, z) -> tuple[float, float]:
    import torch

    a64, w64, z64 = a.double(), w.double(), z.double()
    n = a.shape[-1]
    an = torch.linalg.matrix_norm(a64, ord=1)
    r = torch.linalg.matrix_norm(a64 @ z64 - z64 * w64[..., None, :], ord=1) / (n * an * ULP)
    eye = torch.eye(n, dtype=torch.float64, device=a.device)
    o = torch.linalg.matrix_norm(z64.mT @ z64 - eye, ord=1) / (n * ULP)
    return float(r.max()), float(o.max())


def worker(config: str, points: list[tuple[int, int]]) -> None:
    import torch

    if config == "torch":
        fn = torch.linalg.eigh
    else:
        import metal_linalg_torch as mlt

        fn = mlt.eigh
    for n, batch in points:
        a = _matrix(n, batch)
        w, z = fn(a)
        torch.cuda.synchronize()
        ts: list[float] = []
        t0 = time.perf_counter()
        while len(ts) < 3 and (len(ts) < 1 or time.perf_counter() - t0 < 1.5):
            s = time.perf_counter()
            w, z = fn(a)
            torch.cuda.synchronize()
            ts.append((time.perf_counter() - s) * 1e3)
        ts.sort()
        rec = {
            "config": config,
            "n": n,
            "batch": batch,
            "best_ms": ts[0],
            "median_ms": ts[len(ts) // 2],
        }
        if config != "torch":
            rec["resid"], rec["orth"] = _ratios(a, w, z)
        print(json.dumps(rec), flush=True)


def split(points: list[tuple[int, int]]) -> None:
    import metal_linalg_torch as mlt
    import torch
    from torch.profiler import ProfilerActivity, profile

    for n, batch in points:
        a = _matrix(n, batch)
        mlt.eigh(a)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            mlt.eigh(a)
            torch.cuda.synchronize()
        ks = sorted(
            (ev.time_range.start, ev.time_range.end, ev.name)
            for ev in prof.events()
            if ev.device_type == torch.autograd.DeviceType.CUDA
        )
        phase, out, launches = "stage1", {}, {}
        for start, end, name in ks:
            if phase == "stage1" and ("sb_sweeps" in name or "sb_chase" in name):
                phase = "chase"
            elif phase == "chase" and "sb_extract" not in name and "sb_" not in name:
                phase = "solver"
            elif phase == "solver" and "sb_back" in name:
                phase = "q2"
            elif phase == "q2" and "sb_back" not in name:
                phase = "q1"
            if phase == "q1" and "step_store" in name:
                phase = "store"
            out[phase] = out.get(phase, 0.0) + (end - start) / 1e3
            launches[phase] = launches.get(phase, 0) + 1
        span = (ks[-1][1] - ks[0][0]) / 1e3 if ks else 0.0
        print(
            json.dumps(
                {"split": f"{n}x{batch}", "span_ms": span, "gpu_ms": out, "launches": launches}
            ),
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--points", default="1024x1,2048x1,4096x1,1024x8")
    ap.add_argument("--configs", default="one,two,torch")
    ap.add_argument("--worker")
    ap.add_argument("--split")
    args = ap.parse_args()
    pts = [tuple(int(x) for x in p.split("x")) for p in args.points.split(",") if p]
    if args.split:
        split([tuple(int(x) for x in p.split("x")) for p in args.split.split(",")])
        return
    if args.worker:
        worker(args.worker, pts)
        return
    os.makedirs(args.out or ".", exist_ok=True)
    for c in args.configs.split(","):
        env = {**os.environ, **CONFIGS[c]}
        cmd = [sys.executable, __file__, "--worker", c, "--points", args.points]
        r = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True)
        sys.stdout.write(r.stdout)
        if r.returncode:
            sys.stdout.write(f"{c}: exit {r.returncode}\n{r.stderr[-2000:]}\n")
        if args.out:
            with open(os.path.join(args.out, "eigh2.jsonl"), "a") as f:
                f.write(r.stdout)


if __name__ == "__main__":
    main()
