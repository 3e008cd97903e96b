"""A/B of the linear systems' settings in one process on one CUDA device: every point's input is
made once, then each variant (METAL_LINALG_* variables the blocked path reads per call, e.g.
METAL_LINALG_LS_POTRF_REG, _LS_CHOL_OUTER, _LS_GEMM_NB, _LS_LU_NB) is set, warmed up and timed on
it in turn (CUDA events, best and median of --reps), with its residual as linsys_gpu.py's;
torch.linalg and CuPy once per point. Writes <slug>.json and <slug>.md into --out, and <slug>.png
(each variant against torch.linalg) where matplotlib is installed; --replot JSON redraws a saved
run's plot.

    python3 benchmarks/linsys_ab.py --out OUT --slug ab --points cholesky:4096:1 \\
        --variant base: --variant reg0:METAL_LINALG_LS_POTRF_REG=0
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import metal_linalg_torch as mlt
import torch
from cuda_events import best_and_median_ms
from linsys_gpu import _cupy, _inputs, _ours, _resid, _torch


def plot(data: dict, path: Path) -> bool:
    """Each variant's speed against torch.linalg (torch ms / variant ms) per point, as grouped
    bars, into path; False where matplotlib is missing or no row has a torch time."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [r for r in data["rows"] if r.get("torch_ms")]
    if not rows:
        return False
    names = [n for n, _ in data["variants"]]
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(rows)), 4.0))
    for i, name in enumerate(names):
        xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(rows))]
        ax.bar(xs, [r["torch_ms"] / r[f"{name}_ms"] for r in rows], width, label=name)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(
        [
            f"{r['op']}\n{r['n']} x{r['batch']}" + (f" k={r['nrhs']}" if r["nrhs"] else "")
            for r in rows
        ],
        fontsize=8,
    )
    ax.set_ylabel("torch.linalg ms / ours ms (higher is faster)")
    ax.legend(fontsize=8, ncol=min(len(names), 4))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--replot", help="only redraw <JSON>'s plot next to it (<JSON minus .json>.png)"
    )
    ap.add_argument("--out")
    ap.add_argument("--slug", default="linsys-ab")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--points", nargs="+", help="op:n:batch[:nrhs]")
    ap.add_argument("--variant", action="append", default=[], help="name:ENV=V,ENV=V")
    ap.add_argument("--peers", default="torch,cupy", help="comma-separated: torch, cupy (or none)")
    args = ap.parse_args()
    if args.replot:
        src = Path(args.replot)
        if not plot(json.loads(src.read_text()), src.with_suffix(".png")):
            ap.error("nothing to plot (matplotlib missing or no torch times)")
        return
    if not args.out or not args.points:
        ap.error("--out and --points are required (or --replot JSON)")
    variants = []
    for v in args.variant or ["base:"]:
        name, _, env = v.partition(":")
        variants.append((name, dict(kv.split("=", 1) for kv in env.split(",") if kv)))
    names = sorted({k for _, e in variants for k in e})
    rows = []
    for spec in args.points:
        op, n, batch, *rest = spec.split(":")
        n, batch, nrhs = int(n), int(batch), int(rest[0]) if rest else 0
        x = _inputs(op, n, batch, nrhs)
        row = {"op": op, "n": n, "batch": batch, "nrhs": nrhs}
        row["backend"] = getattr(mlt, f"{op}_backend")(n, batch, device="cuda")
        want = args.peers.split(",")
        peers = [(k, m) for k, m in (("torch", _torch), ("cupy", _cupy)) if k in want]
        for name, make in peers:
            fn = make(op)
            if fn is None:
                continue
            try:
                fn(*x)
                torch.cuda.synchronize()
                row[f"{name}_ms"] = best_and_median_ms(lambda fn=fn, x=x: fn(*x), args.reps)[0]
            except (RuntimeError, ValueError, TypeError) as e:
                row[f"{name}_error"] = f"{type(e).__name__}: {e}"[:160]
        for vname, env in variants:
            for k in names:
                os.environ.pop(k, None)
            os.environ.update(env)
            fn = _ours(op)
            fn(*x)
            torch.cuda.synchronize()
            best, med = best_and_median_ms(lambda fn=fn, x=x: fn(*x), args.reps)
            row[f"{vname}_ms"], row[f"{vname}_median_ms"] = best, med
            row[f"{vname}_resid"] = _resid(op, x, fn(*x))
        for k in names:
            os.environ.pop(k, None)
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.slug}.json").write_text(
        json.dumps({"variants": [[n, e] for n, e in variants], "rows": rows}, indent=1)
    )
    vn = [n for n, _ in variants]
    head = "| op | n | batch | nrhs | backend | " + " | ".join(f"{n} ms" for n in vn)
    head += " | torch ms | cupy ms | best variant / best peer | residuals |"
    lines = [
        "variants: " + "; ".join(f"{n}: {e or 'defaults'}" for n, e in variants),
        "",
        head,
        "|" + "---|" * (len(vn) + 9),
    ]

    def f(v):
        return "-" if v is None else f"{v:.3f}"

    for r in rows:
        peers = [r[k] for k in ("torch_ms", "cupy_ms") if k in r]
        best = min(r[f"{n}_ms"] for n in vn)
        sp = f"{min(peers) / best:.2f}x" if peers else "-"
        res = " ".join(f"{r[f'{n}_resid']:.2g}" for n in vn)
        lines.append(
            f"| {r['op']} | {r['n']} | {r['batch']} | {r['nrhs'] or '-'} | {r['backend']} | "
            + " | ".join(f(r.get(f"{n}_ms")) for n in vn)
            + f" | {f(r.get('torch_ms'))} | {f(r.get('cupy_ms'))} | {sp} | {res} |"
        )
    (out / f"{args.slug}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot({"variants": [[n, e] for n, e in variants], "rows": rows}, out / f"{args.slug}.png")


if __name__ == "__main__":
    main()
