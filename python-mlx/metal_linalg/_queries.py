"""Device, backend, routing-policy, calibration and thread queries over the C core: the shared
functions (`_shared.queries`) over this package's compiled module."""

from __future__ import annotations

from ._loader import ext
from ._shared import queries as _shared
from ._shared.queries import OP_ID, OPS, CalibrationWarning  # noqa: F401 (re-exported)

PACKAGE = "metal_linalg"


def _host(device, name: str) -> None:
    """Routing can be queried for data in host memory (MLX's CPU stream) only."""
    if device is not None and "cpu" not in str(device).lower():
        raise ValueError(
            f"[metal_linalg.{name}] device must be 'cpu' (the route of host data), got {device!r}"
        )


class _Core:
    """The compiled module's calls, in the shape `_shared.queries.Queries` expects."""

    device_name = staticmethod(ext.device_name)
    version = staticmethod(ext.version_string)
    lapack_info = staticmethod(ext.lapack_info)
    backend_available = staticmethod(ext.backend_available)
    policy_get = staticmethod(ext.policy_get)
    policy_set = staticmethod(ext.policy_set)
    policy_reset = staticmethod(ext.policy_reset)
    policy_source = staticmethod(ext.policy_source)
    calibration_status = staticmethod(ext.calibration_status)
    policy_file = staticmethod(ext.policy_file)
    policy_reload = staticmethod(ext.policy_reload)
    set_cpu_threads = staticmethod(ext.set_cpu_threads)
    get_cpu_threads = staticmethod(ext.get_cpu_threads)

    @staticmethod
    def backend(op: int, m: int, n: int, batch: int, device) -> str:
        _host(device, f"{OPS[op]}_backend")
        return ext.backend(op, m, n, batch)


_q = _shared.Queries(_Core(), PACKAGE)

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
