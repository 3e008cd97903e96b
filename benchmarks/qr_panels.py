"""Blocked QR and SVD on one CUDA device, variants of the panels against torch.linalg (and CuPy for
QR) in one run. QR with the fused one-group panels (fused, as built; baseline: unfused panels and
larft_gram; unfused; _notsqr: no spread panels; _outer1: two levels at every batch; _l512: 512
lanes; _gramlarft: outer T by larft_gram), --points to pick the QR points. QR: one group per panel (old), its columns' rows split over several warps (split,
1024 lanes for panels of >= 1024 rows: split1024), panels spread over many groups (tsqr,
core/kernels/qr_tsqr.h, row blocks of 256 or 512 rows), both. SVD: brd_tgk_fix's projections a
lane per column (old) or a warp per column with 1024 lanes (fix). The blocked options are read
once per process, so each variant runs in a child process with its environment; each point is
timed with CUDA events after a warm-up (best and median of several runs) and its ratios
(QR: ||A - QR|| / (m ||A|| ulp), ||I - Q^T Q|| / (m ulp); SVD: ||A - U S V^T|| / (m ||A|| ulp),
||I - U^T U|| / (m ulp)) checked in float64. Writes <slug>.json and <slug>.md into --out.

    python benchmarks/qr_panels.py --out bench-out [--slug nvidia-h200-qr]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

QR_POINTS = [(256, 256, 1), (512, 512, 1), (1024, 1024, 1), (2048, 2048, 1), (4096, 4096, 1)]
QR_POINTS += [(1024, 1024, 8), (1024, 512, 1), (3000, 500, 1), (4096, 1024, 1), (2048, 2048, 8)]
SVD_POINTS = [(1024, 1024, 1), (4096, 4096, 1), (3000, 500, 2)]
_T = "METAL_LINALG_BLOCKED_QR_TSQR_ROWS"
_S = "METAL_LINALG_BLOCKED_QR_PANEL_SPLIT"
_L = "METAL_LINALG_BLOCKED_QR_PANEL_LANES"
_F = "METAL_LINALG_BLOCKED_SVD_FIX_LANES"
_M = "METAL_LINALG_BLOCKED_QR_TSQR_MIN_ROWS"
_U = "METAL_LINALG_BLOCKED_QR_PANEL_FUSED"
_UL = "METAL_LINALG_BLOCKED_QR_FUSED_LANES"
_O = "METAL_LINALG_BLOCKED_QR_OUTER_MIN_BATCH"
_R = "METAL_LINALG_BLOCKED_QR_PANEL_REG"
# name: (op, environment); a variant sets every option it names, the rest as built.
VARIANTS = {
    # The one-group panels by the fused factorisation (as built) or a warp per column (unfused),
    # the rest of the options as built; then the fused panels without spread panels, with two
    # levels at every batch, with 512 lanes.
    "fused": ("qr", {}),
    "unfused": ("qr", {_U: "0"}),
    "fused_notsqr": ("qr", {_T: "0"}),
    "fused_outer1": ("qr", {_O: "1"}),
    "fused_outer1_notsqr": ("qr", {_O: "1", _T: "0"}),
    "fused_l512": ("qr", {_UL: "512"}),
    "fused_gramlarft": ("qr", {"METAL_LINALG_BLOCKED_QR_ROW_LARFT": "0"}),
    "baseline": ("qr", {_U: "0", "METAL_LINALG_BLOCKED_QR_ROW_LARFT": "0"}),
    # The panels in registers (qr_panel_reg): as built otherwise, one level
    # (METAL_LINALG_BLOCKED_NB_OUTER=0), without spread panels; shared-memory panels (noreg).
    "reg": ("qr", {_R: "1"}),
    "reg_one": ("qr", {_R: "1", "METAL_LINALG_BLOCKED_NB_OUTER": "0"}),
    "reg_notsqr": ("qr", {_R: "1", _T: "0"}),
    "noreg": ("qr", {_R: "0"}),
    "old": ("qr", {_T: "0", _S: "0", _L: "0"}),
    "split": ("qr", {_T: "0", _S: "1", _L: "0"}),
    "split1024": ("qr", {_T: "0", _S: "1", _L: "1024"}),
    "split1024_nb16": ("qr", {_T: "0", _S: "1", _L: "1024", "METAL_LINALG_BLOCKED_NB": "16"}),
    "tsqr": ("qr", {_T: "256", _S: "0", _L: "0"}),
    "tsqr_split": ("qr", {_T: "256", _S: "1", _L: "1024"}),
    "tsqr512_split": ("qr", {_T: "512", _S: "1", _L: "1024"}),
    "tsqr_split_1536": ("qr", {_T: "256", _S: "1", _L: "1024", _M: "1536"}),
    "torch": ("qr", {}),
    "cupy": ("qr", {}),
    "svd_old": ("svd", {_F: "0"}),
    "svd_fix": ("svd", {_F: "1024"}),
    "svd_torch": ("svd", {}),
}
ULP = 2.0**-23


def time_ms(fn, reps: int) -> tuple[float, float]:
    import torch
    from cuda_events import best_and_median_ms

    fn()
    fn()
    torch.cuda.synchronize()
    return best_and_median_ms(fn, reps)


def _cupy_qr(a):
    import cupy as cp

    q, r = cp.linalg.qr(cp.from_dlpack(a))
    import torch

    return torch.from_dlpack(q), torch.from_dlpack(r)


def worker(variant: str) -> None:
    import torch

    op = VARIANTS[variant][0]
    out = []
    for m, n, b in QR_POINTS if op == "qr" else SVD_POINTS:
        if variant == "torch" and b >= 64 and m * n >= 1 << 20:
            continue  # a loop over the batch: seconds
        g = torch.Generator(device="cuda").manual_seed(m * 7 + n + b)
        a = torch.randn(b, m, n, device="cuda", generator=g)
        if variant == "torch":
            fn, backend = functools.partial(torch.linalg.qr, a), "torch.linalg.qr"
        elif variant == "cupy":
            fn, backend = functools.partial(_cupy_qr, a), "cupy.linalg.qr"
        elif variant == "svd_torch":
            fn = functools.partial(torch.linalg.svd, a, full_matrices=False)
            backend = "torch.linalg.svd"
        else:
            import metal_linalg_torch as mlt

            if op == "qr":
                fn, backend = (
                    functools.partial(mlt.qr, a),
                    mlt.qr_backend(m, n, batch=b, device="cuda"),
                )
            else:
                fn = functools.partial(mlt.svd, a, full_matrices=False)
                backend = mlt.svd_backend(m, n, batch=b, device="cuda")
        work = m * n * min(m, n) * b
        reps = 3 if op == "svd" and work >= 1 << 34 else 5 if work >= 1 << 34 else 10
        try:
            best, med = time_ms(fn, reps)
            res_ = fn()
        except (RuntimeError, ValueError, TypeError) as e:  # a peer without batched support
            print(f"{variant} {m}x{n} x{b}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            continue
        a64 = a.double()
        k = min(m, n)
        eye = torch.eye(k, dtype=torch.float64, device="cuda")
        an = a64.abs().sum(-2).amax(-1)
        if op == "qr":
            q64, r64 = res_[0].double(), res_[1].double()
            rec, orth_of = q64 @ r64, q64
        else:
            u64, s64, vh64 = (x.double() for x in res_)
            rec, orth_of = (u64 * s64.unsqueeze(-2)) @ vh64, u64
        res = ((rec - a64).abs().sum(-2).amax(-1) / (m * an * ULP)).max().item()
        orth = ((orth_of.mT @ orth_of - eye).abs().sum(-2).amax(-1) / (m * ULP)).max().item()
        out.append(
            {
                "op": op,
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
            f"{variant:13s} {m}x{n} x{b}: {best:.3f} ms (median {med:.3f}) resid {res:.3g} "
            f"orth {orth:.3g}",
            file=sys.stderr,
            flush=True,
        )
        del a, res_, a64, rec, orth_of
        torch.cuda.empty_cache()
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--slug", default="nvidia-h200-qr")
    ap.add_argument("--worker")
    ap.add_argument("--only", help="comma-separated variants")
    ap.add_argument(
        "--points", help="QR points instead of the default, e.g. 1024x1024x1,512x512x64"
    )
    args = ap.parse_args()
    if args.points:
        QR_POINTS[:] = [tuple(int(v) for v in p.split("x")) for p in args.points.split(",")]
    if args.worker:
        worker(args.worker)
        return
    names_run = args.only.split(",") if args.only else list(VARIANTS)
    rows = []
    for v in names_run:
        extra = ["--points", args.points] if args.points else []
        p = subprocess.run(
            [sys.executable, __file__, "--out", args.out, "--worker", v, *extra],
            check=False,
            env={**os.environ, **VARIANTS[v][1]},
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
    lines = [
        "# Blocked QR panels and the SVD's vector fix: variants against torch.linalg / CuPy",
        "",
        "ms, best of 3-10 after warm-up (median in brackets). QR: old = one group per panel,",
        "a warp per column; split = a column's rows over several warps while fewer columns than",
        "warps are left; split1024 = that with 1024 lanes for panels of >= 1024 rows (_nb16:",
        "panels of 16 columns, not 32); tsqr =",
        "panels spread over row blocks of 256 (512) rows (_1536: only panels of >= 1536 rows).",
        "SVD: brd_tgk_fix's projections a lane",
        "per column (old) or a warp per column, 1024 lanes (fix). Ratios (worst of the batch,",
        "best variant's):",
        "||A - QR|| / (m ||A|| ulp) / ||I - Q^T Q|| / (m ulp) (SVD: A - U S V^T, I - U^T U).",
        "",
    ]
    by = {(r["op"], r["m"], r["n"], r["batch"], r["variant"]): r for r in rows}
    for op, points in (("qr", QR_POINTS), ("svd", SVD_POINTS)):
        names = [
            v for v in names_run if VARIANTS[v][0] == op and any(r["variant"] == v for r in rows)
        ]
        if not names:
            continue
        peers = [v for v in names if v in ("torch", "cupy", "svd_torch")]
        lines += [
            f"| {op} m x n | batch | "
            + " | ".join(names)
            + " | best ours | vs old | vs best peer | ratios |",
            "|---|---|" + "---|" * len(names) + "---|---|---|---|",
        ]
        for m, n, b in points:
            cells = []
            for v in names:
                r = by.get((op, m, n, b, v))
                cells.append(f"{r['best_ms']:.2f} ({r['median_ms']:.2f})" if r else "-")
            ours = [
                by[(op, m, n, b, v)] for v in names if v not in peers and (op, m, n, b, v) in by
            ]
            peer = [by[(op, m, n, b, v)]["best_ms"] for v in peers if (op, m, n, b, v) in by]
            old = by.get((op, m, n, b, "baseline")) or by.get(
                (op, m, n, b, "old" if op == "qr" else "svd_old")
            )
            best = min(ours, key=lambda r: r["best_ms"]) if ours else None
            bo = f"{best['variant']}" if best else "-"
            vo = f"{old['best_ms'] / best['best_ms']:.2f}x" if best and old else "-"
            vp = f"{min(peer) / best['best_ms']:.2f}x" if best and peer else "-"
            ra = f"{best['resid']:.2g} / {best['orth']:.2g}" if best else "-"
            lines.append(
                f"| {m}x{n} | {b} | " + " | ".join(cells) + f" | {bo} | {vo} | {vp} | {ra} |"
            )
        lines.append("")
    (Path(args.out) / f"{args.slug}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
