"""eigh on MLX's GPU stream (metal_linalg's primitive on a CUDA MLX) against the torch package's
CUDA path on the same data and against mx.linalg.eigh on MLX's CPU stream (MLX's only option).

    python benchmarks/h200_mlx_bench.py --out DIR [--reps 50] [--breakdown | --no-breakdown]

Writes DIR/mlx_gpu_eigh.json, .md and .png (--report JSON rewrites .md and .png from a result).
Times are medians of wall time per call including evaluation (mx.eval for MLX,
torch.cuda.synchronize for torch), after warm-up.
Targets: MLX GPU within 1.2x of the torch package; >= 100x faster than mx.linalg on the CPU.

After the main table (or alone with --breakdown; --no-breakdown leaves it out) a breakdown of
where an MLX call's time goes, per case: graph construction only, the floor of an MLX evaluation
(two MLX adds with eigh's output sizes), the full call and its host part (mx.async_eval), the
full call under each METAL_LINALG_MLX_CUDA_LAUNCH value and with MLX's CUDA graphs off (each in
a child process: both variables are read once per process), the torch package's call and its
host part, and the GPU time of one torch package call (CUDA events). It goes into
DIR/mlx_gpu_call_breakdown.json and .md, and into mlx_gpu_eigh.json ("breakdown") and .md when
the main table ran too. --stream cpu runs the breakdown's MLX part on MLX's CPU stream: only a
check of this script on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import metal_linalg as ml
import mlx.core as mx
import numpy as np

CASES = ((16384, 8), (1024, 64))

# The breakdown's child processes: name, environment overrides, what the table calls them.
VARIANTS = (
    (
        "capture",
        {"METAL_LINALG_MLX_CUDA_LAUNCH": "capture"},
        "METAL_LINALG_MLX_CUDA_LAUNCH=capture",
    ),
    ("direct", {"METAL_LINALG_MLX_CUDA_LAUNCH": "direct"}, "METAL_LINALG_MLX_CUDA_LAUNCH=direct"),
    (
        "no_mlx_graphs",
        {"METAL_LINALG_MLX_CUDA_LAUNCH": "capture", "MLX_USE_CUDA_GRAPHS": "0"},
        "MLX_USE_CUDA_GRAPHS=0 (MLX launches every kernel directly)",
    ),
)
CHILD_TAG = "BREAKDOWN_CHILD "


def symmetric(batch: int, n: int, seed: int) -> np.ndarray:
    b = np.random.default_rng(seed).standard_normal((batch, n, n)).astype(np.float32)
    return (b + np.swapaxes(b, -1, -2)) / 2


def median_s(fn, reps: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def time_mlx_gpu(a: mx.array, reps: int) -> tuple[float, np.ndarray]:
    gpu = mx.default_stream(mx.gpu)

    def run():
        w, v = ml.eigh(a, stream=gpu)
        mx.eval(w, v)
        return w

    t = median_s(run, reps)
    return t, np.array(run())


def time_mx_linalg_cpu(a: mx.array, reps: int) -> float:
    def run():
        w, v = mx.linalg.eigh(a, stream=mx.cpu)
        mx.eval(w, v)

    return median_s(run, reps, warmup=1)


def time_torch(data: np.ndarray, reps: int):
    try:
        import metal_linalg_torch as mt
        import torch
    except ImportError as err:
        return None, None, f"torch package unavailable: {err}"
    t = torch.from_numpy(data).cuda()

    def run():
        w, _ = mt.eigh(t)
        torch.cuda.synchronize()
        return w

    sec = median_s(run, reps)
    return sec, run().cpu().numpy(), None


def submit_ms(make, reps: int, warmup: int = 10) -> float:
    """Median ms of make() plus mx.async_eval of its outputs (the host part of an evaluation);
    the wait for them runs after each timed part, untimed."""
    times = []
    for k in range(warmup + reps):
        t0 = time.perf_counter()
        outs = make()
        mx.async_eval(*outs)
        t1 = time.perf_counter()
        mx.eval(*outs)
        if k >= warmup:
            times.append(t1 - t0)
    return statistics.median(times) * 1e3


def mlx_case(s, i: int, batch: int, n: int, reps: int) -> dict:
    """The MLX part of the breakdown for case i on stream s, in this process (its launch mode)."""
    data = symmetric(batch, n, i)
    a = mx.array(data)
    w0 = mx.zeros((batch, n), dtype=mx.float32)
    mx.eval(a, w0)

    def build():
        return ml.eigh(a, stream=s)

    def floor():
        return mx.add(a, 1.0, stream=s), mx.add(w0, 1.0, stream=s)

    row = {
        "batch": batch,
        "n": n,
        "build_ms": median_s(build, reps, warmup=10) * 1e3,
        "floor_ms": median_s(lambda: mx.eval(*floor()), reps, warmup=10) * 1e3,
        "floor_submit_ms": submit_ms(floor, reps),
        "full_ms": median_s(lambda: mx.eval(*build()), reps, warmup=10) * 1e3,
        "full_submit_ms": submit_ms(build, reps),
    }
    w, v = build()
    mx.eval(w, v)
    w_ref = np.linalg.eigvalsh(data.astype(np.float64))
    row["max_abs_err_eigvals_vs_float64"] = float(np.abs(np.array(w) - w_ref).max())
    return row


def mlx_breakdown(stream_name: str, reps: int) -> list:
    """The MLX part of the breakdown, per case."""
    s = mx.default_stream(mx.gpu if stream_name == "gpu" else mx.cpu)
    return [mlx_case(s, i, batch, n, reps) for i, (batch, n) in enumerate(CASES)]


def torch_breakdown(data: np.ndarray, reps: int) -> dict:
    """The torch package's call, its host part and the GPU time of one call (CUDA events)."""
    none = {"torch_ms": None, "torch_submit_ms": None, "torch_gpu_ms": None}
    try:
        import metal_linalg_torch as mt
        import torch
    except ImportError as err:
        return {**none, "torch_note": f"torch package unavailable: {err}"}
    if not torch.cuda.is_available():
        return {**none, "torch_note": "torch.cuda unavailable"}
    t = torch.from_numpy(data).cuda()

    def full():
        mt.eigh(t)
        torch.cuda.synchronize()

    out = {"torch_ms": median_s(full, reps, warmup=10) * 1e3}
    times = []
    for k in range(10 + reps):
        t0 = time.perf_counter()
        mt.eigh(t)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        if k >= 10:
            times.append(t1 - t0)
    out["torch_submit_ms"] = statistics.median(times) * 1e3
    # A busy-wait kernel first keeps the GPU busy while the call is enqueued, so that the start
    # event completes right before the call's own kernels rather than when the host gets there.
    sleep = getattr(torch.cuda, "_sleep", None)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    gpu = []
    for k in range(10 + reps):
        if sleep is not None:
            sleep(2_000_000)
        start.record()
        mt.eigh(t)
        end.record()
        end.synchronize()
        if k >= 10:
            gpu.append(start.elapsed_time(end))
    out["torch_gpu_ms"] = statistics.median(gpu)
    out["torch_note"] = (
        None if sleep is not None else "no torch.cuda._sleep: GPU time includes launch"
    )
    return out


def run_variant(env_over: dict, stream_name: str, reps: int):
    """mlx_breakdown in a child process with env_over set: its rows, or an error text."""
    env = dict(os.environ)
    env.update(env_over)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", stream_name, "--reps", str(reps)]
    try:
        done = subprocess.run(
            cmd, check=False, env=env, capture_output=True, text=True, timeout=300
        )
    except subprocess.TimeoutExpired:
        return "timed out after 300 s"
    for line in done.stdout.splitlines():
        if line.startswith(CHILD_TAG):
            return json.loads(line[len(CHILD_TAG) :])
    tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
    return f"exit {done.returncode}: " + " | ".join(tail)


def breakdown(stream_name: str, reps: int) -> dict:
    """Where a call's time goes, per case (see the module's doc)."""
    own = mlx_breakdown(stream_name, reps)
    variants = {}
    for name, env_over, _ in VARIANTS:
        variants[name] = run_variant(env_over, stream_name, reps)
        print(
            f"breakdown variant {name}: "
            + ("done" if isinstance(variants[name], list) else variants[name])
        )
    cases = []
    for i, (batch, n) in enumerate(CASES):
        c = dict(own[i])
        c["variants"] = {
            name: rows[i] if isinstance(rows, list) else {"error": rows}
            for name, rows in variants.items()
        }
        c.update(torch_breakdown(symmetric(batch, n, i), reps))
        cases.append(c)
        print(json.dumps(c))
    return {
        "reps": reps,
        "stream": stream_name,
        "launch_env": os.environ.get("METAL_LINALG_MLX_CUDA_LAUNCH", ""),
        "variants": {name: label for name, _, label in VARIANTS},
        "cases": cases,
    }


def _ms(x, fmt: str = ".3f") -> str:
    return "n/a" if x is None else format(x, fmt)


def _diff(x, *ys):
    if x is None or any(y is None for y in ys):
        return None
    return x - sum(ys)


def breakdown_lines(bd: dict) -> list:
    """The Markdown table "where a call's time goes": a column per case."""
    cases = bd["cases"]
    s = bd.get("stream", "gpu")
    env = bd.get("launch_env") or "unset"
    rows = [
        (f"(a) graph construction only: `ml.eigh(a, stream={s})`, no evaluation", "build_ms"),
        ("(b) MLX evaluation floor: `mx.eval` of two MLX adds of eigh's output sizes", "floor_ms"),
        ("(b) its host part: the adds and `mx.async_eval`", "floor_submit_ms"),
        (f"(c) full call: `ml.eigh` + `mx.eval` (METAL_LINALG_MLX_CUDA_LAUNCH {env})", "full_ms"),
        ("(c) its host part: `ml.eigh` + `mx.async_eval`", "full_submit_ms"),
    ]
    table = []
    for label, key in rows:
        table.append((label, [c.get(key) for c in cases], ".3f"))
    for name, label in bd["variants"].items():
        vs = [c["variants"].get(name, {}) for c in cases]
        table.append((f"(d) full call, {label}", [v.get("full_ms") for v in vs], ".3f"))
        table.append((f"(d) its host part, {label}", [v.get("full_submit_ms") for v in vs], ".3f"))
    table += [
        (
            "(e) torch package: `mt.eigh` + `torch.cuda.synchronize`",
            [c.get("torch_ms") for c in cases],
            ".3f",
        ),
        ("(e) its host part: `mt.eigh` alone", [c.get("torch_submit_ms") for c in cases], ".3f"),
        (
            "(f) GPU time of one torch package call (CUDA events)",
            [c.get("torch_gpu_ms") for c in cases],
            ".3f",
        ),
        (
            "(c) - (e): the gap to the torch package",
            [_diff(c.get("full_ms"), c.get("torch_ms")) for c in cases],
            ".3f",
        ),
        (
            "(c) - (a) - (b): the call beyond construction and the evaluation floor",
            [_diff(c.get("full_ms"), c.get("build_ms"), c.get("floor_ms")) for c in cases],
            ".3f",
        ),
        (
            "(c) max eigenvalue error vs float64",
            [c.get("max_abs_err_eigvals_vs_float64") for c in cases],
            ".2e",
        ),
    ]
    for name, label in bd["variants"].items():
        vs = [c["variants"].get(name, {}) for c in cases]
        table.append(
            (
                f"(d) max eigenvalue error vs float64, {label}",
                [v.get("max_abs_err_eigvals_vs_float64") for v in vs],
                ".2e",
            )
        )
    lines = [
        "## Where a call's time goes",
        "",
        "| ms per call (median) | " + " | ".join(f"{c['batch']} x {c['n']}" for c in cases) + " |",
        "|---|" + "---|" * len(cases),
    ]
    for label, values, fmt in table:
        lines.append(f"| {label} | " + " | ".join(_ms(x, fmt) for x in values) + " |")
    lines.append("")
    lines.append(
        f"Medians of {bd['reps']} calls after 10 warm-up calls; each (d) variant in its own process "
        "(the variables are read once per process). Host parts exclude the wait, which follows "
        "each timed part untimed. (f): CUDA events around the call after a busy-wait kernel."
    )
    for name in bd["variants"]:
        errs = {c["variants"].get(name, {}).get("error") for c in cases} - {None}
        for e in errs:
            lines.append(f"Variant {name} failed: {e}")
    notes = {c.get("torch_note") for c in cases} - {None}
    lines += [f"torch: {x}" for x in sorted(notes)]
    return lines


def write_breakdown(meta: dict, bd: dict, out: str) -> None:
    """Writes out/mlx_gpu_call_breakdown.{json,md}."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "mlx_gpu_call_breakdown.json"), "w") as f:
        json.dump({"meta": meta, "breakdown": bd}, f, indent=2)
    lines = [f"# eigh through metal_linalg on MLX ({meta['device']}, MLX {meta['mlx']})", ""]
    lines += breakdown_lines(bd)
    with open(os.path.join(out, "mlx_gpu_call_breakdown.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def report(meta: dict, rows: list, out: str, bd: dict | None = None) -> None:
    """Writes out/mlx_gpu_eigh.{json,md,png}."""
    os.makedirs(out, exist_ok=True)
    data = {"meta": meta, "rows": rows}
    if bd is not None:
        data["breakdown"] = bd
    with open(os.path.join(out, "mlx_gpu_eigh.json"), "w") as f:
        json.dump(data, f, indent=2)
    lines = [
        f"# eigh on MLX's GPU stream ({meta['device']}, MLX {meta['mlx']})",
        "",
        (
            "| batch x n | kernel | MLX GPU ms | torch pkg CUDA ms | ratio (<= 1.2) "
            "| mx.linalg CPU ms | speed-up (>= 100) | max err vs float64 |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        tt = "n/a" if r["torch_package_cuda_ms"] is None else f"{r['torch_package_cuda_ms']:.3f}"
        ratio = "n/a" if r["mlx_gpu_vs_torch"] is None else f"{r['mlx_gpu_vs_torch']:.2f}"
        lines.append(
            f"| {r['batch']} x {r['n']} | {r['kernel']} | {r['mlx_gpu_ms']:.3f} | {tt} | {ratio} "
            f"| {r['mx_linalg_cpu_ms']:.1f} | {r['speedup_vs_mx_linalg_cpu']:.0f}x "
            f"| {r['max_abs_err_eigvals_vs_float64']:.2e} |"
        )
    lines.append("")
    lines.append(
        "Median wall time per call including evaluation and synchronisation, after warm-up; "
        f"{meta['reps']} repetitions on the GPU, {meta['cpu_reps']} for mx.linalg on the CPU."
    )
    if bd is not None:
        lines += [""] + breakdown_lines(bd)
    with open(os.path.join(out, "mlx_gpu_eigh.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(meta, rows, os.path.join(out, "mlx_gpu_eigh.png"))


def plot(meta: dict, rows: list, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    impls = (
        ("mlx_gpu_ms", "metal_linalg, MLX GPU stream"),
        ("torch_package_cuda_ms", "metal_linalg_torch, CUDA"),
        ("mx_linalg_cpu_ms", "mx.linalg.eigh, CPU stream"),
    )
    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.27
    for k, (key, label) in enumerate(impls):
        xs = [i + (k - 1) * width for i in range(len(rows))]
        ys = [r[key] if r[key] is not None else float("nan") for r in rows]
        ax.bar(xs, ys, width, label=label)
        for x, y in zip(xs, ys):
            ax.annotate(f"{y:.3g}", (x, y), ha="center", va="bottom", fontsize=7)
    ax.set_yscale("log")
    ax.set_xticks(range(len(rows)), [f"eigh {r['n']}x{r['n']} x{r['batch']}" for r in rows])
    ax.set_ylabel("ms per call (median, log scale)")
    ax.set_title(f"eigh on {meta['device']}, MLX {meta['mlx']}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out")
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--cpu-reps", type=int, default=5)
    p.add_argument(
        "--report", metavar="JSON", help="only rewrite the .md and .png of a JSON result"
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--breakdown", action="store_true", help="only the breakdown")
    which.add_argument("--no-breakdown", action="store_true", help="leave the breakdown out")
    p.add_argument("--breakdown-reps", type=int, default=200)
    p.add_argument(
        "--stream",
        choices=("gpu", "cpu"),
        default="gpu",
        help="cpu: the breakdown's MLX part on MLX's CPU stream (checks this script without a GPU)",
    )
    p.add_argument("--child", choices=("gpu", "cpu"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(CHILD_TAG + json.dumps(mlx_breakdown(args.child, args.reps)))
        return
    if not args.out:
        p.error("--out is required")
    if args.report:
        with open(args.report) as f:
            data = json.load(f)
        report(data["meta"], data["rows"], args.out, data.get("breakdown"))
        return
    os.makedirs(args.out, exist_ok=True)
    if args.stream == "gpu" and (not mx.is_available(mx.gpu) or ml.gpu_path() != "cuda"):
        raise SystemExit(f"needs a CUDA MLX with a GPU (gpu_path={ml.gpu_path()})")
    meta = {
        "device": ml.device_name(),
        "mlx": mx.__version__,
        "python": platform.python_version(),
        "reps": args.reps,
        "cpu_reps": args.cpu_reps,
    }
    rows = None
    if not args.breakdown and args.stream == "gpu":
        rows = main_table(args)
        report(meta, rows, args.out)
    if args.no_breakdown:
        return
    bd = breakdown(args.stream, args.breakdown_reps)
    write_breakdown(meta, bd, args.out)
    if rows is not None:
        report(meta, rows, args.out, bd)


def main_table(args) -> list:
    rows = []
    for i, (batch, n) in enumerate(CASES):
        data = symmetric(batch, n, i)
        a = mx.array(data)
        mx.eval(a)
        kernel = ml._ops.ext.gpu_backend(1, n, n, batch)
        t_gpu, w_gpu = time_mlx_gpu(a, args.reps)
        t_cpu = time_mx_linalg_cpu(a, args.cpu_reps)
        t_torch, w_torch, note = time_torch(data, args.reps)
        w_ref = np.linalg.eigvalsh(data.astype(np.float64))
        row = {
            "batch": batch,
            "n": n,
            "kernel": kernel,
            "mlx_gpu_ms": t_gpu * 1e3,
            "mx_linalg_cpu_ms": t_cpu * 1e3,
            "torch_package_cuda_ms": None if t_torch is None else t_torch * 1e3,
            "mlx_gpu_vs_torch": None if t_torch is None else t_gpu / t_torch,
            "speedup_vs_mx_linalg_cpu": t_cpu / t_gpu,
            "max_abs_err_eigvals_vs_float64": float(np.abs(w_gpu - w_ref).max()),
            "max_abs_diff_vs_torch_package": (
                None if w_torch is None else float(np.abs(w_gpu - w_torch).max())
            ),
            "note": note,
        }
        row["target_within_1.2x_of_torch"] = (
            None if row["mlx_gpu_vs_torch"] is None else row["mlx_gpu_vs_torch"] <= 1.2
        )
        row["target_100x_vs_mx_linalg_cpu"] = row["speedup_vs_mx_linalg_cpu"] >= 100
        rows.append(row)
        print(json.dumps(row))
    return rows


if __name__ == "__main__":
    main()
