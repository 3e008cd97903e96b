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
from ._shared.queries import ALL_OPS, OP_ID, OPS, CalibrationWarning  # noqa: F401 (re-exported)

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


def _route(op: int, m: int, n: int, batch: int, stream) -> str:
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
    if s.device.type == mx.DeviceType.gpu:
        placed = ext.placement(op, 0, [batch, m, n], s)
        if placed.device.type == mx.DeviceType.gpu:
            return ext.gpu_backend(op, m, n, batch)
    return ext.backend(op, m, n, batch)


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

device_name = _q.device_name
version = _q.version
lapack_info = _q.lapack_info
backends_available = _q.backends_available
policy = _q.policy
set_policy = _q.set_policy
reset_policy = _q.reset_policy
policy_source = _q.policy_source
calibration_status = _q.calibration_status
policy_file = _q.policy_file
reload_policy = _q.reload_policy
set_cpu_threads = _q.set_cpu_threads
get_cpu_threads = _q.get_cpu_threads
cpu_only = _q.cpu_only
set_cpu_only = _q.set_cpu_only
gpu_core_count = _q.gpu_core_count
qr_backend, qr_policy, set_qr_policy, reset_qr_policy, qr_policy_source = (
    _q.qr_backend,
    _q.qr_policy,
    _q.set_qr_policy,
    _q.reset_qr_policy,
    _q.qr_policy_source,
)
eigh_backend, eigh_policy, set_eigh_policy, reset_eigh_policy, eigh_policy_source = (
    _q.eigh_backend,
    _q.eigh_policy,
    _q.set_eigh_policy,
    _q.reset_eigh_policy,
    _q.eigh_policy_source,
)
eigvalsh_backend, eigvalsh_policy, set_eigvalsh_policy = (
    _q.eigvalsh_backend,
    _q.eigvalsh_policy,
    _q.set_eigvalsh_policy,
)
reset_eigvalsh_policy, eigvalsh_policy_source = _q.reset_eigvalsh_policy, _q.eigvalsh_policy_source
svd_backend, svd_policy, set_svd_policy, reset_svd_policy, svd_policy_source = (
    _q.svd_backend,
    _q.svd_policy,
    _q.set_svd_policy,
    _q.reset_svd_policy,
    _q.svd_policy_source,
)
svdvals_backend, svdvals_policy, set_svdvals_policy = (
    _q.svdvals_backend,
    _q.svdvals_policy,
    _q.set_svdvals_policy,
)
reset_svdvals_policy, svdvals_policy_source = _q.reset_svdvals_policy, _q.svdvals_policy_source


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
