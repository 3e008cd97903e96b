"""Command line: `python -m metal_linalg_torch [info | bench | calibrate | demo]`."""

from __future__ import annotations

import argparse
import sys
import warnings

OPS = ("qr", "eigh", "eigvalsh", "svd", "svdvals")


def _import():
    # The CLI reports calibration itself; the import-time notice would only repeat it.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import metal_linalg_torch as mlt
    return mlt


def cmd_info(args) -> int:
    import torch
    from rich.console import Console
    from rich.table import Table

    mlt = _import()
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(
        f"[bold]metal_linalg_torch[/bold] {mlt.__version__} (core {mlt.version()}), torch {torch.__version__}"
    )
    console.print(f"device:        {mlt.device_name()}")
    avail = mlt.backends_available()
    console.print(
        "backends:      " + ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in avail.items())
    )
    if torch.cuda.is_available():
        console.print(
            f"torch CUDA:    {torch.cuda.get_device_name()} ({torch.cuda.device_count()} device(s))"
        )
    console.print(f"LAPACK:        {mlt.lapack_info()}")
    console.print(f"CPU threads:   {mlt.get_cpu_threads()}")
    console.print(f"policy file:   {mlt.policy_file()}")
    status = mlt.calibration_status()
    policies = {op: getattr(mlt, f"{op}_policy")() for op in OPS}
    fields = list(dict.fromkeys(k for p in policies.values() for k in p))
    table = Table(title="routing policy per op")
    for col in ["op", "calibration", "source"] + fields:
        table.add_column(col)
    for op in OPS:
        colour = "green" if status[op] == "tuned" else "yellow"
        table.add_row(
            op,
            f"[{colour}]{status[op]}[/{colour}]",
            getattr(mlt, f"{op}_policy_source")(),
            *(str(policies[op].get(f, "-")) for f in fields),
        )
    console.print(table)
    examples = ((8, 8, 1024), (32, 32, 64), (64, 32, 1024), (512, 512, 1))
    routes = Table(title="backend per call (m x n x batch)")
    routes.add_column("op")
    for m, n, b in examples:
        routes.add_column(f"{m}x{n} x{b}")
    for op in OPS:
        q = getattr(mlt, f"{op}_backend")
        if op.startswith("eig"):
            routes.add_row(op, *(q(n, b) if m == n else "-" for m, n, b in examples))
        else:
            routes.add_row(op, *(q(m, n, b) for m, n, b in examples))
    table = routes
    console.print(table)
    if any(s != "tuned" for s in status.values()):
        console.print(
            "[yellow]untuned ops use cautious defaults: run `python -m metal_linalg_torch calibrate`[/yellow]"
        )
    return 0


def _shapes(args, bench):
    if args.n or args.shapes:
        shapes = [(n, n) for n in (args.n or [])]
        for text in args.shapes or []:
            m, n = text.lower().split("x")
            shapes.append((int(m), int(n)))
        return shapes
    return list(bench.QUICK_SHAPES) if args.quick else None


def cmd_bench(args) -> int:
    import torch
    from rich.console import Console

    _import()
    from metal_linalg_torch import bench

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        print("bench: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    batches = args.batch or (bench.QUICK_BATCHES if args.quick else bench.BATCHES)
    points = bench.grid(args.ops or bench.OPS, _shapes(args, bench), batches, args.max_work)
    if not points:
        print("bench: no grid point matches the options", file=sys.stderr)
        return 2
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(
        f"[bold]{len(points)} points[/bold] on {device}; peers: "
        + ", ".join(i.name for i in bench.implementations(device, args.peers)[1:])
    )
    records = bench.run_grid(
        points,
        device,
        peers=args.peers,
        min_runs=2 if args.quick else 3,
        budget_s=0.3 if args.quick else 1.0,
        slow_s=args.slow,
    )
    console.print(bench.rich_table(records))
    small = [r.speedup for r in records if r.batch >= 64 and max(r.m, r.n) <= 32]
    console.print(
        f"geometric-mean speedup vs best peer: all {bench.geomean([r.speedup for r in records]):.2f}x"
        + (f", batch>=64 & n<=32 {bench.geomean(small):.2f}x" if small else "")
    )
    paths = bench.write_results(records, args.out, device, args.name)
    console.print("wrote " + ", ".join(paths.values()))
    return 0


def cmd_calibrate(args) -> int:
    _import()
    from metal_linalg_torch import calibrate

    cuda = False if args.cpu_only else None
    if args.no_cpu and not calibrate.cuda_usable():
        print("calibrate: --no-cpu but no usable CUDA device: nothing to measure", file=sys.stderr)
        return 2
    words = ["python -m metal_linalg_torch calibrate"]
    words += ["--ops", *args.ops] if args.ops else []
    words += [f for f, on in (("--cpu-only", args.cpu_only), ("--no-cpu", args.no_cpu)) if on]
    for flag, value in (
        ("--budget-s", args.budget_s),
        ("--table-out", args.table_out),
        ("--json-out", args.json_out),
    ):
        words += [flag, str(value)] if value is not None else []
    command = " ".join(words)
    path = calibrate.calibrate(
        args.ops or OPS,
        cuda=cuda,
        cpu=not args.no_cpu,
        budget_s=args.budget_s,
        table_out=args.table_out,
        json_out=args.json_out,
        command=command,
    )
    print(f"wrote {path}; the policy was reloaded (source now tuned:<device>)")
    for label, out in (("table", args.table_out), ("timings", args.json_out)):
        if out:
            print(f"wrote {label} {out}")
    return 0


def cmd_demo(args) -> int:
    cmd_info(args)
    args.quick = True
    return cmd_bench(args)


def _add_bench_args(p) -> None:
    p.add_argument("--ops", nargs="+", choices=OPS, help="ops to run (default: all)")
    p.add_argument(
        "--n", nargs="+", type=int, help="square sizes (default: docs/design.md section 8 grid)"
    )
    p.add_argument("--shapes", nargs="+", help="extra MxN shapes, e.g. 64x32")
    p.add_argument("--batch", nargs="+", type=int, help="batch sizes (default: 1 64 1024 16384)")
    p.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda when available")
    p.add_argument("--peers", nargs="+", help="only these peers (torch, numpy, cupy, jax)")
    p.add_argument("--out", default="bench-results", help="folder for JSON, Markdown and PNG")
    p.add_argument("--name", help="file name stem (default: <device name>-<device>)")
    p.add_argument("--quick", action="store_true", help="a small grid with fewer runs")
    p.add_argument("--max-work", type=int, default=2**27, help="cap on batch*m*n (default 2^27)")
    p.add_argument(
        "--slow", type=float, default=10.0, help="seconds: a call slower than this is timed once"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m metal_linalg_torch", description=__doc__)
    sub = parser.add_subparsers(dest="cmd")
    sub.add_parser("info", help="device, backends, policies, calibration status, LAPACK")
    _add_bench_args(
        sub.add_parser("bench", help="compare against torch.linalg / NumPy (CuPy, JAX on CUDA)")
    )
    cal = sub.add_parser("calibrate", help="measure this machine and write its policy file")
    cal.add_argument("--ops", nargs="+", choices=OPS, help="ops to measure (default: all)")
    which = cal.add_mutually_exclusive_group()
    which.add_argument("--cpu-only", action="store_true", help="skip the GPU measurements")
    which.add_argument(
        "--no-cpu", action="store_true", help="skip the CPU kernel measurement (cpu_kernel_max_n)"
    )
    cal.add_argument(
        "--table-out",
        metavar="PATH",
        help="also write the measured fields as a core/tuned/<device>.policy table",
    )
    cal.add_argument("--json-out", metavar="PATH", help="also write every raw timing as JSON")
    cal.add_argument(
        "--budget-s",
        type=float,
        help="total seconds for the measurements; points beyond it are skipped (default: none)",
    )
    _add_bench_args(sub.add_parser("demo", help="info + a quick bench (the default)"))
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("info", "bench", "calibrate", "demo", "-h", "--help"):
        argv = ["demo", *argv]  # no subcommand: the demo, with any bench options given
    args = parser.parse_args(argv)
    return {"info": cmd_info, "bench": cmd_bench, "calibrate": cmd_calibrate, "demo": cmd_demo}[
        args.cmd
    ](args)


if __name__ == "__main__":
    sys.exit(main())
