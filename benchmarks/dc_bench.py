"""The tridiagonal eigensolver inside blocked eigh / svd on one CUDA device: divide and conquer
(the default from core/src/blocked_tridiag.cpp's kTridiagDcMinN) or bisection with inverse
iteration (METAL_LINALG_TRIDIAG_DC_MIN_N=0, read once per process), and torch.linalg, on
A + A^T and A^T A (a clustered spectrum) of a random A. CUDA-event timing after a warm-up, the
best of the repetitions; LAPACK ratios of every result in float64. Prints and appends JSON lines.

    METAL_LINALG_TRIDIAG_DC_MIN_N=0 python3 benchmarks/dc_bench.py --label old --out r.jsonl
    python3 benchmarks/dc_bench.py --label dc --peers --out r.jsonl
"""

from __future__ import annotations

import argparse
import json
import time

import metal_linalg_torch as mlt
import torch

EPS = 2.0**-24


def timed(fn, reps: int) -> tuple[float, object]:
    out = fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0.record()
        out = fn()
        t1.record()
        torch.cuda.synchronize()
        best = min(best, t0.elapsed_time(t1))
    return best, out


def eigh_ratios(a: torch.Tensor, w: torch.Tensor, v: torch.Tensor) -> tuple[float, float]:
    n = a.shape[-1]
    a64, w64, v64 = a.double(), w.double(), v.double()
    res = torch.linalg.matrix_norm(a64 @ v64 - v64 * w64.unsqueeze(-2), 1) / (
        torch.linalg.matrix_norm(a64, 1) * n * EPS
    )
    orth = torch.linalg.matrix_norm(
        torch.eye(n, device=a.device, dtype=torch.float64) - v64.mT @ v64, 1
    ) / (n * EPS)
    return float(res.max()), float(orth.max())


def svd_ratios(a: torch.Tensor, u, s, vh) -> tuple[float, float]:
    n = a.shape[-1]
    a64, u64, s64, v64 = a.double(), u.double(), s.double(), vh.double()
    res = torch.linalg.matrix_norm(a64 - (u64 * s64) @ v64, 1) / (
        torch.linalg.matrix_norm(a64, 1) * n * EPS
    )
    eye = torch.eye(n, device=a.device, dtype=torch.float64)
    orth = torch.maximum(
        torch.linalg.matrix_norm(eye - u64.mT @ u64, 1),
        torch.linalg.matrix_norm(eye - v64 @ v64.mT, 1),
    ) / (n * EPS)
    return float(res.max()), float(orth.max())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    ap.add_argument("--peers", action="store_true")
    ap.add_argument("--out", required=True)
    ap.add_argument("--eigh", default="1024,2048,4096")
    ap.add_argument("--svd", default="1024,2048")
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    rows = []
    g = torch.Generator(device="cuda").manual_seed(0)
    points = [("eigh", kind, int(n)) for n in args.eigh.split(",") for kind in ("sym", "ata")]
    points += [("svd", "random", int(n)) for n in args.svd.split(",")]
    for op, kind, n in points:
        x = torch.randn(1, n, n, device="cuda", generator=g)
        if kind == "sym":
            a = x + x.mT
        elif kind == "ata":
            a = (x.double().mT @ x.double()).float()
        else:
            a = x
        impls = [("ours", getattr(mlt, op))] + (
            [("torch", getattr(torch.linalg, op))] if args.peers else []
        )
        for impl, fn in impls:
            label = args.label if impl == "ours" else "torch"
            row = {"op": op, "kind": kind, "n": n, "batch": 1, "impl": label}
            t0 = time.perf_counter()
            try:
                ms, out = timed(lambda fn=fn, a=a: fn(a), args.reps)
                res, orth = eigh_ratios(a, *out) if op == "eigh" else svd_ratios(a, *out)
                row.update(ms=round(ms, 3), residual=round(res, 3), orthogonality=round(orth, 3))
            except Exception as e:  # noqa: BLE001 - a failed point is recorded, not fatal
                row["error"] = f"{type(e).__name__}: {e}"
            row["wall_s"] = round(time.perf_counter() - t0, 2)
            print(json.dumps(row), flush=True)
            rows.append(row)
    with open(args.out, "a") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    main()
