"""Device, backend, routing-policy, calibration and thread queries over the C core."""

from __future__ import annotations

import operator
import os
import warnings

from ._loader import ext

# Op names in ml_op order; also the names used in policy files and environment variables.
OPS = ("qr", "eigh", "eigvalsh", "svd", "svdvals")
OP_ID = {name: i for i, name in enumerate(OPS)}


class CalibrationWarning(UserWarning):
    """A decomposition runs with the cautious default policy: this machine was never measured."""


def device_name() -> str:
    """The device policies are tuned for: the CUDA device when usable, else the CPU model."""
    return ext.device_name()


def version() -> str:
    """Version of the core library."""
    return ext.version_string()


def lapack_info() -> str:
    """The LAPACK provider the CPU backend uses."""
    return ext.lapack_info()


def backends_available() -> dict:
    return {b: ext.backend_available(b) for b in ("cpu", "cuda", "metal")}


def _op_id(op: str) -> int:
    if op not in OP_ID:
        raise ValueError(f"[metal_linalg] unknown op {op!r}; ops: {', '.join(OPS)}")
    return OP_ID[op]


def _backend(op: str, m: int, n: int, batch: int) -> str:
    for label, value in (("m", m), ("n", n), ("batch", batch)):
        if operator.index(value) < 1:
            raise ValueError(f"[metal_linalg.{op}_backend] {label} must be >= 1, got {value}")
    return ext.backend(_op_id(op), m, n, batch)


def qr_backend(m: int, n: int, batch: int = 1) -> str:
    """Kernel a qr of `batch` m x n matrices would use ("cpu:lapack", "cpu:kernel:<k>", ...)."""
    return _backend("qr", m, n, batch)


def eigh_backend(n: int, batch: int = 1) -> str:
    """Kernel an eigh of `batch` n x n matrices would use."""
    return _backend("eigh", n, n, batch)


def eigvalsh_backend(n: int, batch: int = 1) -> str:
    """Kernel an eigvalsh of `batch` n x n matrices would use."""
    return _backend("eigvalsh", n, n, batch)


def svd_backend(m: int, n: int, batch: int = 1) -> str:
    """Kernel an svd of `batch` m x n matrices would use."""
    return _backend("svd", m, n, batch)


def svdvals_backend(m: int, n: int, batch: int = 1) -> str:
    """Kernel an svdvals of `batch` m x n matrices would use."""
    return _backend("svdvals", m, n, batch)


def policy(op: str) -> dict:
    """The routing policy of op as {field: int}."""
    fields = {}
    for item in ext.policy_get(_op_id(op)).split(";"):
        if "=" in item:
            key, value = item.split("=", 1)
            fields[key.strip()] = int(value)
    return fields


def set_policy(op: str, **fields) -> None:
    """Set policy fields of op (its source becomes "user"); unknown fields raise ValueError."""
    valid = policy(op)
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
    for key, value in fields.items():
        ext.policy_set(_op_id(op), key, value)


def reset_policy(op: str) -> None:
    """Drop user settings of op: back to env > tuned > default."""
    ext.policy_reset(_op_id(op))


def policy_source(op: str) -> str:
    """ "user", "env:<VAR>", "tuned:<device>" or "default:untuned-device"."""
    return ext.policy_source(_op_id(op))


def calibration_status() -> dict:
    """{op: "tuned" | "untuned"} for every decomposition."""
    return {op: ext.calibration_status(OP_ID[op]) for op in OPS}


def policy_file() -> str:
    """The per-machine policy file the core reads (`python -m metal_linalg calibrate` writes it)."""
    return ext.policy_file()


def reload_policy() -> None:
    """Re-read the per-machine policy file."""
    ext.policy_reload()


def set_cpu_threads(n: int) -> None:
    """Threads for CPU batches (0 = all cores). Also METAL_LINALG_CPU_THREADS."""
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"[metal_linalg.set_cpu_threads] n must be >= 0, got {n}")
    ext.set_cpu_threads(n)


def get_cpu_threads() -> int:
    return ext.get_cpu_threads()


def _make(op: str):
    def get() -> dict:
        return policy(op)

    def set_(**fields) -> None:
        set_policy(op, **fields)

    def reset() -> None:
        reset_policy(op)

    def source() -> str:
        return policy_source(op)

    get.__name__, get.__doc__ = f"{op}_policy", f"The routing policy of {op} as {{field: int}}."
    set_.__name__ = f"set_{op}_policy"
    set_.__doc__ = f"Set fields of the {op} policy, e.g. set_{op}_policy(cpu_kernel_max_n=16)."
    reset.__name__, reset.__doc__ = f"reset_{op}_policy", f"Drop user settings of the {op} policy."
    source.__name__, source.__doc__ = f"{op}_policy_source", f"Where the {op} policy comes from."
    return get, set_, reset, source


qr_policy, set_qr_policy, reset_qr_policy, qr_policy_source = _make("qr")
eigh_policy, set_eigh_policy, reset_eigh_policy, eigh_policy_source = _make("eigh")
eigvalsh_policy, set_eigvalsh_policy, reset_eigvalsh_policy, eigvalsh_policy_source = _make(
    "eigvalsh"
)
svd_policy, set_svd_policy, reset_svd_policy, svd_policy_source = _make("svd")
svdvals_policy, set_svdvals_policy, reset_svdvals_policy, svdvals_policy_source = _make("svdvals")


def warn_untuned() -> None:
    """One CalibrationWarning per untuned decomposition (called at import)."""
    if os.environ.get("METAL_LINALG_NO_CALIBRATION_NOTICE", "") not in ("", "0"):
        return
    device = device_name()
    for op, status in calibration_status().items():
        if status != "tuned":
            warnings.warn(
                f"metal_linalg: {op} uses the default routing policy on {device!r} ({status}); "
                "run `python -m metal_linalg calibrate` to measure this machine, or set "
                "METAL_LINALG_NO_CALIBRATION_NOTICE=1 to silence this notice",
                CalibrationWarning,
                stacklevel=3,
            )
