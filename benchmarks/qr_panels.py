"""Blocked QR on one CUDA device: one group per panel (old) against panels spread over many groups
(tsqr, core/kernels/qr_tsqr.h) against torch.linalg.qr, in one run. The blocked options are read
once per process, so each variant runs in a child process with its environment; each point is
timed with CUDA events after a warm-up (best and median of several runs) and its ratios
||A - QR|| / (m ||A|| ulp) and ||I - Q^T Q|| / (m ulp) checked in float64. Writes
<slug>.json and <slug>.md into --out.

    python benchmarks/qr_panels.py --out bench-out [--slug nvidia-h200-qr]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

POINTS = [(1024, 1024, 1), (2048, 2048, 1), (4096, 4096, 1), (4096, 1024, 1), (1024, 1024, 8)]
POINTS += [(2048, 2048, 8), (1024, 512, 1), (4096, 1024, 8)]
VARIANTS = {
    "old": {"METAL_LINALG_BLOCKED_QR_TSQR_ROWS": "0"},
    "tsqr": {"METAL_LINALG_BLOCKED_QR_TSQR_ROWS": "256"},
    "tsqr128": {"METAL_LINALG_BLOCKED_QR_TSQR_ROWS": "128"},
    "tsqr512": {"METAL_LINALG_BLOCKED_QR_TSQR_ROWS": "512"},
    "torch": {},
}
ULP = 2.0**-23


def time_ms(fn, reps: int) -> tuple[float, float]:
    import torch

    fn()
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    return min(ts), statistics.median(ts)


def worker(variant: str) -> None:
    import torch

    out = []
    for m, n, b in POINTS:
        g = torch.Generator(device="cuda").manual_seed(m * 7 + n + b)
        a = torch.randn(b, m, n, device="cuda", generator=g)
        if variant == "torch":
            fn = functools.partial(torch.linalg.qr, a)
            backend = "torch.linalg.qr"
        else:
            import metal_linalg_torch as mlt

            fn = functools.partial(mlt.qr, a)
            backend = mlt.qr_backend(m, n, batch=b, device="cuda")
        reps = 5 if m * n * min(m, n) * b >= 1 << 34 else 10
        best, med = time_ms(fn, reps)
        q, r = fn()
        a64, q64, r64 = a.double(), q.double(), r.double()
        k = min(m, n)
        eye = torch.eye(k, dtype=torch.float64, device="cuda")
        an = a64.abs().sum(-2).amax(-1)
        res = ((q64 @ r64 - a64).abs().sum(-2).amax(-1) / (m * an * ULP)).max().item()
        orth = ((q64.mT @ q64 - eye).abs().sum(-2).amax(-1) / (m * ULP)).max().item()
        out.append(
            {
                "m": m,
                "n": n,
                "batch": b,
                "variant": variant,
                "backend": backend,
                "best_ms": best,
                "median_ms": med,
                "resid": res,
                "orth": orth,
            }
        )
        print(
            f"{variant:8s} {m}x{n} x{b}: {best:.3f} ms (median {med:.3f}) resid {res:.3g} "
            f"orth {orth:.3g}",
            file=sys.stderr,
            flush=True,
        )
        del a, q, r, a64, q64, r64
        torch.cuda.empty_cache()
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--slug", default="nvidia-h200-qr")
    ap.add_argument("--worker")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
        return
    rows = []
    for v, env in VARIANTS.items():
        p = subprocess.run(
            [sys.executable, __file__, "--out", args.out, "--worker", v],
            check=False,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            text=True,
            timeout=120,
        )
        if p.returncode == 0:
            rows += json.loads(p.stdout.strip().splitlines()[-1])
        else:
            print(f"variant {v} failed (rc {p.returncode})", file=sys.stderr)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.slug}.json").write_text(json.dumps(rows, indent=1))
    by = {(r["m"], r["n"], r["batch"], r["variant"]): r for r in rows}
    names = [v for v in VARIANTS if any(r["variant"] == v for r in rows)]
    lines = [
        "# Blocked QR: one group per panel (old) vs panels spread over many groups (tsqr)",
        "",
        "ms, best of 5-10 after warm-up (median in brackets); tsqr = row blocks of 256 rows,",
        "tsqr128 / tsqr512 = of 128 / 512; worst ||A - QR|| / (m ||A|| ulp) and ||I - Q^T Q|| / (m ulp) of the batch.",
        "",
        "| m x n | batch | "
        + " | ".join(names)
        + " | tsqr vs old | best ours vs torch | ratios (tsqr) |",
        "|---|---|" + "---|" * len(names) + "---|---|---|",
    ]
    for m, n, b in POINTS:
        cells = []
        for v in names:
            r = by.get((m, n, b, v))
            cells.append(f"{r['best_ms']:.2f} ({r['median_ms']:.2f})" if r else "-")
        old, new, tor = (
            by.get((m, n, b, "old")),
            by.get((m, n, b, "tsqr")),
            by.get((m, n, b, "torch")),
        )
        ours = [by[(m, n, b, v)]["best_ms"] for v in names if v != "torch" and (m, n, b, v) in by]
        sp = f"{old['best_ms'] / new['best_ms']:.2f}x" if old and new else "-"
        vt = f"{tor['best_ms'] / min(ours):.2f}x" if tor and ours else "-"
        ra = f"{new['resid']:.2g} / {new['orth']:.2g}" if new else "-"
        lines.append(f"| {m}x{n} | {b} | " + " | ".join(cells) + f" | {sp} | {vt} | {ra} |")
    (out / f"{args.slug}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
