"""metal_linalg: batched float32 QR, eigh, SVD and linear systems of MLX arrays [..., M, N].

Functions mirror mx.linalg's names and return float32 mx.array:

    qr(a, mode="reduced")                        -> (Q, R); mode="r" -> R; "complete": Q m x m
    eigh(a, UPLO="L")                            -> (w ascending, V with eigenvectors as columns)
    eigvalsh(a, UPLO="L")                        -> w
    svd(a, compute_uv=True, *, full_matrices=False) -> (U, S, Vt), or S when compute_uv=False
    svdvals(a)                                   -> S (descending)

and the linear systems, with torch.linalg's semantics (info words, broadcasting, gradients):

    cholesky(a, upper=False), cholesky_ex(a, upper=False, check_errors=False) -> L, (L, info)
    lu_factor(a), lu_factor_ex(a, *, check_errors=False)  -> (LU, pivots int32 1-based)[, info]
    solve(a, b, *, left=True), solve_ex(a, b, *, left=True, check_errors=False) -> X[, info]
    inv(a), inv_ex(a, *, check_errors=False)               -> X[, info]
    solve_triangular(a, b, *, upper=False, left=True, unitriangular=False) -> X
    tri_inv(a, upper=False), cholesky_inv(L, upper=False)  -> X
    lu(a) -> (p uint32 row indices, L, U) with a = L[p] @ U, as mx.linalg.lu
    det(a) -> det; slogdet(a) -> (sign, logabsdet)         (from lu_factor, as mx.linalg's)

(each with the keyword-only stream=). The plain cholesky, lu_factor, solve and inv evaluate the
call and raise LinearSystemError (a ValueError and a LinAlgError) naming the first matrix that
is not positive-definite / exactly singular (not under mx.compile / mx.vmap, where such a matrix
gives NaN); the *_ex forms stay lazy and return LAPACK's info (0x40000000 for NaN/Inf input).

Each call is a lazy MLX primitive: it returns unevaluated arrays that compose with other MLX
ops in one graph (mx.eval / mx.async_eval run it), with gradients (mx.grad, mx.vjp, mx.jvp),
mx.vmap over any axis and mx.compile; small calls on an evaluated input on the CPU stream
(up to 32x32) run at once, which costs less than a graph node. The keyword-only `stream` (None, an mx.Stream or an
mx.Device) picks where it runs; None means MLX's default device. On MLX's CPU stream the core's
host path (LAPACK spread over the cores, or its own small-matrix kernels) runs as an MLX task;
on the GPU stream of a CUDA MLX (mlx[cuda13]) the core's CUDA kernels run on MLX's CUDA stream,
and shapes no CUDA kernel covers run on the CPU stream. On Apple's Metal MLX (gpu_path() ==
"metal") the core's Metal kernels are encoded into MLX's command encoder, likewise with the CPU
stream for uncovered shapes; that path is type-checked only, never yet built or run on a Mac.
Inputs: mx.array, NumPy arrays or nested lists of any real dtype (converted to float32;
complex raises TypeError), any number of batch dimensions, zero-size batches. A matrix with
NaN/Inf gives NaN for that matrix only. full_matrices=True needs square matrices for now
(NotImplementedError); a tall qr(mode="complete") has no derivative (as torch). qr_ex, eigh_ex, eigvalsh_ex, svd_ex, svdvals_ex add the
per-matrix info word (int32 [...], 0 when the matrix converged and was finite) and take
check_errors=True (evaluates the call; LinAlgError for a matrix that did not converge or had
NaN/Inf). UPLO may be 'L', 'U', 'l' or 'u'. stream=mx.gpu on an MLX without a GPU (mlx[cpu])
raises ValueError. Ignored or adjusted settings raise MetalLinalgWarning.

Routing queries: device_name(), <op>_backend(..., stream=None) (what a call on that stream
would run), <op>_policy(), set_<op>_policy(**fields), reset_<op>_policy(), <op>_policy_source(),
calibration_status(), set_cpu_threads(n), get_cpu_threads(), cpu_only(), set_cpu_only(on) (also
a context manager: `with ml.set_cpu_only(True): ...`), gpu_core_count(); the linear systems
have <op>_backend(n, batch=1, *, stream=None) only (no policy). CLI: `python -m metal_linalg info | bench | calibrate`.

Environment variables (read by the core when it loads):
    METAL_LINALG_<OP>_BACKEND=cpu|gpu|auto   force a backend; OP in QR, EIGH, EIGVALSH, SVD, SVDVALS
    METAL_LINALG_<OP>_<FIELD>=int            one policy field, e.g. METAL_LINALG_EIGH_CPU_KERNEL_MAX_N=16
    METAL_LINALG_CPU_THREADS=n               threads for CPU batches (0 = all cores)
    METAL_LINALG_NO_CALIBRATION_NOTICE=1     no CalibrationWarning at import
"""

from __future__ import annotations

from . import _queries
from ._linsys import (
    LinearSystemError,
    cholesky,
    cholesky_ex,
    cholesky_inv,
    det,
    inv,
    inv_ex,
    lu,
    lu_factor,
    lu_factor_ex,
    slogdet,
    solve,
    solve_ex,
    solve_triangular,
    tri_inv,
)
from ._loader import check_mlx_version
from ._ops import (
    LinAlgError,
    eigh,
    eigh_ex,
    eigvalsh,
    eigvalsh_ex,
    gpu_path,
    qr,
    qr_ex,
    svd,
    svd_ex,
    svdvals,
    svdvals_ex,
)
from ._queries import CalibrationWarning, MetalLinalgWarning, warn_untuned
from ._queries import claim_warnings as _claim_warnings

# The queries (device_name, set_cpu_threads, ..., each op's qr_backend, qr_policy, ...;
# cholesky_backend, ... for the linear systems).
globals().update({name: getattr(_queries, name) for name in _queries.PUBLIC})

__version__ = "0.1.0"

__all__ = [
    "CalibrationWarning",
    "LinAlgError",
    "LinearSystemError",
    "MetalLinalgWarning",
    "check_mlx_version",
    "cholesky",
    "cholesky_ex",
    "cholesky_inv",
    "det",
    "eigh",
    "eigh_ex",
    "eigvalsh",
    "eigvalsh_ex",
    "gpu_path",
    "inv",
    "inv_ex",
    "lu",
    "lu_factor",
    "lu_factor_ex",
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
    "tri_inv",
]
__all__ += _queries.PUBLIC  # noqa: PLE0605 (names made from the op table)

# Before anything reads the policy: the core's warnings become MetalLinalgWarning, not stderr.
_claim_warnings()
warn_untuned()
