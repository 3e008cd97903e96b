"""Benchmark engine: metal_linalg_torch against torch.linalg, NumPy (CPU), CuPy and JAX (CUDA).

The grid is docs/design.md section 8: ops x (square n in 8..1024 and tall 64x32, 256x128, 1024x512) x batch in
{1, 64, 1024, 16384}, capped at batch*m*n <= 2^27. Every implementation gets the same input in one
run; each is timed after a warm-up (CUDA events for torch on the GPU, perf_counter elsewhere) and
reported as best and median of several runs. run_grid() returns records; write_results() writes
JSON, a Markdown table and a PNG plot. benchmarks/ scripts import this module.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import re
import statistics
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

import metal_linalg_torch as mlt

OPS = ("qr", "eigh", "eigvalsh", "svd", "svdvals")
SQUARE_N = (8, 16, 32, 64, 128, 256, 512, 1024)
TALL = ((64, 32), (256, 128), (1024, 512))
BATCHES = (1, 64, 1024, 16384)
MAX_WORK = 2**27
QUICK_SHAPES = ((8, 8), (16, 16), (32, 32), (64, 32))
QUICK_BATCHES = (1, 64, 1024)


@dataclass
class Point:
    op: str
    m: int
    n: int
    batch: int


@dataclass
class Record:
    op: str
    m: int
    n: int
    batch: int
    backend: str
    times: dict = field(default_factory=dict)  # impl -> {"best_ms", "median_ms", "runs"}
    roofline_ms: float = 0.0

    @property
    def ours_ms(self) -> float:
        return self.times.get("metal_linalg", {}).get("best_ms", math.nan)

    @property
    def best_peer(self):
        peers = [(t["best_ms"], name) for name, t in self.times.items() if name != "metal_linalg"]
        peers = [p for p in peers if not math.isnan(p[0])]
        return min(peers)[::-1] if peers else (None, math.nan)

    @property
    def speedup(self) -> float:
        return self.best_peer[1] / self.ours_ms if self.ours_ms > 0 else math.nan

    def as_dict(self) -> dict:
        d = asdict(self)
        peer, peer_ms = self.best_peer
        d.update(
            ours_ms=self.ours_ms,
            us_per_matrix=self.ours_ms * 1e3 / self.batch,
            best_peer=peer,
            best_peer_ms=peer_ms,
            speedup_vs_best_peer=self.speedup,
            roofline_fraction=self.roofline_ms / self.ours_ms if self.ours_ms > 0 else math.nan,
        )
        return d


def grid(ops=OPS, shapes=None, batches=BATCHES, max_work=MAX_WORK) -> list:
    """The benchmark points, shapes as (m, n) pairs (default: docs/design.md section 8's square + tall)."""
    shapes = shapes or [(n, n) for n in SQUARE_N] + list(TALL)
    points = []
    for op in ops:
        for m, n in shapes:
            if op in ("eigh", "eigvalsh") and m != n:
                continue
            for b in batches:
                if b * m * n <= max_work:
                    points.append(Point(op, m, n, b))
    return points


# ---- implementations ----


def _torch_fn(op):
    return {
        "qr": lambda a: torch.linalg.qr(a),
        "eigh": lambda a: torch.linalg.eigh(a),
        "eigvalsh": lambda a: torch.linalg.eigvalsh(a),
        "svd": lambda a: torch.linalg.svd(a, full_matrices=False),
        "svdvals": lambda a: torch.linalg.svdvals(a),
    }[op]


def _ours_fn(op):
    return {
        "qr": mlt.qr,
        "eigh": mlt.eigh,
        "eigvalsh": mlt.eigvalsh,
        "svd": mlt.svd,
        "svdvals": mlt.svdvals,
    }[op]


def _array_fns(xp, op):
    la = xp.linalg
    return {
        "qr": lambda a: la.qr(a),
        "eigh": lambda a: la.eigh(a),
        "eigvalsh": lambda a: la.eigvalsh(a),
        "svd": lambda a: la.svd(a, full_matrices=False),
        "svdvals": lambda a: la.svd(a, compute_uv=False),
    }[op]


class Impl:
    """One implementation: converts the shared torch input, runs, synchronises."""

    def __init__(self, name, prepare, run, sync=None, cuda_events=False):
        self.name, self.prepare, self.run, self.sync, self.cuda_events = (
            name,
            prepare,
            run,
            sync,
            cuda_events,
        )


# Peers that could not be loaded, with the reason (reported in the JSON metadata).
UNAVAILABLE: dict = {}


def implementations(device: str, peers=None) -> list:
    """metal_linalg first, then every importable peer for this device (optionally filtered by name)."""
    impls = []
    if device == "cuda":
        sync = torch.cuda.synchronize
        impls.append(Impl("metal_linalg", lambda a: a, None, sync, cuda_events=True))
        impls.append(Impl("torch", lambda a: a, None, sync, cuda_events=True))
        try:
            import cupy

            impls.append(
                Impl(
                    "cupy",
                    lambda a: cupy.from_dlpack(a.contiguous()),
                    "cupy",
                    lambda: cupy.cuda.Device().synchronize(),
                )
            )
        except Exception as exc:  # noqa: BLE001  (any import/driver failure: peer absent)
            UNAVAILABLE["cupy"] = f"{type(exc).__name__}: {exc}"
        try:
            import jax
            import jax.numpy as jnp

            if any(d.platform == "gpu" for d in jax.devices()):
                impls.append(Impl("jax", lambda a: jnp.asarray(a.cpu().numpy()), "jax", None))
        except Exception as exc:  # noqa: BLE001
            UNAVAILABLE["jax"] = f"{type(exc).__name__}: {exc}"
    else:
        impls.append(Impl("metal_linalg", lambda a: a, None))
        impls.append(Impl("torch", lambda a: a, None))
        impls.append(Impl("numpy", lambda a: a.numpy(), "numpy"))
    if peers:
        impls = [i for i in impls if i.name == "metal_linalg" or i.name in peers]
    return impls


def _callable(impl: Impl, op: str):
    if impl.name == "metal_linalg":
        return _ours_fn(op)
    if impl.name == "torch":
        return _torch_fn(op)
    if impl.run == "numpy":
        return _array_fns(np, op)
    if impl.run == "cupy":
        import cupy

        return _array_fns(cupy, op)
    import jax
    import jax.numpy as jnp

    fn = jax.jit(_array_fns(jnp, op))
    return lambda a: jax.block_until_ready(fn(a))


# ---- timing ----


def _time_runs(fn, x, impl: Impl, min_runs: int, budget_s: float, slow_s: float) -> list:
    """Per-run milliseconds after one warm-up; fewer runs for slow points."""
    t0 = time.perf_counter()
    fn(x)
    if impl.sync:
        impl.sync()
    warm = time.perf_counter() - t0
    if warm > slow_s:
        return [warm * 1e3]
    runs = max(min_runs, min(20, int(budget_s / max(warm, 1e-6))))
    out = []
    for _ in range(runs):
        if impl.cuda_events:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(x)
            stop.record()
            stop.synchronize()
            out.append(start.elapsed_time(stop))
        else:
            t0 = time.perf_counter()
            fn(x)
            if impl.sync:
                impl.sync()
            out.append((time.perf_counter() - t0) * 1e3)
    return out


def make_input(point: Point, device: str, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(point.batch, point.m, point.n, generator=g)
    if point.op in ("eigh", "eigvalsh"):
        a = (a + a.mT) / 2
    return a.to(device)


# ---- roofline ----


def nominal_flops(op: str, m: int, n: int) -> float:
    """Nominal LAPACK flop counts per matrix (Golub & Van Loan; LAPACK Working Notes)."""
    k, big = min(m, n), max(m, n)
    if op == "qr":  # geqrf + orgqr of the thin Q
        return 4.0 * big * k * k - 4.0 * k**3 / 3
    if op == "eigh":
        return 9.0 * n**3
    if op == "eigvalsh":
        return 4.0 * n**3 / 3
    if op == "svd":
        return 4.0 * big * k * k + 22.0 * k**3
    return 4.0 * big * k * k - 4.0 * k**3 / 3  # svdvals: bidiagonalisation


def output_floats(op: str, m: int, n: int) -> int:
    k = min(m, n)
    return {
        "qr": m * k + k * n,
        "eigh": n + n * n,
        "eigvalsh": n,
        "svd": m * k + k + k * n,
        "svdvals": k,
    }[op]


def machine_peaks(device: str) -> dict:
    """Measured copy bandwidth (bytes/s) and float32 GEMM rate (flop/s) used as the roofline."""
    n_copy = 1 << 24
    src = torch.empty(n_copy, device=device)
    dst = torch.empty_like(src)
    a = torch.randn(2048, 2048, device=device)

    def best(fn, reps):
        times = []
        for _ in range(reps):
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        return min(times)

    dst.copy_(src)
    copy_s = best(lambda: dst.copy_(src), 5)
    a @ a
    gemm_s = best(lambda: a @ a, 3)
    return {"copy_bytes_per_s": 2 * 4 * n_copy / copy_s, "fp32_flops_per_s": 2 * 2048**3 / gemm_s}


def roofline_ms(point: Point, peaks: dict) -> float:
    nbytes = 4 * point.batch * (point.m * point.n + output_floats(point.op, point.m, point.n))
    flops = point.batch * nominal_flops(point.op, point.m, point.n)
    return 1e3 * max(nbytes / peaks["copy_bytes_per_s"], flops / peaks["fp32_flops_per_s"])


# ---- driver ----


def run_grid(
    points,
    device: str = "cpu",
    peers=None,
    min_runs: int = 3,
    budget_s: float = 1.0,
    slow_s: float = 10.0,
    progress: bool = True,
) -> list:
    """Time every implementation on every point; returns [Record]."""
    impls = implementations(device, peers)
    peaks = machine_peaks(device)
    records = []
    bar = None
    if progress:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        bar = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()
        )
        task = bar.add_task("bench", total=len(points) * len(impls))
        bar.start()
    try:
        for point in points:
            x = make_input(point, device)
            rec = Record(point.op, point.m, point.n, point.batch, _backend(point, device))
            rec.roofline_ms = roofline_ms(point, peaks)
            for impl in impls:
                if bar:
                    bar.update(
                        task,
                        description=f"{point.op} {point.m}x{point.n} x{point.batch} {impl.name}",
                    )
                try:
                    fn = _callable(impl, point.op)
                    xi = impl.prepare(x)
                    ms = _time_runs(fn, xi, impl, min_runs, budget_s, slow_s)
                    rec.times[impl.name] = {
                        "best_ms": min(ms),
                        "median_ms": statistics.median(ms),
                        "runs": len(ms),
                    }
                except Exception as exc:  # noqa: BLE001  (a peer failing a shape is a result, not a crash)
                    rec.times[impl.name] = {
                        "best_ms": math.nan,
                        "median_ms": math.nan,
                        "runs": 0,
                        "error": f"{type(exc).__name__}: {exc}"[:200],
                    }
                if bar:
                    bar.advance(task)
            records.append(rec)
    finally:
        if bar:
            bar.stop()
    return records


def _backend(point: Point, device: str) -> str:
    q = getattr(mlt, f"{point.op}_backend")
    dev = "cuda" if device == "cuda" else "cpu"
    if point.op in ("eigh", "eigvalsh"):
        return q(point.n, point.batch, device=dev)
    return q(point.m, point.n, point.batch, device=dev)


# ---- reporting ----


def _impl_names(records) -> list:
    names = []
    for r in records:
        for name in r.times:
            if name not in names:
                names.append(name)
    return names


def _fmt(ms: float) -> str:
    if ms is None or math.isnan(ms):
        return "-"
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def rich_table(records, title: str = "metal_linalg_torch benchmark (best ms)"):
    from rich.table import Table

    names = _impl_names(records)
    table = Table(title=title)
    for col in ("op", "shape", "batch", "backend"):
        table.add_column(col)
    for name in names:
        table.add_column(f"{name} ms", justify="right")
    table.add_column("vs best peer", justify="right")
    table.add_column("roofline", justify="right")
    for r in records:
        s = r.speedup
        colour = "green" if s >= 1 else "red"
        cells = [_fmt(r.times.get(n, {}).get("best_ms", math.nan)) for n in names]
        roof = r.roofline_ms / r.ours_ms if r.ours_ms > 0 else math.nan
        table.add_row(
            r.op,
            f"{r.m}x{r.n}",
            str(r.batch),
            r.backend,
            *cells,
            f"[{colour}]{s:.2f}x[/{colour}]" if not math.isnan(s) else "-",
            f"{roof:.1%}" if not math.isnan(roof) else "-",
        )
    return table


def markdown_table(records) -> str:
    names = _impl_names(records)
    head = (
        ["op", "shape", "batch", "backend"]
        + [f"{n} ms" for n in names]
        + ["us/matrix", "vs best peer", "roofline"]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in records:
        d = r.as_dict()
        cells = [r.op, f"{r.m}x{r.n}", str(r.batch), f"`{r.backend}`"]
        cells += [_fmt(r.times.get(n, {}).get("best_ms", math.nan)) for n in names]
        cells += [
            f"{d['us_per_matrix']:.3g}",
            f"{r.speedup:.2f}x" if not math.isnan(r.speedup) else "-",
            f"{d['roofline_fraction']:.1%}" if not math.isnan(d["roofline_fraction"]) else "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(records, path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    ops = [op for op in OPS if any(r.op == op for r in records)]
    fig, axes = plt.subplots(1, len(ops), figsize=(4.2 * len(ops), 3.8), squeeze=False)
    for ax, op in zip(axes[0], ops):
        recs = [r for r in records if r.op == op]
        shapes = []
        for r in recs:
            if (r.m, r.n) not in shapes:
                shapes.append((r.m, r.n))
        for b in sorted({r.batch for r in recs}):
            xs, ys = [], []
            for r in recs:
                if r.batch == b and not math.isnan(r.speedup):
                    xs.append(shapes.index((r.m, r.n)))
                    ys.append(r.speedup)
            if xs:
                ax.plot(xs, ys, marker="o", label=f"batch {b}")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(ticker.LogLocator(base=2))
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_xticks(range(len(shapes)))
        ax.set_xticklabels([f"{m}x{n}" for m, n in shapes], rotation=60, fontsize=7)
        ax.set_title(op)
        ax.set_ylabel("speedup vs best peer")
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "device"


def metadata(device: str) -> dict:
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": device,
        "device_name": torch.cuda.get_device_name() if device == "cuda" else mlt.device_name(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "metal_linalg": mlt.version(),
        "lapack": mlt.lapack_info(),
        "cpu_threads": mlt.get_cpu_threads(),
        "unavailable_peers": dict(UNAVAILABLE),
        "policies": {
            op: {
                "policy": getattr(mlt, f"{op}_policy")(),
                "source": getattr(mlt, f"{op}_policy_source")(),
            }
            for op in OPS
        },
    }
    return meta


def write_results(records, out_dir: str, device: str, name: str | None = None) -> dict:
    """Write <name>.json, <name>.md and <name>.png into out_dir; returns the paths."""
    os.makedirs(out_dir, exist_ok=True)
    meta = metadata(device)
    name = name or f"{_slug(meta['device_name'])}-{device}"
    paths = {ext: os.path.join(out_dir, f"{name}.{ext}") for ext in ("json", "md", "png")}
    with open(paths["json"], "w") as f:
        json.dump(
            {"meta": meta, "results": [r.as_dict() for r in records]}, f, indent=1, default=str
        )
    title = f"metal_linalg_torch vs peers on {meta['device_name']} ({device}), {meta['date']}"
    with open(paths["md"], "w") as f:
        f.write(
            f"# {title}\n\nBest of several runs after a warm-up, milliseconds per call of the whole batch; "
            "`vs best peer` > 1 means metal_linalg is faster; roofline = max(bytes / measured copy "
            "bandwidth, nominal LAPACK flops / measured fp32 GEMM rate) / measured time.\n\n"
        )
        f.write(markdown_table(records))
    plot(records, paths["png"], title)
    return paths


def load_records(path: str) -> list:
    """Records back from a JSON file written by write_results (e.g. to re-plot or merge runs)."""
    with open(path) as f:
        rows = json.load(f)["results"]
    names = {f.name for f in Record.__dataclass_fields__.values()}
    return [Record(**{k: v for k, v in row.items() if k in names}) for row in rows]


def geomean(values) -> float:
    vals = [v for v in values if v > 0 and not math.isnan(v)]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else math.nan
