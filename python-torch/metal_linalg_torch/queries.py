"""Device, backend, routing-policy, calibration and thread queries over the C core: the shared
functions (`_shared.queries`) over this package's ctypes calls."""

from __future__ import annotations

import ctypes
import operator

from . import _lib
from ._dispatch import CUDA_CORE
from ._lib import lib
from ._shared import queries as _shared
from ._shared.queries import (  # noqa: F401 (re-exported)
    ALL_OPS,
    LINSYS_OPS,
    OP_ID,
    OPS,
    POLICY_OPS,
    RHS_OPS,
    CalibrationWarning,
)

PACKAGE = "metal_linalg_torch"


def _memory(device, name: str) -> int:
    if device is None:
        return _lib.ML_MEMORY_CUDA if CUDA_CORE else _lib.ML_MEMORY_HOST
    kind = device if isinstance(device, str) else getattr(device, "type", str(device))
    kind = kind.split(":")[0]
    if kind == "cuda":
        return _lib.ML_MEMORY_CUDA
    if kind == "cpu":
        return _lib.ML_MEMORY_HOST
    raise ValueError(f"[metal_linalg.{name}] device must be 'cpu' or 'cuda', got {device!r}")


INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def _c_int(value, limit: int, what: str, name: str) -> int:
    """value as an int in [0, limit] for a C integer argument: ctypes would truncate a larger
    one silently (2**32 + 1 -> 1), so it is refused here."""
    if isinstance(value, bool):
        raise TypeError(f"[metal_linalg.{name}] {what} must be an int, got bool")
    value = operator.index(value)
    if not 0 <= value <= limit:
        bound = "2**31 - 1" if limit == INT32_MAX else "2**63 - 1"
        raise ValueError(f"[metal_linalg.{name}] {what} must be in [0, {bound}], got {value}")
    return value


for _name, _restype, _argtypes in (
    ("ml_set_cpu_only", None, [ctypes.c_int32]),
    ("ml_cpu_only", ctypes.c_int32, []),
    ("ml_gpu_core_count", ctypes.c_int32, []),
):
    getattr(lib, _name).restype = _restype
    getattr(lib, _name).argtypes = _argtypes


class _Core:
    """The core's calls through ctypes, in the shape `_shared.queries.Queries` expects."""

    set_cpu_only = staticmethod(lambda on: lib.ml_set_cpu_only(1 if on else 0))
    cpu_only = staticmethod(lambda: bool(lib.ml_cpu_only()))
    gpu_core_count = staticmethod(lambda: int(lib.ml_gpu_core_count()))

    device_name = staticmethod(lambda: _lib.text(lib.ml_device_name()))
    version = staticmethod(lambda: _lib.text(lib.ml_version_string()))
    lapack_info = staticmethod(lambda: _lib.text(lib.ml_lapack_info()))
    backend_available = staticmethod(lambda b: bool(lib.ml_backend_available(b.encode())))
    policy_source = staticmethod(lambda op: _lib.text(lib.ml_policy_source(op)))
    calibration_status = staticmethod(lambda op: _lib.text(lib.ml_calibration_status(op)))
    policy_file = staticmethod(lambda: _lib.text(lib.ml_policy_file()))
    get_cpu_threads = staticmethod(lambda: int(lib.ml_get_cpu_threads()))

    @staticmethod
    def backend(op: int, m: int, n: int, batch: int, device, nrhs: int = 1) -> str:
        label = f"{ALL_OPS[op]}_backend"
        m, n, batch, nrhs = (
            _c_int(v, INT64_MAX, w, label)
            for v, w in ((m, "m"), (n, "n"), (batch, "batch"), (nrhs, "nrhs"))
        )
        memory = _memory(device, label)
        if ALL_OPS[op] in RHS_OPS:
            name = lib.ml_backend_rhs(op, memory, n, nrhs, batch)
        else:
            name = lib.ml_backend(op, memory, m, n, batch)
        if not name:
            raise _lib.MetalLinalgError(
                f"[metal_linalg.{label}] {_lib.text(lib.ml_last_error()) or 'no backend'}"
            )
        return _lib.text(name)

    @staticmethod
    def policy_get(op: int) -> str:
        size = 512
        while True:
            buf = ctypes.create_string_buffer(size)
            needed = ctypes.c_size_t(0)
            _lib.check(
                lib.ml_policy_get(op, buf, size, ctypes.byref(needed)), f"{ALL_OPS[op]}_policy"
            )
            if needed.value < size:
                return buf.value.decode()
            size = needed.value + 1

    @staticmethod
    def policy_set(op: int, field: str, value: int) -> None:
        label = f"set_{ALL_OPS[op]}_policy"
        value = _c_int(value, INT64_MAX, field, label)
        _lib.check(lib.ml_policy_set(op, field.encode(), value), label)

    @staticmethod
    def policy_reset(op: int) -> None:
        _lib.check(lib.ml_policy_reset(op), f"reset_{ALL_OPS[op]}_policy")

    @staticmethod
    def policy_reload() -> None:
        _lib.check(lib.ml_policy_reload(), "reload_policy")

    @staticmethod
    def set_cpu_threads(n: int) -> None:
        n = _c_int(n, INT32_MAX, "n", "set_cpu_threads")
        _lib.check(lib.ml_set_cpu_threads(n), "set_cpu_threads")


_q = _shared.Queries(_Core(), PACKAGE)

# device_name(), ..., policy("qr"), ... and each op's own: qr_backend, qr_policy, set_qr_policy, ...
_q.export(globals())
# The names the package exports at its top level.
PUBLIC = _q.public()


def warn_untuned() -> None:
    """One short CalibrationWarning per untuned decomposition (import time)."""
    _q.warn_untuned(stacklevel=4)
