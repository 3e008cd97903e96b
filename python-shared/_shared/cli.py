"""The command line of both packages: `python -m <package> [info | bench | calibrate | demo]`.

Same subcommands, flags, files and behaviour for both; no subcommand runs the demo (info and a
quick bench). The frontend (loaded only when a command needs it) supplies the peers and devices.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from .queries import LINSYS_OPS, OPS, POLICY_OPS

DEVICES = ("cpu", "gpu", "cuda")
COMMANDS = ("info", "bench", "calibrate", "demo")


def console(width: int | None = None):
    """A rich console that does not squeeze tables to 80 columns when piped."""
    from rich.console import Console

    if width is None and not sys.stdout.isatty():
        width = 160
    return Console(width=width)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# ---- info ----


def policy_table(q, ops=None, title="routing policy per op"):
    """Rows: calibration, source, then each policy field; a column per op (short headers, so
    nothing is cut however narrow the terminal). ops: default the decompositions (OPS)."""
    from rich.table import Table

    ops = OPS if ops is None else ops
    policies = {op: getattr(q, f"{op}_policy")() for op in ops}
    fields = list(dict.fromkeys(k for p in policies.values() for k in p))
    status = q.calibration_status()
    table = Table(title=title)
    table.add_column("field", no_wrap=True)
    for op in ops:
        table.add_column(op, overflow="fold")
    table.add_row(
        "calibration",
        *(f"[{'green' if status[op] == 'tuned' else 'yellow'}]{status[op]}[/]" for op in ops),
    )
    table.add_row("source", *(getattr(q, f"{op}_policy_source")() for op in ops))
    for f in fields:
        table.add_row(f, *(str(policies[op].get(f, "-")) for op in ops))
    return table


def routes_table(q, ops=None):
    """The backend of a few calls per op (ops: default every op with a policy); "-" where an
    op takes square matrices only."""
    from rich.table import Table

    ops = POLICY_OPS if ops is None else ops
    examples = ((8, 8, 1024), (32, 32, 64), (64, 32, 1024), (512, 512, 1))
    # fe.q is the package's queries module; its Queries object says what the queries take.
    stream = getattr(getattr(q, "_q", q), "where", "device") == "stream"
    where = "the default stream" if stream else "the default device"
    table = Table(title=f"backend per call (m x n x batch) on {where}")
    table.add_column("op", no_wrap=True)
    for m, n, b in examples:
        table.add_column(f"{m}x{n} x{b}", overflow="fold")
    for op in ops:
        backend = getattr(q, f"{op}_backend")
        if op.startswith("eig") or op in LINSYS_OPS:
            table.add_row(op, *(backend(n, b) if m == n else "-" for m, n, b in examples))
        else:
            table.add_row(op, *(backend(m, n, b) for m, n, b in examples))
    return table


def _policy_file_line(path: str) -> str:
    """The policy file's path, and whether it is there (the core ignores a missing one)."""
    if os.path.isfile(path):
        return path
    if os.path.exists(path):
        return f"{path} (not a regular file: ignored)"
    return f"{path} (does not exist: the built-in policy applies; `calibrate` writes it)"


def cmd_info(fe, args, out=None) -> int:
    out = out or console()
    q = fe.q
    out.print(
        f"[bold]{fe.package}[/bold] {fe.version} (core {q.version()}), "
        f"{fe.framework} {fe.framework_version}"
    )
    avail = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in q.backends_available().items())
    threads = q.get_cpu_threads()
    lines = [
        ("device", q.device_name()),
        ("backends", avail),
        *(tuple(s.split(": ", 1)) for s in fe.info_lines()),
        ("LAPACK", q.lapack_info()),
        ("CPU threads", f"{threads or 'all'} (of {os.cpu_count()})"),
        ("CPU only", "yes (set_cpu_only: every op on the CPU)" if q.cpu_only() else "no"),
        ("GPU cores", str(q.gpu_core_count() or "-")),
        ("policy file", _policy_file_line(q.policy_file())),
    ]
    for key, value in lines:
        out.print(f"{key + ':':20s}{value}", highlight=False)
    out.print(policy_table(q))
    linsys = [op for op in POLICY_OPS if op in LINSYS_OPS]
    if linsys:
        out.print(policy_table(q, linsys, "routing policy per op: the linear systems"))
    out.print(routes_table(q))
    if any(s != "tuned" for s in q.calibration_status().values()):
        out.print(
            f"[yellow]untuned ops use cautious defaults: run `python -m {fe.package} "
            "calibrate`[/yellow]"
        )
    return 0


# ---- bench ----


def _device(fe, text: str | None) -> str:
    if text is None:
        return fe.default_device()
    return "cpu" if text == "cpu" else fe.gpu_name


def bench_plan(args):
    """(shapes or None for the default grid, batches, min_runs, budget_s) of the options."""
    from . import bench

    if args.n or args.shapes:
        shapes = [(n, n) for n in (args.n or [])]
        shapes += [bench.parse_shape(s) for s in args.shapes or []]
    else:
        shapes = list(bench.QUICK_SHAPES) if args.quick else None
    batches = args.batch or (bench.QUICK_BATCHES if args.quick else bench.BATCHES)
    if args.quick:
        return shapes, batches, bench.QUICK_MIN_RUNS, bench.QUICK_BUDGET_S
    return shapes, batches, bench.MIN_RUNS, bench.BUDGET_S


def square_only_problem(ops, shapes, explicit: bool) -> tuple:
    """(error, note) for square-only ops (eigh, eigvalsh, the linear systems) given non-square
    --shapes: an error when ops named with --ops (explicit) get no square shape at all, else a
    note naming the shapes they skip (None, None when nothing is skipped)."""
    from . import bench

    square_ops = [op for op in ops if bench.square_only(op)]
    skipped = [f"{m}x{n}" for m, n in shapes or [] if m != n]
    if not square_ops or not skipped:
        return None, None
    which = f"{', '.join(square_ops)} {'takes' if len(square_ops) == 1 else 'take'}"
    if explicit and len(skipped) == len(shapes):
        return (
            f"{which} square matrices only; --shapes {' '.join(skipped)} has none "
            "(use --n N or NxN shapes)"
        ), None
    return None, f"{which} square matrices only: {' '.join(skipped)} skipped for them"


def _save_records_somewhere(meta, records, name: str) -> str | None:
    """The results as JSON in the current or temporary folder, when --out failed after
    measuring (None if neither can be written)."""
    from . import bench

    for folder in (os.getcwd(), tempfile.gettempdir()):
        try:
            return bench.write_json(os.path.join(folder, f"{name}.json"), meta, records)
        except OSError:
            continue
    return None


def cmd_bench(fe, args) -> int:
    from . import bench

    out = console()
    device = _device(fe, args.device)
    problem = fe.device_problem(device)
    if problem:
        print(f"bench: --device {args.device}: {problem}", file=sys.stderr)
        return 2
    known = fe.peer_names(device)
    unknown = [p for p in args.peers or [] if p not in known]
    if unknown:
        print(
            f"bench: unknown peer(s) {', '.join(unknown)} on {device}; peers: {', '.join(known)}",
            file=sys.stderr,
        )
        return 2
    try:
        shapes, batches, min_runs, budget_s = bench_plan(args)
    except ValueError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    ops = args.ops or bench.bench_ops()
    given = shapes if args.n or args.shapes else None  # not the quick grid's tall shape
    error, note = square_only_problem(ops, given, bool(args.ops))
    if error:
        print(f"bench: {error}", file=sys.stderr)
        return 2
    if args.nrhs and not any(bench.takes_rhs(op) for op in ops):
        print(
            f"bench: --nrhs applies to {' and '.join(bench.rhs_ops())} only, and the ops run "
            f"({' '.join(ops)}) have neither",
            file=sys.stderr,
        )
        return 2
    nrhs = args.nrhs or bench.NRHS
    points = bench.grid(ops, shapes, batches, args.max_work, nrhs)
    if not points:
        print("bench: no grid point matches the options", file=sys.stderr)
        return 2
    try:
        bench.check_out_dir(args.out)
    except OSError as exc:
        print(f"bench: --out {args.out}: cannot write there ({exc}); nothing was measured",
              file=sys.stderr)  # fmt: skip
        return 2
    meta = bench.metadata(fe, device)
    name = args.name or bench.default_name(fe, device, meta["device_name"])
    paths = bench.result_paths(args.out, name)
    if note:
        print(f"bench: note: {note}", file=sys.stderr)
    impls = fe.implementations(device, args.peers)
    names = [i.name for i in impls]
    per_call = bench.per_call_from_rates(bench.probe_rates(impls, sorted({p.op for p in points})))
    weights = [
        bench.estimate_seconds([p], per_call, names, min_runs, budget_s, args.slow) for p in points
    ]
    estimate = sum(weights) + bench.POINT_OVERHEAD_S * len(points)
    out.print(
        f"[bold]{bench.plural(len(points), 'point')}[/bold] on {device} ({fe.q.device_name()}); "
        f"{impls[0].name} vs {', '.join(i.name for i in impls[1:]) or 'no peer'}"
    )
    out.print(
        f"estimated time: about {_duration(estimate)} (extrapolated from two probe shapes per op "
        "and implementation; more on a busy machine)",
        highlight=False,
    )
    if not args.quick and shapes is None:
        quick = bench.grid(ops, bench.QUICK_SHAPES, bench.QUICK_BATCHES, args.max_work, nrhs)
        q_est = bench.estimate_seconds(
            quick, per_call, names, bench.QUICK_MIN_RUNS, bench.QUICK_BUDGET_S, args.slow
        )
        q_est += bench.POINT_OVERHEAD_S * len(quick)
        out.print(
            f"`--quick` runs {bench.plural(len(quick), 'point')} instead (about "
            f"{_duration(q_est)})",
            highlight=False,
        )
    failed_partial = []

    def save_partial(records) -> None:
        # Partial results after every point, so an interrupted run keeps what it measured.
        if failed_partial:
            return
        try:
            bench.write_json(paths["json"], meta, records, planned=len(points))
        except OSError as exc:
            failed_partial.append(exc)
            print(f"bench: warning: cannot save partial results: {exc}", file=sys.stderr)

    started = time.perf_counter()
    records = bench.run_grid(
        fe,
        points,
        device,
        peers=args.peers,
        min_runs=min_runs,
        budget_s=budget_s,
        slow_s=args.slow,
        console=out,
        on_record=save_partial,
        weights=weights,
    )
    elapsed = time.perf_counter() - started
    out.print(bench.rich_table(records, f"{fe.package} on {device} (best ms per call)"))
    out.print(bench.summary(records), highlight=False)
    out.print(f"measured in {elapsed:.0f} s (estimated {estimate:.0f} s)",
              highlight=False)  # fmt: skip
    noisy = bench.noisy_lines(records)
    if noisy:
        print(
            f"bench: warning: {bench.plural(len(noisy), 'point')} whose timed runs spread by "
            f"more than {bench.SPREAD_LIMIT:g}x (slowest / fastest; a busy machine?), marked "
            "'!' in the tables:" + "".join(f"\n  {line}" for line in noisy),
            file=sys.stderr,
        )
    try:
        written = bench.write_results(fe, records, args.out, device, name, meta=meta)
    except OSError as exc:
        saved = _save_records_somewhere(meta, records, name)
        where = f"the results are saved in {saved}" if saved else "the table above is all"
        print(f"bench: writing to {args.out} failed after measuring: {exc}; {where}",
              file=sys.stderr)  # fmt: skip
        return 1
    out.print("wrote " + ", ".join(written.values()), highlight=False)
    return 0


# ---- calibrate ----


def _calibrate_command(package: str, args) -> str:
    words = [f"python -m {package} calibrate"]
    words += ["--ops", *args.ops] if args.ops else []
    words += [f for f, on in (("--cpu-only", args.cpu_only), ("--no-cpu", args.no_cpu)) if on]
    for flag, value in (
        ("--budget-s", args.budget_s),
        ("--table-out", args.table_out),
        ("--json-out", args.json_out),
    ):
        words += [flag, str(value)] if value is not None else []
    return " ".join(words)


def _save_somewhere(result, package: str) -> str | None:
    """The measurements, when a destination failed after measuring: a JSON file in the current
    folder or the temporary folder (None if neither can be written)."""
    from . import calibrate

    name = f"{package}-calibration-{time.strftime('%Y%m%d-%H%M%S')}.json"
    for folder in (os.getcwd(), tempfile.gettempdir()):
        path = os.path.join(folder, name)
        try:
            return calibrate.write_json(path, result)
        except OSError:
            continue
    return None


def cmd_calibrate(fe, args) -> int:
    from . import calibrate

    q = fe.q
    policy = q.policy_file()
    targets = [] if args.dry_run else [("policy file", policy)]
    targets += [
        (label, p)
        for label, p in (("--table-out", args.table_out), ("--json-out", args.json_out))
        if p
    ]
    for label, path in targets:
        try:
            calibrate.check_destination(path)
            if label == "policy file":
                calibrate.check_policy_file(fe, path)
        except calibrate.DestinationError as exc:
            hint = (
                " (set METAL_LINALG_POLICY_FILE to a writable file, or use --dry-run)"
                if label == "policy file"
                else ""
            )
            print(f"calibrate: {label}: {exc}{hint}; nothing was measured", file=sys.stderr)
            return 2
    gpu = False if args.cpu_only else None
    if args.no_cpu and not calibrate.gpu_in_core(fe):
        print(
            "calibrate: --no-cpu but the core has no GPU backend: nothing to measure",
            file=sys.stderr,
        )
        return 2
    ops = tuple(args.ops or POLICY_OPS)
    print(f"calibrating {', '.join(ops)} on {q.device_name()} ({q.lapack_info()})")
    result = calibrate.measure(fe, ops, cpu=not args.no_cpu, gpu=gpu, budget_s=args.budget_s)
    lines = calibrate.policy_lines(result)
    print("measured:" + "".join(f"\n  {ln}" for ln in lines) if lines else "measured: nothing")
    if args.dry_run:
        print(f"dry run: {policy} not written")
        return 0
    written = []
    try:
        written.append(calibrate.write_policy(fe, result, policy))
        if args.table_out:
            written.append(
                calibrate.write_table(args.table_out, result, _calibrate_command(fe.package, args))
            )
        if args.json_out:
            written.append(calibrate.write_json(args.json_out, result))
    except OSError as exc:
        saved = _save_somewhere(result, fe.package)
        where = (
            f"the measurements are saved in {saved}"
            if saved
            else "the lines above are the measurements"
        )
        print(f"calibrate: writing failed after measuring: {exc}; {where}", file=sys.stderr)
        return 1
    print("wrote " + ", ".join(written))
    status = q.calibration_status()
    for op in ops:
        print(f"  {op:17s}{status[op]:9s}source {getattr(q, f'{op}_policy_source')()}")
    return 0


# ---- parser ----


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (a clear usage error, not a traceback after measuring)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def _shape(text: str) -> str:
    from . import bench

    try:
        bench.parse_shape(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _file_stem(text: str) -> str:
    """argparse type of --name: a file name (the files go into --out; a folder in it would make
    the writes fail after measuring)."""
    if not text or text in (".", "..") or "/" in text or os.sep in text or "\0" in text:
        raise argparse.ArgumentTypeError(
            f"must be a file name without a folder, got {text!r} (--out names the folder)"
        )
    return text


def _bench_args(p, package: str) -> None:
    from . import bench

    p.add_argument(
        "--ops",
        nargs="+",
        choices=bench.bench_ops(),
        metavar="OP",
        help=f"ops to run: {' '.join(bench.bench_ops())} (default: all)",
    )
    p.add_argument(
        "--n", nargs="+", type=_positive_int, help="square sizes (default: 8 16 ... 1024)"
    )
    p.add_argument(
        "--shapes",
        nargs="+",
        type=_shape,
        metavar="MxN",
        help="M x N shapes, e.g. 64x32 (default: 64x32 256x128 1024x512); eigh, eigvalsh and the "
        "linear systems take the square ones only",
    )
    p.add_argument(
        "--batch", nargs="+", type=_positive_int, help="batch sizes (default: 1 64 1024 16384)"
    )
    p.add_argument(
        "--nrhs",
        nargs="+",
        type=_positive_int,
        help="right-hand sides of solve and solve_triangular (default: 1)",
    )
    p.add_argument(
        "--max-work",
        type=_positive_int,
        default=2**27,
        help="skip points with batch*m*n (or batch*n*nrhs, when larger) above this (default 2^27)",
    )
    p.add_argument(
        "--device",
        choices=DEVICES,
        help="where the data lives: cpu, or the GPU (gpu and cuda are the same); default: the GPU when there is one",
    )
    p.add_argument("--peers", nargs="+", help="only these peers (the default: every one available)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="a small grid (99 points, 54 of them decompositions) with fewer runs: about 2 "
        "minutes on a 2-core CPU",
    )
    p.add_argument(
        "--out",
        default="bench-out",
        help="folder for the JSON, Markdown and PNG (default bench-out)",
    )
    p.add_argument(
        "--name",
        type=_file_stem,
        help="file name stem (default: <device name>-<framework>-<device>)",
    )
    p.add_argument(
        "--slow",
        type=_positive_float,
        default=10.0,
        help="seconds: a call slower than this is timed once",
    )


def parser(package: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"python -m {package}",
        description=f"{package}: info, benchmark and calibration. No subcommand: the demo.",
    )
    sub = p.add_subparsers(dest="cmd")
    sub.add_parser("info", help="device, backends, LAPACK, policies and calibration status")
    _bench_args(
        sub.add_parser("bench", help="time against the peers, write JSON/Markdown/PNG"), package
    )
    cal = sub.add_parser("calibrate", help="measure this machine and write its policy file")
    cal.add_argument(
        "--ops",
        nargs="+",
        choices=POLICY_OPS,
        metavar="OP",
        help=f"ops to measure: {' '.join(POLICY_OPS)} (default: all)",
    )
    which = cal.add_mutually_exclusive_group()
    which.add_argument("--cpu-only", action="store_true", help="skip the GPU measurements")
    which.add_argument(
        "--no-cpu", action="store_true", help="skip the CPU kernel measurement (cpu_kernel_max_n)"
    )
    cal.add_argument(
        "--budget-s",
        type=_positive_float,
        help="total seconds; points beyond it are skipped (default: none)",
    )
    cal.add_argument(
        "--table-out",
        metavar="PATH",
        help="also write the measured fields as a core/tuned/<device>.policy table",
    )
    cal.add_argument("--json-out", metavar="PATH", help="also write every raw timing as JSON")
    cal.add_argument("--dry-run", action="store_true", help="measure and print, write nothing")
    _bench_args(sub.add_parser("demo", help="info + a quick bench (the default)"), package)
    return p


def main(package: str, load_frontend, argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in (*COMMANDS, "-h", "--help"):
        argv = ["demo", *argv]  # no subcommand: the demo, with any bench options given
    args = parser(package).parse_args(argv)
    fe = load_frontend()
    if args.cmd == "info":
        return cmd_info(fe, args)
    if args.cmd == "bench":
        return cmd_bench(fe, args)
    if args.cmd == "calibrate":
        return cmd_calibrate(fe, args)
    cmd_info(fe, args)
    args.quick = True
    return cmd_bench(fe, args)
