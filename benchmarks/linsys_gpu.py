"""The linear systems on one CUDA device against torch.linalg, CuPy and JAX, in one run: cholesky,
solve (1 and 16 right-hand sides), inv, lu_factor and solve_triangular (lower, and as the ops
solve_triangular_upper and solve_triangular_right: A upper, and X A = B with A lower) on batches
of small matrices. Each point is timed with CUDA events after a warm-up (best and median of the timed
calls; JAX, on its own streams, by the wall clock around block_until_ready); the backend each call of ours takes is printed with it, and a residual in float64 checks
the result: cholesky ||A - L L^T|| / (n ||A|| eps), solve ||A X - B|| / (||A|| ||X|| n eps), inv
||A X - I|| / (||A|| ||X|| n eps), solve_triangular as solve. Writes <slug>.json, <slug>.md and
<slug>.png (where matplotlib is installed; `--replot RESULT.json` draws an earlier run's again).

    python3 benchmarks/linsys_gpu.py --out bench-out [--slug nvidia-h200-linsys] [--points op:n:batch[:nrhs] ...]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import statistics
import time
from pathlib import Path

import metal_linalg_torch as mlt
import torch
from cuda_events import best_and_median_ms
from metal_linalg_torch import _dispatch, _lib
from metal_linalg_torch.linsys import ML_LS_RIGHT, ML_LS_UPPER

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX shares the device with torch

EPS = 2.0**-24
# (op, n, batch, nrhs)
POINTS = [
    ("cholesky", 8, 16384, 0),
    ("cholesky", 32, 16384, 0),
    ("cholesky", 64, 1024, 0),
    ("cholesky", 128, 1024, 0),
    ("cholesky", 32, 1, 0),
    ("cholesky", 64, 64, 0),
    ("solve", 16, 16384, 1),
    ("solve", 64, 4096, 1),
    ("solve", 64, 4096, 16),
    ("solve", 128, 1024, 16),
    ("solve", 64, 64, 1),
    ("inv", 32, 4096, 0),
    ("inv", 64, 1024, 0),
    ("inv", 128, 256, 0),
    ("lu_factor", 64, 4096, 0),
    ("solve_triangular", 64, 4096, 16),
]


def _spd(batch: int, n: int) -> torch.Tensor:
    a = torch.randn(batch, n, n, device="cuda")
    return a @ a.mT / n + torch.eye(n, device="cuda")


def _inputs(op: str, n: int, batch: int, nrhs: int):
    if op == "cholesky":
        return (_spd(batch, n),)
    a = torch.randn(batch, n, n, device="cuda") + n**0.5 * torch.eye(n, device="cuda")
    if op in ("inv", "lu_factor"):
        return (a,)
    if op == "solve_triangular_right":
        return (torch.tril(a), torch.randn(batch, nrhs, n, device="cuda"))
    b = torch.randn(batch, n, nrhs, device="cuda")
    if op == "solve_triangular":
        return (torch.tril(a), b)
    if op == "solve_triangular_upper":
        return (torch.triu(a), b)
    return (a, b)


def route_name(op: str, n: int, batch: int, nrhs: int, ex=None) -> str:
    """The core's plan for this very call, right-hand sides included (the lane launch depends
    on their number; the package's *_backend queries answer for one), on the CUDA exec of
    torch's current stream unless ex is given. The query's answer, marked, if the plan fails."""
    base = "solve_triangular" if op.startswith("solve_triangular") else op
    flags = {"solve_triangular_upper": ML_LS_UPPER, "solve_triangular_right": ML_LS_RIGHT}
    sizes = (ctypes.c_int64 * 4)(batch, n, n, max(nrhs, 1))
    memory, nbytes, name = ctypes.c_int32(0), ctypes.c_int64(0), ctypes.c_char_p()
    if ex is None:
        ex = _dispatch._cuda_exec(torch.empty(0, device="cuda"))
    rc = _lib.lib.ml_plan(
        ctypes.byref(ex),
        _lib.OP_ID[base],
        ctypes.addressof(sizes),
        flags.get(op, 0),
        ctypes.byref(memory),
        ctypes.byref(nbytes),
        ctypes.addressof(name),
    )
    if rc == 0 and name.value:
        return name.value.decode()
    return getattr(mlt, f"{base}_backend")(n, batch, device="cuda") + " (query)"


def _ours(op: str):
    if op == "solve_triangular":
        return lambda a, b: mlt.solve_triangular(a, b, upper=False)
    if op == "solve_triangular_upper":
        return lambda a, b: mlt.solve_triangular(a, b, upper=True)
    if op == "solve_triangular_right":
        return lambda a, b: mlt.solve_triangular(a, b, upper=False, left=False)
    if op == "lu_factor":
        return lambda a: mlt.lu_factor(a)[0]
    return getattr(mlt, op)


def _torch(op: str):
    if op == "solve_triangular":
        return lambda a, b: torch.linalg.solve_triangular(a, b, upper=False)
    if op == "solve_triangular_upper":
        return lambda a, b: torch.linalg.solve_triangular(a, b, upper=True)
    if op == "solve_triangular_right":
        return lambda a, b: torch.linalg.solve_triangular(a, b, upper=False, left=False)
    if op == "lu_factor":
        return lambda a: torch.linalg.lu_factor(a)[0]
    return getattr(torch.linalg, op)


def _cupy(op: str):
    try:
        import cupy as cp
    except ImportError:
        return None
    if op == "cholesky":
        return lambda a: cp.linalg.cholesky(cp.asarray(a))
    if op == "solve":
        return lambda a, b: cp.linalg.solve(cp.asarray(a), cp.asarray(b))
    if op == "inv":
        return lambda a: cp.linalg.inv(cp.asarray(a))
    return None


def _jax(op: str):
    """JAX's jitted function of op and a converter of its torch inputs, or None without JAX."""
    try:
        import jax
        import jax.numpy as jnp
        import jax.scipy.linalg as jsl
    except ImportError:
        return None
    fns = {
        "cholesky": lambda a: jnp.linalg.cholesky(a),
        "solve": lambda a, b: jnp.linalg.solve(a, b),
        "inv": lambda a: jnp.linalg.inv(a),
        "lu_factor": lambda a: jsl.lu_factor(a)[0],
        "solve_triangular": lambda a, b: jsl.solve_triangular(a, b, lower=True),
        "solve_triangular_upper": lambda a, b: jsl.solve_triangular(a, b, lower=False),
        # X A = B as A^T X^T = B^T.
        "solve_triangular_right": lambda a, b: jnp.swapaxes(
            jsl.solve_triangular(a, jnp.swapaxes(b, -1, -2), trans=1, lower=True), -1, -2
        ),
    }
    if op not in fns:
        return None
    return jax.jit(fns[op]), lambda t: jax.device_put(t.cpu().numpy()), jax.block_until_ready


def _jax_ms(op: str, x, reps: int) -> tuple[float, float] | None:
    made = _jax(op)
    if made is None:
        return None
    fn, put, wait = made
    xs = [put(t) for t in x]
    wait(fn(*xs))  # compile and warm up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        wait(fn(*xs))
        times.append((time.perf_counter() - t0) * 1e3)
    return min(times), statistics.median(times)


def _resid(op: str, args, out) -> float:
    a = args[0].double()
    na = torch.linalg.matrix_norm(a, ord=1)
    n = a.shape[-1]
    if op == "cholesky":
        lo = out.double()
        r = torch.linalg.matrix_norm(a - lo @ lo.mT, ord=1) / (n * na * EPS)
    elif op == "lu_factor":
        return float("nan")  # checked by the tests against P A = L U
    else:
        x = out.double()
        b = args[1].double() if op != "inv" else torch.eye(n, dtype=torch.float64, device="cuda")
        nx = torch.linalg.matrix_norm(x, ord=1)
        ax = x @ a if op == "solve_triangular_right" else a @ x
        r = torch.linalg.matrix_norm(ax - b, ord=1) / (na * nx * n * EPS)
    return float(r.max())


# The targets: (label, selects a row, the speedup over the best peer it needs).
TARGETS = (
    (
        "batched small (n 8..128, batch >= 1024)",
        lambda r: r["n"] <= 128 and r["batch"] >= 1024,
        3.0,
    ),
    ("batch 1 and 64 (n 8..128)", lambda r: r["n"] <= 128 and r["batch"] in (1, 64), 1.0),
    ("large (n >= 1024, batch <= 8)", lambda r: r["n"] >= 1024 and r["batch"] <= 8, 1.0),
)


def _point(r: dict) -> str:
    rhs = f" ({r['nrhs']} rhs)" if r["nrhs"] else ""
    return f"{r['op']} {r['n']} x{r['batch']}{rhs}"


def target_lines(rows: list[dict]) -> list[str]:
    """Per target with points among rows: how many meet it, the geometric mean and the lowest
    speedup over the best peer, and the points below it (rows without a peer are left out)."""
    lines = []
    for label, selects, need in TARGETS:
        pts = [r for r in rows if selects(r) and "speedup" in r]
        if not pts:
            continue
        sps = [r["speedup"] for r in pts]
        geo = math.exp(sum(math.log(v) for v in sps) / len(sps))
        below = [f"{_point(r)} {r['speedup']:.2f}x" for r in pts if r["speedup"] < need]
        lines.append(
            f"- {label}, >= {need:g}x the best peer: {len(pts) - len(below)} of {len(pts)} points "
            f"(geometric mean {geo:.2f}x, lowest {min(sps):.2f}x)"
            + (f"; below: {', '.join(below)}" if below else "")
        )
    return lines


def plot(rows: list[dict], path: Path) -> bool:
    """Ours, torch, CuPy and JAX per point (ms, log scale), the best peer's speedup over each group of bars."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [
        ("ours", "metal-linalg"),
        ("torch", "torch.linalg"),
        ("cupy", "CuPy"),
        ("jax", "JAX"),
    ]
    fig, ax = plt.subplots(figsize=(max(8.0, 1.1 * len(rows)), 5.0))
    for k, (key, label) in enumerate(names):
        xs = [i + (k - 1.5) * 0.2 for i in range(len(rows))]
        ax.bar(xs, [r.get(f"{key}_ms", 0.0) for r in rows], 0.2, label=label)
    labels = []
    for r in rows:
        rhs = f"\nrhs {r['nrhs']}" if r["nrhs"] else ""
        sp = f"{r['speedup']:.2f}x" if "speedup" in r else "-"
        op = r["op"].replace("solve_triangular", "solve_tri")
        labels.append(f"{op}\n{r['n']} x{r['batch']}{rhs}\n{sp}")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("ms (best of the calls, log scale)")
    ax.set_title(
        "linear systems: metal-linalg vs torch.linalg, CuPy and JAX (speedup over the best peer)"
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--slug", default="nvidia-h200-linsys")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument(
        "--points",
        nargs="*",
        help="op:n:batch[:nrhs] instead of the default points (e.g. solve:2048:1:2048)",
    )
    ap.add_argument("--replot", default="", help="an earlier run's JSON: draw its plot again")
    ap.add_argument("--ours-only", action="store_true", help="no peers (an A/B's other variants)")
    args = ap.parse_args()
    if args.replot:
        src = Path(args.replot)
        plot(json.loads(src.read_text()), src.with_suffix(".png"))
        return
    points = POINTS
    if args.points:
        points = []
        for spec in args.points:
            op, n, batch, *rest = spec.split(":")
            points.append((op, int(n), int(batch), int(rest[0]) if rest else 0))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for op, n, batch, nrhs in points:
        x = _inputs(op, n, batch, nrhs)
        backend = route_name(op, n, batch, nrhs)
        row = {"op": op, "n": n, "batch": batch, "nrhs": nrhs, "backend": backend}
        libs = (
            (("ours", _ours),)
            if args.ours_only
            else (("ours", _ours), ("torch", _torch), ("cupy", _cupy))
        )
        for name, make in libs:
            fn = make(op)
            if fn is None:
                continue
            try:
                fn(*x)  # warm-up
                torch.cuda.synchronize()
                best, med = best_and_median_ms(lambda fn=fn, x=x: fn(*x), args.reps)
                row[f"{name}_ms"], row[f"{name}_median_ms"] = best, med
            except (RuntimeError, ValueError, TypeError) as e:  # a peer without this shape
                row[f"{name}_error"] = f"{type(e).__name__}: {e}"[:160]
        if not args.ours_only:
            try:
                got = _jax_ms(op, x, args.reps)
                if got is not None:
                    row["jax_ms"], row["jax_median_ms"] = got
            except Exception as e:  # noqa: BLE001 (JAX raises its own error types)
                row["jax_error"] = f"{type(e).__name__}: {e}"[:160]
        row["resid"] = _resid(op, x, _ours(op)(*x))
        peers = [row[k] for k in ("torch_ms", "cupy_ms", "jax_ms") if k in row]
        if "ours_ms" in row and peers:
            row["speedup"] = min(peers) / row["ours_ms"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    (out / f"{args.slug}.json").write_text(json.dumps(rows, indent=1))
    lines = [
        "| op | n | batch | nrhs | backend | ours ms | torch ms | cupy ms | jax ms | speedup | residual |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def f(v):
        return "-" if v is None else f"{v:.3f}"

    for r in rows:
        sp = f"{r['speedup']:.2f}x" if "speedup" in r else "-"
        lines.append(
            f"| {r['op']} | {r['n']} | {r['batch']} | {r['nrhs'] or '-'} | {r['backend']} | "
            f"{f(r.get('ours_ms'))} | {f(r.get('torch_ms'))} | {f(r.get('cupy_ms'))} | "
            f"{f(r.get('jax_ms'))} | {sp} | "
            f"{r['resid']:.3g} |"
        )
    if not args.ours_only:
        lines += ["", "Targets:", "", *target_lines(rows)]
    (out / f"{args.slug}.md").write_text("\n".join(lines) + "\n")
    plot(rows, out / f"{args.slug}.png")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
