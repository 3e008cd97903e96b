"""`python -m metal_linalg bench`: metal_linalg against mx.linalg (CPU stream) and NumPy
on the same inputs in one run, over (a part of) the grid of docs/design.md section 8.

Writes bench-<device>.json, .md and .png into --out. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import mlx.core as mx
import numpy as np

OPS = ("qr", "eigh", "eigvalsh", "svd", "svdvals")
GRID_SQUARE = (8, 16, 32, 64, 128, 256, 512, 1024)
GRID_TALL = ((64, 32), (256, 128), (1024, 512))
GRID_BATCHES = (1, 64, 1024, 16384)
GRID_MAX_ELEMENTS = 2**27
# Default: a part of the grid that runs in well under two minutes on two cores.
QUICK_SHAPES = "8,16,32,64,64x32"
QUICK_BATCHES = "1,64,1024"
QUICK_MAX_ELEMENTS = 2**21
PEERS = ("mx.linalg", "numpy")


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """ "8,32,64x32" -> [(8, 8), (32, 32), (64, 32)]."""
    shapes = []
    for item in text.split(","):
        item = item.strip().lower()
        if not item:
            continue
        if "x" in item:
            m, n = item.split("x", 1)
            shapes.append((int(m), int(n)))
        else:
            shapes.append((int(item), int(item)))
    for m, n in shapes:
        if m < 1 or n < 1:
            raise ValueError(f"shape {m}x{n}: sizes must be >= 1")
    return shapes


def parse_ints(text: str) -> list[int]:
    values = [int(x) for x in text.split(",") if x.strip()]
    if any(v < 1 for v in values):
        raise ValueError("batches must be >= 1")
    return values


def grid_points(ops, shapes, batches, max_elements):
    """(op, m, n, batch) for every combination within the element cap; eigh ops square only."""
    points = []
    for op in ops:
        for m, n in shapes:
            if op in ("eigh", "eigvalsh") and m != n:
                continue
            for batch in batches:
                if batch * m * n <= max_elements:
                    points.append((op, m, n, batch))
    return points


def nominal_flops(op: str, m: int, n: int) -> float:
    """LAPACK-style nominal flop counts per matrix (Golub & Van Loan), m >= n assumed."""
    m, n = max(m, n), min(m, n)
    if op == "qr":
        return 2 * (2 * m * n * n - 2 * n**3 / 3)  # geqrf + orgqr
    if op == "eigh":
        return 9 * n**3
    if op == "eigvalsh":
        return 4 * n**3 / 3
    if op == "svd":
        return 6 * m * n * n + 20 * n**3
    return 4 * m * n * n - 4 * n**3 / 3  # svdvals


def nominal_bytes(op: str, m: int, n: int) -> float:
    k = min(m, n)
    out = {
        "qr": m * k + k * n,
        "eigh": n + n * n,
        "eigvalsh": n,
        "svd": m * k + k + k * n,
        "svdvals": k,
    }[op]
    return 4.0 * (m * n + out)


def measure_machine() -> dict:
    """Copy bandwidth and an fp32 GEMM rate, the roofline's two ceilings."""
    src = np.ones(32 * 2**20, dtype=np.float32)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    bandwidth = 2 * src.nbytes / best
    a = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
    a @ a
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - t)
    return {"copy_bandwidth_Bps": bandwidth, "fp32_gemm_flops": 2 * 1024**3 / best}


def make_input(op: str, m: int, n: int, batch: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((batch, m, n), dtype=np.float32)
    if op in ("eigh", "eigvalsh"):
        a = (a + np.swapaxes(a, -1, -2)) * np.float32(0.5)
    return np.ascontiguousarray(a)


def implementations(op: str):
    """{name: fn(np_input, mx_input)} for metal_linalg and its peers."""
    import metal_linalg as ml

    cpu = mx.cpu
    ours = {
        "qr": lambda x: mx.eval(*ml.qr(x)),
        "eigh": lambda x: mx.eval(*ml.eigh(x)),
        "eigvalsh": lambda x: mx.eval(ml.eigvalsh(x)),
        "svd": lambda x: mx.eval(*ml.svd(x)),
        "svdvals": lambda x: mx.eval(ml.svdvals(x)),
    }[op]
    # mx.linalg.svd always returns full U and Vt (more work than thin on tall shapes).
    mlx_peer = {
        "qr": lambda x: mx.eval(*mx.linalg.qr(x, stream=cpu)),
        "eigh": lambda x: mx.eval(*mx.linalg.eigh(x, stream=cpu)),
        "eigvalsh": lambda x: mx.eval(mx.linalg.eigvalsh(x, stream=cpu)),
        "svd": lambda x: mx.eval(*mx.linalg.svd(x, stream=cpu)),
        "svdvals": lambda x: mx.eval(mx.linalg.svd(x, compute_uv=False, stream=cpu)),
    }[op]
    numpy_peer = {
        "qr": lambda x: np.linalg.qr(x),
        "eigh": lambda x: np.linalg.eigh(x),
        "eigvalsh": lambda x: np.linalg.eigvalsh(x),
        "svd": lambda x: np.linalg.svd(x, full_matrices=False),
        "svdvals": lambda x: np.linalg.svd(x, compute_uv=False),
    }[op]
    return {
        "metal_linalg": (ours, "mx"),
        "mx.linalg": (mlx_peer, "mx"),
        "numpy": (numpy_peer, "np"),
    }


def time_call(fn, arg, repeats: int, budget_s: float) -> dict:
    """Best and median wall time (ms) of fn(arg) after one warm-up call."""
    t = time.perf_counter()
    fn(arg)
    warm = time.perf_counter() - t
    times = []
    while len(times) < repeats:
        t = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - t)
        if sum(times) + warm > budget_s:
            break
    return {
        "best_ms": 1e3 * min(times),
        "median_ms": 1e3 * statistics.median(times),
        "runs": len(times),
    }


def backend_of(op: str, m: int, n: int, batch: int) -> str:
    import metal_linalg as ml

    if op in ("eigh", "eigvalsh"):
        return getattr(ml, f"{op}_backend")(n, batch)
    return getattr(ml, f"{op}_backend")(m, n, batch)


def run(points, peers, repeats: int, budget_s: float, progress=None) -> tuple[list, dict]:
    machine = measure_machine()
    records = []
    for i, (op, m, n, batch) in enumerate(points):
        a_np = make_input(op, m, n, batch, seed=i)
        a_mx = mx.array(a_np)
        mx.eval(a_mx)
        rec = {"op": op, "m": m, "n": n, "batch": batch, "backend": backend_of(op, m, n, batch)}
        timings = {}
        for name, (fn, kind) in implementations(op).items():
            if name != "metal_linalg" and name not in peers:
                continue
            if progress is not None:
                progress(f"{op} {m}x{n} x{batch}: {name}")
            try:
                timings[name] = time_call(fn, a_mx if kind == "mx" else a_np, repeats, budget_s)
            except (RuntimeError, ValueError, MemoryError, np.linalg.LinAlgError) as err:
                # a peer that cannot do this shape is reported, not fatal
                timings[name] = {"error": f"{type(err).__name__}: {err}"}
        rec["timings"] = timings
        ours = timings["metal_linalg"].get("best_ms")
        peer_best = [
            t["best_ms"] for k, t in timings.items() if k != "metal_linalg" and "best_ms" in t
        ]
        rec["best_peer_ms"] = min(peer_best) if peer_best else None
        rec["speedup_vs_best_peer"] = (
            rec["best_peer_ms"] / ours if ours and rec["best_peer_ms"] else None
        )
        rec["us_per_matrix"] = 1e3 * ours / batch if ours else None
        roof_s = max(
            batch * nominal_bytes(op, m, n) / machine["copy_bandwidth_Bps"],
            batch * nominal_flops(op, m, n) / machine["fp32_gemm_flops"],
        )
        rec["roofline_fraction"] = roof_s / (ours / 1e3) if ours else None
        records.append(rec)
    return records, machine


def device_slug(name: str) -> str:
    keep = "".join(c if c.isalnum() else "-" for c in name.lower())
    while "--" in keep:
        keep = keep.replace("--", "-")
    return keep.strip("-") or "device"


def fmt_ms(t: dict | None) -> str:
    if not t:
        return "-"
    if "error" in t:
        return "error"
    return f"{t['best_ms']:.3f}"


def markdown(records, meta) -> str:
    peers = meta["peers"]
    lines = [
        f"# metal_linalg (MLX) benchmark on {meta['device']}",
        "",
        (
            f"{meta['cpu_count']} CPU threads, MLX {meta['mlx_version']}, "
            f"NumPy {meta['numpy_version']}, metal_linalg {meta['metal_linalg_version']}, "
            f"LAPACK: {meta['lapack']}. Best of up to {meta['repeats']} calls after a warm-up "
            "(ms); speedup = best peer / metal_linalg; roofline = max(bytes / copy bandwidth, "
            "nominal flops / fp32 GEMM rate) / time. mx.linalg runs on the CPU stream; its svd "
            "computes full U and Vt."
        ),
        "",
        "| op | shape | batch | metal_linalg ms | "
        + " | ".join(f"{p} ms" for p in peers)
        + " | speedup | us/matrix | roofline | backend |",
        "|---|---|---|---|" + "---|" * len(peers) + "---|---|---|---|",
    ]
    for r in records:
        t = r["timings"]
        sp, us, roof = r["speedup_vs_best_peer"], r["us_per_matrix"], r["roofline_fraction"]
        cells = [
            r["op"],
            f"{r['m']}x{r['n']}",
            str(r["batch"]),
            fmt_ms(t.get("metal_linalg")),
            *(fmt_ms(t.get(p)) for p in peers),
            f"{sp:.2f}x" if sp else "-",
            f"{us:.2f}" if us is not None else "-",
            f"{100 * roof:.1f}%" if roof else "-",
            r["backend"],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    speedups = [r["speedup_vs_best_peer"] for r in records if r["speedup_vs_best_peer"]]
    if speedups:
        geo = float(np.exp(np.mean(np.log(speedups))))
        summary = (
            f"Geometric mean speedup vs best peer: {geo:.2f}x over {len(speedups)} points; "
            f"slowest point {min(speedups):.2f}x."
        )
        lines += ["", summary]
    return "\n".join(lines) + "\n"


def plot(records, meta, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = [op for op in OPS if any(r["op"] == op for r in records)]
    fig, axes = plt.subplots(len(ops), 1, figsize=(10, 2.6 * len(ops)), squeeze=False)
    for ax, op in zip(axes[:, 0], ops):
        rows = [r for r in records if r["op"] == op and r["speedup_vs_best_peer"]]
        labels = [f"{r['m']}x{r['n']}\nx{r['batch']}" for r in rows]
        values = [r["speedup_vs_best_peer"] for r in rows]
        colors = ["tab:green" if v >= 1 else "tab:red" for v in values]
        ax.bar(range(len(rows)), values, color=colors)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xticks(range(len(rows)), labels, fontsize=7)
        ax.set_ylabel("speedup")
        ax.set_title(f"{op}: metal_linalg vs best of {', '.join(meta['peers'])}", fontsize=9)
    fig.suptitle(f"metal_linalg (MLX) on {meta['device']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ops", default=",".join(OPS), help="comma-separated subset of " + ",".join(OPS)
    )
    p.add_argument(
        "--sizes",
        default=None,
        help=f"shapes, e.g. '8,32,64x32' (default quick set {QUICK_SHAPES})",
    )
    p.add_argument("--batches", default=None, help=f"batch sizes (default {QUICK_BATCHES})")
    p.add_argument(
        "--full",
        action="store_true",
        help="the whole grid of docs/design.md section 8 (square 8..1024, tall, batches 1..16384; long)",
    )
    p.add_argument(
        "--max-elements",
        type=int,
        default=None,
        help=f"skip points with batch*m*n above this (default {QUICK_MAX_ELEMENTS}; "
        f"--full: {GRID_MAX_ELEMENTS})",
    )
    p.add_argument(
        "--peers", default=",".join(PEERS), help="comma-separated subset of " + ",".join(PEERS)
    )
    p.add_argument("--repeats", type=int, default=5, help="timed calls per point (after a warm-up)")
    p.add_argument(
        "--budget",
        type=float,
        default=1.0,
        help="seconds per implementation and point after which repeats stop",
    )
    p.add_argument("--out", default="bench-out", help="folder for the JSON, Markdown and PNG")


def main(args) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    import metal_linalg as ml

    from .__main__ import console as make_console

    console = make_console()
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    bad = [o for o in ops if o not in OPS]
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    bad += [p for p in peers if p not in PEERS]
    if bad:
        console.print(f"[red]unknown op or peer: {', '.join(bad)}[/red]")
        return 2
    if args.full:
        shapes = [(n, n) for n in GRID_SQUARE] + list(GRID_TALL)
        batches = list(GRID_BATCHES)
        cap = GRID_MAX_ELEMENTS
    else:
        shapes = parse_shapes(QUICK_SHAPES)
        batches = parse_ints(QUICK_BATCHES)
        cap = QUICK_MAX_ELEMENTS
    if args.sizes:
        shapes = parse_shapes(args.sizes)
    if args.batches:
        batches = parse_ints(args.batches)
    if args.max_elements is not None:
        cap = args.max_elements
    points = grid_points(ops, shapes, batches, cap)
    if not points:
        console.print("[red]no grid point selected[/red]")
        return 2

    per_point = 1 + len(peers)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("measuring", total=len(points) * per_point)

        def step(label: str) -> None:
            bar.update(task, description=label)
            bar.advance(task)

        records, machine = run(points, peers, args.repeats, args.budget, progress=step)

    meta = {
        "device": ml.device_name(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_threads_setting": ml.get_cpu_threads(),
        "metal_linalg_version": ml.__version__,
        "core_version": ml.version(),
        "mlx_version": mx.__version__,
        "numpy_version": np.__version__,
        "lapack": ml.lapack_info(),
        "peers": peers,
        "repeats": args.repeats,
        "machine": machine,
        "policy_source": {op: getattr(ml, f"{op}_policy_source")() for op in OPS},
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"bench-mlx-{device_slug(meta['device'])}"
    Path(f"{stem}.json").write_text(json.dumps({"meta": meta, "records": records}, indent=1))
    Path(f"{stem}.md").write_text(markdown(records, meta))
    plot(records, meta, Path(f"{stem}.png"))

    table = Table(title=f"metal_linalg vs {', '.join(peers)} on {meta['device']} (best ms)")
    for col in ["op", "shape", "batch", "metal_linalg", *peers, "speedup", "backend"]:
        table.add_column(col, justify="right" if col not in ("op", "backend") else "left")
    for r in records:
        sp = r["speedup_vs_best_peer"]
        style = "green" if sp and sp >= 1 else "red"
        table.add_row(
            r["op"],
            f"{r['m']}x{r['n']}",
            str(r["batch"]),
            fmt_ms(r["timings"].get("metal_linalg")),
            *[fmt_ms(r["timings"].get(p)) for p in peers],
            f"[{style}]{sp:.2f}x[/{style}]" if sp else "-",
            r["backend"],
        )
    console.print(table)
    console.print(f"wrote {stem}.json, {stem}.md, {stem}.png")
    return 0
