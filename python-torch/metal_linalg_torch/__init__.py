"""metal_linalg_torch: batched float32 QR, eigh and SVD of PyTorch tensors [..., M, N].

Functions take torch.linalg's arguments and return its result types:

    qr(A, mode="reduced")          -> torch.return_types.linalg_qr (Q, R); "r", "complete"
    eigh(A, UPLO="L")              -> torch.return_types.linalg_eigh (eigenvalues, eigenvectors)
    eigvalsh(A, UPLO="L")          -> Tensor
    svd(A, full_matrices=False)    -> torch.return_types.linalg_svd (U, S, Vh)
    svdvals(A)                     -> Tensor

and the linear systems, on the CPU through LAPACK (CUDA tensors on the core's GPU kernels where
they cover the size, else through a host copy), with torch.linalg's errors (LinAlgError) and
gradients:

    cholesky(A, *, upper=False), cholesky_ex(A, *, upper=False, check_errors=False)
    solve(A, B, *, left=True), solve_ex(A, B, *, left=True, check_errors=False)
    inv(A), inv_ex(A, *, check_errors=False)
    solve_triangular(A, B, *, upper, left=True, unitriangular=False)
    lu_factor(A, *, pivot=True), lu_factor_ex(A, *, pivot=True, check_errors=False)
    lu(A, *, pivot=True)              (lu_factor unpacked: P, L, U)
    lu_solve(LU, pivots, B, *, left=True, adjoint=False)   (two solve_triangular calls)
    det(A), slogdet(A)                (from lu_factor)

Results are float32 on the input's device (other real dtypes are converted, complex raises
TypeError); full_matrices=True needs square matrices (NotImplementedError); a tall
mode="complete" QR has no derivative (RuntimeError at backward, as torch).
A matrix with NaN/Inf gives NaN for that matrix only, as does one whose iteration did not
converge. The *_ex variants (qr_ex, eigh_ex, eigvalsh_ex, svd_ex, svdvals_ex) also return
the per-matrix info word (int32, batch shape; bit 0x1 not converged, 0x2 non-finite input,
0x4 rank deficient, bits 16+ sweeps), like torch.linalg.cholesky_ex; check_errors=True
raises torch.linalg.LinAlgError for a non-converged or non-finite matrix. UPLO may be
'L', 'U', 'l' or 'u'. Ignored or adjusted settings raise MetalLinalgWarning. The same computations are the
custom ops torch.ops.metal_linalg.{qr, eigh, eigvalsh, svd, svdvals} (torch.compile,
torch.jit.trace and autograd work; eigvalsh/svdvals compute vectors when the input requires
grad); the public functions add forward-mode AD and torch.func (grad, jacrev, jvp, vmap).

Routing queries: device_name(), <op>_backend(...), <op>_policy(), set_<op>_policy(**fields),
reset_<op>_policy(), <op>_policy_source(), calibration_status(), set_cpu_threads(n),
get_cpu_threads(), cpu_only(), set_cpu_only(on) (also a context manager: `with
set_cpu_only(True): ...` routes every op to the CPU), gpu_core_count() (the CUDA SM count).
A DTensor sharded on a batch dimension is decomposed locally on each rank (no communication).
`python -m metal_linalg_torch calibrate` measures this machine.

Environment variables (read by the core when the library loads):
    METAL_LINALG_<OP>_BACKEND=cpu|gpu|auto   force a backend; OP in QR, EIGH, EIGVALSH, SVD, SVDVALS
    METAL_LINALG_<OP>_<FIELD>=int            one policy field, e.g. METAL_LINALG_EIGH_GPU_MIN_BATCH=1
    METAL_LINALG_CPU_THREADS=n               threads for CPU batches (0 = all cores)
    METAL_LINALG_POLICY_FILE=path            the per-machine policy file (written by calibrate)
    METAL_LINALG_NO_CALIBRATION_NOTICE=1     no CalibrationWarning at import
Policy precedence: set_<op>_policy (user) > environment (env:) > measured table (tuned:) > default.
"""

from __future__ import annotations

from . import queries as _queries
from ._lib import MetalLinalgError, MetalLinalgWarning
from .eigh import eigh, eigh_ex, eigvalsh, eigvalsh_ex
from .qr import qr, qr_ex
from .queries import CalibrationWarning
from .svd import svd, svd_ex, svdvals, svdvals_ex

__version__ = "0.1.0"

# The linear systems (CPU through LAPACK; CUDA tensors on GPU kernels or through a host copy).
from .linsys import (
    cholesky,
    cholesky_ex,
    det,
    inv,
    inv_ex,
    lu,
    lu_factor,
    lu_factor_ex,
    lu_solve,
    slogdet,
    solve,
    solve_ex,
    solve_triangular,
)

# The queries (device_name, set_cpu_threads, ..., each op's qr_backend, qr_policy, ...;
# cholesky_backend, cholesky_policy, ... for the linear systems).
globals().update({name: getattr(_queries, name) for name in _queries.PUBLIC})

__all__ = [
    "CalibrationWarning",
    "MetalLinalgError",
    "MetalLinalgWarning",
    "cholesky",
    "cholesky_ex",
    "det",
    "eigh",
    "eigh_ex",
    "eigvalsh",
    "eigvalsh_ex",
    "inv",
    "inv_ex",
    "lu",
    "lu_factor",
    "lu_factor_ex",
    "lu_solve",
    "qr",
    "qr_ex",
    "slogdet",
    "solve",
    "solve_ex",
    "solve_triangular",
    "svd",
    "svd_ex",
    "svdvals",
    "svdvals_ex",
]
__all__ += _queries.PUBLIC  # noqa: PLE0605 (names made from the op table)

from .queries import warn_untuned as _warn_untuned

_warn_untuned()
# The core reads the environment and the policy file now (not at the first call), so settings
# it ignores or adjusts warn at import.
# DTensor sharding rules once torch.distributed.tensor loads.
from ._dtensor import register_when_imported as _register_dtensor
from ._lib import emit_warnings as _emit_warnings
from ._lib import lib as _core

_register_dtensor()

_core.ml_policy_source(0)
_core.ml_get_cpu_threads()  # METAL_LINALG_CPU_THREADS
_emit_warnings()
