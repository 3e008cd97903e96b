"""The linear systems: cholesky, lu_factor, solve, inv, solve_triangular (and the *_ex forms),
tri_inv and cholesky_inv, with mx.linalg's names and torch.linalg's semantics (the torch
package's): argument checks here, the work in lazy MLX primitives (_ext).

Each call returns the outputs of one graph node on the stream given by the keyword-only
`stream` (as the decompositions, see _ops.py). The plain forms of the ops that can fail
(cholesky, lu_factor, solve, inv) check the info word as torch.linalg does: they evaluate the
call and raise LinearSystemError (a ValueError and an ml.LinAlgError) naming the first failing
matrix by its flat batch index. Under mx.compile and mx.vmap nothing can be evaluated: there the
check is skipped and a failed matrix's result is NaN (the *_ex forms return the info to
inspect); under mx.grad / mx.vjp / mx.jvp the check runs.

The info word (the *_ex forms, int32 [...]): 0; LAPACK's info k > 0 (cholesky: the leading
minor of order k is not positive-definite; solve, inv, lu_factor: U[k,k] of the LU
factorization is exactly zero, the first such k); or INFO_NONFINITE (the input has a NaN/Inf
entry where the op reads it). Either way that matrix's result is NaN (lu_factor: only for
NaN/Inf input; a singular matrix keeps its factorization, as LAPACK's), the rest of the batch is
unaffected. A NaN/Inf input is an error for cholesky only (as torch): solve, inv and lu_factor
give that matrix a NaN result.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from ._loader import ext
from ._ops import LinAlgError, _as_array, _stream
from ._shared.queries import OP_ID

OP_CHOLESKY = OP_ID["cholesky"]
OP_SOLVE = OP_ID["solve"]
OP_INV = OP_ID["inv"]
OP_SOLVE_TRIANGULAR = OP_ID["solve_triangular"]
OP_LU_FACTOR = OP_ID["lu_factor"]

# ml_ls_flag of metal_linalg.h.
ML_LS_UPPER = 1
ML_LS_RIGHT = 2
ML_LS_UNIT = 4
# ML_INFO_LS_NONFINITE of metal_linalg.h: a NaN/Inf entry in what the op reads.
INFO_NONFINITE = 0x40000000


class LinearSystemError(LinAlgError, ValueError):
    """A matrix of a linear-system call could not be factored or inverted (not positive-definite,
    exactly singular, or NaN/Inf input to cholesky), as torch.linalg.LinAlgError: both a
    ValueError and an ml.LinAlgError."""


# ---- argument checks ----


def _bool(value, what: str, name: str) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    raise TypeError(f"[metal_linalg.{name}] {what} must be a bool, got {value!r}")


def _square(a: mx.array, name: str, what: str = "A") -> None:
    if a.ndim < 2:
        raise ValueError(
            f"[metal_linalg.{name}] {what} must be an array of matrices [..., N, N], got shape "
            f"{tuple(a.shape)}"
        )
    if a.shape[-1] != a.shape[-2]:
        raise ValueError(
            f"[metal_linalg.{name}] {what} must be square matrices [..., N, N], got shape "
            f"{tuple(a.shape)}"
        )


def _rhs(a: mx.array, b, name: str) -> tuple[mx.array, bool]:
    """b as an array of right-hand sides and whether it was a batch of vectors (torch.linalg.solve's
    rule: b of shape [N], or a's shape without its last dimension), then made [..., N, 1]."""
    b = _as_array(b, name)
    if b.ndim < 1:
        raise ValueError(f"[metal_linalg.{name}] B must have at least 1 dimension, got a scalar")
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and tuple(b.shape) == tuple(a.shape[:-1]))
    if vector:
        b = mx.expand_dims(b, -1)
    return b, vector


# ---- errors as torch.linalg raises them ----


def _readable(info: mx.array) -> bool:
    """Evaluates info (and with it the call), or False under a transformation whose placeholders
    cannot be read (mx.compile, mx.vmap)."""
    try:
        mx.eval(info)
    except ValueError:
        if ext.is_tracer(info):
            return False
        raise
    return True


def _raise(name: str, info: mx.array, failed, message) -> None:
    """LinearSystemError for the first matrix whose info word `failed` accepts."""
    if not _readable(info):
        return
    flat = np.asarray(info).reshape(-1)
    bad = np.flatnonzero(failed(flat))
    if bad.size == 0:
        return
    i = int(bad[0])
    where = f" (batch index {i})" if info.ndim else ""
    raise LinearSystemError(
        f"[metal_linalg.{name}] the input matrix{where} {message(int(flat[i]))}"
    )


def _cholesky_errors(info: mx.array, name: str) -> None:
    _raise(
        name,
        info,
        lambda f: f != 0,
        lambda k: (
            "has NaN or Inf entries (in the triangle read)"
            if k == INFO_NONFINITE
            else f"is not positive-definite: its leading minor of order {k} is not "
            "positive-definite"
        ),
    )


def _singular(flat: np.ndarray) -> np.ndarray:
    """LAPACK's zero pivots; a NaN/Inf input is no error (a NaN result, as in torch)."""
    return (flat != 0) & (flat != INFO_NONFINITE)


def _singular_errors(info: mx.array, name: str) -> None:
    _raise(
        name,
        info,
        _singular,
        lambda k: f"is singular: U[{k},{k}] of its LU factorization is exactly zero",
    )


def _lu_factor_errors(info: mx.array, name: str) -> None:
    _raise(
        name,
        info,
        _singular,
        lambda k: (
            f"is singular: U[{k},{k}] is exactly zero, so solving with the factorization would "
            "divide by zero (lu_factor_ex returns the factorization and the info)"
        ),
    )


# ---- cholesky ----


def _cholesky(a, upper, stream):
    upper = _bool(upper, "upper", "cholesky")
    s = _stream(stream, "cholesky")
    a = _as_array(a, "cholesky")
    _square(a, "cholesky")
    return ext.decompose(a, OP_CHOLESKY, ML_LS_UPPER if upper else 0, True, s)


def cholesky(a, upper: bool = False, *, stream=None):
    """The Cholesky factor of symmetric positive-definite matrices a [..., N, N], as
    mx.linalg.cholesky: L with a = L L^T from a's lower triangle, or U with a = U^T U from its
    upper triangle (upper=True); the other triangle of the result is zero and that of a is not
    read. Raises LinearSystemError (a ValueError) naming the first matrix that is not
    positive-definite or has NaN/Inf in the triangle read (this evaluates the call; cholesky_ex
    stays lazy). Differentiable (torch's formulas: the gradient is symmetric)."""
    L, info = _cholesky(a, upper, stream)
    _cholesky_errors(info, "cholesky")
    return L


def cholesky_ex(a, upper: bool = False, check_errors: bool = False, *, stream=None):
    """cholesky and the per-matrix info word: (L, info). A failed matrix's L is all NaN and its
    info is the order of the leading minor that is not positive-definite (LAPACK's info), or
    INFO_NONFINITE (0x40000000) for NaN/Inf input; the rest of the batch is unaffected.
    check_errors=True evaluates and raises as cholesky."""
    L, info = _cholesky(a, upper, stream)
    if _bool(check_errors, "check_errors", "cholesky_ex"):
        _cholesky_errors(info, "cholesky_ex")
    return L, info


# ---- lu_factor ----


def _lu_factor(a, stream):
    s = _stream(stream, "lu_factor")
    a = _as_array(a, "lu_factor")
    if a.ndim < 2:
        raise ValueError(
            f"[metal_linalg.lu_factor] A must be an array of matrices [..., M, N], got shape "
            f"{tuple(a.shape)}"
        )
    return ext.decompose(a, OP_LU_FACTOR, 0, True, s)


def lu_factor(a, *, stream=None):
    """A = P L U with partial pivoting for a [..., M, N] (LAPACK's sgetrf), as
    mx.linalg.lu_factor / torch.linalg.lu_factor: (LU [..., M, N], pivots int32 [..., K]) with
    L's unit diagonal not stored and pivots LAPACK's 1-based row interchanges (as torch; not
    mx.linalg's 0-based ones). Raises LinearSystemError (a ValueError) naming the first matrix
    whose U has an exact zero on its diagonal (this evaluates the call; lu_factor_ex stays
    lazy); NaN/Inf input gives that matrix a NaN LU (pivots 1..K). Differentiable for square
    matrices (torch's formulas); a gradient of a non-square factorization raises ValueError."""
    LU, pivots, info = _lu_factor(a, stream)
    _lu_factor_errors(info, "lu_factor")
    return LU, pivots


def lu_factor_ex(a, *, check_errors: bool = False, stream=None):
    """lu_factor and the per-matrix info word: (LU, pivots, info). A singular matrix keeps its
    factorization, info the first k with U[k,k] exactly zero (as torch); NaN/Inf input gives info
    INFO_NONFINITE and a NaN LU. check_errors=True evaluates and raises as lu_factor."""
    out = _lu_factor(a, stream)
    if _bool(check_errors, "check_errors", "lu_factor_ex"):
        _lu_factor_errors(out[2], "lu_factor_ex")
    return tuple(out)


# ---- solve ----


def _solve(a, b, left, stream):
    left = _bool(left, "left", "solve")
    s = _stream(stream, "solve")
    a = _as_array(a, "solve")
    _square(a, "solve")
    b, vector = _rhs(a, b, "solve")
    X, info = ext.solve_rhs(a, b, OP_SOLVE, 0 if left else ML_LS_RIGHT, True, s)
    if vector:
        X = mx.squeeze(X, -1, stream=s)
    return X, info


def solve(a, b, *, left: bool = True, stream=None):
    """X with a X = b (left=True) or X a = b (left=False) for square a [..., N, N], as
    torch.linalg.solve (LU with partial pivoting): b is [..., N, K] ([..., K, N] with
    left=False), or a batch of vectors where torch says so (b of shape [N], or a's shape
    without its last dimension; left=True only); batch dimensions broadcast. Raises
    LinearSystemError (a ValueError) naming the first exactly singular matrix (this evaluates
    the call; solve_ex stays lazy); NaN/Inf input gives that matrix a NaN result.
    Differentiable in a and b."""
    X, info = _solve(a, b, left, stream)
    _singular_errors(info, "solve")
    return X


def solve_ex(a, b, *, left: bool = True, check_errors: bool = False, stream=None):
    """solve and the per-matrix info word (the broadcast batch shape): (X, info). A failed
    matrix's X is all NaN. check_errors=True evaluates and raises as solve."""
    X, info = _solve(a, b, left, stream)
    if _bool(check_errors, "check_errors", "solve_ex"):
        _singular_errors(info, "solve_ex")
    return X, info


# ---- inv ----


def _inv(a, stream):
    s = _stream(stream, "inv")
    a = _as_array(a, "inv")
    _square(a, "inv")
    return ext.decompose(a, OP_INV, 0, True, s)


def inv(a, *, stream=None):
    """The inverse of square matrices a [..., N, N], as mx.linalg.inv (LU with partial
    pivoting). Raises LinearSystemError (a ValueError) naming the first exactly singular matrix
    (this evaluates the call; inv_ex stays lazy); NaN/Inf input gives that matrix a NaN
    inverse. Differentiable."""
    X, info = _inv(a, stream)
    _singular_errors(info, "inv")
    return X


def inv_ex(a, *, check_errors: bool = False, stream=None):
    """inv and the per-matrix info word: (X, info); a failed matrix's X is all NaN.
    check_errors=True evaluates and raises as inv."""
    X, info = _inv(a, stream)
    if _bool(check_errors, "check_errors", "inv_ex"):
        _singular_errors(info, "inv_ex")
    return X, info


# ---- triangular ----


def solve_triangular(
    a, b, *, upper: bool = False, left: bool = True, unitriangular: bool = False, stream=None
):
    """X with a X = b (left=True) or X a = b for triangular a [..., N, N], as
    mx.linalg.solve_triangular / torch.linalg.solve_triangular: only a's upper (upper=True) or
    lower triangle is read, its diagonal taken as ones with unitriangular=True; b [..., N, K]
    ([..., K, N] with left=False) or a batch of vectors as in solve; batch dimensions
    broadcast. A zero on the diagonal or a NaN/Inf entry read gives that matrix a NaN result
    (no error, as torch). Differentiable in a (its triangle) and b."""
    name = "solve_triangular"
    upper = _bool(upper, "upper", name)
    left = _bool(left, "left", name)
    unit = _bool(unitriangular, "unitriangular", name)
    s = _stream(stream, name)
    a = _as_array(a, name)
    _square(a, name)
    b, vector = _rhs(a, b, name)
    flags = (
        (ML_LS_UPPER if upper else 0) | (0 if left else ML_LS_RIGHT) | (ML_LS_UNIT if unit else 0)
    )
    X = ext.solve_rhs(a, b, OP_SOLVE_TRIANGULAR, flags, False, s)[0]
    return mx.squeeze(X, -1, stream=s) if vector else X


def tri_inv(a, upper: bool = False, *, stream=None):
    """The inverse of triangular matrices a [..., N, N], as mx.linalg.tri_inv: only the upper
    (upper=True) or lower triangle is read; the result is triangular. A zero on the diagonal or
    a NaN/Inf entry read gives that matrix a NaN result. One node (solve_triangular with the
    identity); differentiable."""
    upper = _bool(upper, "upper", "tri_inv")
    s = _stream(stream, "tri_inv")
    a = _as_array(a, "tri_inv")
    _square(a, "tri_inv")
    return ext.tri_inv(a, ML_LS_UPPER if upper else 0, s)


def cholesky_inv(L, upper: bool = False, *, stream=None):
    """The inverse of A = L L^T from its Cholesky factor L [..., N, N] (lower triangle read), or
    of A = U^T U from U (upper=True, upper triangle read), as mx.linalg.cholesky_inv /
    torch.cholesky_inverse: two triangular solves in one node. A zero on the diagonal or a
    NaN/Inf entry read gives that matrix a NaN result. Differentiable in the triangle read."""
    upper = _bool(upper, "upper", "cholesky_inv")
    s = _stream(stream, "cholesky_inv")
    L = _as_array(L, "cholesky_inv")
    _square(L, "cholesky_inv", "L")
    return ext.cholesky_inv(L, ML_LS_UPPER if upper else 0, s)
