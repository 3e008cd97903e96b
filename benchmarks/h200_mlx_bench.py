"""eigh on MLX's GPU stream (metal_linalg's primitive on a CUDA MLX) against the torch package's
CUDA path on the same data and against mx.linalg.eigh on MLX's CPU stream (MLX's only option).

    python benchmarks/h200_mlx_bench.py --out DIR [--reps 50]

Writes DIR/mlx_gpu_eigh.json, .md and .png (--report JSON rewrites .md and .png from a result).
Times are medians of wall time per call including evaluation (mx.eval for MLX,
torch.cuda.synchronize for torch), after warm-up.
Targets: MLX GPU within 1.2x of the torch package; >= 100x faster than mx.linalg on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import metal_linalg as ml
import mlx.core as mx
import numpy as np

CASES = ((16384, 8), (1024, 64))


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


def report(meta: dict, rows: list, out: str) -> None:
    """Writes out/mlx_gpu_eigh.{json,md,png}."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "mlx_gpu_eigh.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=2)
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
    p.add_argument("--out", required=True)
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--cpu-reps", type=int, default=5)
    p.add_argument(
        "--report", metavar="JSON", help="only rewrite the .md and .png of a JSON result"
    )
    args = p.parse_args()
    if args.report:
        with open(args.report) as f:
            data = json.load(f)
        report(data["meta"], data["rows"], args.out)
        return
    os.makedirs(args.out, exist_ok=True)
    if not mx.is_available(mx.gpu) or ml.gpu_path() != "cuda":
        raise SystemExit(f"needs a CUDA MLX with a GPU (gpu_path={ml.gpu_path()})")
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
    meta = {
        "device": ml.device_name(),
        "mlx": mx.__version__,
        "python": platform.python_version(),
        "reps": args.reps,
        "cpu_reps": args.cpu_reps,
    }
    report(meta, rows, args.out)


if __name__ == "__main__":
    main()
