"""Blocked eigh (one-stage tridiagonalisation) on one CUDA device: variants of the per-column steps
(core/src/blocked_eigh.cpp, METAL_LINALG_TRD_* read at every call, so one process sweeps them)
on a few shapes, then the grid with the default and the peers (torch.linalg, CuPy, JAX where
cheap). CUDA-event timing after a warm-up, the best of the repetitions; LAPACK ratios of our
results in float64 (residual ||A V - V W||_1 / (||A||_1 n eps), orthogonality ||I - V^T V||_1 /
(n eps)). Prints and appends JSON lines.

    python3 benchmarks/sytrd_bench.py --label nb32 --variants --grid --peers --out r.jsonl
    METAL_LINALG_BLOCKED_NB=64 python3 benchmarks/sytrd_bench.py --label nb64 --variants --out r.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import time

import metal_linalg_torch as mlt
import torch
from dc_bench import eigh_ratios as ratios
from dc_bench import timed

# name -> METAL_LINALG_TRD_* settings; "old": the layout before the sliced update and tiled symv.
VARIANTS = {
    "old": {"LANES": "128", "ROWS": "0", "SYMV_PER": "-1"},
    "default": {},
    "per2": {"SYMV_PER": "2"},
    "per4": {"SYMV_PER": "4"},
    "per8": {"SYMV_PER": "8"},
    "tiled": {"SYMV_PER": "0"},
    "upd128": {"LANES": "128"},
    "upd512": {"LANES": "512"},
    "rows64": {"ROWS": "64"},
    "rows16": {"ROWS": "16", "LANES": "128"},
    "symv512": {"SYMV_LANES": "512"},
    "symv512per4": {"SYMV_LANES": "512", "SYMV_PER": "4"},
    "symv512tiled": {"SYMV_LANES": "512", "SYMV_PER": "0"},
    "symv128": {"SYMV_LANES": "128"},
    # each panel in one launch (trd_panel) with this many persistent groups
    "launches": {"PANEL_GROUPS": "0"},
    "panel66": {"PANEL_GROUPS": "66"},
    "panel132": {"PANEL_GROUPS": "132"},
    "panel264": {"PANEL_GROUPS": "264"},
    "panel528": {"PANEL_GROUPS": "528"},
    "panel1056": {"PANEL_GROUPS": "1056"},
    "panel264r64": {"PANEL_GROUPS": "264", "ROWS": "64"},
    "panel132l512": {"PANEL_GROUPS": "132", "LANES": "512", "ROWS": "64"},
}
KEYS = ("LANES", "ROWS", "SYMV_PER", "SYMV_LANES", "PANEL_GROUPS")


def set_variant(v: dict[str, str]) -> None:
    for k in KEYS:
        os.environ.pop(f"METAL_LINALG_TRD_{k}", None)
    for k, x in v.items():
        os.environ[f"METAL_LINALG_TRD_{k}"] = x


def matrix(kind: str, n: int, batch: int, g: torch.Generator) -> torch.Tensor:
    x = torch.randn(batch, n, n, device="cuda", generator=g)
    if kind == "ata":
        return (x.double().mT @ x.double()).float()
    return x + x.mT


def peer_fns(a: torch.Tensor):
    yield "torch", lambda: torch.linalg.eigh(a)
    try:
        import cupy as cp

        ac = cp.from_dlpack(a)
        yield "cupy", lambda: cp.linalg.eigh(ac)
    except Exception as e:  # noqa: BLE001 - a missing peer is skipped
        print(f"cupy skipped: {e}", flush=True)
    if a.shape[0] == 1 and a.shape[-1] <= 4096:
        try:
            import jax
            import jax.numpy as jnp

            aj = jnp.asarray(a.cpu().numpy())
            f = jax.jit(jnp.linalg.eigh)

            def run():
                w, v = f(aj)
                w.block_until_ready()
                return w, v

            yield "jax", run
        except Exception as e:  # noqa: BLE001
            print(f"jax skipped: {e}", flush=True)


def point(
    out: str, label: str, kind: str, n: int, batch: int, fn, a, reps: int, check: bool
) -> dict:
    row = {"label": label, "kind": kind, "n": n, "batch": batch}
    t0 = time.perf_counter()
    try:
        ms, result = timed(fn, reps)
        row["ms"] = round(ms, 3)
        if check:
            res, orth = ratios(a, *result)
            row["residual"] = round(res, 3)
            row["orthogonality"] = round(orth, 3)
    except Exception as e:  # noqa: BLE001 - a failed point is recorded, not fatal
        row["error"] = f"{type(e).__name__}: {e}"
    row["wall_s"] = round(time.perf_counter() - t0, 2)
    print(json.dumps(row), flush=True)
    with open(out, "a") as f:  # row by row: a run cut short keeps what it measured
        f.write(json.dumps(row) + "\n")
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--variants", action="store_true")
    ap.add_argument("--vshapes", default="1024x1,2048x1,4096x1,1024x8")
    ap.add_argument("--vnames", default=",".join(VARIANTS))
    ap.add_argument("--grid", action="store_true")
    ap.add_argument(
        "--gshapes",
        default="2048x1,4096x1,1024x1,512x1,1024x8,512x8,256x1,256x8,2048x8,256x64,512x64,1024x64",
    )
    ap.add_argument("--peers", action="store_true")
    ap.add_argument("--best", help="JSON lines of a --variants run: the grid runs its fastest")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    shapes = lambda s: [tuple(int(x) for x in p.split("x")) for p in s.split(",") if p]
    if args.variants:
        for n, batch in shapes(args.vshapes):
            a = matrix("sym", n, batch, g)
            for name in args.vnames.split(","):
                set_variant(VARIANTS[name])
                r = point(
                    args.out,
                    f"{args.label}:{name}",
                    "sym",
                    n,
                    batch,
                    lambda a=a: mlt.eigh(a),
                    a,
                    args.reps,
                    batch == 1,
                )
                rows.append(r)
        set_variant({})
    label = args.label
    if args.best and os.path.exists(args.best):
        total: dict[str, float] = {}
        counts: dict[str, int] = {}
        with open(args.best) as f:
            for line in f:
                r = json.loads(line)
                ok = r.get("residual", 0) < 30 and r.get("orthogonality", 0) < 30
                if r["label"].startswith("nb32:") and "ms" in r and ok:
                    total[r["label"]] = total.get(r["label"], 0.0) + r["ms"]
                    counts[r["label"]] = counts.get(r["label"], 0) + 1
        full = max(counts.values(), default=0)
        done = {k: v for k, v in total.items() if counts[k] == full}
        if done:
            best = min(done, key=done.get)
            set_variant(VARIANTS[best.split(":")[1]])
            label = f"{args.label}:{best.split(':')[1]}"
            print(f"grid with {best} ({done[best]:.1f} ms over the variant shapes)", flush=True)
    if args.grid:
        for n, batch in shapes(args.gshapes):
            for kind in ("sym", "ata") if batch == 1 else ("sym",):
                a = matrix(kind, n, batch, g)
                rows.append(
                    point(
                        args.out, label, kind, n, batch, lambda a=a: mlt.eigh(a), a, args.reps, True
                    )
                )
                if args.peers and kind == "sym":
                    for name, fn in peer_fns(a):
                        rows.append(point(args.out, name, kind, n, batch, fn, a, args.reps, False))


if __name__ == "__main__":
    main()
