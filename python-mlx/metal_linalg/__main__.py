"""Command line: `python -m metal_linalg info | bench [...] | calibrate [...]`."""

from __future__ import annotations

import argparse
import os
import sys


def console():
    """A rich console that does not squeeze tables to 80 columns when piped."""
    from rich.console import Console

    c = Console()
    return c if c.is_terminal else Console(width=140)


def cmd_info(_args) -> int:
    import mlx.core as mx
    from rich.table import Table

    import metal_linalg as ml

    out = console()
    out.print(f"metal_linalg {ml.__version__} (core {ml.version()}), MLX {mx.__version__}")
    out.print(f"device: {ml.device_name()}")
    avail = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in ml.backends_available().items())
    out.print(f"backends: {avail}")
    out.print(f"LAPACK: {ml.lapack_info()}")
    threads = ml.get_cpu_threads()
    out.print(f"CPU threads: {threads or 'all'} (of {os.cpu_count()})")
    out.print(f"policy file: {ml.policy_file()}")
    ops = ("qr", "eigh", "eigvalsh", "svd", "svdvals")
    policies = {op: getattr(ml, f"{op}_policy")() for op in ops}
    fields = sorted({f for pol in policies.values() for f in pol})
    status = ml.calibration_status()
    table = Table(title="routing policy per decomposition")
    for col in ("op", "calibration", "source", *fields):
        table.add_column(col)
    for op in ops:
        source = getattr(ml, f"{op}_policy_source")()
        table.add_row(op, status[op], source, *(str(policies[op].get(f, "-")) for f in fields))
    out.print(table)
    sizes = (4, 8, 16, 32, 64, 128, 512)
    table = Table(title="backend per square size (batch 1024 / batch 1)")
    for col in ("op", *(f"n={n}" for n in sizes)):
        table.add_column(col)
    for op in ops:
        backend = getattr(ml, f"{op}_backend")
        cells = []
        for n in sizes:
            shape = (n,) if op.startswith("eig") else (n, n)
            many, one = backend(*shape, 1024), backend(*shape, 1)
            cells.append(many if many == one else f"{many} / {one}")
        table.add_row(op, *(c.replace("cpu:", "") for c in cells))
    out.print(table)
    return 0


def cmd_bench(args) -> int:
    from . import _bench

    return _bench.main(args)


def cmd_calibrate(args) -> int:
    from . import _calibrate

    return _calibrate.main(args)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m metal_linalg", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="device, backends, LAPACK, policies and calibration status")
    bench = sub.add_parser("bench", help="time against mx.linalg (CPU stream) and NumPy")
    from . import _bench, _calibrate

    _bench.add_arguments(bench)
    cal = sub.add_parser("calibrate", help="measure this machine and write its policy file")
    _calibrate.add_arguments(cal)
    args = parser.parse_args(argv)
    return {"info": cmd_info, "bench": cmd_bench, "calibrate": cmd_calibrate}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
