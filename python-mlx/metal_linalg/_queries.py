"""Device, backend, routing-policy, calibration and thread queries over the C core: the shared
functions (`_shared.queries`) over this package's compiled module."""

from __future__ import annotations

import os
import sys
import warnings

import mlx.core as mx

from ._loader import ext
from ._ops import resolve_stream
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

PACKAGE = "metal_linalg"


class MetalLinalgWarning(UserWarning):
    """A setting was ignored or adjusted where it took effect (a garbage METAL_LINALG_* value,
    a forced GPU backend without a GPU, an unreadable or malformed policy file, ...)."""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _caller_level() -> int:
    """warnings.warn's stacklevel of the first frame outside this package (the user's call)."""
    frame, level = sys._getframe(2), 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        _PACKAGE_DIR + os.sep
    ):
        frame, level = frame.f_back, level + 1
    return level


def emit_warnings() -> None:
    """Raise the core's pending warnings as MetalLinalgWarning (each distinct text once),
    attributed to the user's line that caused them."""
    while ext.pending_warnings() > 0:
        _warn_lines(ext.take_warnings())


def _warn_lines(text: str) -> None:
    for line in text.splitlines():
        if line:
            warnings.warn(line, MetalLinalgWarning, stacklevel=_caller_level())


def _warning_after(fn):
    """fn, then the core's pending warnings as Python warnings (raised or not, fn's outcome)."""

    def call(*args):
        try:
            return fn(*args)
        finally:
            if ext.pending_warnings():
                emit_warnings()

    return staticmethod(call)


def _route(op: int, m: int, n: int, batch: int, stream, nrhs: int = 1) -> str:
    """What a call on `stream` runs: the primitive is placed on the GPU stream only where a GPU
    kernel covers the shape (as the graph builder decides), else on the CPU stream, whose host
    path is the core's host route."""
    if isinstance(stream, str):
        if stream not in ("cpu", "gpu", "cuda"):
            raise ValueError(
                f"[metal_linalg.{ALL_OPS[op]}_backend] device must be 'cpu' or 'gpu', got {stream!r}"
            )
        stream = mx.cpu if stream == "cpu" else mx.gpu
    s = resolve_stream(stream, f"{ALL_OPS[op]}_backend", warn=False)
    rhs = (nrhs,) if ALL_OPS[op] in RHS_OPS else ()  # B's columns, of an op that takes one
    if s.device.type == mx.DeviceType.gpu:
        placed = ext.placement(op, 0, [batch, m, n, *rhs], s)
        if placed.device.type == mx.DeviceType.gpu:
            return ext.gpu_backend(op, m, n, batch, *rhs)
    return ext.backend(op, m, n, batch, *rhs)


class _Core:
    """The compiled module's calls, in the shape `_shared.queries.Queries` expects."""

    device_name = staticmethod(ext.device_name)
    version = staticmethod(ext.version_string)
    lapack_info = staticmethod(ext.lapack_info)
    backend_available = staticmethod(ext.backend_available)
    policy_get = staticmethod(ext.policy_get)
    policy_set = _warning_after(ext.policy_set)
    policy_reset = _warning_after(ext.policy_reset)
    policy_source = staticmethod(ext.policy_source)
    calibration_status = staticmethod(ext.calibration_status)
    policy_file = staticmethod(ext.policy_file)
    policy_reload = _warning_after(ext.policy_reload)
    set_cpu_threads = _warning_after(ext.set_cpu_threads)
    get_cpu_threads = staticmethod(ext.get_cpu_threads)
    set_cpu_only = staticmethod(ext.set_cpu_only)
    cpu_only = staticmethod(ext.cpu_only)
    gpu_core_count = staticmethod(ext.gpu_core_count)
    backend = staticmethod(_route)


_q = _shared.Queries(_Core(), PACKAGE, where="stream")

# device_name(), ..., policy("qr"), ... and each op's own: qr_backend, qr_policy, set_qr_policy, ...;
# the linear systems' cholesky_backend, solve_backend, ... (they have no policy to set).
_q.export(globals())
# The names the package exports at its top level.
PUBLIC = _q.public()


def warn_untuned() -> None:
    """One short CalibrationWarning per untuned decomposition (called at import)."""
    _q.warn_untuned(stacklevel=4)


def claim_warnings() -> None:
    """Take the core's warnings from stderr, make it read the environment and the policy file
    now (not at the first call) and raise what it ignored or adjusted (called at import)."""
    _warn_lines(ext.take_warnings())
    ext.policy_source(0)
    ext.get_cpu_threads()  # METAL_LINALG_CPU_THREADS
    emit_warnings()
