"""The benchmark both frontends run: grid, timing, nominal flops, roofline and reports.

The grid: ops x (square n in 8..1024 and tall 64x32, 256x128, 1024x512) x batch in
{1, 64, 1024, 16384}, capped at batch*m*n <= 2^27. The ops: the decompositions (OPS) and the
linear systems (linsys_ops()), these on square matrices only, solve and solve_triangular with a
number of right-hand sides (nrhs, default 1). Every implementation gets the same input (one
NumPy array per point, or the pair (A, B) for the ops with right-hand sides, converted by each
implementation) in one run; each is timed after a warm-up and reported as best and median of
several runs. run_grid() returns Records; write_results() writes JSON, a Markdown table and a
PNG plot.

The frontend adapter `fe` provides `package`, `framework`, `framework_version`, `q` (its
Queries), `implementations(device, peers)` -> [Impl] (ours first), `backend_label(op, m, n,
batch, device)`, `machine_peaks(device)` and `metadata(device)`.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .queries import ALL_OPS, LINSYS_OPS, OPS, OUTPUTS

NRHS = (1,)
SQUARE_N = (8, 16, 32, 64, 128, 256, 512, 1024)
TALL = ((64, 32), (256, 128), (1024, 512))
BATCHES = (1, 64, 1024, 16384)
MAX_WORK = 2**27
QUICK_SHAPES = ((8, 8), (16, 16), (32, 32), (64, 32))
QUICK_BATCHES = (1, 64, 1024)
OURS = "metal_linalg"
# Timing rules (also used by the time estimate).
RUNS_MAX = 20
MIN_RUNS, BUDGET_S = 3, 1.0
QUICK_MIN_RUNS, QUICK_BUDGET_S = 2, 0.3
# Seconds per point beyond the timed calls (making the input, converting it for each
# implementation, the backend query, the partial results file); measured on a 2-core CPU.
POINT_OVERHEAD_S = 0.02
# A point whose slowest timed run took more than this many times its fastest is flagged.
SPREAD_LIMIT = 2.0
# A timed run lasts at least this long: shorter calls (a few microseconds on the CPU) are timed in
# groups of calls, each completed (synced) before the next, so that the timer's resolution and
# one-off stalls of a microsecond call do not make the runs spread (clocked with CUDA events,
# the calls are timed one at a time).
MIN_RUN_S = 2e-4
GROUP_MAX = 1000


# What the bench needs to know of an op, read from the core's op table (queries.ALL_OPS, OPS,
# LINSYS_OPS, OUTPUTS) once the frontend has bound it.


def linsys_ops() -> list:
    """The linear systems, in the table's order."""
    return list(LINSYS_OPS)


def takes_rhs(op: str) -> bool:
    """Whether op takes right-hand sides B [batch, n, nrhs]: its output has their count r."""
    return any("r" in dims for dims in OUTPUTS[op])


def square_only(op: str) -> bool:
    """Whether the bench times op on square matrices only: the linear systems (their queries
    take one order n; lu_factor's rectangular case is not benchmarked), and the ops no output of
    which depends on m or k = min(m, n)."""
    return op in linsys_ops() or not any(sym in ("m", "k") for dims in OUTPUTS[op] for sym in dims)


def rhs_ops() -> list:
    return [op for op in ALL_OPS if takes_rhs(op)]


def bench_ops() -> list:
    """Every op the bench knows, in report order: the decompositions, then the linear systems."""
    return [*OPS, *linsys_ops()]


@dataclass
class Point:
    op: str
    m: int
    n: int
    batch: int
    nrhs: int = 1  # right-hand sides of solve and solve_triangular; 0 for the other ops

    def __post_init__(self):
        if not takes_rhs(self.op):
            self.nrhs = 0


@dataclass
class Impl:
    """One implementation of the ops on one device.

    prepare(np_array) -> its input (applied to A and B of the ops with right-hand sides); run(op)
    -> fn(input), fn taking the pair for those ops, or None where this implementation has no such
    op (the point is then not timed for it); sync(): waits for queued work;
    timer: None (wall clock around run + sync) or fn(call, x) -> milliseconds; reference: shown
    with its own ratio but not counted as a peer (e.g. our other frontend)."""

    name: str
    prepare: object
    run: object
    sync: object = None
    timer: object = None
    reference: bool = False


@dataclass
class Record:
    op: str
    m: int
    n: int
    batch: int
    backend: str
    times: dict = field(default_factory=dict)  # impl -> {"best_ms", "median_ms", "runs"}
    roofline_ms: float = 0.0
    references: list = field(default_factory=list)  # impl names that are not peers
    nrhs: int = 0  # right-hand sides (solve, solve_triangular), 0 for the other ops

    @property
    def ours_ms(self) -> float:
        return self.times.get(OURS, {}).get("best_ms", math.nan)

    @property
    def best_peer(self):
        peers = [
            (t["best_ms"], name)
            for name, t in self.times.items()
            if name != OURS and name not in self.references
        ]
        peers = [p for p in peers if not math.isnan(p[0])]
        return min(peers)[::-1] if peers else (None, math.nan)

    @property
    def noisy(self) -> list:
        """Implementations whose timed runs spread by more than SPREAD_LIMIT (slowest/fastest)."""
        return [n for n, t in self.times.items() if t.get("spread", 1.0) > SPREAD_LIMIT]

    @property
    def speedup(self) -> float:
        return self.best_peer[1] / self.ours_ms if self.ours_ms > 0 else math.nan

    def ratio(self, name: str) -> float:
        """Time of implementation `name` / ours (> 1: ours is faster)."""
        t = self.times.get(name, {}).get("best_ms", math.nan)
        return t / self.ours_ms if self.ours_ms > 0 else math.nan

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
            noisy=self.noisy,
        )
        return d


def grid(ops=OPS, shapes=None, batches=BATCHES, max_work=MAX_WORK, nrhs=NRHS) -> list:
    """The benchmark points, shapes as (m, n) pairs (default: the square + tall grid); the
    square-only ops skip the other shapes, the ops with right-hand sides take each of nrhs; a
    point whose largest input (batch*m*n, or batch*n*nrhs) exceeds max_work is left out."""
    shapes = shapes or [(n, n) for n in SQUARE_N] + list(TALL)
    points = []
    for op in ops:
        for m, n in shapes:
            if square_only(op) and m != n:
                continue
            for r in nrhs if takes_rhs(op) else (0,):
                for b in batches:
                    if b * max(m, r) * n <= max_work:
                        points.append(Point(op, m, n, b, r))
    return points


def shape_text(p) -> str:
    """ "64x32", or "64x64 (4 rhs)" for an op with right-hand sides (a Point or a Record)."""
    return f"{p.m}x{p.n}" + (f" ({p.nrhs} rhs)" if p.nrhs else "")


def point_text(p) -> str:
    """ "qr 64x32 x1024", "solve 64x64 (1 rhs) x1024" (a Point or a Record)."""
    return f"{p.op} {shape_text(p)} x{p.batch}"


def parse_shape(text: str) -> tuple[int, int]:
    """ "64x32" -> (64, 32); "16" -> (16, 16)."""
    parts = text.lower().split("x")
    if len(parts) == 1:
        parts = parts * 2
    try:
        m, n = (int(p) for p in parts)
    except ValueError:
        raise ValueError(f"shape {text!r}: expected N or MxN, e.g. 64x32") from None
    if m < 1 or n < 1:
        raise ValueError(f"shape {text!r}: sizes must be >= 1")
    return m, n


def make_input(point: Point, seed: int = 0):
    """The point's float32 input, shared by every implementation: A with standard normal entries
    G, symmetric for the eigen-ops ((G + G^T) / 2), positive-definite for cholesky (G G^T / n +
    I), lower triangular for solve_triangular (tril(G) + sqrt(n) I), G + 2 sqrt(n) I for solve,
    inv and lu_factor (all well conditioned: condition numbers about 5 to 15); for the ops with
    right-hand sides the pair (A, B), B [batch, n, nrhs] standard normal."""
    rng = np.random.default_rng(seed)
    op, n = point.op, point.n
    a = rng.standard_normal((point.batch, point.m, n), dtype=np.float32)
    eye = np.eye(n, dtype=np.float32)
    if op in ("eigh", "eigvalsh"):
        a = (a + np.swapaxes(a, -1, -2)) * np.float32(0.5)
    elif op == "cholesky":
        a = a @ np.swapaxes(a, -1, -2) / np.float32(n) + eye
    elif op == "solve_triangular":
        a = np.tril(a) + np.float32(math.sqrt(n)) * eye
    elif op in linsys_ops():
        a = a + np.float32(2 * math.sqrt(n)) * eye
    a = np.ascontiguousarray(a)
    if takes_rhs(op):
        return a, rng.standard_normal((point.batch, n, point.nrhs), dtype=np.float32)
    return a


def prepared(impl, a):
    """impl's input from a point's NumPy input (A, or the pair (A, B))."""
    return tuple(impl.prepare(x) for x in a) if isinstance(a, tuple) else impl.prepare(a)


def numpy_fns(xp, op):
    """op on an array module with NumPy's linalg names (NumPy, CuPy, jax.numpy); None for the
    ops NumPy's linalg does not have (lu_factor, solve_triangular)."""
    la = xp.linalg
    return {
        "qr": lambda a: la.qr(a),
        "eigh": lambda a: la.eigh(a),
        "eigvalsh": lambda a: la.eigvalsh(a),
        "svd": lambda a: la.svd(a, full_matrices=False),
        "svdvals": lambda a: la.svd(a, compute_uv=False),
        "cholesky": lambda a: la.cholesky(a),
        "solve": lambda ab: la.solve(*ab),
        "inv": lambda a: la.inv(a),
    }.get(op)


def numpy_impl() -> Impl:
    return Impl("numpy", lambda a: a, lambda op: numpy_fns(np, op))


# ---- timing ----


def planned_runs(warm_s: float, min_runs: int, budget_s: float, slow_s: float) -> int:
    """Timed runs after a warm-up call of warm_s seconds (0: the warm-up is the measurement)."""
    if warm_s > slow_s:
        return 0
    return max(min_runs, min(RUNS_MAX, int(budget_s / max(warm_s, 1e-6))))


def _timed_calls(call, x, sync, count: int) -> float:
    """Seconds of `count` calls, each completed (synced) before the next."""
    t0 = time.perf_counter()
    for _ in range(count):
        call(x)
        if sync:
            sync()
    return time.perf_counter() - t0


def time_runs(call, x, impl: Impl, min_runs: int, budget_s: float, slow_s: float) -> list:
    """Milliseconds per call of each timed run after one warm-up; fewer runs for slow points;
    a run of a call shorter than MIN_RUN_S times a group of calls (see MIN_RUN_S)."""
    warm = _timed_calls(call, x, impl.sync, 1)
    runs = planned_runs(warm, min_runs, budget_s, slow_s)
    if runs == 0:
        return [warm * 1e3]
    group = 1
    if not impl.timer and warm < MIN_RUN_S:
        again = _timed_calls(call, x, impl.sync, 1)  # a first call can be slower than the rest
        group = min(GROUP_MAX, max(1, math.ceil(MIN_RUN_S / max(again, 1e-7))))
    out = []
    for _ in range(runs):
        if impl.timer:
            out.append(impl.timer(call, x))
        else:
            out.append(_timed_calls(call, x, impl.sync, group) * 1e3 / group)
    return out


def estimate_seconds(points, per_call_s, names, min_runs, budget_s, slow_s) -> float:
    """Seconds a grid is expected to take when implementation `name`'s call of a point takes
    per_call_s(name, point) seconds (None: not timed there): the warm-up plus the planned runs,
    for every implementation."""
    total = 0.0
    for p in points:
        for name in names:
            t = per_call_s(name, p)
            if t is None:
                continue
            total += t + max(t, MIN_RUN_S) * planned_runs(t, min_runs, budget_s, slow_s)
    return total


def probe_rates(impls, ops, probe_n: int = 32, probe_batch: int = 64) -> dict:
    """{(impl name, op): (fixed_s, flop_rate)} from two small probe shapes of each implementation
    (8x8 x1 and probe_n^2 x probe_batch, a few calls each), to extrapolate the time of a grid: a rough figure,
    printed before a long run. A failed probe counts as free (its error under "failed"); an
    implementation without the op has no entry."""
    rates = {}
    for impl in impls:
        for op in ops:
            try:
                call = impl.run(op)
                if call is None:
                    continue
                times = []
                for n, batch in ((8, 1), (probe_n, probe_batch)):
                    x = prepared(impl, make_input(Point(op, n, n, batch)))
                    # The lower quartile of 5 or more runs: a grid's time is the sum of its
                    # runs (typical ones, not the fastest), but on a busy machine stalls can
                    # last through most of a probe's few milliseconds (torch's MKL threads on a
                    # loaded 2-core machine: the median then overestimated a quick grid 6x).
                    ms = sorted(time_runs(call, x, impl, 5, 0.05, 1.0))
                    times.append(ms[len(ms) // 4] / 1e3)
            except Exception as exc:  # noqa: BLE001 (the grid run records the failure)
                rates[(impl.name, op)] = (0.0, math.inf)
                rates.setdefault("failed", {})[(impl.name, op)] = repr(exc)[:200]
            else:
                work = probe_batch * nominal_flops(op, probe_n, probe_n)
                rates[(impl.name, op)] = (times[0], work / max(times[1] - times[0], 1e-7))
    rates["probed"] = {impl.name for impl in impls}
    return rates


def per_call_from_rates(rates):
    """per_call(name, point) -> seconds of a call from probe_rates' figures; None where a probed
    implementation has no such op, 0 for one not probed."""
    probed = rates.get("probed", set())

    def per_call(name: str, p: Point):
        if (name, p.op) not in rates and name in probed:
            return None
        fixed, rate = rates.get((name, p.op), (0.0, math.inf))
        return fixed + p.batch * nominal_flops(p.op, p.m, p.n, p.nrhs) / rate

    return per_call


# ---- roofline ----


def nominal_flops(op: str, m: int, n: int, nrhs: int = 1) -> float:
    """Nominal LAPACK flop counts per matrix (Golub & Van Loan; LAPACK Working Notes): qr
    geqrf + orgqr of the thin Q; eigh 9n^3 (tridiagonal QL with vectors); eigvalsh 4n^3/3; thin
    svd (S, U1, V) the cheaper of Golub-Reinsch 14mk^2 + 8k^3 and R-SVD 6mk^2 + 20k^3; svdvals
    Golub-Reinsch 4mk^2 - 4k^3/3 (m the longer side, k the shorter); cholesky n^3/3 (potrf);
    lu_factor mk^2 - k^3/3 (getrf); inv 2n^3 (getrf + getri); solve 2n^3/3 + 2n^2 nrhs (getrf +
    getrs); solve_triangular n^2 nrhs (trsm)."""
    k, big = min(m, n), max(m, n)
    linsys = {  # each op's own count
        "cholesky": lambda: n**3 / 3,
        "lu_factor": lambda: big * k * k - k**3 / 3,
        "inv": lambda: 2.0 * n**3,
        "solve": lambda: 2.0 * n**3 / 3 + 2.0 * n * n * nrhs,
        "solve_triangular": lambda: 1.0 * n * n * nrhs,
    }
    if op in linsys:
        return linsys[op]()
    if op == "qr":
        return 4.0 * big * k * k - 4.0 * k**3 / 3
    if op == "eigh":
        return 9.0 * n**3
    if op == "eigvalsh":
        return 4.0 * n**3 / 3
    if op == "svd":
        return min(14.0 * big * k * k + 8.0 * k**3, 6.0 * big * k * k + 20.0 * k**3)
    return 4.0 * big * k * k - 4.0 * k**3 / 3


def output_floats(op: str, m: int, n: int, nrhs: int = 0) -> int:
    """Floats (lu_factor's pivots: int32, as many bytes) per matrix of op's outputs (the core's
    op table, default flags; nrhs: the right-hand sides)."""
    dims = {"m": m, "n": n, "k": min(m, n), "r": nrhs}
    total = 0
    for symbols in OUTPUTS[op]:
        size = 1
        for d in symbols:
            size *= dims[d]
        total += size
    return total


def roofline_ms(point: Point, peaks: dict) -> float:
    """max(bytes / copy bandwidth, nominal flops / fp32 GEMM rate) in milliseconds."""
    m, n, r = point.m, point.n, point.nrhs
    nbytes = 4 * point.batch * (m * n + n * r + output_floats(point.op, m, n, r))
    flops = point.batch * nominal_flops(point.op, m, n, r)
    return 1e3 * max(nbytes / peaks["copy_bytes_per_s"], flops / peaks["fp32_flops_per_s"])


def numpy_peaks() -> dict:
    """Host copy bandwidth and float32 GEMM rate measured with NumPy."""
    src = np.ones(1 << 24, dtype=np.float32)
    dst = np.empty_like(src)
    copy_s = min(_seconds(lambda: np.copyto(dst, src)) for _ in range(5))
    a = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
    a @ a
    gemm_s = min(_seconds(lambda: a @ a) for _ in range(3))
    return {"copy_bytes_per_s": 2 * src.nbytes / copy_s, "fp32_flops_per_s": 2 * 1024**3 / gemm_s}


def best_seconds(fn, reps: int, sync=None) -> float:
    """The shortest of reps timed calls of fn; sync (a device's synchronize), when given, before
    each call and after it, inside the timing."""
    times = []
    for _ in range(reps):
        if sync:
            sync()
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - t0)
    return min(times)


def _seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# ---- driver ----


def run_grid(
    fe,
    points,
    device: str,
    peers=None,
    min_runs: int = MIN_RUNS,
    budget_s: float = BUDGET_S,
    slow_s: float = 10.0,
    progress: bool = True,
    console=None,
    on_record=None,
    weights=None,
) -> list:
    """Time every implementation on every point; returns [Record]. A peer failing a point is
    recorded with its error (not raised). on_record(records) runs after each point (to save
    partial results); weights: the expected seconds of each point, so that the progress bar's
    remaining time follows the estimate rather than the count of points."""
    impls = fe.implementations(device, peers)
    peaks = fe.machine_peaks(device)
    refs = [i.name for i in impls if i.reference]
    # floor: a point whose probe failed (estimated free) still moves the bar
    weights = [max(w, 1e-3) for w in weights] if weights else [1.0] * len(points)
    records = []
    bar = task = lines = None
    if progress:
        bar = _rich_progress(console)
        lines = None if bar else _ProgressLines(weights)
    if bar:
        from rich.progress import BarColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        bar = bar(
            TextColumn("{task.fields[done]}/{task.fields[count]} points"),
            BarColumn(),
            TextColumn("{task.description}"),
            TextColumn("elapsed"),
            TimeElapsedColumn(),
            TextColumn("remaining"),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        task = bar.add_task("", total=sum(weights), done=0, count=len(points))
        bar.start()
    try:
        for i, point in enumerate(points):
            a = make_input(point, seed=i)
            rec = Record(
                point.op,
                point.m,
                point.n,
                point.batch,
                fe.backend_label(point.op, point.m, point.n, point.batch, device),
                references=refs,
                nrhs=point.nrhs,
            )
            rec.roofline_ms = roofline_ms(point, peaks)
            for impl in impls:
                try:
                    call = impl.run(point.op)
                    if call is None:
                        continue  # no such op there: not timed, "-" in the tables
                    if bar:
                        bar.update(task, description=f"{point_text(point)} {impl.name}")
                    ms = time_runs(call, prepared(impl, a), impl, min_runs, budget_s, slow_s)
                    rec.times[impl.name] = {
                        "best_ms": min(ms),
                        "median_ms": statistics.median(ms),
                        "runs": len(ms),
                        "spread": max(ms) / min(ms) if min(ms) > 0 else 1.0,
                    }
                except Exception as exc:  # noqa: BLE001 (a peer failing a shape is a result)
                    rec.times[impl.name] = {
                        "best_ms": math.nan,
                        "median_ms": math.nan,
                        "runs": 0,
                        "error": f"{type(exc).__name__}: {exc}"[:200],
                    }
            records.append(rec)
            if on_record:
                on_record(records)
            if bar:
                bar.update(task, advance=weights[i], done=i + 1)
            elif lines:
                lines.point_done(i, point_text(point))
    finally:
        if bar:
            bar.stop()
    return records


def _rich_progress(console):
    """rich's Progress class where it can draw a live bar (rich installed, a terminal), else
    None (plain lines instead)."""
    try:
        from rich.console import Console
        from rich.progress import Progress
    except ImportError:
        return None
    if not (console or Console()).is_terminal:
        return None  # piped or captured: a live bar would print nothing
    return Progress


class _ProgressLines:
    """The progress as one plain line per point on stderr: points done, elapsed and remaining
    time (the remaining time from the points' expected weights, as the bar's)."""

    def __init__(self, weights):
        self.weights = weights
        self.total = sum(weights)
        self.done = 0.0
        self.start = time.perf_counter()

    def point_done(self, i: int, what: str) -> None:
        self.done += self.weights[i]
        elapsed = time.perf_counter() - self.start
        left = elapsed * (self.total - self.done) / self.done if self.done > 0 else math.nan
        print(
            f"{i + 1}/{len(self.weights)} points ({what}): elapsed {elapsed:.0f} s, "
            f"remaining about {left:.0f} s",
            file=sys.stderr,
            flush=True,
        )


def noisy_lines(records) -> list:
    """ "eigh 64x64 x256: torch 5.1x" for every point with an implementation whose timed runs
    spread by more than SPREAD_LIMIT."""
    lines = []
    for r in records:
        if r.noisy:
            spread = ", ".join(f"{n} {r.times[n]['spread']:.1f}x" for n in r.noisy)
            lines.append(f"{point_text(r)}: {spread}")
    return lines


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def check_out_dir(path: str) -> None:
    """Raise OSError unless files can be created in folder `path` (created if missing)."""
    os.makedirs(path, exist_ok=True)
    if not os.path.isdir(path):
        raise NotADirectoryError(f"{path} is not a folder")
    fd, probe = tempfile.mkstemp(prefix=".bench-write-check-", dir=path)
    os.close(fd)
    os.remove(probe)


# ---- reporting ----


def _impl_names(records) -> list:
    names = []
    for r in records:
        for name in r.times:
            if name not in names:
                names.append(name)
    return names


def _refs(records) -> list:
    return list(dict.fromkeys(n for r in records for n in r.references))


def _fmt(ms: float) -> str:
    if ms is None or math.isnan(ms):
        return "-"
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def _x(v: float) -> str:
    return "-" if v is None or math.isnan(v) else f"{v:.2f}x"


def _time_cell(r, name: str) -> str:
    """Best time, marked "!" when that implementation's runs spread by more than SPREAD_LIMIT."""
    cell = _fmt(r.times.get(name, {}).get("best_ms", math.nan))
    return cell + "!" if name in r.noisy else cell


def _peers(records) -> list:
    """Implementations that are peers (not ours, not a reference), in report order."""
    refs = set(_refs(records))
    return [n for n in _impl_names(records) if n != OURS and n not in refs]


def rich_table(records, title: str):
    from rich.table import Table

    names, refs = _impl_names(records), _refs(records)
    noisy = any(r.noisy for r in records)
    table = Table(title=title, caption="! = timed runs spread by more than 2x" if noisy else None)
    for col in ("op", "shape", "batch", "backend"):
        table.add_column(col)
    for name in names:
        table.add_column(f"{name} ms", justify="right")
    table.add_column("best peer")
    table.add_column("vs best peer", justify="right")
    for ref in refs:
        table.add_column(f"vs {ref}", justify="right")
    table.add_column("roofline", justify="right")
    if noisy:
        table.add_column("spread > 2x")
    for r in records:
        s = r.speedup
        colour = "green" if s >= 1 else "red"
        roof = r.roofline_ms / r.ours_ms if r.ours_ms > 0 else math.nan
        table.add_row(
            r.op,
            shape_text(r),
            str(r.batch),
            r.backend,
            *(_time_cell(r, n) for n in names),
            r.best_peer[0] or "-",
            f"[{colour}]{s:.2f}x[/{colour}]" if not math.isnan(s) else "-",
            *(_x(r.ratio(ref)) for ref in refs),
            f"{roof:.1%}" if not math.isnan(roof) else "-",
            *([", ".join(r.noisy) or ""] if noisy else []),
        )
    return table


def markdown_table(records) -> str:
    names, refs = _impl_names(records), _refs(records)
    head = ["op", "shape", "batch", "backend"] + [f"{n} ms" for n in names]
    head += ["us/matrix", "best peer", "vs best peer"] + [f"vs {ref}" for ref in refs]
    head += ["roofline", "runs spread > 2x"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in records:
        d = r.as_dict()
        cells = [r.op, shape_text(r), str(r.batch), f"`{r.backend}`"]
        cells += [_time_cell(r, n) for n in names]
        cells += [f"{d['us_per_matrix']:.3g}", r.best_peer[0] or "-", _x(r.speedup)]
        cells += [_x(r.ratio(ref)) for ref in refs]
        cells += [
            f"{d['roofline_fraction']:.1%}" if not math.isnan(d["roofline_fraction"]) else "-"
        ]
        cells += [", ".join(f"{n} {r.times[n]['spread']:.1f}x" for n in r.noisy)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def summary(records) -> str:
    """One line: geometric-mean speedup over the best peer, overall and on batches >= 64 with
    n <= 32, and the number of points where a peer is faster."""
    all_ = [r.speedup for r in records]
    small = [r.speedup for r in records if r.batch >= 64 and max(r.m, r.n) <= 32]
    slower = sum(1 for s in all_ if not math.isnan(s) and s < 1)
    over = plural(_count(all_), "point")
    text = f"geometric-mean speedup vs best peer: {geomean(all_):.2f}x over {over}"
    if _count(small):
        text += f" (batch >= 64 and n <= 32: {geomean(small):.2f}x)"
    return text + f"; slower than the best peer on {slower}"


def _count(values) -> int:
    return sum(1 for v in values if v > 0 and not math.isnan(v))


def bar_spans(values) -> list:
    """(bottom, top) of each speedup bar: bars start at 1x, so 0.997x is a sliver below the
    1x line and 2x as tall (on the log axis) as 0.5x is deep."""
    return [(min(1.0, v), max(1.0, v)) for v in values]


def bar_label(speedup: float, noisy: bool = False) -> str:
    """The number over a bar: two significant digits, three where two would round a speedup
    near 1x to "1" (0.997x is a loss), "!" where the point's timed runs spread by more than
    SPREAD_LIMIT."""
    text = f"{speedup:.0f}" if speedup >= 100 else f"{speedup:.2g}"
    if text == "1" and speedup != 1:
        text = f"{speedup:.3g}"
    return text + ("!" if noisy else "")


PEER_COLOURS = ("tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:cyan", "tab:olive")


def plot_layout(records) -> dict:
    """What plot() draws: the ops (one panel each), their rows, the y-range every panel shares,
    the peers named in the title, the peers that were fastest somewhere (the legend) and the
    colour of each peer."""
    ops = [op for op in bench_ops() if any(r.op == op for r in records)]
    rows_of = {op: [r for r in records if r.op == op and not math.isnan(r.speedup)] for op in ops}
    values = [r.speedup for rows in rows_of.values() for r in rows]
    peers = _peers(records)
    best = list(dict.fromkeys(r.best_peer[0] for rows in rows_of.values() for r in rows))
    every_peer = list(dict.fromkeys(peers + best))
    return {
        "ops": ops,
        "rows": rows_of,
        "ylim": (min([0.5, *values]) / 1.4, max([2.0, *values]) * 1.4),
        "peers": peers,
        "best": best,
        "colour": {p: PEER_COLOURS[i % len(PEER_COLOURS)] for i, p in enumerate(every_peer)},
    }


def plot(records, path: str, title: str) -> dict:
    """One panel per op: a bar per point from 1x to its speedup vs the best peer (log axis, the
    same range in every panel), coloured by which peer was the fastest there, hatched where
    that peer beat us. Returns {op: [(bottom, top) of each bar drawn]}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker
    from matplotlib.patches import Patch

    lay = plot_layout(records)
    ops, rows_of, (lo, hi) = lay["ops"], lay["rows"], lay["ylim"]
    peers, best, colour = lay["peers"], lay["best"], lay["colour"]
    widest = max([len(rows) for rows in rows_of.values()] + [1])
    fig, axes = plt.subplots(
        len(ops), 1, figsize=(max(11.0, 0.55 * widest + 2), 3.3 * len(ops)), squeeze=False
    )
    drawn = {}
    for ax, op in zip(axes[:, 0], ops):
        rows = rows_of[op]
        values = [r.speedup for r in rows]
        spans = bar_spans(values)
        bars = ax.bar(
            range(len(rows)),
            [top - bottom for bottom, top in spans],
            bottom=[bottom for bottom, _ in spans],
            color=[colour[r.best_peer[0]] for r in rows],
            hatch=["//" if v < 1 else "" for v in values],
            edgecolor="black",
            linewidth=0.4,
        )
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_ylim(lo, hi)
        ax.yaxis.set_major_locator(ticker.LogLocator(base=2))
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        ax.tick_params(axis="y", labelsize=9)
        for i, (r, v) in enumerate(zip(rows, values)):
            ax.annotate(
                bar_label(v, bool(r.noisy)),
                (i, v),
                xytext=(0, 2 if v >= 1 else -2),
                textcoords="offset points",
                ha="center",
                va="bottom" if v >= 1 else "top",
                fontsize=7.5,
                color="black" if v >= 1 else "tab:red",
            )
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels(
            [f"{r.m}x{r.n}\nx{r.batch}" + (f"\n{r.nrhs} rhs" if r.nrhs else "") for r in rows],
            fontsize=8,
        )
        ax.set_xlim(-0.6, max(len(rows), 1) - 0.4)
        ax.set_ylabel("speedup vs best peer", fontsize=9)
        ax.set_title(op, fontsize=10, loc="left")
        ax.grid(axis="y", which="major", linewidth=0.3, alpha=0.6)
        drawn[op] = [(b.get_y(), b.get_y() + b.get_height()) for b in bars]
    handles = [Patch(facecolor=colour[p], edgecolor="black", label=f"best peer: {p}") for p in best]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="peer faster"))
    if any(r.noisy for rows in rows_of.values() for r in rows):
        label = f"! runs spread > {SPREAD_LIMIT:g}x"
        handles.append(Patch(facecolor="white", edgecolor="white", label=label))
    fig.legend(handles=handles, loc="upper right", ncol=len(handles), fontsize=9, frameon=False)
    fig.suptitle(
        f"{title}\nmetal_linalg vs the fastest of: {', '.join(peers) or 'no peer'}",
        fontsize=10,
        x=0.01,
        ha="left",
    )
    fig.tight_layout(rect=(0, 0, 1, 0.97 if len(ops) > 1 else 0.9))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return drawn


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "device"


def metadata(fe, device: str, peaks=None) -> dict:
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "package": fe.package,
        "device": device,
        "device_name": fe.q.device_name(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        fe.framework: fe.framework_version,
        "numpy": np.__version__,
        "metal_linalg": fe.q.version(),
        "lapack": fe.q.lapack_info(),
        "cpu_threads": fe.q.get_cpu_threads(),
        "policies": {
            op: {
                "policy": getattr(fe.q, f"{op}_policy")(),
                "source": getattr(fe.q, f"{op}_policy_source")(),
            }
            for op in OPS
        },
    }
    if peaks:
        meta["peaks"] = peaks
    meta.update(fe.metadata(device))
    return meta


def default_name(fe, device: str, device_name: str) -> str:
    return f"{slug(device_name)}-{fe.framework}-{device}"


def result_paths(out_dir: str, name: str) -> dict:
    return {ext: os.path.join(out_dir, f"{name}.{ext}") for ext in ("json", "md", "png")}


def write_json(path: str, meta: dict, records, planned: int | None = None) -> str:
    """The results as JSON; planned (the number of points of a run still going) marks a partial
    file. Written to a side file and renamed, so a crash never leaves half a file."""
    meta = {**meta, "complete": planned is None}
    if planned is not None:
        meta["points_planned"] = planned
    tmp = path + ".part"
    with open(tmp, "w") as f:
        json.dump(
            {"meta": meta, "results": [r.as_dict() for r in records]}, f, indent=1, default=str
        )
    os.replace(tmp, path)
    return path


def write_results(
    fe, records, out_dir: str, device: str, name: str | None = None, meta: dict | None = None
) -> dict:
    """Write <name>.json, <name>.md and <name>.png into out_dir; returns the paths."""
    os.makedirs(out_dir, exist_ok=True)
    meta = meta or metadata(fe, device)
    name = name or default_name(fe, device, meta["device_name"])
    paths = result_paths(out_dir, name)
    write_json(paths["json"], meta, records)
    title = f"{fe.package} vs peers on {meta['device_name']} ({device}), {meta['date']}"
    refs = _refs(records)
    with open(paths["md"], "w") as f:
        f.write(
            f"# {title}\n\n{fe.framework} {fe.framework_version}, NumPy {np.__version__}, core "
            f"{meta['metal_linalg']}, LAPACK: {meta['lapack']}. Best of several runs after a "
            "warm-up, milliseconds per call of the whole batch; `vs best peer` > 1 means "
            "metal_linalg is faster"
            + (f" (`{'`, `'.join(refs)}`: shown for reference, not a peer)" if refs else "")
            + "; roofline = max(bytes / measured copy bandwidth, nominal LAPACK flops / measured "
            "fp32 GEMM rate) / measured time. A time marked `!` comes from runs whose slowest "
            f"took more than {SPREAD_LIMIT:g}x the fastest (a busy machine?): treat it with "
            "care.\n\n"
        )
        notes = [*meta.get("notes", []), *report_notes(records)]
        if notes:
            f.write("".join(f"- {n}\n" for n in notes) + "\n")
        f.write(markdown_table(records))
        f.write("\n" + summary(records) + ".\n")
    plot(records, paths["png"], title)
    return paths


def report_notes(records) -> list:
    """The Markdown report's notes on the linear systems' inputs, and on the implementations
    that do not have some of the ops measured (not timed there)."""
    notes = []
    if any(r.op in linsys_ops() for r in records):
        notes.append(
            "Linear systems: A = G G^T / n + I for cholesky, tril(G) + sqrt(n) I for "
            "solve_triangular (lower), G + 2 sqrt(n) I for solve, inv and lu_factor (G standard "
            "normal); solve and solve_triangular with B [batch, n, nrhs] (the shape's `rhs`)."
        )
    ops = list(dict.fromkeys(r.op for r in records))
    for name in _impl_names(records):
        missing = [op for op in ops if not any(name in r.times for r in records if r.op == op)]
        if missing:
            notes.append(f"{name} has no {', '.join(missing)}: not timed there.")
    return notes


def load_records(path: str) -> list:
    """Records back from a JSON file written by write_results (e.g. to re-plot or merge runs)."""
    with open(path) as f:
        rows = json.load(f)["results"]
    names = {f.name for f in Record.__dataclass_fields__.values()}
    return [Record(**{k: v for k, v in row.items() if k in names}) for row in rows]


def geomean(values) -> float:
    vals = [v for v in values if v > 0 and not math.isnan(v)]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else math.nan
