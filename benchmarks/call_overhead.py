"""Per-call cost of the frontends on tiny inputs (CPU): microseconds per call of eigh, eigvalsh,
qr, svd and svdvals on one 4x4 and one 8x8 matrix, for the torch and the MLX package (whichever
is installed), side by side with their peers in one run.

    python benchmarks/call_overhead.py [--calls 2000] [--repeats 7] [--sizes 1x4x4,1x8x8]
        [--ops eigh,qr] [--breakdown] [--json out.json] [--md out.md]

Peers: torch.linalg and numpy.linalg beside the torch package; numpy.linalg and mx.linalg (CPU
stream, evaluated) beside the MLX package. The torch package's target peer is torch.linalg, the
MLX package's NumPy.

--breakdown adds where one call's time goes, each piece timed on its own with the same input:
  torch: the Python argument checks (checks, float32 cast, eager-path test), the output
  allocation (shapes, torch.empty), the ctypes call of ml_run with preallocated outputs (ctypes,
  core checks, routing, the kernel); and, for the core alone, ml_plan through ctypes (ctypes,
  checks, policy, routing; no kernel) and a ctypes call that does nothing (ml_api_version).
  mlx: the Python argument checks (stream, array, shape), ext.decompose (nanobind, the core's
  checks, then either the graph node with its cast/copy ops, or, for a small call on an
  evaluated CPU input, the kernel itself), and MLX's own floor: build and evaluate one trivial
  CPU op (mx.abs). "eval" is the full call less checks and ext.decompose.
  Both: the core alone from C (call_overhead_core.cpp, built here with $CXX or c++): ml_run
  (checks, routing, the kernel) and ml_plan (checks, routing).

Every variant is timed in turn within one round, `repeats` rounds of `calls` calls each; the best
round counts (the least disturbed by other load). Both wall-clock and this process's CPU time
per call are recorded; the Markdown shows CPU time (steadier on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

OPS = ("eigh", "eigvalsh", "qr", "svd", "svdvals")


def _time_round(fn, calls: int) -> tuple:
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6, (time.process_time() - c0) / calls * 1e6


def measure(variants: dict, calls: int, repeats: int) -> dict:
    """{name: (wall_us, cpu_us)}: the best of `repeats` interleaved rounds per variant."""
    for fn in variants.values():
        for _ in range(min(calls, 200)):
            fn()
    best = {name: [float("inf"), float("inf")] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            wall, cpu = _time_round(fn, calls)
            best[name][0] = min(best[name][0], wall)
            best[name][1] = min(best[name][1], cpu)
    return {name: tuple(v) for name, v in best.items()}


def _numpy_fn(np, op):
    return {
        "eigh": np.linalg.eigh,
        "eigvalsh": np.linalg.eigvalsh,
        "qr": np.linalg.qr,
        "svd": lambda a: np.linalg.svd(a, full_matrices=False),
        "svdvals": lambda a: np.linalg.svd(a, compute_uv=False),
    }[op]


def torch_variants(op: str, batch: int, n: int, breakdown: bool) -> dict:
    import ctypes

    import metal_linalg_torch as mlt
    import numpy as np
    import torch
    from metal_linalg_torch import _dispatch as d
    from metal_linalg_torch import _lib

    g = torch.Generator().manual_seed(0)
    a = torch.randn(batch, n, n, generator=g)
    if op in ("eigh", "eigvalsh"):
        a = (a + a.mT) / 2
    a_np = a.numpy()
    torch_fn = {
        "eigh": torch.linalg.eigh,
        "eigvalsh": torch.linalg.eigvalsh,
        "qr": torch.linalg.qr,
        "svd": lambda x: torch.linalg.svd(x, full_matrices=False),
        "svdvals": torch.linalg.svdvals,
    }[op]
    ours = getattr(mlt, op)
    numpy_fn = _numpy_fn(np, op)
    v = {
        "ours": lambda: ours(a),
        "torch.linalg": lambda: torch_fn(a),
        "numpy": lambda: numpy_fn(a_np),
    }
    if not breakdown:
        return v
    square = op.startswith("eig")

    def checks():
        d.check_input(a, op, square=square)
        if square:
            d.check_uplo("L", op)
        elif op == "qr":
            d.check_qr_mode("reduced", n, n)
        elif op == "svd":
            d.check_full_matrices(False, n, n)
        d.eager(d.to_float32(a))

    flags = 0
    host_outputs = getattr(d, "host_outputs", None)
    if host_outputs is None:  # the package before host_outputs (comparisons with --before)

        def host_outputs(op, b, m, n, flags):
            return d._host_empty(d.output_shapes(op, b, m, n, min(m, n), flags))

    outs = host_outputs(op, a.shape[:-2], n, n, flags)
    op_id = _lib.OP_ID[op]
    sizes = (ctypes.c_int64 * 3)(batch, n, n)
    sizes_addr = ctypes.addressof(sizes)
    lib = _lib.lib
    ptr = a.data_ptr()
    v["checks"] = checks
    v["outputs"] = lambda: host_outputs(op, d._readable(a).shape[:-2], n, n, flags)
    v["ml_run (ctypes)"] = lambda: d._c_call(op, None, ptr, batch, n, n, flags, outs, None)
    v["ml_plan (ctypes)"] = lambda: lib.ml_plan(None, op_id, sizes_addr, flags, None, None, None)
    v["ctypes floor"] = lib.ml_api_version
    return v


def mlx_variants(op: str, batch: int, n: int, breakdown: bool) -> dict:
    import metal_linalg as ml
    import mlx.core as mx
    import numpy as np
    from metal_linalg import _ops

    a = mx.random.normal((batch, n, n), key=mx.random.key(0))
    if op in ("eigh", "eigvalsh"):
        a = (a + a.swapaxes(-1, -2)) / 2
    mx.eval(a)
    a_np = np.array(a)
    cpu = mx.cpu
    ours = {
        "eigh": lambda: mx.eval(*ml.eigh(a, stream=cpu)),
        "eigvalsh": lambda: mx.eval(ml.eigvalsh(a, stream=cpu)),
        "qr": lambda: mx.eval(*ml.qr(a, stream=cpu)),
        "svd": lambda: mx.eval(*ml.svd(a, stream=cpu)),
        "svdvals": lambda: mx.eval(ml.svdvals(a, stream=cpu)),
    }[op]
    peer = {
        "eigh": lambda: mx.eval(*mx.linalg.eigh(a, stream=cpu)),
        "eigvalsh": lambda: mx.eval(mx.linalg.eigvalsh(a, stream=cpu)),
        "qr": lambda: mx.eval(*mx.linalg.qr(a, stream=cpu)),
        "svd": lambda: mx.eval(*mx.linalg.svd(a, stream=cpu)),
        "svdvals": lambda: mx.eval(mx.linalg.svd(a, compute_uv=False, stream=cpu)),
    }[op]
    numpy_fn = _numpy_fn(np, op)
    v = {"ours": ours, "numpy": lambda: numpy_fn(a_np), "mx.linalg": peer}
    if not breakdown:
        return v
    op_id = _ops.OP_ID[op]

    def checks():
        _ops._stream(cpu, op)
        x = _ops._as_array(a, op)
        if op.startswith("eig"):
            _ops._uplo("L", op)
            _ops._square(x, op)
        elif op == "qr":
            _ops._matrix_dims(x, op)
        else:
            _ops._matrix_dims(x, op)

    s = mx.default_stream(cpu)
    v["checks"] = checks
    v["ext.decompose"] = lambda: _ops.ext.decompose(a, op_id, 0, False, s)
    v["mlx floor (abs+eval)"] = lambda: mx.eval(mx.abs(a, stream=cpu))
    return v


def core_times(sizes: list, calls: int, repeats: int) -> dict:
    """{(op, "BxNxN"): (ml_run us, ml_plan us, backend)} from call_overhead_core.cpp, built
    against the torch package's core library; {} (with a note) where that is not possible."""
    try:
        from metal_linalg_torch import _lib
    except ImportError as e:
        print(f"core timing skipped: the torch package is not installed ({e})")
        return {}
    cxx = shutil.which(os.environ.get("CXX", "c++"))
    if cxx is None:
        print("core timing skipped: no C++ compiler (set CXX)")
        return {}
    here = os.path.dirname(os.path.abspath(__file__))
    library = _lib._library_path()
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "core_bench")
        build = [cxx, "-O2", "-std=c++17", "-I" + os.path.join(here, "..", "core", "include")]
        build += [os.path.join(here, "call_overhead_core.cpp"), library, "-o", exe]
        build += ["-Wl,-rpath," + os.path.dirname(library)]
        subprocess.run(build, check=True)
        args = [exe, str(calls), str(repeats)] + [f"{b}x{n}x{n}" for b, n in sizes]
        text = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    out = {}
    for line in text.splitlines():
        op, shape, run, plan, backend = line.split()
        out[(op, shape)] = (float(run), float(plan), backend)
    return out


PACKAGES = {
    "torch": (torch_variants, "torch.linalg"),
    "mlx": (mlx_variants, "numpy"),
}


def _sizes(text: str) -> list:
    out = []
    for item in text.split(","):
        parts = item.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise SystemExit(f"--sizes: expected BATCHxNxN items such as 1x8x8, got {item!r}")
        b, m, n = (int(p) for p in parts)
        if b < 1 or m < 1 or m != n:
            raise SystemExit(
                f"--sizes: expected a positive batch and square matrices, got {item!r}"
            )
        out.append((b, n))
    return out


def _versions() -> dict:
    out = {"python": platform.python_version()}
    for name in ("numpy", "torch", "mlx.core", "metal_linalg_torch", "metal_linalg"):
        try:
            mod = __import__(name, fromlist=["_"])
            out[name] = getattr(mod, "__version__", "?")
        except ImportError:
            pass
    return out


def markdown(result: dict) -> str:
    meta = result["meta"]
    lines = [
        "# Per-call cost on the CPU (tiny inputs)",
        "",
        (
            f"`python benchmarks/call_overhead.py {meta['argv']}` on {meta['machine']} "
            f"({meta['cpu_count']} logical CPUs, load average {meta['load_before']} before and "
            f"{meta['load_after']} after the run). Microseconds of this process's CPU time per "
            f"call, best of {meta['repeats']} interleaved rounds of {meta['calls']} calls. "
            "Ratio: ours / the target peer (torch.linalg for the torch package, NumPy for the "
            "MLX package). Breakdown columns are timed on their own (see the script's doc); "
            "core columns are CPU microseconds of the C calls without Python "
            "(call_overhead_core.cpp): ml_run = checks, routing and the kernel; ml_plan = "
            "checks and routing."
        ),
        "",
    ]
    for package, rows in result["packages"].items():
        if not rows:
            continue
        names = list(rows[0]["cpu_us"])
        core = "core_us" in rows[0]
        head = names + (["core ml_run (C)", "core ml_plan (C)"] if core else [])
        lines.append(f"## {package}")
        lines.append("")
        lines.append("| op | shape | " + " | ".join(head) + " | ratio |")
        lines.append("|---|---|" + "---|" * (len(head) + 1))
        for r in rows:
            cells = [f"{r['cpu_us'][k]:.1f}" for k in names]
            if core:
                cells += [f"{r['core_us']['ml_run']:.2f}", f"{r['core_us']['ml_plan']:.2f}"]
            lines.append(f"| {r['op']} | {r['shape']} | {' | '.join(cells)} | {r['ratio']:.2f} |")
        lines.append("")
    if "before" in result:
        lines += compare(result["before"], result)
    return "\n".join(lines)


def compare(before: dict, after: dict) -> list:
    """Markdown lines: ours and the target peer per op and shape, in both runs."""
    lines = [
        "## Before and after",
        "",
        (
            f"Before: `python benchmarks/call_overhead.py {before['meta']['argv']}` (load "
            f"average {before['meta']['load_before']}), on the code before the change; after: "
            "this run. CPU microseconds per call; peer: torch.linalg (torch), NumPy (mlx)."
        ),
        "",
        (
            "| package | op | shape | ours before | ours after | peer before | peer after "
            "| ratio before | ratio after |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for package, rows in after["packages"].items():
        target = PACKAGES[package][1]
        old = {(r["op"], r["shape"]): r for r in before["packages"].get(package, [])}
        for r in rows:
            b = old.get((r["op"], r["shape"]))
            if b is None:
                continue
            lines.append(
                f"| {package} | {r['op']} | {r['shape']} | {b['cpu_us']['ours']:.1f} | "
                f"{r['cpu_us']['ours']:.1f} | {b['cpu_us'][target]:.1f} | "
                f"{r['cpu_us'][target]:.1f} | {b['ratio']:.2f} | {r['ratio']:.2f} |"
            )
    lines.append("")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--sizes", default="1x4x4,1x8x8")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--packages", default="torch,mlx")
    ap.add_argument("--breakdown", action="store_true")
    ap.add_argument("--json", help="write the results as JSON here")
    ap.add_argument("--md", help="write the results as a Markdown table here")
    ap.add_argument(
        "--before", help="JSON of an earlier run (e.g. before a change): compared in the Markdown"
    )
    args = ap.parse_args()
    if args.calls < 1 or args.repeats < 1:
        raise SystemExit("--calls and --repeats must be positive")
    sizes = _sizes(args.sizes)
    ops = args.ops.split(",")
    for op in ops:
        if op not in OPS:
            raise SystemExit(f"--ops: unknown op {op!r}; ops: {', '.join(OPS)}")
    before = None
    if args.before:
        with open(args.before) as f:
            before = json.load(f)
    for path in (args.json, args.md):  # fail before measuring, not after
        if path:
            with open(path, "a"):
                pass
    result = {
        "meta": {
            "argv": " ".join(sys.argv[1:]),
            "machine": platform.machine() + " " + platform.processor(),
            "cpu_count": os.cpu_count(),
            "load_before": round(os.getloadavg()[0], 1),
            "calls": args.calls,
            "repeats": args.repeats,
            "versions": _versions(),
            "unit": "microseconds per call (best round)",
        },
        "packages": {},
    }
    core = core_times(sizes, args.calls * 5, args.repeats) if args.breakdown else {}
    for package in args.packages.split(","):
        if package not in PACKAGES:
            raise SystemExit(f"--packages: unknown package {package!r}; packages: torch, mlx")
        make, target = PACKAGES[package]
        rows = []
        for op in ops:
            for batch, n in sizes:
                try:
                    variants = make(op, batch, n, args.breakdown)
                except ImportError as e:
                    print(f"{package}: not installed ({e})")
                    break
                got = measure(variants, args.calls, args.repeats)
                row = {
                    "op": op,
                    "shape": f"{batch}x{n}x{n}",
                    "wall_us": {k: round(w, 2) for k, (w, _) in got.items()},
                    "cpu_us": {k: round(c, 2) for k, (_, c) in got.items()},
                }
                if args.breakdown and package == "mlx":
                    c = row["cpu_us"]
                    row["cpu_us"]["eval (derived)"] = round(
                        c["ours"] - c["checks"] - c["ext.decompose"], 2
                    )
                if (op, row["shape"]) in core:
                    run, plan, backend = core[(op, row["shape"])]
                    row["core_us"] = {"ml_run": run, "ml_plan": plan, "backend": backend}
                row["ratio"] = round(row["cpu_us"]["ours"] / row["cpu_us"][target], 3)
                rows.append(row)
                print(
                    f"{package} {op} {row['shape']}: "
                    + ", ".join(f"{k} {x:.1f}" for k, x in row["cpu_us"].items())
                    + f" us CPU; ratio {row['ratio']:.2f}",
                    flush=True,
                )
            else:
                continue
            break
        result["packages"][package] = rows
    result["meta"]["load_after"] = round(os.getloadavg()[0], 1)
    if before is not None:
        result["before"] = before
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    if args.md:
        with open(args.md, "w") as f:
            f.write(markdown(result) + "\n")


if __name__ == "__main__":
    main()
