"""`python -m metal_linalg calibrate`: measure where the core's small-matrix CPU kernels beat
LAPACK on this machine and write the result to the per-machine policy file the core reads.

Measures the policy field cpu_kernel_max_n of every op (the CPU fields; GPU fields keep what
the file or the tuned table says). Other lines already in the file are kept.
"""

from __future__ import annotations

import time
from pathlib import Path

import mlx.core as mx
import numpy as np

OPS = ("qr", "eigh", "eigvalsh", "svd", "svdvals")
SIZES = (2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128)
FIELD = "cpu_kernel_max_n"


def add_arguments(p) -> None:
    p.add_argument(
        "--ops", default=",".join(OPS), help="comma-separated subset of " + ",".join(OPS)
    )
    p.add_argument(
        "--elements",
        type=int,
        default=2**19,
        help="matrix elements per timed batch (batch = elements / n^2, at least 4)",
    )
    p.add_argument(
        "--repeats", type=int, default=3, help="timed calls per measurement (best is kept)"
    )
    p.add_argument("--dry-run", action="store_true", help="print the result, write nothing")


def _call(op: str, x):
    import metal_linalg as ml

    out = getattr(ml, op)(x)
    mx.eval(*(out if isinstance(out, tuple) else (out,)))


def _best(op: str, x, repeats: int) -> float:
    _call(op, x)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        _call(op, x)
        best = min(best, time.perf_counter() - t)
    return best


def _backend(op: str, n: int, batch: int) -> str:
    import metal_linalg as ml

    if op.startswith("eig"):
        return getattr(ml, f"{op}_backend")(n, batch)
    return getattr(ml, f"{op}_backend")(n, n, batch)


def measure(op: str, elements: int, repeats: int, report=print) -> int | None:
    """Largest n up to which the kernel path wins (0: LAPACK everywhere); None if no kernel."""
    import metal_linalg as ml

    set_policy = getattr(ml, f"set_{op}_policy")
    reset = getattr(ml, f"reset_{op}_policy")
    rng = np.random.default_rng(0)
    crossover = 0
    had_kernel = False
    try:
        for n in SIZES:
            batch = max(4, elements // (n * n))
            a = rng.standard_normal((batch, n, n), dtype=np.float32)
            if op.startswith("eig"):
                a = a + np.swapaxes(a, -1, -2)
            x = mx.array(a)
            set_policy(**{FIELD: n})
            kernel_backend = _backend(op, n, batch)
            if not kernel_backend.startswith("cpu:kernel"):
                break  # no kernel at this size: LAPACK beyond
            had_kernel = True
            t_kernel = _best(op, x, repeats)
            set_policy(**{FIELD: 0})
            t_lapack = _best(op, x, repeats)
            report(
                f"  {op} n={n} batch={batch}: kernel {1e3 * t_kernel:.3f} ms "
                f"({kernel_backend}), lapack {1e3 * t_lapack:.3f} ms"
            )
            if t_kernel >= t_lapack:
                break
            crossover = n
    finally:
        reset()
    return crossover if had_kernel else None


def write_policy(path: Path, values: dict) -> None:
    """Replace the measured fields' lines in the policy file, keep every other line."""
    keep = []
    if path.exists():
        for line in path.read_text().splitlines():
            parts = line.split()
            if (
                len(parts) == 3
                and not line.lstrip().startswith("#")
                and (parts[0], parts[1]) in values
            ):
                continue
            keep.append(line)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    keep.append(f"# measured by python -m metal_linalg calibrate, {stamp}")
    keep += [f"{op} {field} {value}" for (op, field), value in values.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(keep) + "\n")


def main(args) -> int:
    import metal_linalg as ml

    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    bad = [o for o in ops if o not in OPS]
    if bad:
        print(f"unknown op(s): {', '.join(bad)}")
        return 2
    print(f"calibrating on {ml.device_name()} ({ml.lapack_info()})")
    values = {}
    for op in ops:
        n = measure(op, args.elements, args.repeats)
        if n is None:
            print(f"{op}: no CPU kernel; LAPACK everywhere")
            n = 0
        else:
            print(f"{op}: {FIELD} = {n}")
        values[(op, FIELD)] = n
    path = Path(ml.policy_file())
    if args.dry_run:
        print(f"dry run: {path} not written")
        return 0
    write_policy(path, values)
    ml.reload_policy()
    print(f"wrote {path}; calibration status: {ml.calibration_status()}")
    return 0
