"""Device, backend, routing-policy, calibration and thread queries over the C core.

`Queries(core, package)` turns a frontend's raw core calls into the public functions both
packages export under the same names. `core` provides:

    device_name() version() lapack_info() -> str; backend_available(name) -> bool
    backend(op_id, m, n, batch, device, nrhs) -> str  (device as the user passed it; the core's
                                                 route for data there, with nrhs columns of B for
                                                 the ops in RHS_OPS; ValueError if unsupported)
    policy_get(op_id) -> "field=value;..."; policy_set(op_id, field, value); policy_reset(op_id)
    policy_source(op_id), calibration_status(op_id), policy_file() -> str; policy_reload()
    set_cpu_threads(n); get_cpu_threads() -> int
    set_cpu_only(on: bool); cpu_only() -> bool; gpu_core_count() -> int

`where` names the keyword of the `*_backend` queries that says where the call runs: "device"
(torch: where the tensor lives) or "stream" (MLX: the stream the call would run on).
"""

from __future__ import annotations

import operator
import os
import warnings

# The op lists, in ml_op order, as the core's op table has them (a frontend fills these in place
# with bind_ops when it loads the core, so every module sees the same objects); the names are
# also those of policy files and environment variables. OPS: the decompositions with GPU
# kernels (the benchmark's default grid); LINSYS_OPS: the linear systems (LAPACK's info words,
# ml_op_linear_system); POLICY_OPS: every op with GPU kernels (ml_op_kernels), the decompositions
# and the linear systems: each has a routing policy that calibration measures, the calibration
# notice and the per-op query functions cover. RHS_OPS: the ops that take a right-hand side B
# (ml_op_inputs 2: their routing may depend on its column count). ALL_OPS: every op; OP_ID maps
# its names to their ml_op values.
OPS: list = []
LINSYS_OPS: list = []
RHS_OPS: list = []
POLICY_OPS: list = []
ALL_OPS: list = []
OP_ID: dict = {}
# Per op name: its outputs' dimensions under the default flags, each a tuple of 'm', 'n', 'k'
# (= min(m, n)) symbols, in the table's order.
OUTPUTS: dict = {}
INT64_MAX = 2**63 - 1
# The query functions both packages export at the top level, besides each op's five (OP_QUERIES);
# their queries modules also export the forms that take an op's name (BY_OP_NAME).
TOP_LEVEL = (
    "backends_available",
    "calibration_status",
    "cpu_only",
    "device_name",
    "get_cpu_threads",
    "gpu_core_count",
    "lapack_info",
    "policy_file",
    "reload_policy",
    "set_cpu_only",
    "set_cpu_threads",
    "version",
)
BY_OP_NAME = ("policy", "set_policy", "reset_policy", "policy_source")
OP_QUERIES = (
    "{op}_backend",
    "{op}_policy",
    "set_{op}_policy",
    "reset_{op}_policy",
    "{op}_policy_source",
)


def bind_ops(names, outputs, kernels, linear_system, inputs) -> None:
    """The core's op names, in ml_op order, outputs(op_id) -> the op's output symbols (see
    OUTPUTS), kernels(op_id) -> whether it has GPU kernels (ml_op_kernels),
    linear_system(op_id) -> whether it is a linear system (ml_op_linear_system) and
    inputs(op_id) -> its input matrices (ml_op_inputs); the frontends call this once at import."""
    ALL_OPS[:] = list(names)
    LINSYS_OPS[:] = [name for i, name in enumerate(ALL_OPS) if linear_system(i)]
    RHS_OPS[:] = [name for i, name in enumerate(ALL_OPS) if inputs(i) > 1]
    POLICY_OPS[:] = [name for i, name in enumerate(ALL_OPS) if kernels(i)]
    OPS[:] = [name for name in POLICY_OPS if name not in LINSYS_OPS]
    OP_ID.clear()
    OP_ID.update({name: i for i, name in enumerate(ALL_OPS)})
    OUTPUTS.clear()
    OUTPUTS.update({name: tuple(outputs(i)) for i, name in enumerate(ALL_OPS)})


class CalibrationWarning(UserWarning):
    """Ops run with the cautious default policy: this machine was never measured."""


def op_id(op: str) -> int:
    if op not in OP_ID:
        raise ValueError(f"[metal_linalg] unknown op {op!r}; ops: {', '.join(ALL_OPS)}")
    return OP_ID[op]


def parse_policy(text: str) -> dict:
    """ "field=value;field=value" -> {field: int}."""
    fields = {}
    for item in text.split(";"):
        if "=" in item:
            key, value = item.split("=", 1)
            fields[key.strip()] = int(value)
    return fields


def check_policy_fields(op: str, valid, fields: dict) -> None:
    """Every problem with a set_<op>_policy call, raised before any field is set (so a bad call
    changes nothing): unknown names -> ValueError, non-int -> TypeError, out of range -> ValueError."""
    unknown = sorted(set(fields) - set(valid))
    if unknown:
        raise ValueError(
            f"[metal_linalg.set_{op}_policy] unknown field(s) {', '.join(unknown)}; "
            f"valid fields: {', '.join(sorted(valid))}"
        )
    for key, value in fields.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(
                f"[metal_linalg.set_{op}_policy] {key} must be an int, got {type(value).__name__}"
            )
        if not 0 <= value <= INT64_MAX:
            raise ValueError(
                f"[metal_linalg.set_{op}_policy] {key} must be in [0, 2**63 - 1], got {value}"
            )


def calibration_notice(package: str, ops, device: str, every: bool = False) -> str:
    """The CalibrationWarning text, one line: the untuned ops (or "every op" when every is
    set), the device and the command that measures it."""
    which = (
        "every op uses" if every else f"{', '.join(ops)} use" if len(ops) > 1 else f"{ops[0]} uses"
    )
    return (
        f"{package}: {which} untuned defaults on {device!r}; `python -m {package} calibrate` "
        "(METAL_LINALG_NO_CALIBRATION_NOTICE=1 hides this)"
    )


class CpuOnly:
    """What set_cpu_only returns: as a context manager it restores the setting it replaced."""

    def __init__(self, queries, previous: bool):
        self._queries, self.previous = queries, previous

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._queries.core.set_cpu_only(self.previous)

    def __repr__(self) -> str:
        return f"CpuOnly(on={self._queries.cpu_only()}, previous={self.previous})"


class Queries:
    """The public query/setting functions of one package over its core adapter."""

    def __init__(self, core, package: str, where: str = "device"):
        self.core = core
        self.package = package
        self.where = where
        for op in ALL_OPS:
            self._make(op)

    def public(self) -> list:
        """The names a package exports at its top level: TOP_LEVEL, then the five of each op
        with a routing policy (POLICY_OPS), then {op}_backend of any other op (one without
        GPU kernels: no policy to query or set)."""
        rest = [f"{op}_backend" for op in ALL_OPS if op not in POLICY_OPS]
        return [*TOP_LEVEL, *(q.format(op=op) for op in POLICY_OPS for q in OP_QUERIES), *rest]

    def export(self, namespace: dict) -> None:
        """Every query function into namespace (a queries module's globals()): the public ones
        and those that take an op's name."""
        namespace.update({name: getattr(self, name) for name in [*self.public(), *BY_OP_NAME]})

    def device_name(self) -> str:
        """The device policies are tuned for: the CUDA device when usable, else the CPU model."""
        return self.core.device_name()

    def version(self) -> str:
        """Version of the core library."""
        return self.core.version()

    def lapack_info(self) -> str:
        """The LAPACK provider the CPU backend uses."""
        return self.core.lapack_info()

    def backends_available(self) -> dict:
        """{"cpu": bool, "cuda": bool, "metal": bool}: backends compiled in and usable."""
        return {b: bool(self.core.backend_available(b)) for b in ("cpu", "cuda", "metal")}

    def backend(self, op: str, m: int, n: int, batch: int = 1, device=None, nrhs: int = 1) -> str:
        """Kernel a call of op on `batch` m x n matrices would use ("cpu:lapack", ...); nrhs: the
        right-hand side's columns of an op in RHS_OPS (1 for any other)."""
        for label, value in (("n", n), ("m", m), ("batch", batch), ("nrhs", nrhs)):
            if operator.index(value) < 1:
                raise ValueError(f"[metal_linalg.{op}_backend] {label} must be >= 1, got {value}")
        if op not in RHS_OPS and nrhs != 1:
            raise ValueError(f"[metal_linalg.{op}_backend] {op} takes no right-hand side (nrhs)")
        return self.core.backend(op_id(op), int(m), int(n), int(batch), device, int(nrhs))

    def policy(self, op: str) -> dict:
        """The routing policy of op as {field: int}."""
        return parse_policy(self.core.policy_get(op_id(op)))

    def set_policy(self, op: str, **fields) -> None:
        """Set policy fields of op (its source becomes "user"). All fields are checked before any
        is set: unknown names raise ValueError, non-ints TypeError, negative values ValueError."""
        check_policy_fields(op, self.policy(op), fields)
        for key, value in fields.items():
            self.core.policy_set(op_id(op), key, value)

    def reset_policy(self, op: str) -> None:
        """Drop user settings of op: back to env > tuned > default."""
        self.core.policy_reset(op_id(op))

    def policy_source(self, op: str) -> str:
        """ "user", "env:<VAR>", "tuned:<device>" or "default:untuned-device"."""
        return self.core.policy_source(op_id(op))

    def calibration_status(self) -> dict:
        """{op: "tuned" | "untuned"} for every op with a routing policy (POLICY_OPS): "tuned"
        once a policy file or a tuned table has a line for it."""
        return {op: self.core.calibration_status(OP_ID[op]) for op in POLICY_OPS}

    def policy_file(self) -> str:
        """The per-machine policy file the core reads (`calibrate` writes it)."""
        return self.core.policy_file()

    def reload_policy(self) -> None:
        """Re-read the per-machine policy file."""
        self.core.policy_reload()

    def set_cpu_threads(self, n: int) -> None:
        """Threads for CPU batches (0 = all cores). Also METAL_LINALG_CPU_THREADS."""
        n = operator.index(n)
        if n < 0:
            raise ValueError(f"[metal_linalg.set_cpu_threads] n must be >= 0, got {n}")
        self.core.set_cpu_threads(n)

    def get_cpu_threads(self) -> int:
        """Threads for CPU batches (0 = all cores)."""
        return int(self.core.get_cpu_threads())

    def cpu_only(self) -> bool:
        """True while every op is routed to the CPU (set_cpu_only)."""
        return bool(self.core.cpu_only())

    def set_cpu_only(self, on: bool = True) -> CpuOnly:
        """Route every op to the CPU (on=True: host data never goes to a GPU, device data is
        copied to the host) or back to the routing policy (on=False); process-wide, overriding
        policies and METAL_LINALG_<OP>_BACKEND. Returns a context manager that restores the
        previous setting on exit: `with set_cpu_only(True): ...`."""
        if not isinstance(on, (bool, int)) or isinstance(on, int) and on not in (0, 1):
            raise TypeError(f"[metal_linalg.set_cpu_only] on must be a bool, got {on!r}")
        previous = self.cpu_only()
        self.core.set_cpu_only(bool(on))
        return CpuOnly(self, previous)

    def gpu_core_count(self) -> int:
        """Compute units of the GPU the routing is tuned for: the multiprocessor (SM) count of
        CUDA device 0 (132 on an H200); 0 when no GPU backend is usable, and on Metal (Metal has
        no public query for its GPU core count)."""
        return int(self.core.gpu_core_count())

    def warn_untuned(self, stacklevel: int = 3) -> None:
        """One short CalibrationWarning naming the untuned ops (called at import)."""
        if os.environ.get("METAL_LINALG_NO_CALIBRATION_NOTICE", "") not in ("", "0"):
            return
        status = self.calibration_status()
        untuned = [op for op, s in status.items() if s != "tuned"]
        if untuned:
            warnings.warn(
                calibration_notice(
                    self.package, untuned, self.device_name(), every=len(untuned) == len(status)
                ),
                CalibrationWarning,
                stacklevel=stacklevel,
            )

    @staticmethod
    def _stream_or_device(op: str, stream, device):
        """MLX's queries take the stream; device ("cpu", "gpu") stays accepted for the shared
        calibration code, meaning that device's default stream."""
        if stream is not None and device is not None:
            raise TypeError(f"[metal_linalg.{op}_backend] pass stream or device, not both")
        return stream if device is None else device

    def _make(self, op: str) -> None:
        square = op.startswith("eig") or op in LINSYS_OPS  # the linear systems: n x n
        dims = "n" if square else "m, n"

        if op in RHS_OPS and self.where == "stream":

            def backend(n: int, batch: int = 1, *, nrhs: int = 1, stream=None, device=None) -> str:
                where = self._stream_or_device(op, stream, device)
                return self.backend(op, n, n, batch, where, nrhs)
        elif op in RHS_OPS:

            def backend(n: int, batch: int = 1, *, nrhs: int = 1, device=None) -> str:
                return self.backend(op, n, n, batch, device, nrhs)
        elif square and self.where == "stream":

            def backend(n: int, batch: int = 1, *, stream=None, device=None) -> str:
                return self.backend(op, n, n, batch, self._stream_or_device(op, stream, device))
        elif square:

            def backend(n: int, batch: int = 1, *, device=None) -> str:
                return self.backend(op, n, n, batch, device)
        elif self.where == "stream":

            def backend(m: int, n: int, batch: int = 1, *, stream=None, device=None) -> str:
                return self.backend(op, m, n, batch, self._stream_or_device(op, stream, device))
        else:

            def backend(m: int, n: int, batch: int = 1, *, device=None) -> str:
                return self.backend(op, m, n, batch, device)

        def get() -> dict:
            return self.policy(op)

        def set_(**fields) -> None:
            self.set_policy(op, **fields)

        def reset() -> None:
            self.reset_policy(op)

        def source() -> str:
            return self.policy_source(op)

        backend.__name__ = f"{op}_backend"
        where = (
            "stream: the stream the call would run on (None: MLX's default device), an "
            "mx.Stream or an mx.Device"
            if self.where == "stream"
            else "device: where the data lives (default: the package's default device)"
        )
        rhs = "; nrhs: the right-hand side's columns" if op in RHS_OPS else ""
        backend.__doc__ = (
            f"Kernel a {op} of `batch` matrices ({dims}) would use, e.g. 'cpu:lapack'; "
            f"{where}{rhs}."
        )
        get.__name__, get.__doc__ = f"{op}_policy", f"The routing policy of {op} as {{field: int}}."
        set_.__name__ = f"set_{op}_policy"
        set_.__doc__ = (
            f"Set fields of the {op} policy, e.g. set_{op}_policy(cpu_kernel_max_n=16); a bad "
            "field or value raises and changes nothing."
        )
        reset.__name__, reset.__doc__ = (
            f"reset_{op}_policy",
            f"Drop user settings of the {op} policy.",
        )
        source.__name__, source.__doc__ = (
            f"{op}_policy_source",
            f"Where the {op} policy comes from.",
        )
        for fn in (backend, get, set_, reset, source):
            setattr(self, fn.__name__, fn)
