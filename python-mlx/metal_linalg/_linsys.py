"""The linear systems: cholesky, lu_factor, solve, inv, solve_triangular (and the *_ex forms),
tri_inv and cholesky_inv, with mx.linalg's names and torch.linalg's semantics (the torch
package's): argument checks here, the work in lazy MLX primitives (_ext). lu, det and slogdet
(mx.linalg's results) are lu_factor's node and MLX ops, det and slogdet with their own
derivatives (mx.custom_function).

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

import contextlib

import mlx.core as mx
import numpy as np

from ._loader import ext
from ._ops import LinAlgError, _as_array, _stream, svd
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


def _matrices(a, stream, name: str):
    """(a as an array of matrices [..., M, N], the call's stream) for lu_factor and lu."""
    s = _stream(stream, name)
    a = _as_array(a, name)
    if a.ndim < 2:
        raise ValueError(
            f"[metal_linalg.{name}] A must be an array of matrices [..., M, N], got shape "
            f"{tuple(a.shape)}"
        )
    return a, s


def _lu_factor(a, stream):
    a, s = _matrices(a, stream, "lu_factor")
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


# ---- lu, det, slogdet: lu_factor's factorization and MLX ops ----


def _on(s):
    """MLX's stream context for s (None: the default stream), so that operators (a * b) run
    where the call's primitives do."""
    return contextlib.nullcontext() if s is None else mx.stream(s)


def _row_indices(pivots: mx.array, m: int) -> mx.array:
    """mx.linalg.lu's p (uint32 [..., M], A = L[p] @ U) from LAPACK's 1-based pivots [..., K]:
    p = t_{K-1} o ... o t_0 with t_i the interchange of rows i and pivots[i] - 1, each a
    permutation of 0..M-1 held as an index array, composed pairwise ((a o b)[x] = a[b[x]], one
    gather a level, log2(K) levels), so it stays lazy and maps under mx.vmap."""
    rows = mx.arange(m, dtype=mx.int32)
    k = pivots.shape[-1]
    if k == 0:
        return mx.broadcast_to(rows, (*pivots.shape[:-1], m)).astype(mx.uint32)
    target = mx.expand_dims(pivots.astype(mx.int32) - 1, -1)  # [..., K, 1]
    step = mx.expand_dims(mx.arange(k, dtype=mx.int32), -1)  # [K, 1]
    perms = mx.where(rows == step, target, mx.where(rows == target, step, rows))  # [..., K, M]
    while perms.shape[-2] > 1:
        if perms.shape[-2] % 2:  # the identity last: t_{K-1} o ... stays as it is
            identity = mx.broadcast_to(rows, (*perms.shape[:-2], 1, m))
            perms = mx.concatenate([perms, identity], axis=-2)
        perms = mx.take_along_axis(perms[..., 1::2, :], perms[..., 0::2, :], axis=-1)
    return perms[..., 0, :].astype(mx.uint32)


def _lu_sign(pivots: mx.array) -> mx.array:
    """The sign (+-1, float32) of the row permutation: one interchange per pivot that is not
    its own row."""
    own = mx.arange(1, pivots.shape[-1] + 1, dtype=mx.int32)
    swaps = mx.sum(pivots != own, axis=-1)
    return 1.0 - 2.0 * (swaps % 2).astype(mx.float32)


def _lu_diagonal(a: mx.array, s):
    """U's diagonal [..., N] of a = P L U (lu_factor, no error check) and the permutation's
    sign."""
    LU, pivots, _ = ext.decompose(a, OP_LU_FACTOR, 0, True, s)
    with _on(s):
        return mx.diagonal(LU, 0, -2, -1), _lu_sign(pivots)


def _det_value(a: mx.array, s) -> mx.array:
    diag, sign = _lu_diagonal(a, s)
    with _on(s):
        return sign * mx.prod(diag, axis=-1) + 0.0  # + 0: a singular matrix's 0 is not -0


def _unpack(LU: mx.array, pivots: mx.array):
    """(p, L, U) of mx.linalg.lu from lu_factor's packed factorization."""
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    L = mx.tril(LU[..., :, :k], -1) + mx.eye(m, k, dtype=LU.dtype)
    return _row_indices(pivots, m), L, mx.triu(LU[..., :k, :])


def lu(a, *, stream=None):
    """The LU factorization with partial pivoting of a [..., M, N] as mx.linalg.lu: (p, L, U)
    with a = L[p] @ U (mx.take_along_axis(L, p[..., None], axis=-2) @ U with batch
    dimensions): p uint32 [..., M] the row indices, L [..., M, K] unit lower triangular,
    U [..., K, N] upper triangular, K = min(M, N). lu_factor's factorization unpacked with MLX
    ops (lazy; it runs where lu_factor runs). A singular matrix is no error (its U has a zero on
    the diagonal); NaN/Inf input gives that matrix NaN L (below the diagonal) and U, and p
    0..M-1. Differentiable in L and U for square matrices (lu_factor's gradient, torch's
    formula); mx.grad / mx.vjp / mx.jvp through a non-square one raise ValueError."""
    a, s = _matrices(a, stream, "lu")
    m, n = a.shape[-2], a.shape[-1]

    def factor(x):
        LU, pivots, _ = ext.decompose(x, OP_LU_FACTOR, 0, True, s)
        with _on(s):
            return _unpack(LU, pivots)

    if m == n:
        return factor(a)

    # lu_factor's gradient is for square matrices: a non-square one's is refused here, with
    # lu's name, on a stop_gradient input (forward mode would differentiate the node first).
    def no_derivative(*_):
        raise ValueError(
            f"[metal_linalg.lu] gradients of lu are implemented for square matrices only, "
            f"got {m} x {n}"
        )

    factored = mx.custom_function(lambda x: factor(mx.stop_gradient(x)))
    factored.vjp(no_derivative)
    factored.jvp(no_derivative)
    return factored(a)


def _square_float(a, name: str) -> mx.array:
    a = _as_array(a, name)
    _square(a, name)
    return a if a.dtype == mx.float32 else a.astype(mx.float32)


def _cofactor(a: mx.array, d: mx.array, s) -> mx.array:
    """det's derivative, the matrix of cofactors adj(A)^T (the torch package's det_cofactor):
    d A^-T where the determinant d is a normal float and the inverse (inv: the LU of A, as d's)
    is finite; elsewhere (an exactly singular matrix, a determinant out of float32's range, an
    inverse that overflowed) the adjugate from the SVD A = U S V^T, det(U) det(V) U
    diag(prod_{j != i} s_j) V^T (a polynomial in A: nonzero at rank N - 1, where d A^-T would
    be 0 * inf). Each branch sees a harmless stand-in (I; a diagonal of distinct values) for the
    matrices it does not serve, so that neither its values nor its own derivative (second
    order) has inf/NaN there (but for an inverse that overflowed). A NaN d (NaN/Inf input)
    takes the first branch: NaN. The SVD is skipped when no matrix needs it, where that can be
    read (not under mx.compile / mx.vmap)."""
    n = a.shape[-1]
    with _on(s):
        eye = mx.eye(n, dtype=mx.float32)
        out_of_range = mx.expand_dims(
            (mx.abs(d) < np.finfo(np.float32).tiny) | mx.isinf(d), (-2, -1)
        )
        inverse = inv_ex(mx.where(out_of_range, eye, a), stream=s)[0]
        C = mx.expand_dims(d, (-2, -1)) * mx.swapaxes(inverse, -1, -2)
        overflow = mx.expand_dims(~mx.isnan(d), (-2, -1)) & ~mx.all(
            mx.isfinite(C), axis=(-2, -1), keepdims=True
        )
        singular = out_of_range | overflow
        if _readable(singular) and not bool(mx.any(singular).item()):
            return C
        distinct = mx.diag(mx.arange(1, n + 1, dtype=mx.float32))
        U, S, Vt = svd(mx.where(singular, a, distinct), stream=s)
        others = mx.cumprod(S, axis=-1, inclusive=False) * mx.cumprod(
            S, axis=-1, reverse=True, inclusive=False
        )
        alpha = mx.stop_gradient(mx.sign(_det_value(U, s) * _det_value(Vt, s)))
        adjugate_t = mx.expand_dims(alpha, (-2, -1)) * ((U * mx.expand_dims(others, -2)) @ Vt)
        return mx.where(singular, adjugate_t, C)


def det(a, *, stream=None):
    """The determinant of square matrices a [..., N, N] as mx.linalg.det: the product of U's
    diagonal of a = P L U (lu_factor) and the permutation's sign, float32 [...] (it runs where
    lu_factor runs). 0 for an exactly singular matrix, NaN for one with a NaN/Inf entry (that
    matrix only); a determinant out of float32's range is 0 or +-inf (slogdet keeps it). No
    error is raised. Differentiable (mx.grad, mx.vjp, mx.jvp; mx.vmap): the derivative is the
    cofactor matrix, det A^-T, and where det is 0 or not a normal float the adjugate from the
    SVD (nonzero at rank N - 1; torch.linalg.det's first-order gradient is 0 there)."""
    s = _stream(stream, "det")
    a = _square_float(a, "det")
    fn = mx.custom_function(lambda x: _det_value(x, s))

    @fn.vjp
    def _(x, g, d):
        with _on(s):
            return mx.expand_dims(g, (-2, -1)) * _cofactor(x, d, s)

    @fn.jvp
    def _(x, t):
        with _on(s):
            return mx.sum(_cofactor(x, _det_value(x, s), s) * t, axis=(-2, -1))

    return fn(a)


def _inverse_transpose(a: mx.array, s) -> mx.array:
    """A^-T, the derivative of log|det A|; LinearSystemError for an exactly singular matrix,
    where it is not finite (NaN for it under mx.compile / mx.vmap, where nothing is read)."""
    X, info = inv_ex(a, stream=s)
    _raise(
        "slogdet",
        info,
        _singular,
        lambda k: (
            f"is singular: U[{k},{k}] of its LU factorization is exactly zero, so the "
            "gradient of logabsdet (A^-T) is not finite"
        ),
    )
    with _on(s):
        return mx.swapaxes(X, -1, -2)


def slogdet(a, *, stream=None):
    """(sign, logabsdet) of square matrices a [..., N, N] as mx.linalg.slogdet, both float32
    [...], det = sign * exp(logabsdet), from U's diagonal of a = P L U (lu_factor): logabsdet
    is the sum of log|U[i,i]|, finite wherever U's diagonal is nonzero, also where det
    overflows or underflows float32 (mx.linalg.slogdet gives (0, -inf) for some underflowing
    ones). (0, -inf) for an exactly singular matrix; (0, NaN) for one with a NaN/Inf entry (as
    mx.linalg and torch.linalg), that matrix only. Differentiable in logabsdet (sign has no
    derivative): A^-T from the package's inv; mx.grad / mx.vjp / mx.jvp raise
    LinearSystemError for an exactly singular matrix, where it is not finite (torch gives
    +-inf there; under mx.compile / mx.vmap it is NaN for that matrix)."""
    s = _stream(stream, "slogdet")
    a = _square_float(a, "slogdet")

    def forward(x):
        diag, sign = _lu_diagonal(x, s)
        with _on(s):
            # MLX's sign(NaN) is 0: the sign of a NaN matrix is 0, as mx.linalg's and torch's
            sign = sign * mx.prod(mx.sign(diag), axis=-1) + 0.0  # 0, not -0, when singular
            return sign, mx.sum(mx.log(mx.abs(diag)), axis=-1)

    fn = mx.custom_function(forward)

    @fn.vjp
    def _(x, g, _out):
        with _on(s):
            return mx.expand_dims(g[1], (-2, -1)) * _inverse_transpose(x, s)

    @fn.jvp
    def _(x, t):
        with _on(s):
            logabsdet = mx.sum(_inverse_transpose(x, s) * t, axis=(-2, -1))
            return mx.zeros_like(logabsdet), logabsdet

    return fn(a)


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
