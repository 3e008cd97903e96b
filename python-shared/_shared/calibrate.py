"""Measure this machine and write the per-machine policy file the core reads (policy_file()).

The ops: every op with a routing policy (queries.POLICY_OPS), the decompositions and the linear
systems, these on square matrices (solve and solve_triangular with one right-hand side, inputs
as the benchmark makes them: positive-definite for cholesky, well conditioned for the others).
CPU: for each op, the largest n up to which the portable CPU kernel beats LAPACK on a batch
(cpu_kernel_max_n; the linear systems' kernels across SIMD lanes, up to n = 128). With a GPU in
the core:
- host_gpu_min_work (any frontend; not for the linear systems, whose host data always stays
  with LAPACK): the work batch*m*n from which host data is faster sent through the GPU, copies
  included, than computed by the CPU backend (0 = never);
- with data in GPU memory (a frontend with a `gpu` device): gpu_min_batch, the smallest batch at
  which device data is faster on the GPU than through the CPU backend, and gpu_lane_max_n /
  gpu_lane_min_batch, where the lane-per-matrix launch beats the block launch;
  gpu_global_max_n / gpu_global_min_batch, where the global launch (a group kernel with its
  scratch in device memory, for shapes beyond the shared-memory window) beats the host route
  (copy to the host and LAPACK); gpu_blocked_min_n / gpu_blocked_max_batch, where the blocked
  algorithms beat the shared-memory kernels inside their window (a backend with the blocked
  path only).
Other fields keep their values.

The functions that turn timings into thresholds (choose_*), the policy-file merge and the table
writer are pure, so they are tested without a GPU. measure() collects every raw timing;
calibrate() checks the destinations first (an existing policy file must be text the core reads
whole), then measures, writes and reloads.

The frontend adapter `fe` provides: `q` (its Queries), `package`, `framework`,
`framework_version`, `gpu` (its device name for GPU-resident data, or None), `op(op, device)` (a
callable running our op on an input and returning once the result is ready on the host side of
that device's queue), `sync(device)`, `random_input(op, n, batch, device, seed)`,
`event_timer(device)` (None, or a fn(call, x) -> seconds measured on the device) and `warm_gpu()`.
"""

from __future__ import annotations

import json
import os
import platform
import re
import stat
import tempfile
import time

from .queries import LINSYS_OPS, OPS, POLICY_OPS  # noqa: F401 (OPS: re-exported)

CPU_SIZES = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
# ... and for the linear systems, whose kernels across SIMD lanes reach n = 128.
LINSYS_CPU_SIZES = (*CPU_SIZES, 96, 128)
CPU_BATCH = 256
GPU_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
HUGE = 1 << 30

# Host data: CPU backend vs the GPU route (copies included).
HOST_SIZES = (8, 16, 32, 64, 128)
HOST_BATCHES = (1, 16, 64, 256, 1024, 4096, 16384)
HOST_MAX_WORK = 1 << 26  # batch * n * n
HOST_BOTH_SLOW_S = 0.5  # stop growing the batch of an n once both routes take longer than this
HOST_ONE_SLOW_S = 2.0  # ... or once one of them does
HOST_PREDICTED_MAX_S = 4.0  # skip a point predicted (linearly in batch) to take longer

# Device data: lane-per-matrix launch vs block launch.
LANE_SIZES = (2, 3, 4, 6, 8, 12, 16, 24, 32)
LANE_BATCHES = (256, 1024, 4096, 16384, 65536)
# The simdgroup kernels (gpu_simd_min_n..gpu_simd_max_n) against what the op runs without them,
# device data.
SIMD_SIZES = (9, 12, 16, 24, 32, 48, 64)
# ... and for the linear systems, whose SIMD lines reach n = 128 (solve_triangular_simd128).
LINSYS_SIMD_SIZES = (*SIMD_SIZES, 96, 128)
SIMD_BATCHES = (1, 64, 1024, 16384)
SIMD_MAX_WORK = 1 << 26  # batch * max(m, n)^2 above this is not timed
SIMD_TOLERANCE = 1.05  # timing noise: two times within this factor are alike (no loss, no win)
# ... and one within this factor is a loss a size may carry where it saves time over the batches
# (a lone matrix a little slower for a batch's gain: the window has no batch bound).
SIMD_MAX_LOSS = 1.2
LANE_GIVE_UP = 2.0  # past a loss of the lane launch by this factor, larger n are not timed
# Device data beyond the shared window: the global launch against the host route.
GLOBAL_SIZES = (256, 384, 512, 768, 1024)
GLOBAL_BATCHES = (1, 8, 64)
GLOBAL_MAX_WORK = 1 << 34  # batch * n^3 above this is not timed
GLOBAL_SLOW_S = (
    5.0  # once the global launch loses and takes longer than this, larger n are not timed
)

# Device data inside the shared window: the blocked algorithms against the table's kernels.
BLOCKED_SIZES = (64, 96, 128, 192)
BLOCKED_BATCHES = (1, 8, 64)
BLOCKED_TOLERANCE = SIMD_TOLERANCE  # a blocked time within this factor of the kernels' is no loss
UNBOUNDED = (1 << 63) - 1  # gpu_blocked_max_batch's default: no bound on the batch
# Device data: an op's alternative group kernel (its next kernel-table line) against its first,
# the window by choose_simd's rule; measured for the ops these kernels belong to (alt_op).
ALT_KERNELS = (
    "cholesky_cols",
    "eigh_tridiag_bisect",
    "eigvalsh_tridiag_ql",
    "svd_jacobi_group",
    "svdvals_jacobi_group",
)
ALT_SIZES = (33, 48, 64, 96, 128)
ALT_BATCHES = (1, 64)  # the window is claimed up to the largest (gpu_alt_max_batch)
ALT_MAX_WORK = 1 << 26  # batch * n^2 above this is not timed

SLOW_CALL_S = 0.25  # a call slower than this is timed once after its warm-up
LANE_FIELDS = ("gpu_lane_max_n", "gpu_lane_min_batch")
FIELD_ORDER = (
    "cpu_kernel_max_n",
    "gpu_min_batch",
    "gpu_max_n",
    "host_gpu_min_work",
    "gpu_lane_max_n",
    "gpu_lane_min_batch",
    "gpu_small_max_n",
    "gpu_simd_max_n",
    "gpu_simd_min_n",
    "gpu_global_max_n",
    "gpu_global_min_batch",
    "gpu_blocked_min_n",
    "gpu_blocked_max_batch",
    "gpu_alt_min_n",
    "gpu_alt_max_n",
    "gpu_alt_max_batch",
    "cpu_small_max_n",
)
GLOBAL_FIELDS = ("gpu_global_max_n", "gpu_global_min_batch")
BLOCKED_FIELDS = ("gpu_blocked_min_n", "gpu_blocked_max_batch")
ALT_FIELDS = ("gpu_alt_min_n", "gpu_alt_max_n", "gpu_alt_max_batch")
HEADER_MARK = "# metal-linalg policy measured by "
MAX_POLICY_FILE_BYTES = 1 << 20  # what the core reads of a policy file at most (policy.cpp)


class DestinationError(OSError):
    """A file calibrate must write cannot be written."""


# ---------------------------------------------------------------------------------------------
# Pure selection rules (timings in, thresholds out).


def _wins(t_fast, t_slow) -> bool | None:
    """Whether t_fast < t_slow; None when either was not measured."""
    if t_fast is None or t_slow is None:
        return None
    return t_fast < t_slow


def alt_op(op: str) -> bool:
    """Whether the op has an alternative group kernel the alt phase measures."""
    return any(k.startswith(op + "_") for k in ALT_KERNELS)


def host_op(op: str) -> bool:
    """Whether host data of op may go to the GPU (host_gpu_min_work): not for the linear
    systems, whose host buffers always stay with LAPACK on the CPU."""
    return op not in LINSYS_OPS


def cpu_sizes(op: str) -> tuple:
    """The sizes the cpu_kernel phase times for op."""
    return LINSYS_CPU_SIZES if op in LINSYS_OPS else CPU_SIZES


def simd_sizes(op: str) -> tuple:
    """The sizes the simd phase times for op."""
    return LINSYS_SIMD_SIZES if op in LINSYS_OPS else SIMD_SIZES


def choose_cpu_kernel_max_n(timings) -> int:
    """cpu_kernel_max_n from [(n, t_kernel, t_lapack)] in measuring order: the largest n before the
    first size where the kernel does not win (0: LAPACK everywhere)."""
    best = 0
    for n, t_kernel, t_lapack in timings:
        if not _wins(t_kernel, t_lapack):
            break
        best = n
    return best


def choose_host_gpu_min_work(points) -> int | None:
    """host_gpu_min_work from (work, t_cpu, t_gpu) triples, work = batch*m*n, seconds per call.

    The smallest measured work W at which the GPU route wins such that it wins at every measured
    point with work >= W (W is a measured work: nothing is claimed about unmeasured work below it).
    Returns 0 (the field's "never") when the GPU route loses at the largest work measured, and None
    when nothing was measured. A point with t_gpu None (no GPU route for that shape) or t_cpu
    None (not measured) is left out.
    """
    measured = [(int(w), bool(_wins(g, c))) for w, c, g in points if _wins(g, c) is not None]
    if not measured:
        return None
    losing = [w for w, win in measured if not win]
    above = [w for w, win in measured if win and (not losing or w > max(losing))]
    return min(above) if above else 0


def choose_lane(timings, sizes=LANE_SIZES, batches=LANE_BATCHES) -> tuple[int | None, int | None]:
    """(gpu_lane_max_n, gpu_lane_min_batch) from {(n, batch): (t_lane, t_block)} in seconds.

    t_lane None: the lane launch is not available (or failed) there, which counts as a loss; a
    missing key, a None value or t_block None: not measured.
    gpu_lane_max_n: the largest n of `sizes` such that the lane launch wins at the largest batch of
    `batches` for every n' <= n of `sizes` (0 if it loses at the smallest n; the sizes from the
    first one not measured at the largest batch on are not claimed). gpu_lane_min_batch: the
    smallest batch of `batches` such that the lane launch wins at every measured batch >= it for
    every n <= gpu_lane_max_n (points not measured there count as losses); None when
    gpu_lane_max_n is 0 (the launch is off, the field does not matter).
    Returns (None, None) when nothing usable was measured at the smallest n.
    """
    sizes, batches = sorted(sizes), sorted(batches)
    top = batches[-1]

    def result(n, b):
        v = timings.get((n, b))
        if v is None:
            return None  # not measured
        t_lane, t_block = v
        if t_block is None:
            return None
        return t_lane is not None and t_lane < t_block

    max_n = None
    for n in sizes:
        r = result(n, top)
        if r is None:
            break
        if not r:
            max_n = max_n or 0
            break
        max_n = n
    if not max_n:
        return max_n, None
    covered = [n for n in sizes if n <= max_n]
    for i, b in enumerate(batches):
        if all(result(n, bb) is True for n in covered for bb in batches[i:]):
            return max_n, b
    return max_n, top  # unreachable: every covered n wins at the largest batch


def choose_simd(timings, sizes=SIMD_SIZES, batches=SIMD_BATCHES) -> tuple[int, int] | None:
    """(gpu_simd_min_n, gpu_simd_max_n) from {(n, batch): (t_simd, t_other)} in seconds: the
    window of consecutive sizes of `sizes` where the simdgroup kernel wins, wherever in n it
    lies. A size wins when the kernel saves time summed over its measured batches (a workload
    spread evenly over them), is faster than the route without it by more than timing noise
    (SIMD_TOLERANCE) at one batch at least, and slower by no more than SIMD_MAX_LOSS at any
    (the window has no batch bound: a lone matrix may be a little slower where a large batch
    gains); a point with t_simd None counts as a loss (the kernel failed or none covers n
    there), a size with no measured batch ends every window (nothing is claimed across it). Of the
    windows, the one saving the most time over its points (sum of t_other - t_simd) is taken,
    ties to the smaller n. min_n is 0 when the window starts at the smallest size (no lower
    bound), else its first size; max_n its last. (0, 0) when the kernel wins at no size; None
    when nothing was measured."""
    runs, cur, measured = [], None, False
    for n in sorted(sizes):
        pts = [timings[(n, b)] for b in batches if timings.get((n, b)) is not None]
        pts = [(ts, to) for ts, to in pts if to is not None]
        if not pts:
            if cur:
                runs.append(cur)
            cur = None
            if measured:
                break
            continue
        measured = True
        bounded = all(ts is not None and ts <= SIMD_MAX_LOSS * to for ts, to in pts)
        saved = sum(to - ts for ts, to in pts) if bounded else 0.0  # unbounded: no win
        if not (saved > 0 and any(ts * SIMD_TOLERANCE < to for ts, to in pts)):
            if cur:
                runs.append(cur)
            cur = None
            continue
        cur = [cur[0], n, cur[2] + saved] if cur else [n, n, saved]
    if cur:
        runs.append(cur)
    if not measured:
        return None
    if not runs:
        return 0, 0
    lo, hi, _ = max(runs, key=lambda r: (r[2], -r[0]))
    return (0 if lo == min(sizes) else lo), hi


def choose_global(
    timings, sizes=GLOBAL_SIZES, batches=GLOBAL_BATCHES
) -> tuple[int | None, int | None]:
    """(gpu_global_max_n, gpu_global_min_batch) from {(n, batch): (t_global, t_host)} in seconds.

    t_global None: the global launch is not available (or failed) there, a loss; a missing key,
    a None value or t_host None: not measured. A threshold by n alone cannot say that a lone
    matrix loses (one thread block against LAPACK on every CPU core) where a batch wins, so the
    route is the rectangle n <= max_n, batch >= min_batch. For each min_batch b of `batches`:
    max_n(b) is the largest n of `sizes` such that the global launch wins at every measured
    point (n', b') with n' <= n and b' >= b (the first n with no measured point there, or
    with a loss, ends it). Chosen: the b whose rectangle saves the most time over its measured
    points (sum of t_host - t_global: a workload spread evenly over the grid), ties to the
    larger max_n, then the smaller b. Returns (0, None) when the global
    launch wins nowhere from the smallest n (the launch is off, min_batch does not matter) and
    (None, None) when nothing was measured at the smallest n.
    """
    sizes, batches = sorted(sizes), sorted(batches)

    def result(n, b):
        v = timings.get((n, b))
        if v is None or v[1] is None:
            return None
        return v[0] is not None and v[0] < v[1]

    if all(result(sizes[0], b) is None for b in batches):
        return None, None
    best = (0.0, 0, 0)  # (seconds saved, max_n, -min_batch)
    for b in batches:
        max_n, saved = 0, 0.0
        for n in sizes:
            pts = [(bb, result(n, bb)) for bb in batches if bb >= b]
            pts = [(bb, r) for bb, r in pts if r is not None]
            if not pts or not all(r for _, r in pts):
                break
            max_n = n
            saved += sum(timings[(n, bb)][1] - timings[(n, bb)][0] for bb, _ in pts)
        if max_n and (saved, max_n, -b) > best:
            best = (saved, max_n, -b)
    if not best[1]:
        return 0, None
    return best[1], -best[2]


def choose_blocked(
    timings, sizes=BLOCKED_SIZES, batches=BLOCKED_BATCHES
) -> tuple[int, int | None] | None:
    """(gpu_blocked_min_n, gpu_blocked_max_batch) from {(n, batch): (t_blocked, t_table)} in
    seconds, n inside the shared window (a kernel of the table covers it).

    Inside the window the blocked path is taken for n >= min_n at batch <= max_batch: a
    rectangle, since a lone matrix (one block of a table kernel, most of the GPU idle) may gain
    from the blocked path's products spread over the GPU where a batch, which fills the GPU
    with blocks, loses. For each (min_n, max_batch) of `sizes` x `batches` the rectangle is
    claimed when at no measured point in it the blocked path is slower than BLOCKED_TOLERANCE
    times the kernels' time (timing noise) and it saves time over its measured points (sum of
    t_table - t_blocked > 0). Chosen: the claimed rectangle saving the most, ties to the
    larger min_n, then the smaller max_batch (claiming less where the data cannot tell).
    max_batch is a measured batch: larger batches were not timed, so they are not claimed.

    t_blocked None: the blocked call failed, a loss; a missing key, a None value or t_table
    None: not measured. Returns (1 << 30, None) when no rectangle is claimed (the blocked path
    beyond the window only, the field's default; max_batch does not matter) and None when
    nothing was measured.
    """
    sizes, batches = sorted(sizes), sorted(batches)
    pts = {
        (n, b): v
        for (n, b), v in timings.items()
        if v is not None and v[1] is not None and n in sizes and b in batches
    }
    if not pts:
        return None
    best = None  # (seconds saved, min_n, -max_batch)
    for min_n in sizes:
        for max_batch in batches:
            inside = [v for (n, b), v in pts.items() if n >= min_n and b <= max_batch]
            if not inside:
                continue
            if any(tb is None or tb > BLOCKED_TOLERANCE * tt for tb, tt in inside):
                continue
            saved = sum(tt - tb for tb, tt in inside)
            if saved <= 0:
                continue
            key = (saved, min_n, -max_batch)
            if best is None or key > best:
                best = key
    if best is None:
        return HUGE, None
    return best[1], -best[2]


# ---------------------------------------------------------------------------------------------
# Policy tables (core/tuned/README: "# device: <name>" first, then "<op> <field> <int>" lines)
# and the per-machine policy file.


def table_file_name(device: str) -> str:
    """<device>.policy with characters other than letters, digits, '.', '-', '_' replaced."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", device) + ".policy"


def _comment(text: str) -> str:
    # The core treats any comment holding "device:" as the device line: keep it out of the others.
    return "# " + " ".join(str(text).split()).replace("device:", "device :")


def _ordered(values: dict):
    """(op, field, value) of {op: {field: int}} in a fixed order, values checked."""
    for op in [o for o in POLICY_OPS if o in values] + sorted(set(values) - set(POLICY_OPS)):
        fields = values[op]
        for field in [f for f in FIELD_ORDER if f in fields] + sorted(
            set(fields) - set(FIELD_ORDER)
        ):
            value = fields[field]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{op} {field}: expected a non-negative int, got {value!r}")
            yield op, field, value


def format_table(device: str, values: dict, *, date: str, command: str, notes=()) -> str:
    """A core/tuned/*.policy table: the device line, date and command comments, notes, then
    "<op> <field> <value>" for each field in values ({op: {field: int}}), in a fixed order."""
    if not device or "\n" in device:
        raise ValueError(f"device name must be one non-empty line, got {device!r}")
    lines = [f"# device: {device}", _comment(f"date: {date}"), _comment(f"command: {command}")]
    lines += [_comment(note) for note in notes]
    lines += [f"{op} {field} {value}" for op, field, value in _ordered(values)]
    return "\n".join(lines) + "\n"


def merge_policy_file(old_text: str, values: dict, header: str) -> str:
    """The per-machine policy file after a calibration: a one-line header comment, the measured
    fields, then every line of the old file except the fields measured now and the header of an
    earlier calibration (a user's comments and other fields are kept)."""
    new = list(_ordered(values))
    measured = {(op, field) for op, field, _ in new}
    kept = []
    for line in old_text.splitlines():
        words = line.split("#", 1)[0].split()
        if line.startswith(HEADER_MARK) or (len(words) >= 2 and (words[0], words[1]) in measured):
            continue
        kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    lines = [
        _comment(header).replace("# ", HEADER_MARK, 1) if not header.startswith("#") else header
    ]
    lines += [f"{op} {field} {value}" for op, field, value in new]
    return "\n".join(lines + kept) + "\n"


def check_destination(path: str) -> None:
    """Raise DestinationError unless a file can be written at path (its folder is created):
    checked before anything is measured, by writing and removing a probe file."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        if os.path.isdir(path):
            raise IsADirectoryError(f"{path} is a directory")
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".calibrate-probe-"):
            pass
        if os.path.exists(path) and not os.access(path, os.W_OK):
            raise PermissionError(f"{path} is not writable")
    except OSError as exc:
        raise DestinationError(f"cannot write {path}: {exc.strerror or exc}") from exc


def read_policy_file(path: str) -> str:
    """The text of the policy file at path ("" when there is none), read within the core's
    bounds: a regular file of at most MAX_POLICY_FILE_BYTES of UTF-8 text. Anything else raises
    DestinationError at once: a FIFO is opened without waiting for a writer, a device or a huge
    file is never read."""
    limit = MAX_POLICY_FILE_BYTES
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise DestinationError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DestinationError(f"{path} is not a regular file")
        if info.st_size > limit:
            raise DestinationError(
                f"{path} has {info.st_size} bytes, more than the {limit} a policy file may have"
            )
        data = b""
        while chunk := os.read(fd, 1 << 16):
            data += chunk
            if len(data) > limit:
                raise DestinationError(f"{path} grew past {limit} bytes while read")
    finally:
        os.close(fd)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DestinationError(f"{path} is not text (byte {exc.start} is not UTF-8)") from None
    if "\0" in text:
        raise DestinationError(f"{path} is not text (it holds a NUL byte)")
    return text


def check_policy_file(fe, path: str) -> None:
    """Raise DestinationError unless the existing policy file at path (if any) can be read and
    merged: text within the core's bounds that the core applies whole. Checked before anything is
    measured; the core re-reads it (reload_policy) and names a malformed line."""
    read_policy_file(path)
    try:
        fe.q.reload_policy()
    except (ValueError, RuntimeError) as exc:
        raise DestinationError(f"{exc}; fix or remove that line") from None


def write_text_atomic(path: str, text: str) -> str:
    """Write text to path through a temporary file in the same folder (never a half-written file)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".calibrate-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


# ---------------------------------------------------------------------------------------------
# Measurements.


class Budget:
    """A total time budget spread over weighted phases: each phase may use its share of what is
    left when it starts (time a phase leaves unused goes to the later ones). None: no limit."""

    def __init__(self, total_s: float | None, clock=time.monotonic):
        self.clock = clock
        self.total_s = total_s
        self.deadline = None if total_s is None else clock() + total_s
        self.phase_deadline = None

    def start_phase(self, weight: float, remaining_weight: float) -> None:
        if self.deadline is None:
            return
        now = self.clock()
        left = max(0.0, self.deadline - now)
        self.phase_deadline = now + left * weight / max(remaining_weight, weight, 1e-9)

    def expired(self) -> bool:
        return self.phase_deadline is not None and self.clock() > self.phase_deadline


def _dims(op, n):
    return (n,) if op.startswith("eig") or op in LINSYS_OPS else (n, n)


def _backend(fe, op, n, batch, device) -> str:
    return getattr(fe.q, f"{op}_backend")(*_dims(op, n), batch, device=device)


def wall_timer(fe, device):
    def timer(call, x) -> float:
        fe.sync(device)
        t0 = time.perf_counter()
        call(x)
        fe.sync(device)
        return time.perf_counter() - t0

    return timer


def _best(timer, call, x, reps=5) -> float:
    call(x)
    return min(timer(call, x) for _ in range(reps))


def cpu_kernel_max_n(fe, op: str, batch: int = CPU_BATCH, log=print, record=None) -> int:
    """Largest n of CPU_SIZES below which the kernel wins every size (0: LAPACK everywhere).

    record: an optional list that receives one dict of timings per measured size."""
    call, timer, timings = fe.op(op, "cpu"), wall_timer(fe, "cpu"), []
    try:
        for n in cpu_sizes(op):
            fe.q.set_policy(op, cpu_kernel_max_n=HUGE)
            if not _backend(fe, op, n, batch, "cpu").startswith("cpu:kernel"):
                break  # no portable kernel for this size
            x = fe.random_input(op, n, batch, "cpu", seed=n * 7 + batch)
            t_kernel = _best(timer, call, x)
            fe.q.set_policy(op, cpu_kernel_max_n=0)
            t_lapack = _best(timer, call, x)
            log(
                f"  {op:16s} n={n:3d} x{batch}: kernel {_ms(t_kernel)} ms, lapack {_ms(t_lapack)} ms"
            )
            if record is not None:
                record.append({"n": n, "batch": batch, "kernel_s": t_kernel, "lapack_s": t_lapack})
            timings.append((n, t_kernel, t_lapack))
            if t_kernel >= t_lapack:
                break
    finally:
        fe.q.reset_policy(op)
    return choose_cpu_kernel_max_n(timings)


def gpu_min_batch(fe, op: str, n: int = 32, log=print, record=None) -> int | None:
    """Smallest batch of n x n device matrices where the GPU beats the CPU route (None: never)."""
    dev = fe.gpu
    call, timer = fe.op(op, dev), wall_timer(fe, dev)
    try:
        for batch in GPU_BATCHES:
            x = fe.random_input(op, n, batch, dev, seed=n * 7 + batch)
            fe.q.set_policy(op, gpu_min_batch=1, gpu_max_n=max(n, fe.q.policy(op)["gpu_max_n"]))
            if not _backend(fe, op, n, batch, dev).startswith("cuda:"):
                return None
            t_gpu = _best(timer, call, x)
            fe.q.set_policy(op, gpu_min_batch=HUGE)
            t_cpu = _best(timer, call, x)
            log(f"  {op:16s} {n}x{n} x{batch}: gpu {_ms(t_gpu)} ms, via cpu {_ms(t_cpu)} ms")
            if record is not None:
                record.append({"n": n, "batch": batch, "gpu_s": t_gpu, "via_cpu_s": t_cpu})
            if t_gpu < t_cpu:
                return batch
        return None
    finally:
        fe.q.reset_policy(op)


def _compare(fe, device, call, x, variants: dict, timer, min_reps=3, max_reps=10, point_s=0.3):
    """Best per-call seconds of call(x) under each variant ({label: setup()}), timed in interleaved
    rounds after one warm-up call each (one round only when a call of the first round is slower
    than SLOW_CALL_S); a variant whose call raises gets None (and its error)."""
    best = {label: None for label in variants}
    errors = {}
    for label, setup in variants.items():
        setup()
        try:
            call(x)
            fe.sync(device)
        except Exception as exc:  # noqa: BLE001 - recorded, the variant counts as unavailable
            errors[label] = f"{type(exc).__name__}: {exc}"[:300]
    live = [label for label in variants if label not in errors]
    started = time.perf_counter()
    rounds = 0
    while live and rounds < max_reps:
        if rounds == 1 and any(t is not None and t > SLOW_CALL_S for t in best.values()):
            break
        for label in list(live):
            variants[label]()
            try:
                t = timer(call, x)
            except Exception as exc:  # noqa: BLE001
                errors[label] = f"{type(exc).__name__}: {exc}"[:300]
                best[label] = None
                live.remove(label)
                continue
            best[label] = t if best[label] is None else min(best[label], t)
        rounds += 1
        if rounds >= min_reps and time.perf_counter() - started > point_s:
            break
    return {"best": best, "errors": errors}


def _ms(t) -> str:
    return "   -    " if t is None else f"{t * 1e3:8.3f}"


def lane_timings(fe, op: str, budget: Budget | None = None, log=print, record=None, base=None):
    """{(n, batch): (t_lane, t_block)} for device data (see choose_lane). The largest batch of
    every n first, then the other batches for the sizes up to the first loss at the largest batch.
    record: list receiving one dict per point (timings, backends, errors, skips)."""
    budget = budget or Budget(None)
    dev = fe.gpu
    call = fe.op(op, dev)
    timer = fe.event_timer(dev) or wall_timer(fe, dev)
    out = {}
    top = max(LANE_BATCHES)
    gpu_max_n = max(max(LANE_SIZES), fe.q.policy(op)["gpu_max_n"])
    # The register kernels (gpu_small_max_n) would take n <= 8 in both launches and the simdgroup
    # kernels (gpu_simd_max_n) the block launch: off here, so the two launch shapes of the same
    # kernels are compared.
    small_off = {f: 0 for f in ("gpu_small_max_n", "gpu_simd_max_n") if f in fe.q.policy(op)}

    def lane():
        fe.q.set_policy(
            op,
            gpu_lane_max_n=HUGE,
            gpu_lane_min_batch=1,
            gpu_min_batch=1,
            gpu_max_n=gpu_max_n,
            **small_off,
        )

    def block():
        fe.q.set_policy(op, gpu_lane_max_n=0, gpu_min_batch=1, gpu_max_n=gpu_max_n, **small_off)

    def point(n, batch, skip=None):
        entry = {"n": n, "batch": batch}
        if skip or budget.expired():
            entry["skipped"] = skip or "time budget"
            if record is not None:
                record.append(entry)
            return
        lane()
        lane_name = _backend(fe, op, n, batch, dev)
        block()
        block_name = _backend(fe, op, n, batch, dev)
        entry.update(lane_backend=lane_name, block_backend=block_name)
        if not block_name.startswith("cuda:") or "/lane" in block_name:
            entry["skipped"] = "block launch not routed to the GPU"
        else:
            variants = {"block": block}
            if lane_name.endswith("/lane"):
                variants["lane"] = lane
            x = fe.random_input(op, n, batch, dev, seed=n * 7 + batch)
            r = _compare(fe, dev, call, x, variants, timer)
            del x
            t_lane, t_block = r["best"].get("lane"), r["best"]["block"]
            entry.update(lane_s=t_lane, block_s=t_block)
            if r["errors"]:
                entry["errors"] = r["errors"]
            out[(n, batch)] = (t_lane, t_block)
            note = "" if "lane" in variants else f" (no lane launch: {lane_name})"
            log(
                f"  {op:16s} {n:2d}x{n:<2d} x{batch:<6d} lane {_ms(t_lane)} ms, block "
                f"{_ms(t_block)} ms{note}{' errors: ' + str(r['errors']) if r['errors'] else ''}"
            )
        if record is not None:
            record.append(entry)

    try:
        if base:
            fe.q.set_policy(op, **base)
        stop = None
        for n in LANE_SIZES:
            point(n, top, stop)
            t_lane, t_block = out.get((n, top), (None, None))
            # Past the first loss the larger sizes only inform: leave them out once the lane
            # launch is clearly behind or slow (a lane call of a large n can take seconds).
            if stop or t_block is None:
                continue
            if t_lane is None or (
                t_lane >= t_block and (t_lane > LANE_GIVE_UP * t_block or t_lane > SLOW_CALL_S)
            ):
                stop = f"lane launch missing, > {LANE_GIVE_UP}x slower or slow at a smaller n"
        max_n, _ = choose_lane(out)
        for n in [s for s in LANE_SIZES if max_n and s <= max_n]:
            for batch in sorted(LANE_BATCHES, reverse=True)[1:]:
                point(n, batch)
    finally:
        fe.q.reset_policy(op)
    return out


def _window_sweep(
    fe, op, sizes, batches, names, on, off, classify, seed, budget, log, record, too_much=None
):
    """{(n, batch): (t_on, t_off)} of a route switched on and off for device data, square n of
    sizes x batches (both named by `names`: the record's <name>_backend and <name>_s). Per point:
    classify(on_name, off_name) -> None (timed), ("skip", why) or ("uncovered", why): nothing to
    compare, recorded as (None, None); once every batch of a size is uncovered the larger sizes
    are not timed. too_much(n, batch): why a point is not timed, or None. The policy is reset
    afterwards."""
    dev = fe.gpu
    call = fe.op(op, dev)
    timer = fe.event_timer(dev) or wall_timer(fe, dev)
    a, b = names
    out = {}
    try:
        for n in sizes:
            uncovered = 0
            for batch in batches:
                entry = {"n": n, "batch": batch}
                if record is not None:
                    record.append(entry)
                if budget.expired():
                    entry["skipped"] = "time budget"
                    continue
                why = too_much(n, batch) if too_much else None
                if why:
                    entry["skipped"] = why
                    continue
                on()
                on_name = _backend(fe, op, n, batch, dev)
                off()
                off_name = _backend(fe, op, n, batch, dev)
                entry.update({f"{a}_backend": on_name, f"{b}_backend": off_name})
                verdict = classify(on_name, off_name)
                if verdict is not None:
                    entry["skipped"] = verdict[1]
                    if verdict[0] == "uncovered":
                        out[(n, batch)] = (None, None)
                        uncovered += 1
                    continue
                x = fe.random_input(op, n, batch, dev, seed=n * seed + batch)
                r = _compare(fe, dev, call, x, {a: on, b: off}, timer)
                del x
                t_on, t_off = r["best"][a], r["best"][b]
                entry.update({f"{a}_s": t_on, f"{b}_s": t_off})
                if r["errors"]:
                    entry["errors"] = r["errors"]
                out[(n, batch)] = (t_on, t_off)
                log(
                    f"  {op:16s} {n:3d}x{n:<3d} x{batch:<6d} {a} {_ms(t_on)} ms ({on_name}), "
                    f"{b} {_ms(t_off)} ms ({off_name})"
                    f"{' errors: ' + str(r['errors']) if r['errors'] else ''}"
                )
            if uncovered == len(batches):
                break
    finally:
        fe.q.reset_policy(op)
    return out


def simd_timings(fe, op: str, budget: Budget | None = None, log=print, record=None, base=None):
    """{(n, batch): (t_simd, t_other)} for device data (see choose_simd): the simdgroup kernels
    on (gpu_simd_max_n unlimited, gpu_simd_min_n 0) against off (gpu_simd_max_n 0), the other
    fields as `base` says. Every size is timed (a loss at one n does not end the sweep: the
    winning window may start above it) up to the first that no simdgroup kernel covers."""
    sizes = simd_sizes(op)
    gpu_max_n = max(max(sizes), fe.q.policy(op)["gpu_max_n"])
    common = dict(base or {}, gpu_min_batch=1, gpu_max_n=gpu_max_n)
    lower = {"gpu_simd_min_n": 0} if "gpu_simd_min_n" in fe.q.policy(op) else {}

    def simd():
        fe.q.set_policy(op, gpu_simd_max_n=HUGE, **lower, **common)

    def other():
        fe.q.set_policy(op, gpu_simd_max_n=0, **common)

    def classify(simd_name, other_name):
        # A SIMD line's name ends in _simd, or _simd and its register size (_simd64).
        if not re.search(r"_simd\d*$", simd_name) or not other_name.startswith("cuda:"):
            return ("uncovered", "no simdgroup kernel covers the shape")
        return None

    def too_much(n, batch):
        return "work above SIMD_MAX_WORK" if batch * n * n > SIMD_MAX_WORK else None

    return _window_sweep(
        fe,
        op,
        sizes,
        SIMD_BATCHES,
        ("simd", "other"),
        simd,
        other,
        classify,
        11,
        budget or Budget(None),
        log,
        record,
        too_much,
    )


def global_timings(fe, op: str, budget: Budget | None = None, log=print, record=None, base=None):
    """{(n, batch): (t_global, t_host)} for device data (see choose_global): square n of
    GLOBAL_SIZES x GLOBAL_BATCHES with batch * n^3 <= GLOBAL_MAX_WORK, the global launch on
    (gpu_global_max_n unlimited, gpu_global_min_batch 1) against what the op does with it off
    (gpu_global_max_n 0: the host route, a copy to the host and LAPACK), wall time of the whole
    call. Past a size where the global launch loses and takes longer than GLOBAL_SLOW_S at some
    batch, larger sizes are not timed."""
    budget = budget or Budget(None)
    dev = fe.gpu
    call, timer = fe.op(op, dev), wall_timer(fe, dev)
    out = {}
    gpu_max_n = max(max(GLOBAL_SIZES), fe.q.policy(op)["gpu_max_n"])
    common = dict(base or {}, gpu_min_batch=1, gpu_max_n=gpu_max_n)

    def on():
        fe.q.set_policy(op, gpu_global_max_n=HUGE, gpu_global_min_batch=1, **common)

    def off():
        fe.q.set_policy(op, gpu_global_max_n=0, **common)

    stop = None
    try:
        for n in GLOBAL_SIZES:
            slow_loss = False
            for batch in GLOBAL_BATCHES:
                entry = {"n": n, "batch": batch}
                if record is not None:
                    record.append(entry)
                if batch * n**3 > GLOBAL_MAX_WORK:
                    entry["skipped"] = "work above GLOBAL_MAX_WORK"
                    continue
                if stop or budget.expired():
                    entry["skipped"] = stop or "time budget"
                    continue
                on()
                on_name = _backend(fe, op, n, batch, dev)
                off()
                off_name = _backend(fe, op, n, batch, dev)
                entry.update(global_backend=on_name, host_backend=off_name)
                if not off_name.startswith("cpu:"):
                    entry["skipped"] = f"the route without global launches is {off_name}"
                    continue
                variants = {"host": off}
                if on_name.endswith("/global"):
                    variants["global"] = on
                x = fe.random_input(op, n, batch, dev, seed=n * 13 + batch)
                r = _compare(fe, dev, call, x, variants, timer, min_reps=2, max_reps=5)
                del x
                t_global, t_host = r["best"].get("global"), r["best"]["host"]
                entry.update(global_s=t_global, host_s=t_host)
                if r["errors"]:
                    entry["errors"] = r["errors"]
                out[(n, batch)] = (t_global, t_host)
                note = "" if "global" in variants else f" (no global launch: {on_name})"
                log(
                    f"  {op:16s} {n:4d}x{n:<4d} x{batch:<3d} global {_ms(t_global)} ms, host "
                    f"{_ms(t_host)} ms{note}{' errors: ' + str(r['errors']) if r['errors'] else ''}"
                )
                if t_host is not None and (
                    t_global is None or (t_global >= t_host and t_global > GLOBAL_SLOW_S)
                ):
                    slow_loss = True
            if slow_loss:
                stop = (
                    f"global launch missing, or lost and took > {GLOBAL_SLOW_S} s, at a smaller n"
                )
    finally:
        fe.q.reset_policy(op)
    return out


def alt_timings(fe, op: str, budget: Budget | None = None, log=print, record=None, base=None):
    """{(n, batch): (t_alt, t_first)} for device data (see choose_simd, whose window rule
    applies): square n of ALT_SIZES x ALT_BATCHES, the op's alternative group kernel (gpu_alt
    window over every n) against its first (gpu_alt_max_n 0), the blocked path off inside the
    window, the other fields as `base` says. Every size is timed up to the first where no
    alternative covers the shape (the same kernel either way)."""
    gpu_max_n = max(max(ALT_SIZES), fe.q.policy(op)["gpu_max_n"])
    common = dict(base or {}, gpu_min_batch=1, gpu_max_n=gpu_max_n)
    if "gpu_blocked_min_n" in fe.q.policy(op):
        common.update(gpu_blocked_min_n=HUGE)

    def on():
        fe.q.set_policy(
            op, gpu_alt_min_n=0, gpu_alt_max_n=HUGE, gpu_alt_max_batch=UNBOUNDED, **common
        )

    def off():
        fe.q.set_policy(op, gpu_alt_min_n=0, gpu_alt_max_n=0, **common)

    def classify(on_name, off_name):
        if on_name == off_name or not on_name.startswith("cuda:"):
            return ("uncovered", f"no alternative kernel covers the shape ({on_name})")
        return None

    def too_much(n, batch):
        return "work above ALT_MAX_WORK" if batch * n * n > ALT_MAX_WORK else None

    return _window_sweep(
        fe,
        op,
        ALT_SIZES,
        ALT_BATCHES,
        ("alt", "first"),
        on,
        off,
        classify,
        19,
        budget or Budget(None),
        log,
        record,
        too_much,
    )


def blocked_timings(fe, op: str, budget: Budget | None = None, log=print, record=None, base=None):
    """{(n, batch): (t_blocked, t_table)} for device data (see choose_blocked): square n of
    BLOCKED_SIZES x BLOCKED_BATCHES, the blocked path forced on (gpu_blocked_min_n 1, no batch
    bound) against off inside the window (gpu_blocked_min_n 1 << 30: the table's kernels), the
    other fields as `base` says. A shape no kernel of the table covers (beyond the window: the
    blocked path either way) is recorded as (None, None), and the larger sizes are not timed."""
    gpu_max_n = max(max(BLOCKED_SIZES), fe.q.policy(op)["gpu_max_n"])
    common = dict(base or {}, gpu_min_batch=1, gpu_max_n=gpu_max_n)
    blocked_name = f":blocked_{op}"

    def on():
        fe.q.set_policy(op, gpu_blocked_min_n=1, gpu_blocked_max_batch=UNBOUNDED, **common)

    def off():
        fe.q.set_policy(op, gpu_blocked_min_n=HUGE, gpu_blocked_max_batch=UNBOUNDED, **common)

    def classify(on_name, off_name):
        if not on_name.endswith(blocked_name):
            return ("skip", f"no blocked path ({on_name})")
        if off_name.startswith("cpu:") or off_name.endswith(blocked_name):
            return ("uncovered", "no kernel of the table covers the shape")
        return None

    return _window_sweep(
        fe,
        op,
        BLOCKED_SIZES,
        BLOCKED_BATCHES,
        ("blocked", "table"),
        on,
        off,
        classify,
        17,
        budget or Budget(None),
        log,
        record,
    )


def host_timings(fe, op: str, budget: Budget | None = None, log=print, record=None, base=None):
    """[(work, t_cpu, t_gpu)] for host data: the CPU backend vs the GPU route (copies
    included), square n of HOST_SIZES x HOST_BATCHES with batch*n*n <= HOST_MAX_WORK; the batch of
    an n stops growing once both routes take > HOST_BOTH_SLOW_S or one > HOST_ONE_SLOW_S.
    base: policy fields set for both routes (e.g. the cpu_kernel_max_n just measured)."""
    budget = budget or Budget(None)
    call, timer = fe.op(op, "cpu"), wall_timer(fe, "cpu")
    out = []
    gpu_max_n = max(max(HOST_SIZES), fe.q.policy(op)["gpu_max_n"])

    def cpu_route():
        fe.q.set_policy(op, host_gpu_min_work=0)

    def gpu_route():
        fe.q.set_policy(op, host_gpu_min_work=1, gpu_min_batch=1, gpu_max_n=gpu_max_n)

    def skip(entry, why):
        entry["skipped"] = why
        if record is not None:
            record.append(entry)

    try:
        if base:
            fe.q.set_policy(op, **base)
        for n in HOST_SIZES:
            prev = None  # (batch, slowest time) of the last point of this n
            stop = None
            for batch in HOST_BATCHES:
                entry = {"n": n, "batch": batch, "work": batch * n * n}
                if batch * n * n > HOST_MAX_WORK:
                    continue  # outside the grid, not a skip
                if stop:
                    skip(entry, stop)
                    continue
                if budget.expired():
                    skip(entry, "time budget")
                    continue
                if prev and prev[1] * batch / prev[0] > HOST_PREDICTED_MAX_S:
                    skip(entry, f"predicted > {HOST_PREDICTED_MAX_S} s")
                    stop = entry["skipped"]
                    continue
                cpu_route()
                cpu_name = _backend(fe, op, n, batch, "cpu")
                gpu_route()
                gpu_name = _backend(fe, op, n, batch, "cpu")
                entry.update(cpu_backend=cpu_name, gpu_backend=gpu_name)
                if not cpu_name.startswith("cpu:"):
                    skip(entry, "CPU route not on the CPU")
                    continue
                variants = {"cpu": cpu_route}
                if gpu_name.startswith("cuda:"):
                    variants["gpu"] = gpu_route
                x = fe.random_input(op, n, batch, "cpu", seed=n * 7 + batch)
                r = _compare(fe, "cpu", call, x, variants, timer, min_reps=2, max_reps=7)
                del x
                t_cpu, t_gpu = r["best"]["cpu"], r["best"].get("gpu")
                entry.update(cpu_s=t_cpu, gpu_s=t_gpu)
                if r["errors"]:
                    entry["errors"] = r["errors"]
                if record is not None:
                    record.append(entry)
                out.append((batch * n * n, t_cpu, t_gpu))
                note = "" if "gpu" in variants else f" (no GPU route: {gpu_name})"
                log(
                    f"  {op:16s} {n:3d}x{n:<3d} x{batch:<6d} cpu {_ms(t_cpu)} ms, gpu "
                    f"{_ms(t_gpu)} ms{note}{' errors: ' + str(r['errors']) if r['errors'] else ''}"
                )
                times = [t for t in (t_cpu, t_gpu) if t is not None]
                if not times:
                    continue
                prev = (batch, max(times))
                if len(times) == 2 and min(times) > HOST_BOTH_SLOW_S:
                    stop = f"both routes > {HOST_BOTH_SLOW_S} s at a smaller batch"
                elif max(times) > HOST_ONE_SLOW_S:
                    stop = f"a route > {HOST_ONE_SLOW_S} s at a smaller batch"
    finally:
        fe.q.reset_policy(op)
    return out


def gpu_in_core(fe) -> bool:
    return bool(fe.q.backends_available()["cuda"])


def has_lane_fields(fe, op: str = "qr") -> bool:
    return all(f in fe.q.policy(op) for f in LANE_FIELDS)


PHASE_WEIGHTS = {
    "cpu_kernel": 1.0,
    "lane": 1.0,
    "simd": 0.75,
    "global": 1.5,
    "blocked": 0.5,
    "alt": 0.5,
    "gpu_min_batch": 0.25,
    "host": 2.0,
}


def plan_phases(
    ops,
    *,
    cpu: bool,
    host_gpu: bool,
    device_gpu: bool,
    lanes: bool,
    simd: bool = False,
    global_launch: bool = False,
    blocked: bool = False,
    alt: bool = False,
) -> list:
    """[(op, phase)] in measuring order. blocked: the backend of device data runs the blocked
    algorithms and the core has their fields (never for CPU data). alt: the core has the
    gpu_alt fields (measured for the ops of ALT_KERNELS, before the blocked phase, which then
    compares the blocked path with the kernels the window picks)."""
    phases = []
    for op in ops:
        if cpu:
            phases.append((op, "cpu_kernel"))
        if device_gpu:
            if lanes:
                phases.append((op, "lane"))
            if simd:
                phases.append((op, "simd"))
            if global_launch:
                phases.append((op, "global"))
            if alt and alt_op(op):
                phases.append((op, "alt"))
            if blocked:
                phases.append((op, "blocked"))
            phases.append((op, "gpu_min_batch"))
        if host_gpu and host_op(op):
            phases.append((op, "host"))
    return phases


def measure(
    fe, ops=POLICY_OPS, *, cpu: bool = True, gpu: bool | None = None, budget_s=None, log=print
) -> dict:
    """Run the measurements; returns {"meta", "chosen": {op: {field: int}}, "notes": {op: [..]},
    "points": {op: {phase: [raw timings]}}}. Only fields actually measured appear in "chosen".
    gpu: measure the GPU fields (default: when the core has a GPU backend)."""
    if gpu is None:
        gpu = gpu_in_core(fe)
    device_gpu = bool(gpu) and fe.gpu is not None
    lanes = device_gpu and has_lane_fields(fe, ops[0] if ops else "qr")
    simd = device_gpu and "gpu_simd_max_n" in fe.q.policy(ops[0] if ops else "qr")
    global_launch = device_gpu and all(
        f in fe.q.policy(ops[0] if ops else "qr") for f in GLOBAL_FIELDS
    )
    blocked = device_gpu and all(f in fe.q.policy(ops[0] if ops else "qr") for f in BLOCKED_FIELDS)
    alt = device_gpu and all(f in fe.q.policy(ops[0] if ops else "qr") for f in ALT_FIELDS)
    phases = plan_phases(
        ops,
        cpu=cpu,
        host_gpu=bool(gpu),
        device_gpu=device_gpu,
        lanes=lanes,
        simd=simd,
        global_launch=global_launch,
        blocked=blocked,
        alt=alt,
    )
    budget = Budget(budget_s)
    result = {
        "meta": {
            "device": fe.q.device_name(),
            "version": fe.q.version(),
            "package": fe.package,
            fe.framework: fe.framework_version,
            "python": platform.python_version(),
            "lapack": fe.q.lapack_info(),
            "cpu_threads": fe.q.get_cpu_threads(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "budget_s": budget_s,
            "cpu": bool(cpu),
            "gpu": bool(gpu),
            "gpu_device_data": device_gpu,
            "lane_fields": lanes,
            "simd_field": simd,
            "global_fields": global_launch,
            "blocked_fields": blocked,
            "alt_fields": alt,
            "grids": {
                "cpu_sizes": list(CPU_SIZES),
                "linsys_cpu_sizes": list(LINSYS_CPU_SIZES),
                "cpu_batch": CPU_BATCH,
                "gpu_batches": list(GPU_BATCHES),
                "host_sizes": list(HOST_SIZES),
                "host_batches": list(HOST_BATCHES),
                "host_max_work": HOST_MAX_WORK,
                "lane_sizes": list(LANE_SIZES),
                "lane_batches": list(LANE_BATCHES),
                "simd_sizes": list(SIMD_SIZES),
                "linsys_simd_sizes": list(LINSYS_SIMD_SIZES),
                "simd_batches": list(SIMD_BATCHES),
                "global_sizes": list(GLOBAL_SIZES),
                "global_batches": list(GLOBAL_BATCHES),
                "global_max_work": GLOBAL_MAX_WORK,
                "blocked_sizes": list(BLOCKED_SIZES),
                "blocked_batches": list(BLOCKED_BATCHES),
                "alt_sizes": list(ALT_SIZES),
                "alt_batches": list(ALT_BATCHES),
            },
        },
        "chosen": {op: {} for op in ops},
        "notes": {op: [] for op in ops},
        "points": {op: {} for op in ops},
    }
    result["meta"].update(fe.calibration_meta())
    if gpu:
        fe.warm_gpu()
    if gpu and not device_gpu:
        log(
            f"[calibrate] {fe.package} keeps no data in GPU memory: device-data fields not measured"
        )
    started = time.monotonic()
    for i, (op, phase) in enumerate(phases):
        chosen, notes = result["chosen"][op], result["notes"][op]
        rec = result["points"][op].setdefault(phase, [])
        budget.start_phase(PHASE_WEIGHTS[phase], sum(PHASE_WEIGHTS[p] for _, p in phases[i:]))
        if budget.expired():
            notes.append(f"{phase}: not measured (time budget)")
            log(f"[calibrate] {op}: {phase} skipped (time budget)")
            continue
        # Fields measured so far apply while the later phases of the op run.
        base = {
            f: v
            for f, v in chosen.items()
            if f in ("cpu_kernel_max_n", "gpu_simd_max_n", "gpu_simd_min_n", *LANE_FIELDS)
        }
        try:
            _phase(fe, op, phase, chosen, notes, rec, base, budget, log)
        except Exception as exc:  # noqa: BLE001 - one failing phase keeps the others' results
            fe.q.reset_policy(op)
            notes.append(f"{phase}: failed ({type(exc).__name__}: {exc})"[:400])
            log(f"[calibrate] {op}: {phase} failed: {type(exc).__name__}: {exc}")
        skipped = sum(1 for r in rec if r.get("skipped") == "time budget")
        if skipped:
            notes.append(f"{phase}: {skipped} of {len(rec)} points skipped (time budget)")
    result["meta"]["elapsed_s"] = round(time.monotonic() - started, 1)
    return result


def _phase(fe, op, phase, chosen, notes, rec, base, budget, log) -> None:
    if phase == "cpu_kernel":
        log(f"[calibrate] {op}: CPU kernel vs LAPACK")
        chosen["cpu_kernel_max_n"] = cpu_kernel_max_n(fe, op, log=log, record=rec)
    elif phase == "lane":
        log(f"[calibrate] {op}: lane-per-matrix vs block CUDA launches (device data)")
        max_n, min_batch = choose_lane(lane_timings(fe, op, budget, log, rec, base))
        if max_n is None:
            notes.append("lane: nothing measured at the smallest n (field not set)")
        else:
            chosen["gpu_lane_max_n"] = max_n
            if min_batch is not None:
                chosen["gpu_lane_min_batch"] = min_batch
    elif phase == "simd":
        log(f"[calibrate] {op}: simdgroup kernels vs the route without them (device data)")
        window = choose_simd(simd_timings(fe, op, budget, log, rec, base), simd_sizes(op))
        if window is None:
            notes.append("simd: nothing measured (field not set)")
        else:
            min_n, max_n = window
            chosen["gpu_simd_max_n"] = max_n
            if "gpu_simd_min_n" in fe.q.policy(op):
                chosen["gpu_simd_min_n"] = min_n
            elif min_n:
                notes.append(f"simd: wins from n = {min_n} only (no gpu_simd_min_n: off)")
                chosen["gpu_simd_max_n"] = 0
    elif phase == "global":
        log(f"[calibrate] {op}: global launch vs host route beyond the shared window (device data)")
        max_n, min_batch = choose_global(global_timings(fe, op, budget, log, rec, base))
        if max_n is None:
            notes.append("global: nothing measured at the smallest n (fields not set)")
        else:
            chosen["gpu_global_max_n"] = max_n
            if min_batch is not None:
                chosen["gpu_global_min_batch"] = min_batch
    elif phase == "alt":
        log(f"[calibrate] {op}: the alternative group kernel vs the first (device data)")
        window = choose_simd(alt_timings(fe, op, budget, log, rec, base), ALT_SIZES, ALT_BATCHES)
        if window is None:
            notes.append("alt: nothing measured (fields not set)")
        else:
            min_n, max_n = window  # a window from the smallest size claims no smaller n
            chosen["gpu_alt_min_n"] = min_n or (ALT_SIZES[0] if max_n else 0)
            chosen["gpu_alt_max_n"] = max_n
            chosen["gpu_alt_max_batch"] = max(ALT_BATCHES)
    elif phase == "blocked":
        log(f"[calibrate] {op}: blocked path vs the shared-memory kernels inside the window")
        found = choose_blocked(blocked_timings(fe, op, budget, log, rec, base))
        if found is None:
            notes.append("blocked: nothing measured (fields not set)")
        else:
            min_n, max_batch = found
            chosen["gpu_blocked_min_n"] = min_n
            if max_batch is not None:
                chosen["gpu_blocked_max_batch"] = max_batch
    elif phase == "gpu_min_batch":
        log(f"[calibrate] {op}: GPU vs CPU by batch (device data)")
        if base:
            fe.q.set_policy(op, **base)
        found = gpu_min_batch(fe, op, log=log, record=rec)
        chosen["gpu_min_batch"] = found if found is not None else HUGE
    elif phase == "host":
        log(f"[calibrate] {op}: host data, CPU backend vs GPU route (copies included)")
        work = choose_host_gpu_min_work(host_timings(fe, op, budget, log, rec, base))
        if work is None:
            notes.append("host: nothing measured (host_gpu_min_work not set)")
        else:
            chosen["host_gpu_min_work"] = work


def table_notes(result: dict) -> list:
    meta = result["meta"]
    budget = "no time budget" if meta["budget_s"] is None else f"time budget {meta['budget_s']} s"
    framework = "torch" if "torch" in meta else "mlx"
    package = meta.get("package", "metal_linalg_torch" if framework == "torch" else "metal_linalg")
    notes = [
        (
            f"{package} ({framework} {meta.get(framework)}), core {meta['version']}, "
            f"{budget}, took {meta.get('elapsed_s')} s"
        ),
        "host_gpu_min_work 0 = host data never goes to the GPU",
        f"gpu_min_batch {HUGE} = device data never goes to the GPU; gpu_lane_max_n 0 = lane off",
        "gpu_global_max_n 0 = no global launches (device data beyond the shared window: host)",
        f"gpu_blocked_min_n {HUGE} = the blocked path beyond the shared window only",
    ]
    for op, items in result["notes"].items():
        notes += [f"{op}: {n}" for n in items]
    return notes


def write_table(path: str, result: dict, command: str) -> str:
    text = format_table(
        result["meta"]["device"],
        result["chosen"],
        date=result["meta"]["date"],
        command=command,
        notes=table_notes(result),
    )
    return write_text_atomic(path, text)


def write_json(path: str, result: dict) -> str:
    return write_text_atomic(path, json.dumps(result, indent=1) + "\n")


def policy_lines(result: dict) -> list:
    return [f"{op} {field} {value}" for op, field, value in _ordered(result["chosen"])]


def write_policy(fe, result: dict, path: str | None = None) -> str:
    """Merge the measured fields into the per-machine policy file and reload it."""
    path = path or fe.q.policy_file()
    old = read_policy_file(path)
    header = f"{HEADER_MARK}`python -m {fe.package} calibrate` on {result['meta']['device']}"
    header += f", {result['meta']['date']}"
    write_text_atomic(path, merge_policy_file(old, result["chosen"], header))
    fe.q.reload_policy()
    return path
