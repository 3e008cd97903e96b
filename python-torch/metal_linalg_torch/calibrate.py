"""Measure this machine and write the per-machine policy file the core reads (ml_policy_file()).

CPU: for each op, the largest n up to which the portable CPU kernel beats LAPACK on a batch
(cpu_kernel_max_n). CUDA (when the core has it): the smallest batch at which device tensors are
faster on the GPU than through the CPU backend (gpu_min_batch). Other fields keep their values.
"""

from __future__ import annotations

import os
import time

import torch

import metal_linalg_torch as mlt
from metal_linalg_torch import queries

OPS = ("qr", "eigh", "eigvalsh", "svd", "svdvals")
CPU_SIZES = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
GPU_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
HUGE = 1 << 30


def _fn(op):
    return getattr(mlt, op)


def _input(op, n, batch, device):
    a = torch.randn(batch, n, n, generator=torch.Generator().manual_seed(n * 7 + batch))
    if op in ("eigh", "eigvalsh"):
        a = (a + a.mT) / 2
    return a.to(device)


def _best(fn, x, sync=None, reps=5) -> float:
    fn(x)
    times = []
    for _ in range(reps):
        if sync:
            sync()
        t0 = time.perf_counter()
        fn(x)
        if sync:
            sync()
        times.append(time.perf_counter() - t0)
    return min(times)


def cpu_kernel_max_n(op: str, batch: int = 256, log=print) -> int:
    """Largest n of CPU_SIZES below which the kernel wins every size (0: LAPACK everywhere)."""
    fn, best_n = _fn(op), 0
    try:
        for n in CPU_SIZES:
            queries.set_policy(op, cpu_kernel_max_n=HUGE)
            kernel = getattr(mlt, f"{op}_backend")(
                *((n,) if op.startswith("eig") else (n, n)), batch, device="cpu"
            )
            if not kernel.startswith("cpu:kernel"):
                break  # no portable kernel for this size
            x = _input(op, n, batch, "cpu")
            t_kernel = _best(fn, x)
            queries.set_policy(op, cpu_kernel_max_n=0)
            t_lapack = _best(fn, x)
            log(
                f"  {op:9s} n={n:3d} x{batch}: kernel {t_kernel * 1e3:8.3f} ms, lapack {t_lapack * 1e3:8.3f} ms"
            )
            if t_kernel >= t_lapack:
                break
            best_n = n
    finally:
        queries.reset_policy(op)
    return best_n


def gpu_min_batch(op: str, n: int = 32, log=print) -> int | None:
    """Smallest batch of n x n device matrices where the GPU beats the CPU route (None: never)."""
    fn, sync = _fn(op), torch.cuda.synchronize
    try:
        for batch in GPU_BATCHES:
            x = _input(op, n, batch, "cuda")
            queries.set_policy(
                op, gpu_min_batch=1, gpu_max_n=max(n, queries.policy(op)["gpu_max_n"])
            )
            if not getattr(mlt, f"{op}_backend")(
                *((n,) if op.startswith("eig") else (n, n)), batch, device="cuda"
            ).startswith("cuda:"):
                return None
            t_gpu = _best(fn, x, sync)
            queries.set_policy(op, gpu_min_batch=HUGE)
            t_cpu = _best(fn, x, sync)
            log(
                f"  {op:9s} {n}x{n} x{batch}: gpu {t_gpu * 1e3:8.3f} ms, via cpu {t_cpu * 1e3:8.3f} ms"
            )
            if t_gpu < t_cpu:
                return batch
        return None
    finally:
        queries.reset_policy(op)


def calibrate(ops=OPS, cuda: bool | None = None, log=print) -> str:
    """Measure, write the policy file, reload it; returns the file's path."""
    if cuda is None:
        cuda = torch.cuda.is_available() and queries.backends_available()["cuda"]
    lines = [
        f"# metal-linalg policy measured by `python -m metal_linalg_torch calibrate` on {mlt.device_name()}",
        f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}",
    ]
    for op in ops:
        log(f"[calibrate] {op}: CPU kernel vs LAPACK")
        lines.append(f"{op} cpu_kernel_max_n {cpu_kernel_max_n(op, log=log)}")
        if cuda:
            log(f"[calibrate] {op}: GPU vs CPU by batch")
            found = gpu_min_batch(op, log=log)
            lines.append(f"{op} gpu_min_batch {found if found is not None else HUGE}")
    path = queries.policy_file()
    if os.path.exists(path):  # keep what an earlier run measured for the other ops
        with open(path) as f:
            lines += [
                ln.rstrip("\n")
                for ln in f
                if ln.split() and ln.split()[0] in OPS and ln.split()[0] not in ops
            ]
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    queries.reload_policy()
    return path
