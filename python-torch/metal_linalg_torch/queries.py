"""Device, backend, routing-policy, calibration and thread queries over the C core."""

from __future__ import annotations

import ctypes
import operator
import os
import warnings

from . import _lib
from ._dispatch import CUDA_CORE
from ._lib import OP_ID, OPS, lib


class CalibrationWarning(UserWarning):
    """A decomposition runs with the cautious default policy: this machine was never measured."""


def device_name() -> str:
    """The device policies are tuned for: the CUDA device when usable, else the CPU model."""
    return _lib.text(lib.ml_device_name())


def version() -> str:
    return _lib.text(lib.ml_version_string())


def lapack_info() -> str:
    return _lib.text(lib.ml_lapack_info())


def backends_available() -> dict:
    return {b: bool(lib.ml_backend_available(b.encode())) for b in ("cpu", "cuda", "metal")}


def _memory(device) -> int:
    if device is None:
        return _lib.ML_MEMORY_CUDA if CUDA_CORE else _lib.ML_MEMORY_HOST
    kind = device if isinstance(device, str) else getattr(device, "type", str(device))
    kind = kind.split(":")[0]
    if kind == "cuda":
        return _lib.ML_MEMORY_CUDA
    if kind == "cpu":
        return _lib.ML_MEMORY_HOST
    raise ValueError(f"[metal_linalg.backend] device must be 'cpu' or 'cuda', got {device!r}")


def _backend(op: str, m: int, n: int, batch: int, device) -> str:
    for label, value in (("n", n), ("m", m), ("batch", batch)):
        if operator.index(value) < 1:
            raise ValueError(f"[metal_linalg.{op}_backend] {label} must be >= 1, got {value}")
    name = lib.ml_backend(OP_ID[op], _memory(device), m, n, batch)
    if not name:
        raise _lib.MetalLinalgError(
            f"[metal_linalg.{op}_backend] {_lib.text(lib.ml_last_error()) or 'no backend'}"
        )
    return _lib.text(name)


def qr_backend(m: int, n: int, batch: int = 1, *, device=None) -> str:
    """Kernel a qr of `batch` m x n matrices would use ("cpu:lapack", "cuda:<kernel>", ...).

    device: "cpu" or "cuda"; default: CUDA memory when the core has a usable CUDA device.
    """
    return _backend("qr", m, n, batch, device)


def eigh_backend(n: int, batch: int = 1, *, device=None) -> str:
    """Kernel an eigh of `batch` n x n matrices would use."""
    return _backend("eigh", n, n, batch, device)


def eigvalsh_backend(n: int, batch: int = 1, *, device=None) -> str:
    """Kernel an eigvalsh of `batch` n x n matrices would use."""
    return _backend("eigvalsh", n, n, batch, device)


def svd_backend(m: int, n: int, batch: int = 1, *, device=None) -> str:
    """Kernel an svd of `batch` m x n matrices would use."""
    return _backend("svd", m, n, batch, device)


def svdvals_backend(m: int, n: int, batch: int = 1, *, device=None) -> str:
    """Kernel an svdvals of `batch` m x n matrices would use."""
    return _backend("svdvals", m, n, batch, device)


def policy(op: str) -> dict:
    """The routing policy of op as {field: int}."""
    size = 512
    while True:
        buf = ctypes.create_string_buffer(size)
        needed = ctypes.c_size_t(0)
        _lib.check(lib.ml_policy_get(OP_ID[op], buf, size, ctypes.byref(needed)), f"{op}_policy")
        if needed.value < size:
            break
        size = needed.value + 1
    fields = {}
    for item in buf.value.decode().split(";"):
        if "=" in item:
            key, value = item.split("=", 1)
            fields[key.strip()] = int(value)
    return fields


def set_policy(op: str, **fields) -> None:
    """Set policy fields of op (source becomes "user"); unknown fields raise ValueError."""
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
        _lib.check(lib.ml_policy_set(OP_ID[op], key.encode(), value), f"set_{op}_policy")


def reset_policy(op: str) -> None:
    """Drop user settings of op: back to env > tuned > default."""
    _lib.check(lib.ml_policy_reset(OP_ID[op]), f"reset_{op}_policy")


def policy_source(op: str) -> str:
    """ "user", "env:<VAR>", "tuned:<device>" or "default:untuned-device"."""
    return _lib.text(lib.ml_policy_source(OP_ID[op]))


def calibration_status() -> dict:
    """{op: "tuned" | "untuned"} for every decomposition."""
    return {op: _lib.text(lib.ml_calibration_status(OP_ID[op])) for op in OPS}


def policy_file() -> str:
    """The per-machine policy file `python -m metal_linalg_torch calibrate` writes."""
    return _lib.text(lib.ml_policy_file())


def reload_policy() -> None:
    """Re-read the per-machine policy file."""
    _lib.check(lib.ml_policy_reload(), "reload_policy")


def set_cpu_threads(n: int) -> None:
    """Threads for CPU batches (0 = all cores). Also METAL_LINALG_CPU_THREADS."""
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"[metal_linalg.set_cpu_threads] n must be >= 0, got {n}")
    _lib.check(lib.ml_set_cpu_threads(n), "set_cpu_threads")


def get_cpu_threads() -> int:
    return int(lib.ml_get_cpu_threads())


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
    set_.__doc__ = f"Set fields of the {op} policy, e.g. set_{op}_policy(gpu_min_batch=1)."
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
    """One CalibrationWarning per untuned decomposition (import time)."""
    if os.environ.get("METAL_LINALG_NO_CALIBRATION_NOTICE", "") not in ("", "0"):
        return
    device = device_name()
    for op, status in calibration_status().items():
        if status != "tuned":
            warnings.warn(
                f"metal_linalg_torch: {op} uses the default routing policy on {device!r} "
                f"({status}); run `python -m metal_linalg_torch calibrate` to measure this "
                "machine, or set METAL_LINALG_NO_CALIBRATION_NOTICE=1 to silence this notice",
                CalibrationWarning,
                stacklevel=3,
            )
