"""GPU benchmark: metal_linalg_torch against torch.linalg, CuPy and JAX on one CUDA device, in one run.

Grid (docs/design.md section 8): every op x square n in {8..1024} and tall {64x32, 256x128, 1024x512} x batch in
{1, 64, 1024, 16384}, capped at batch*m*n <= 2^27. CUDA-event timing (JAX: wall clock around
block_until_ready) after warm-up; best and median. Roofline: max(bytes / measured copy bandwidth,
nominal LAPACK flops / fp32 peak). Writes <slug>.json, <slug>.md and <slug>.png into --out.

Peers that fail are recorded as errors; peer points whose time, from benchmarks/peers/<device>.md,
would blow the per-point cap are skipped and say so, so the whole grid fits in a few minutes.

    python benchmarks/run_gpu.py --out bench-out            # full grid
    python benchmarks/run_gpu.py --out bench-out --quick    # a handful of points
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import re
import statistics
import sys
import time
import traceback
from pathlib import Path

# JAX must not grab 75% of the GPU before torch and CuPy allocate.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import torch
from metal_linalg_torch._shared import bench as shared

OPS = shared.OPS
MAX_ELEMS = shared.MAX_WORK
FP32_PEAK = 67e12  # H200 SXM plain fp32 (non-tensor) FLOP/s, datasheet
IMPLS = ("ours", "torch", "cupy", "jax")
HERE = Path(__file__).resolve().parent


# The large-matrix grid: square n in {256..4096}, tall 1024x512, 3000x500, 4096x1024 and wide
# 512x1024, batch in {1, 8, 64}, capped at batch * m * n * min(m, n) <= 2^36.
LARGE_SHAPES = [(n, n) for n in (256, 512, 1024, 2048, 4096)] + [
    (1024, 512),
    (3000, 500),
    (4096, 1024),
    (512, 1024),
]
LARGE_BATCHES = (1, 8, 64)


def large_grid() -> list[tuple[str, int, int, int]]:
    pts = []
    for op in OPS:
        for m, n in LARGE_SHAPES:
            if op in ("eigh", "eigvalsh") and m != n:
                continue
            for b in LARGE_BATCHES:
                if b * m * n * min(m, n) <= 1 << 36:
                    pts.append((op, m, n, b))
    return pts


def grid(quick: bool) -> list[tuple[str, int, int, int]]:
    """The shared benchmark grid (both packages' `bench`), or a handful of points."""
    if quick:
        points = shared.grid(OPS, [(8, 8), (32, 32), (64, 64), (64, 32)], (1024, 16384))
    else:
        points = shared.grid(OPS)
    return [(p.op, p.m, p.n, p.batch) for p in points]


# ---- nominal work per matrix (the shared counts) ----

flops = shared.nominal_flops


def io_bytes(op: str, m: int, n: int) -> float:
    return 4.0 * (m * n + shared.output_floats(op, m, n))


# ---- peers file: skip peer points known to take far longer than the cap ----


def load_peer_file(
    path: Path,
) -> dict[tuple[str, int, int, str], list[tuple[int, float]]]:
    table: dict[tuple[str, int, int, str], list[tuple[int, float]]] = {}
    if not path.exists():
        return table
    row = re.compile(r"^\|\s*(\w+)\s*\|\s*(\d+)x(\d+)\s*\|\s*(\d+)\s*\|(.*)\|\s*$")
    for line in path.read_text().splitlines():
        mt = row.match(line)
        if not mt:
            continue
        op, m, n, b = mt.group(1), int(mt.group(2)), int(mt.group(3)), int(mt.group(4))
        cells = [c.strip() for c in mt.group(5).split("|")]
        for impl, cell in zip(("torch", "cupy", "jax"), cells[:3]):
            try:
                table.setdefault((op, m, n, impl), []).append((b, float(cell)))
            except ValueError:
                pass
    return table


def estimate(known: dict, impl: str, op: str, m: int, n: int, batch: int):
    """(ms, how) for one call, from the nearest known point of impl and op, or (None, "").

    known[(impl, op)] holds (m, n, batch, ms, source) rows: the peers file and this run's
    measurements. Same shape: scaled by batch; otherwise by batch x nominal flops."""
    rows = known.get((impl, op), [])
    same = [r for r in rows if (r[0], r[1]) == (m, n)]
    if same:
        bm, bn, b, t, src = min(same, key=lambda r: abs(math.log(r[2] / batch)))
        return (t if b == batch else t * batch / b), src
    if not rows:
        return None, ""

    # Peers switch algorithms with the shape (cuSOLVER's batched paths stop at n = 32), so take
    # the most pessimistic of the points within a factor of about two in each dimension.
    def dist(r):
        return abs(math.log(r[0] / m)) + abs(math.log(r[1] / n))

    near = [r for r in rows if dist(r) <= 1.4] or [min(rows, key=dist)]
    work = batch * flops(op, m, n)
    best = max(near, key=lambda r: r[3] / (r[2] * flops(op, r[0], r[1])))
    bm, bn, b, t, src = best
    return t * work / (b * flops(op, bm, bn)), f"{src}, scaled from {bm}x{bn} x{b}"


def load_known(path: Path) -> dict:
    known: dict = {}
    for (op, m, n, impl), rows in load_peer_file(path).items():
        for b, t in rows:
            known.setdefault((impl, op), []).append((m, n, b, t, "peers file"))
    return known


# ---- implementations: each returns a callable running the op once on prepared input ----


class Impl:
    name = ""
    events = True  # timed with CUDA events on torch's current stream

    def prepare(self, x: torch.Tensor):
        return x

    def fn(self, op: str, x):
        raise NotImplementedError

    def sync(self, out) -> None:
        torch.cuda.synchronize()


class Ours(Impl):
    name = "ours"

    def __init__(self):
        import metal_linalg_torch as mlt
        from metal_linalg_torch import _lib

        self.mlt, self.lib = mlt, _lib

    def backend(self, op: str, m: int, n: int, batch: int) -> str:
        raw = self.lib.lib.ml_backend(OPS.index(op), self.lib.ML_MEMORY_CUDA, m, n, batch)
        return self.lib.text(raw)

    def fn(self, op, x):
        f = getattr(self.mlt, op)  # named as torch.linalg's, the thin SVD by default
        return lambda: f(x)


class Torch(Impl):
    name = "torch"

    def fn(self, op, x):
        la = torch.linalg
        return {
            "qr": lambda: la.qr(x),
            "eigh": lambda: la.eigh(x),
            "eigvalsh": lambda: la.eigvalsh(x),
            "svd": lambda: la.svd(x, full_matrices=False),
            "svdvals": lambda: la.svdvals(x),
        }[op]


class CuPy(Impl):
    name = "cupy"

    def __init__(self):
        import cupy

        self.cp = cupy

    def prepare(self, x):
        return self.cp.from_dlpack(x)  # same memory; both use the legacy default stream

    def fn(self, op, x):
        la = self.cp.linalg
        return {
            "qr": lambda: la.qr(x, mode="reduced"),
            "eigh": lambda: la.eigh(x),
            "eigvalsh": lambda: la.eigvalsh(x),
            "svd": lambda: la.svd(x, full_matrices=False),
            "svdvals": lambda: la.svd(x, full_matrices=False, compute_uv=False),
        }[op]

    def sync(self, out):
        self.cp.cuda.Device().synchronize()
        torch.cuda.synchronize()


class Jax(Impl):
    name = "jax"
    events = False  # JAX runs on its own streams: wall clock around block_until_ready

    def __init__(self):
        import jax
        import jax.numpy as jnp

        self.jax, self.jnp = jax, jnp
        la = jnp.linalg
        self.fns = {
            "qr": jax.jit(lambda a: la.qr(a, mode="reduced")),
            "eigh": jax.jit(lambda a: la.eigh(a)),
            "eigvalsh": jax.jit(lambda a: la.eigvalsh(a)),
            "svd": jax.jit(lambda a: la.svd(a, full_matrices=False)),
            "svdvals": jax.jit(lambda a: la.svd(a, compute_uv=False)),
        }

    def prepare(self, x):
        torch.cuda.synchronize()
        return self.jax.device_put(x.cpu().numpy())

    def fn(self, op, x):
        f = self.fns[op]
        return lambda: f(x)

    def sync(self, out):
        self.jax.block_until_ready(out)


def time_calls(impl: Impl, call, reps: int) -> list[float]:
    """Milliseconds of `reps` isolated calls (each starts on an idle device)."""
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        if impl.events:
            start, end = (
                torch.cuda.Event(enable_timing=True),
                torch.cuda.Event(enable_timing=True),
            )
            start.record()
            res = call()
            end.record()
            impl.sync(res)
            end.synchronize()
            out.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            res = call()
            impl.sync(res)
            out.append((time.perf_counter() - t0) * 1e3)
        del res
    return out


def measure(impl: Impl, call, args, over: bool) -> list[float]:
    """Times of the timed calls after a warm-up (which may compile or load)."""
    warm = time_calls(impl, call, 1)[0]
    if warm > 4 * args.cap_ms:  # slow even allowing for compilation: one sample is enough
        return [warm]
    t1 = time_calls(impl, call, 1)[0]
    if t1 > args.cap_ms:
        return [t1]
    reps = int(max(2, min(args.reps if not over else 3, args.point_ms / max(t1, 1e-3))))
    return [t1] + time_calls(impl, call, reps)


def warm_up(impls: dict) -> None:
    """Imports, handles and first-call costs of every implementation, outside any timing."""
    x = torch.randn(2, 6, 6, device="cuda")
    x = x @ x.mT
    for name, impl in impls.items():
        for op in OPS:
            try:
                impl.sync(impl.fn(op, impl.prepare(x))())
            except Exception as exc:  # noqa: BLE001  (reported again at the real points)
                print(f"warm-up {name} {op}: {short_error(exc)}")


def short_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def make_input(op: str, m: int, n: int, batch: int, seed: int) -> torch.Tensor:
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(batch, m, n, device="cuda", generator=g)
    if op in ("eigh", "eigvalsh"):
        a = a.mT @ a / n  # A^T A, as the peers file measured
        a = (a + a.mT) / 2
    return a.contiguous()


def copy_bandwidth() -> float:
    """Device-to-device copy bandwidth in bytes/s, counting bytes read plus written."""
    x = torch.empty(1 << 28, device="cuda")  # 1 GiB
    y = torch.empty_like(x)
    y.copy_(x)
    best = float("inf")
    for _ in range(10):
        s, e = (
            torch.cuda.Event(enable_timing=True),
            torch.cuda.Event(enable_timing=True),
        )
        s.record()
        y.copy_(x)
        e.record()
        e.synchronize()
        best = min(best, s.elapsed_time(e) / 1e3)
    del x, y
    return 2 * (1 << 30) / best


def run(args) -> dict:
    t_start = time.perf_counter()
    device = torch.cuda.get_device_name()
    slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")
    known = load_known(HERE / "peers" / args.peers_file)
    impls: dict[str, Impl] = {}
    meta_versions = {"torch": torch.__version__}
    for cls in (Ours, Torch, CuPy, Jax):
        if cls.name not in args.impls:
            continue
        try:
            impls[cls.name] = cls()
            mod = {
                "ours": "metal_linalg_torch",
                "torch": "torch",
                "cupy": "cupy",
                "jax": "jax",
            }[cls.name]
            meta_versions[cls.name] = getattr(sys.modules[mod], "__version__", "?")
        except Exception as exc:  # noqa: BLE001  (a missing peer is recorded, not fatal)
            meta_versions[cls.name] = "unavailable: " + short_error(exc)
    if args.force_gpu and "ours" in impls:
        for i in range(len(OPS)):
            impls["ours"].lib.lib.ml_policy_set(i, b"gpu_min_batch", 1)
    bw = copy_bandwidth()
    warm_up(impls)
    points = large_grid() if args.large else grid(args.quick)
    if args.extra_shapes:  # shapes off the grid, at the grid's batches and work cap
        extra = [shared.parse_shape(t) for t in args.extra_shapes]
        points += [(q.op, q.m, q.n, q.batch) for q in shared.grid(OPS, extra)]
    if args.ops:
        points = [p for p in points if p[0] in args.ops]
    if args.shapes:
        points = [p for p in points if f"{p[1]}x{p[2]}" in args.shapes]
    # The targets first (n <= 64, batch >= 1024), so a time budget cuts the rest.
    order = sorted(
        range(len(points)),
        key=lambda i: (not (max(points[i][1:3]) <= 64 and points[i][3] >= 1024), i),
    )
    results = {
        "meta": {
            "device": device,
            "slug": slug,
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "versions": meta_versions,
            "copy_bandwidth_Bps": bw,
            "fp32_peak_flops": FP32_PEAK,
            "cap_ms": args.cap_ms,
            "budget_s": args.budget_s,
            "force_gpu": bool(args.force_gpu),
            "command": " ".join(sys.argv),
            "timing": "CUDA events around one call after warm-up (JAX: wall clock around "
            "block_until_ready); best and median of the timed calls",
        },
        "points": [],
    }
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, inflight_path = out_dir / f"{slug}.json", out_dir / "inflight.json"
    crashed = None
    if args.resume and json_path.exists():
        # A call that killed the process (a segfault in a library) is recorded as an error
        # and the grid continues where it stopped.
        prev = json.loads(json_path.read_text())
        results["points"] = [r for r in prev["points"] if "_order" in r]
        t_start -= prev["meta"].get("partial_elapsed_s", 0.0)
        for r in results["points"]:
            for name, v in r["impls"].items():
                if "best_ms" in v:
                    row = (r["m"], r["n"], r["batch"], v["best_ms"], "measured")
                    known.setdefault((name, r["op"]), []).append(row)
        if inflight_path.exists():
            crashed = json.loads(inflight_path.read_text())
    done = {r["_order"] for r in results["points"]}
    for idx in order:
        if idx in done:
            continue
        op, m, n, batch = points[idx]
        x = make_input(op, m, n, batch, seed=idx)
        rec = {"op": op, "m": m, "n": n, "batch": batch, "impls": {}, "_order": idx}
        if "ours" in impls:
            rec["backend"] = impls["ours"].backend(op, m, n, batch)
        for name, impl in impls.items():
            elapsed = time.perf_counter() - t_start
            over = elapsed > args.budget_s
            if elapsed > args.budget_s + args.ours_extra_s:
                rec["impls"][name] = {"skipped": "time budget"}
                continue
            if name != "ours":
                est, how = estimate(known, name, op, m, n, batch)
                if est is not None and est > args.cap_ms:
                    rec["impls"][name] = {"skipped": f"too slow ({how}: {est:.0f} ms)"}
                    continue
                if over:
                    rec["impls"][name] = {"skipped": "time budget"}
                    continue
            if crashed and crashed == {"order": idx, "impl": name}:
                rec["impls"][name] = {"error": "the process crashed in this call (resumed)"}
                continue
            inflight_path.write_text(json.dumps({"order": idx, "impl": name}))
            try:
                times = measure(impl, impl.fn(op, impl.prepare(x)), args, over)
                rec["impls"][name] = {
                    "best_ms": min(times),
                    "median_ms": statistics.median(times),
                    "samples": len(times),
                }
                known.setdefault((name, op), []).append((m, n, batch, min(times), "measured"))
            except Exception as exc:  # noqa: BLE001  (peer failures are results)
                rec["impls"][name] = {"error": short_error(exc)}
                if args.verbose:
                    traceback.print_exc()
                torch.cuda.synchronize()
        del x
        summarize(rec, bw)
        results["points"].append(rec)
        print(line_for(rec), flush=True)
        results["meta"]["partial_elapsed_s"] = time.perf_counter() - t_start
        write_json(results, json_path)
        inflight_path.unlink(missing_ok=True)
    results["points"].sort(key=lambda r: r.pop("_order"))
    results["meta"]["elapsed_s"] = time.perf_counter() - t_start
    write_json(results, json_path)
    (out_dir / f"{slug}.md").write_text(markdown(results))
    try:
        plot(results, out_dir / f"{slug}.png")
    except Exception as exc:  # noqa: BLE001  (the numbers matter more than the figure)
        print("plot failed:", short_error(exc))
    return results


def summarize(rec: dict, bw: float) -> None:
    op, m, n, b = rec["op"], rec["m"], rec["n"], rec["batch"]
    roof_s = max(b * io_bytes(op, m, n) / bw, b * flops(op, m, n) / FP32_PEAK)
    rec["roofline_ms"] = roof_s * 1e3
    peers = {k: v["best_ms"] for k, v in rec["impls"].items() if k != "ours" and "best_ms" in v}
    if peers:
        best = min(peers, key=peers.get)
        rec["best_peer"], rec["best_peer_ms"] = best, peers[best]
    ours = rec["impls"].get("ours", {})
    if "best_ms" in ours:
        rec["us_per_matrix"] = ours["best_ms"] * 1e3 / b
        rec["roofline_frac"] = rec["roofline_ms"] / ours["best_ms"]
        if peers:
            rec["speedup_vs_best_peer"] = rec["best_peer_ms"] / ours["best_ms"]


def write_json(results: dict, path: Path) -> None:
    path.write_text(json.dumps(results, indent=1))


def cell(v: dict | None) -> str:
    if v is None:
        return "-"
    if "best_ms" in v:
        return f"{v['best_ms']:.3f}"
    if "skipped" in v:
        return "skipped: " + v["skipped"]
    return "error: " + v["error"].replace("|", "/")[:80]


def line_for(rec: dict) -> str:
    ims = " ".join(f"{k}={cell(v)}" for k, v in rec["impls"].items())
    sp = rec.get("speedup_vs_best_peer")
    extra = f" x{sp:.2f}" if sp else ""
    return f"{rec['op']:8s} {rec['m']}x{rec['n']:<5d} b={rec['batch']:<6d} {ims}{extra}"


def markdown(results: dict) -> str:
    meta = results["meta"]
    lines = [
        f"# metal-linalg vs torch.linalg, CuPy and JAX on {meta['device']}",
        "",
        f"Date {meta['date']}; versions: "
        + ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
        + ".",
        (
            f"Copy bandwidth measured {meta['copy_bandwidth_Bps'] / 1e12:.2f} TB/s; fp32 peak "
            f"{meta['fp32_peak_flops'] / 1e12:.0f} TFLOP/s (nominal). {meta['timing']}."
        ),
        (
            "Times are best (median) ms of one call; roofline = max(bytes / bandwidth, "
            "nominal LAPACK flops / peak) over our best time; speedup = best peer / ours."
        ),
        f"Command: `{meta['command']}`",
        "",
        (
            "| op | shape | batch | backend | ours ms (median) | us/matrix | torch ms | cupy ms "
            "| jax ms | best peer | speedup | roofline |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["points"]:
        ours = r["impls"].get("ours", {})
        ours_s = (
            f"{ours['best_ms']:.3f} ({ours['median_ms']:.3f})"
            if "best_ms" in ours
            else cell(ours or None)
        )
        upm = f"{r['us_per_matrix']:.3f}" if "us_per_matrix" in r else "-"
        sp = f"{r['speedup_vs_best_peer']:.2f}x" if "speedup_vs_best_peer" in r else "-"
        rf = f"{100 * r['roofline_frac']:.1f}%" if "roofline_frac" in r else "-"
        bp = r.get("best_peer", "-")
        lines.append(
            f"| {r['op']} | {r['m']}x{r['n']} | {r['batch']} | {r.get('backend', '-')} | {ours_s} "
            f"| {upm} | {cell(r['impls'].get('torch'))} | {cell(r['impls'].get('cupy'))} "
            f"| {cell(r['impls'].get('jax'))} | {bp} | {sp} | {rf} |"
        )
    lines.append("")
    lines.append(f"Elapsed {meta.get('elapsed_s', 0):.0f} s.")
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(OPS), 1, figsize=(16, 4 * len(OPS)))
    colors = {
        "ours": "tab:red",
        "torch": "tab:blue",
        "cupy": "tab:green",
        "jax": "tab:purple",
    }
    for ax, op in zip(axes, OPS):
        pts = [r for r in results["points"] if r["op"] == op]
        labels = [f"{r['m']}x{r['n']}\nx{r['batch']}" for r in pts]
        xs = range(len(pts))
        for impl, color in colors.items():
            ys = [r["impls"].get(impl, {}).get("best_ms", float("nan")) for r in pts]
            ax.semilogy(
                xs,
                ys,
                "o-" if impl == "ours" else ".--",
                color=color,
                label=impl,
                markersize=6 if impl == "ours" else 5,
                linewidth=1,
            )
        ax.semilogy(xs, [r["roofline_ms"] for r in pts], ":", color="gray", label="roofline")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, fontsize=6)
        ax.set_ylabel("ms per call (best)")
        ax.set_title(f"{op} on {results['meta']['device']}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, ncol=5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="bench-out", help="output folder for JSON, Markdown and PNG")
    p.add_argument("--quick", action="store_true", help="a few points only (smoke run)")
    p.add_argument(
        "--large",
        action="store_true",
        help="the large-matrix grid (n 256..4096, tall 1024x512, 3000x500 and 4096x1024, wide 512x1024, "
        "batch 1/8/64, batch*m*n*min(m,n) <= 2^36) instead of the small-matrix one",
    )
    p.add_argument("--ops", nargs="*", choices=OPS, help="only these ops")
    p.add_argument("--shapes", nargs="*", help="only these shapes, e.g. 64x64 1024x512")
    p.add_argument("--impls", nargs="*", default=list(IMPLS), choices=IMPLS)
    p.add_argument(
        "--extra-shapes",
        nargs="*",
        default=[],
        help="shapes off the grid to add at the grid's batches, e.g. 17x17 100x40",
    )
    p.add_argument(
        "--cap-ms",
        type=float,
        default=1500.0,
        help="skip a peer point whose peers-file estimate exceeds this; one sample "
        "when the warm-up exceeds it",
    )
    p.add_argument("--point-ms", type=float, default=400.0, help="timing budget per point and impl")
    p.add_argument("--reps", type=int, default=15, help="most timed calls per point and impl")
    p.add_argument(
        "--budget-s",
        type=float,
        default=420.0,
        help="after this many seconds, peers are skipped (ours still runs)",
    )
    p.add_argument(
        "--ours-extra-s",
        type=float,
        default=90.0,
        help="seconds after --budget-s during which ours still runs (then everything is skipped)",
    )
    p.add_argument("--peers-file", default="h200.md", help="file under benchmarks/peers/")
    p.add_argument(
        "--force-gpu",
        action="store_true",
        help="set gpu_min_batch=1 so every shape a GPU kernel covers runs on the GPU",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the grid in --out after a crash, recording the crashing call as an error",
    )
    p.add_argument("--verbose", action="store_true")
    p.add_argument(
        "--report",
        metavar="JSON",
        help="only write the Markdown table and plot of a (possibly partial) results file",
    )
    args = p.parse_args(argv)
    if args.report:
        path = Path(args.report)
        results = json.loads(path.read_text())
        results["points"].sort(key=lambda r: r.pop("_order", 0))
        results["meta"].setdefault("elapsed_s", results["meta"].get("partial_elapsed_s", 0.0))
        path.with_suffix(".md").write_text(markdown(results))
        plot(results, path.with_suffix(".png"))
        return 0
    if not torch.cuda.is_available():
        print("run_gpu.py needs a CUDA device", file=sys.stderr)
        return 2
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
