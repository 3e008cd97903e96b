"""The MLX linear systems (cholesky, lu_factor, solve, inv, solve_triangular, the *_ex forms,
tri_inv, cholesky_inv; lu, det and slogdet also against mx.linalg's) against float64
references: LAPACK's test ratios (docs/design.md section 7) on hard matrix families, a NaN
matrix in a batch (NaN for it only, the rest bitwise as without it), singular and indefinite
matrices (info words, errors naming the matrix), bad arguments, broadcasting, gradients and
forward derivatives against float64 torch autograd on the CPU (also on hard inputs; det's at
singular matrices against float64 cofactors), vmap, compile, one graph node per call, and the
queries.
"""

from __future__ import annotations

import io

import metal_linalg as ml
import mlx.core as mx
import numpy as np
import pytest
import torch
from _mlx_helpers import general, norm1, orthogonal
from accuracy import THRESH, ULP

# torch's forward AD scripts its decompositions on first use (torch.func.jvp, the references).
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
)

CPU = mx.cpu
LIMIT = THRESH["linsys"]
NONFINITE = 0x40000000
F64 = torch.float64


def rng_(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def f32(x) -> np.ndarray:
    """x rounded to float32 values, as float64 (the matrix actually tested)."""
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def np64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def norms1(x: np.ndarray) -> np.ndarray:
    """LAPACK's 1-norm of each matrix of a batch."""
    return np.abs(x).sum(axis=-2).max(axis=-1)


# Square families: random; geometric singular values down to ulp (condition 1/ulp); graded rows
# and columns (2^-10 .. 2^10 each); magnitudes 1e-30 and 1e30 (1e37, _mlx_helpers' huge scale,
# overflows LAPACK's transposed substitution of X A = B for n = 33, in torch as here); clustered
# (all singular values but one at ulp: nearly singular).
SOLVE_FAMILIES = ("random", "geometric", "graded", "tiny", "huge", "clustered")
SCALE = {"tiny": 1e-30, "huge": 1e30}


def square(family: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if family in SCALE:
        return f32(general("random", n, n, rng) * SCALE[family])
    return general(family, n, n, rng)


def square_batch(n: int, families=SOLVE_FAMILIES, seed: int = 0) -> np.ndarray:
    rng = rng_(seed)
    return np.stack([square(f, n, rng) for f in families])


def spd(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """A symmetric positive-definite matrix (float32 values): random spectrum in [0.5, 2];
    'ill' condition ~1/ulp yet definite in float32; 'graded' D (B B^T + n I) D with D over
    2^-10 .. 2^10; 'tiny' / 'huge' scaled by 1e-30 / 1e30."""
    q = orthogonal(n, rng)
    if kind == "graded":
        d = 2.0 ** np.linspace(-10, 10, n)
        b = rng.standard_normal((n, n))
        a = d[:, None] * (b @ b.T + n * np.eye(n)) * d[None, :]
    else:
        if kind == "ill":
            w = 10 * ULP ** (np.arange(n) / max(n - 1, 1))
        else:
            w = rng.uniform(0.5, 2.0, n) * {"tiny": 1e-30, "huge": 1e30}.get(kind, 1.0)
        a = (q * w) @ q.T
    return f32((a + a.T) / 2)


SPD_KINDS = ("random", "ill", "graded", "tiny", "huge")


def spd_batch(n: int, kinds=SPD_KINDS, seed: int = 0) -> np.ndarray:
    rng = rng_(seed)
    return np.stack([spd(k, n, rng) for k in kinds])


def mxa(x) -> mx.array:
    return mx.array(np.asarray(x, dtype=np.float32))


def permutation(pivots: np.ndarray, m: int) -> np.ndarray:
    """perm with (P^T A)[i] = A[perm[i]] from LAPACK's 1-based pivots."""
    perm = np.arange(m)
    for i, p in enumerate(pivots):
        perm[[i, p - 1]] = perm[[p - 1, i]]
    return perm


# ---- accuracy: LAPACK's ratios ----


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("n", [1, 7, 40])
def test_cholesky_residual(upper, n):
    A = spd_batch(n)
    # The triangle not read holds garbage: the result must not depend on it.
    noise = rng_(1).standard_normal(A.shape) * 1e3
    A_in = A + (np.tril(noise, -1) if upper else np.triu(noise, 1))
    L = np64(ml.cholesky(mxa(A_in), upper=upper, stream=CPU))
    assert np.isfinite(L).all()
    assert not (np.tril(L, -1) if upper else np.triu(L, 1)).any()
    prod = np.swapaxes(L, -1, -2) @ L if upper else L @ np.swapaxes(L, -1, -2)
    ratio = norms1(prod - A) / (n * norms1(A) * ULP)
    assert ratio.max() < LIMIT, ratio
    ref = np.linalg.cholesky(A)
    ref = np.swapaxes(ref, -1, -2) if upper else ref
    rel = np.linalg.norm(L - ref, axis=(-2, -1)) / np.linalg.norm(ref, axis=(-2, -1))
    # The forward error of a backward-stable factor is cond(A) ulp: tight where A is well
    # conditioned (random, tiny, huge).
    assert rel[[0, 3, 4]].max() < 1e-5, rel


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("n,k", [(1, 1), (6, 3), (33, 5)])
def test_solve_backward_error(left, n, k):
    A = square_batch(n)
    rng = rng_(2)
    scale = np.array([SCALE.get(f, 1.0) for f in SOLVE_FAMILIES])[:, None, None]
    B = f32(rng.standard_normal((len(SOLVE_FAMILIES), n, k) if left else (6, k, n)) * scale)
    X, info = ml.solve_ex(mxa(A), mxa(B), left=left, stream=CPU)
    assert X.dtype == mx.float32 and info.dtype == mx.int32 and info.shape == (6,)
    assert not np.asarray(info).any()
    X = np64(X)
    assert np.isfinite(X).all()
    resid = A @ X - B if left else X @ A - B
    ratio = norms1(resid) / (norms1(A) * norms1(X) * n * ULP)
    assert ratio.max() < LIMIT, ratio
    ref = np.linalg.solve(A[0], B[0]) if left else np.linalg.solve(A[0].T, B[0].T).T
    assert np.linalg.norm(X[0] - ref) / np.linalg.norm(ref) < 1e-4  # the well-conditioned one


@pytest.mark.parametrize("n", [1, 6, 33])
def test_inv_residual(n):
    A = square_batch(n)
    X = np64(ml.inv(mxa(A), stream=CPU))
    assert np.isfinite(X).all()
    ratio = norms1(A @ X - np.eye(n)) / (n * norms1(A) * norms1(X) * ULP)
    assert ratio.max() < LIMIT, ratio
    X2, info = ml.inv_ex(mxa(A), stream=CPU)
    assert not np.asarray(info).any() and np.array_equal(np64(X2), X)


def triangular_batch(n: int, unit: bool, seed: int = 3) -> np.ndarray:
    """Matrices whose triangles are well-posed triangular systems of each family's magnitude:
    a dominant diagonal, or (unit diagonal) off-diagonals of 1-norm 1."""
    full = square_batch(n, ("random", "graded", "tiny", "huge"), seed)
    if unit:
        return f32(full / norms1(full)[:, None, None])
    diag = np.sign(np.diagonal(full, axis1=-2, axis2=-1)) + (np.diagonal(full, 0, -2, -1) == 0)
    return f32(full + 4 * diag[..., None] * np.eye(n) * norms1(full)[:, None, None] / n)


def triangle(a: np.ndarray, upper: bool, unit: bool) -> np.ndarray:
    t = np.triu(a) if upper else np.tril(a)
    if unit:
        n = a.shape[-1]
        t = t - np.diagonal(t, 0, -2, -1)[..., None] * np.eye(n) + np.eye(n)
    return t


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular_backward_error(upper, left, unit):
    n, k = 17, 4
    full = triangular_batch(n, unit)
    B = f32(rng_(4).standard_normal((4, n, k) if left else (4, k, n)))
    X = np64(
        ml.solve_triangular(
            mxa(full), mxa(B), upper=upper, left=left, unitriangular=unit, stream=CPU
        )
    )
    T = triangle(full, upper, unit)
    resid = T @ X - B if left else X @ T - B
    ratio = norms1(resid) / (norms1(T) * norms1(X) * n * ULP)
    assert ratio.max() < LIMIT, ratio
    ref = np.linalg.solve(T[0], B[0]) if left else np.linalg.solve(T[0].T, B[0].T).T
    assert np.linalg.norm(X[0] - ref) / np.linalg.norm(ref) < 1e-4


@pytest.mark.parametrize("shape", [(6, 6), (9, 4), (4, 9), (1, 1), (40, 40)])
def test_lu_factor_residual(shape):
    m, n = shape
    rng = rng_(5)
    A = np.stack([square(f, max(m, n), rng)[:m, :n] for f in SOLVE_FAMILIES])
    LU, piv = ml.lu_factor(mxa(A), stream=CPU)
    assert LU.shape == A.shape and piv.shape == (6, min(m, n)) and piv.dtype == mx.int32
    LU, piv = np64(LU), np.asarray(piv)
    k = min(m, n)
    for i in range(len(A)):
        L = np.tril(LU[i], -1)[:, :k] + np.eye(m, k)
        U = np.triu(LU[i])[:k, :]
        perm = permutation(piv[i], m)
        ratio = norm1(A[i][perm] - L @ U) / (n * norm1(A[i]) * ULP)
        assert ratio < LIMIT, (i, ratio)
    ref_lu, ref_piv = torch.linalg.lu_factor(torch.as_tensor(A[0]))
    assert np.array_equal(piv[0], ref_piv.numpy())  # the random matrix: the same pivots
    np.testing.assert_allclose(LU[0], ref_lu.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("n", [1, 9, 33])
def test_tri_inv_and_cholesky_inv_residuals(upper, n):
    T = triangle(triangular_batch(n, unit=False), upper, unit=False)
    garbage = rng_(6).standard_normal(T.shape) * 1e3
    T_in = T + (np.tril(garbage, -1) if upper else np.triu(garbage, 1))
    X = np64(ml.tri_inv(mxa(T_in), upper=upper, stream=CPU))
    assert not (np.tril(X, -1) if upper else np.triu(X, 1)).any()
    ratio = norms1(T @ X - np.eye(n)) / (n * norms1(T) * norms1(X) * ULP)
    assert ratio.max() < LIMIT, ratio
    A = spd_batch(n)
    F = np.linalg.cholesky(A)
    F = f32(np.swapaxes(F, -1, -2) if upper else F)
    A = np.swapaxes(F, -1, -2) @ F if upper else F @ np.swapaxes(F, -1, -2)
    F_in = F + (np.tril(garbage[:1], -1) if upper else np.triu(garbage[:1], 1))
    X = np64(ml.cholesky_inv(mxa(F_in), upper, stream=CPU))
    ratio = norms1(A @ X - np.eye(n)) / (n * norms1(A) * norms1(X) * ULP)
    assert ratio.max() < LIMIT, ratio
    ref = torch.cholesky_inverse(torch.as_tensor(F[0]), upper=upper).numpy()
    assert np.linalg.norm(X[0] - ref) / np.linalg.norm(ref) < 1e-5


# ---- failures: NaN for that matrix only, info set, errors naming the matrix ----


def assert_rest_exact(got: np.ndarray, alone: np.ndarray, good) -> None:
    """The good matrices of a batch with failing ones equal (bitwise) the batch of the good
    matrices alone."""
    assert np.array_equal(np.asarray(got)[good], np.asarray(alone)), "a failure leaked"


def test_cholesky_indefinite_and_nan_in_a_batch():
    A = spd_batch(5, ("random",) * 4)
    A[1, 2, 2] = -1.0  # the leading minor of order 3 is not positive-definite
    A[3, 4, 1] = np.nan  # in the lower triangle, which is read
    L, info = ml.cholesky_ex(mxa(A), stream=CPU)
    assert np.asarray(info).tolist() == [0, 3, 0, NONFINITE]
    L = np.asarray(L)
    assert np.isnan(L[[1, 3]]).all() and np.isfinite(L[[0, 2]]).all()
    assert_rest_exact(L, ml.cholesky(mxa(A[[0, 2]]), stream=CPU), [0, 2])
    ref_info = torch.linalg.cholesky_ex(torch.as_tensor(A[:3])).info
    assert np.asarray(info)[:3].tolist() == ref_info.tolist()  # LAPACK's order, as torch
    with pytest.raises(ValueError, match=r"\(batch index 1\) is not positive-definite.*order 3"):
        ml.cholesky(mxa(A), stream=CPU)
    with pytest.raises(ml.LinAlgError, match=r"\(batch index 1\).*NaN or Inf"):
        ml.cholesky(mxa(A[2:]), stream=CPU)
    with pytest.raises(
        ml.LinearSystemError, match="^\\[metal_linalg.cholesky\\] the input matrix is"
    ):
        ml.cholesky(mxa(A[1]), upper=True, stream=CPU)
    with pytest.raises(ValueError, match=r"cholesky_ex\] .*order 3"):
        ml.cholesky_ex(mxa(A), check_errors=True, stream=CPU)
    # NaN in the triangle not read is no error.
    B = A[0].copy()
    B[0, 3] = np.nan
    np.testing.assert_array_equal(np.asarray(ml.cholesky(mxa(B), stream=CPU)), L[0])


def test_solve_singular_and_nan_in_a_batch():
    A = square_batch(6, ("random",) * 5)
    A[1, :, 2] = 0.0  # exactly singular
    A[2, 0, 0] = np.inf
    B = f32(rng_(7).standard_normal((5, 6, 2)))
    B[3, 1, 1] = np.nan
    X, info = ml.solve_ex(mxa(A), mxa(B), stream=CPU)
    info = np.asarray(info)
    assert info[0] == 0 and info[4] == 0 and 1 <= info[1] <= 6
    assert info[2] == NONFINITE and info[3] == NONFINITE
    X = np.asarray(X)
    assert np.isnan(X[1:4]).all() and np.isfinite(X[[0, 4]]).all()
    assert_rest_exact(X, ml.solve(mxa(A[[0, 4]]), mxa(B[[0, 4]]), stream=CPU), [0, 4])
    with pytest.raises(ValueError, match=r"solve\] the input matrix \(batch index 1\) is singular"):
        ml.solve(mxa(A), mxa(B), stream=CPU)
    with pytest.raises(ValueError, match=r"solve_ex\] .*batch index 1"):
        ml.solve_ex(mxa(A), mxa(B), check_errors=True, stream=CPU)
    # A NaN input is no error (as torch): a NaN result for that matrix.
    assert np.isnan(np.asarray(ml.solve(mxa(A[2:4]), mxa(B[2:4]), stream=CPU))).all()


def test_inv_singular_and_nan_in_a_batch():
    A = square_batch(5, ("random",) * 4)
    A[1, :, 0] = 0.0  # U(1,1) = 0: info 1, the first zero pivot
    A[2, 3, 3] = np.nan
    X, info = ml.inv_ex(mxa(A), stream=CPU)
    assert np.asarray(info).tolist() == [0, 1, NONFINITE, 0]
    X = np.asarray(X)
    assert np.isnan(X[1:3]).all() and np.isfinite(X[[0, 3]]).all()
    assert_rest_exact(X, ml.inv(mxa(A[[0, 3]]), stream=CPU), [0, 3])
    with pytest.raises(ValueError, match=r"inv\] the input matrix \(batch index 1\).*U\[1,1\]"):
        ml.inv(mxa(A), stream=CPU)
    with pytest.raises(ml.LinAlgError, match=r"inv_ex\] the input matrix is singular"):
        ml.inv_ex(mxa(A[1]), check_errors=True, stream=CPU)
    assert np.isnan(np.asarray(ml.inv(mxa(A[2]), stream=CPU))).all()


def test_lu_factor_singular_and_nan_in_a_batch():
    A = square_batch(5, ("random",) * 4)
    A[1, :, 2] = 0.0  # U(3,3) = 0: the factorization is kept, info 3
    A[2, 1, 1] = np.nan
    LU, piv, info = ml.lu_factor_ex(mxa(A), stream=CPU)
    ref = torch.linalg.lu_factor_ex(torch.as_tensor(A[:2]))
    assert np.asarray(info).tolist() == [0, 3, NONFINITE, 0]
    assert np.asarray(info)[:2].tolist() == ref.info.tolist()
    LU, piv = np64(LU), np.asarray(piv)
    assert np.isfinite(LU[[0, 1, 3]]).all() and np.isnan(LU[2]).all()
    assert piv[2].tolist() == [1, 2, 3, 4, 5]
    L, U = np.tril(LU[1], -1) + np.eye(5), np.triu(LU[1])
    np.testing.assert_allclose(L @ U, A[1][permutation(piv[1], 5)], rtol=1e-5, atol=1e-5)
    assert_rest_exact(LU, ml.lu_factor(mxa(A[[0, 3]]), stream=CPU)[0], [0, 3])
    with pytest.raises(
        ValueError, match=r"lu_factor\] the input matrix \(batch index 1\).*U\[3,3\]"
    ):
        ml.lu_factor(mxa(A), stream=CPU)
    with pytest.raises(ValueError, match=r"lu_factor_ex\] .*U\[3,3\]"):
        ml.lu_factor_ex(mxa(A[1]), check_errors=True, stream=CPU)
    ml.lu_factor(mxa(A[2]), stream=CPU)  # NaN input: no error (as torch), a NaN LU


def test_triangular_zero_diagonal_and_nan():
    T = np.triu(square_batch(5, ("random",) * 4)) + 3 * np.eye(5)
    T[1, 2, 2] = 0.0
    T[2, 1, 4] = np.nan
    T[0, 3, 1] = np.nan  # below the diagonal: not read
    B = f32(rng_(8).standard_normal((4, 5, 2)))
    X = np.asarray(ml.solve_triangular(mxa(T), mxa(B), upper=True, stream=CPU))
    assert np.isnan(X[1:3]).all() and np.isfinite(X[[0, 3]]).all()
    np.testing.assert_allclose(X[0], np.linalg.solve(np.triu(T[0]), B[0]), rtol=1e-5, atol=1e-5)
    # unitriangular: the zero diagonal is not read
    X1 = np64(ml.solve_triangular(mxa(T[1]), mxa(B[1]), upper=True, unitriangular=True))
    ref = np.linalg.solve(triangle(T[1], True, True), B[1])
    np.testing.assert_allclose(X1, ref, rtol=1e-4, atol=1e-5)
    Xi = np.asarray(ml.tri_inv(mxa(T), upper=True, stream=CPU))
    assert np.isnan(Xi[1:3]).all() and np.isfinite(Xi[[0, 3]]).all()
    assert_rest_exact(Xi, ml.tri_inv(mxa(T[[0, 3]]), upper=True, stream=CPU), [0, 3])
    Xc = np.asarray(ml.cholesky_inv(mxa(T), upper=True, stream=CPU))
    assert np.isnan(Xc[1:3]).all() and np.isfinite(Xc[[0, 3]]).all()
    assert_rest_exact(Xc, ml.cholesky_inv(mxa(T[[0, 3]]), upper=True, stream=CPU), [0, 3])


# ---- shapes, broadcasting, dtypes, argument errors ----


def test_broadcasting_vectors_and_views():
    rng = rng_(9)
    A = f32(rng.standard_normal((2, 1, 4, 4)) + 4 * np.eye(4))
    B = f32(rng.standard_normal((3, 4, 2)))
    X = ml.solve(mxa(A), mxa(B), stream=CPU)
    assert X.shape == (2, 3, 4, 2)
    np.testing.assert_allclose(np64(X), np.linalg.solve(A, B), rtol=1e-4, atol=1e-5)
    b = f32(rng.standard_normal(4))
    x = ml.solve(mxa(A[0, 0]), mxa(b), stream=CPU)
    assert x.shape == (4,)
    np.testing.assert_allclose(np64(x), np.linalg.solve(A[0, 0], b), rtol=1e-4, atol=1e-5)
    Ab = np.ascontiguousarray(np.broadcast_to(A, (2, 3, 4, 4)))
    bb = f32(rng.standard_normal((2, 3, 4)))  # A's shape without its last dim: vectors
    tb = torch.linalg.solve(torch.as_tensor(Ab), torch.as_tensor(bb))
    xb = ml.solve(mxa(Ab), mxa(bb), stream=CPU)
    assert xb.shape == tuple(tb.shape) == (2, 3, 4)
    np.testing.assert_allclose(np64(xb), tb.numpy(), rtol=1e-4, atol=1e-5)
    Bt = np.swapaxes(B, -1, -2)
    Xr = ml.solve(mxa(A), mxa(Bt), left=False, stream=CPU)
    ref = torch.linalg.solve(torch.as_tensor(A), torch.as_tensor(Bt), left=False).numpy()
    np.testing.assert_allclose(np64(Xr), ref, rtol=1e-4, atol=1e-5)
    T = np.triu(A)
    Xt = ml.solve_triangular(mxa(T), mxa(B), upper=True, stream=CPU)
    assert Xt.shape == (2, 3, 4, 2)
    np.testing.assert_allclose(
        np64(Xt), np.linalg.solve(np.broadcast_to(T, (2, 3, 4, 4)), B), rtol=1e-4, atol=1e-5
    )
    xt = ml.solve_triangular(mxa(T[0, 0]), mxa(b), upper=True, stream=CPU)  # as mx.linalg
    assert xt.shape == (4,)
    # Non-contiguous views, float64, int and NumPy input are read as float32 values.
    An = mx.swapaxes(mxa(A[:, 0]), -1, -2)
    np.testing.assert_allclose(
        np64(ml.inv(-An, stream=CPU)),
        np.linalg.inv(-np.swapaxes(A[:, 0], -1, -2)),
        rtol=1e-4,
        atol=1e-5,
    )
    np.testing.assert_allclose(
        np64(ml.inv(A[0, 0], stream=CPU)), np.linalg.inv(A[0, 0]), rtol=1e-4, atol=1e-5
    )
    P = mx.array(np.array([[4, 1], [1, 3]], dtype=np.int32))
    np.testing.assert_allclose(
        np64(ml.cholesky(P, stream=CPU)), np.linalg.cholesky([[4.0, 1.0], [1.0, 3.0]]), rtol=1e-6
    )


def test_empty_shapes():
    assert ml.cholesky(mx.zeros((0, 3, 3)), stream=CPU).shape == (0, 3, 3)
    assert ml.inv(mx.zeros((2, 0, 0)), stream=CPU).shape == (2, 0, 0)
    X, info = ml.solve_ex(mx.zeros((2, 3, 3)), mx.zeros((2, 3, 0)), stream=CPU)
    assert X.shape == (2, 3, 0) and info.shape == (2,)
    Xt = ml.solve_triangular(mx.eye(3), mx.zeros((0, 3)), upper=True, left=False, stream=CPU)
    assert Xt.shape == (0, 3)
    LU, piv, info = ml.lu_factor_ex(mx.zeros((4, 0, 3)), stream=CPU)
    assert LU.shape == (4, 0, 3) and piv.shape == (4, 0) and piv.dtype == mx.int32
    assert ml.tri_inv(mx.zeros((0, 2, 2)), stream=CPU).shape == (0, 2, 2)
    assert ml.cholesky_inv(mx.zeros((3, 0, 0)), stream=CPU).shape == (3, 0, 0)


def test_argument_errors():
    with pytest.raises(ValueError, match="square"):
        ml.cholesky(mx.zeros((3, 4)))
    with pytest.raises(ValueError, match="square"):
        ml.inv(mx.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match=r"\[\.\.\., N, N\]"):
        ml.tri_inv(mx.zeros((3,)))
    with pytest.raises(ValueError, match=r"AX = B \(3x3 and 4x2\)"):
        ml.solve(mx.eye(3), mx.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"XA = B \(3x3 and 3x1\)"):
        ml.solve(mx.eye(3), mx.zeros(3), left=False)  # vectors are right-hand sides of AX = B
    with pytest.raises(ValueError, match="do not broadcast"):
        ml.solve(mx.zeros((2, 3, 3)), mx.zeros((4, 3, 1)))
    with pytest.raises(ValueError, match=r"XA = B \(4x4 and 2x3\)"):
        ml.solve_triangular(mx.eye(4), mx.zeros((2, 3)), left=False)
    with pytest.raises(TypeError, match="complex"):
        ml.inv(mx.zeros((3, 3), dtype=mx.complex64))
    with pytest.raises(TypeError, match="complex"):
        ml.solve(mx.eye(3), np.zeros((3, 1), dtype=np.complex64))
    with pytest.raises(TypeError, match="real numeric"):
        ml.lu_factor(np.array([["a", "b"], ["c", "d"]]))
    with pytest.raises(TypeError, match="upper must be a bool"):
        ml.cholesky(mx.eye(3), upper="yes")
    with pytest.raises(TypeError, match="left must be a bool"):
        ml.solve(mx.eye(3), mx.ones(3), left=2)
    if not mx.is_available(mx.gpu):
        with pytest.raises(ValueError, match="no GPU backend"):
            ml.solve(mx.eye(3), mx.ones(3), stream=mx.gpu)


# ---- gradients and forward derivatives against float64 torch autograd ----


def weights(shape, seed: int = 5) -> np.ndarray:
    return f32(rng_(seed).standard_normal(shape))


def mx_grads(fn, *inputs: np.ndarray) -> list:
    """Gradients of sum(fn(*inputs) * W) through MLX (float32), W fixed per output shape."""
    out_shape = fn(*[mxa(x) for x in inputs]).shape
    w = mxa(weights(out_shape))
    grad = mx.grad(lambda *xs: (fn(*xs) * w).sum(), argnums=tuple(range(len(inputs))))
    got = grad(*[mxa(x) for x in inputs])
    return [np64(g) for g in (got if len(inputs) > 1 else (got,))]


def torch_grads(fn, *inputs: np.ndarray) -> list:
    leaves = [torch.tensor(x, dtype=F64, requires_grad=True) for x in inputs]
    out = fn(*leaves)
    (out * torch.as_tensor(weights(tuple(out.shape)))).sum().backward()
    return [leaf.grad.numpy() for leaf in leaves]


def mx_jvp(fn, inputs, tangents) -> np.ndarray:
    _, (t,) = mx.jvp(fn, [mxa(x) for x in inputs], [mxa(t) for t in tangents])
    return np64(t)


def torch_jvp(fn, inputs, tangents) -> np.ndarray:
    _, t = torch.func.jvp(
        fn, tuple(torch.as_tensor(x) for x in inputs), tuple(torch.as_tensor(t) for t in tangents)
    )
    return t.numpy()


# Relative accuracy expected of the float32 derivatives (measured: about 1e-7 on the well
# conditioned inputs, 4e-6 on the hard ones); a wrong formula is off by O(1).
TOL = 2e-5
HARD_TOL = 1e-4


def assert_close(got, ref, tol: float = TOL) -> None:
    for g, r in zip(got, ref):
        err = np.linalg.norm(g - r) / np.linalg.norm(r)
        assert err < tol, err


def hard_matrix(n: int, rng: np.random.Generator) -> np.ndarray:
    """Singular values 1 .. 1e-3, geometric: condition 1e3."""
    return f32((orthogonal(n, rng) * np.logspace(0, -3, n)) @ orthogonal(n, rng))


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_gradient_and_jvp(upper):
    rng = rng_(10)
    # random, and graded (2^-10 .. 2^10 both sides: exact scalings, hard for the formulas' solves)
    for A in (np.stack([spd("random", 5, rng) for _ in range(3)]), spd("graded", 6, rng)[None]):
        assert_close(
            mx_grads(lambda X: ml.cholesky(X, upper=upper, stream=CPU), A),
            torch_grads(lambda X: torch.linalg.cholesky(X, upper=upper), A),
        )
        assert_close(
            mx_grads(lambda X: ml.cholesky_ex(X, upper, stream=CPU)[0], A),
            torch_grads(lambda X: torch.linalg.cholesky_ex(X, upper=upper).L, A),
        )
        dA = weights(A.shape, 11)
        dA = f32(dA + np.swapaxes(dA, -1, -2))
        assert_close(
            [mx_jvp(lambda X: ml.cholesky(X, upper=upper, stream=CPU), [A], [dA])],
            [torch_jvp(lambda X: torch.linalg.cholesky(X, upper=upper), [A], [dA])],
        )


@pytest.mark.parametrize("left", [True, False])
def test_solve_gradient_and_jvp_with_broadcasting(left):
    rng = rng_(12)
    A = f32(rng.standard_normal((3, 5, 5)) + 5 * np.eye(5))
    B = f32(rng.standard_normal((2, 1, 5, 4)))
    B = B if left else np.swapaxes(B, -1, -2)
    assert_close(
        mx_grads(lambda X, Y: ml.solve(X, Y, left=left, stream=CPU), A, B),
        torch_grads(lambda X, Y: torch.linalg.solve(X, Y, left=left), A, B),
    )
    dA, dB = weights(A.shape, 13), weights(B.shape, 14)
    assert_close(
        [mx_jvp(lambda X, Y: ml.solve(X, Y, left=left, stream=CPU), [A, B], [dA, dB])],
        [torch_jvp(lambda X, Y: torch.linalg.solve(X, Y, left=left), [A, B], [dA, dB])],
    )
    # the vector case, and a hard matrix: condition ~1e3 (the tolerance follows it)
    b = f32(rng.standard_normal(5))
    assert_close(
        mx_grads(lambda X, y: ml.solve_ex(X, y, stream=CPU)[0], A[0], b),
        torch_grads(lambda X, y: torch.linalg.solve(X, y), A[0], b),
    )
    H = hard_matrix(5, rng)
    assert_close(
        mx_grads(lambda X, Y: ml.solve(X, Y, left=left, stream=CPU), H, B[0, 0]),
        torch_grads(lambda X, Y: torch.linalg.solve(X, Y, left=left), H, B[0, 0]),
        HARD_TOL,
    )


def test_inv_gradient_jvp_and_second_order():
    rng = rng_(15)
    A = f32(rng.standard_normal((2, 6, 6)) + 6 * np.eye(6))
    H = hard_matrix(6, rng)[None]
    for X, tol in ((A, TOL), (H, HARD_TOL)):
        assert_close(
            mx_grads(lambda Y: ml.inv(Y, stream=CPU), X), torch_grads(torch.linalg.inv, X), tol
        )
        assert_close(
            mx_grads(lambda Y: ml.inv_ex(Y, stream=CPU)[0], X),
            torch_grads(torch.linalg.inv, X),
            tol,
        )
        dX = weights(X.shape, 16)
        assert_close(
            [mx_jvp(lambda Y: ml.inv(Y, stream=CPU), [X], [dX])],
            [torch_jvp(torch.linalg.inv, [X], [dX])],
            tol,
        )
    # second order: the gradient's formulas run through the package's own nodes
    gg = mx.grad(lambda Y: mx.grad(lambda Z: ml.inv(Z, stream=CPU).sum())(Y).sum())(mxa(A[0]))
    At = torch.tensor(A[0], dtype=F64, requires_grad=True)
    (g,) = torch.autograd.grad(torch.linalg.inv(At).sum(), At, create_graph=True)
    (ref,) = torch.autograd.grad(g.sum(), At)
    assert_close([np64(gg)], [ref.numpy()])


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular_gradient_and_jvp(upper, left, unit):
    rng = rng_(17)
    A = f32(rng.standard_normal((2, 5, 5)) + 5 * np.eye(5))
    B = f32(rng.standard_normal((2, 5, 3)))
    B = B if left else np.swapaxes(B, -1, -2)
    kw = {"upper": upper, "left": left, "unitriangular": unit}
    assert_close(
        mx_grads(lambda X, Y: ml.solve_triangular(X, Y, stream=CPU, **kw), A, B),
        torch_grads(lambda X, Y: torch.linalg.solve_triangular(X, Y, **kw), A, B),
    )
    dA, dB = weights(A.shape, 18), weights(B.shape, 19)
    assert_close(
        [mx_jvp(lambda X, Y: ml.solve_triangular(X, Y, stream=CPU, **kw), [A, B], [dA, dB])],
        [torch_jvp(lambda X, Y: torch.linalg.solve_triangular(X, Y, **kw), [A, B], [dA, dB])],
    )


def test_lu_factor_gradient_and_jvp():
    rng = rng_(20)
    A = f32(rng.standard_normal((3, 5, 5)))
    A[1, 0, 0] = 0.0  # a zero leading entry: the first step must pivot
    assert_close(
        mx_grads(lambda X: ml.lu_factor(X, stream=CPU)[0], A),
        torch_grads(lambda X: torch.linalg.lu_factor(X).LU, A),
    )
    assert_close(
        mx_grads(lambda X: ml.lu_factor_ex(X, stream=CPU)[0], A),
        torch_grads(lambda X: torch.linalg.lu_factor_ex(X).LU, A),
    )
    dA = weights(A.shape, 21)
    assert_close(
        [mx_jvp(lambda X: ml.lu_factor(X, stream=CPU)[0], [A], [dA])],
        [torch_jvp(lambda X: torch.linalg.lu_factor(X).LU, [A], [dA])],
    )
    with pytest.raises(ValueError, match=r"lu_factor\] gradients .* square .* 5 x 3"):
        mx.grad(lambda X: ml.lu_factor(X, stream=CPU)[0].sum())(mxa(A[0, :, :3]))


@pytest.mark.parametrize("upper", [False, True])
def test_tri_inv_and_cholesky_inv_gradients(upper):
    rng = rng_(22)
    T = f32(rng.standard_normal((2, 5, 5)) + 4 * np.eye(5))
    tri = torch.triu if upper else torch.tril
    assert_close(
        mx_grads(lambda X: ml.tri_inv(X, upper, stream=CPU), T),
        torch_grads(lambda X: torch.linalg.inv(tri(X)), T),
    )
    dT = weights(T.shape, 23)
    assert_close(
        [mx_jvp(lambda X: ml.tri_inv(X, upper, stream=CPU), [T], [dT])],
        [torch_jvp(lambda X: torch.linalg.inv(tri(X)), [T], [dT])],
    )
    # the factor of a graded matrix (hard: 2^-10 .. 2^10), and one whose other triangle is
    # garbage (not read: no gradient there)
    F = np.linalg.cholesky(spd("graded", 5, rng))
    F = np.stack([f32(F.T if upper else F), T[0]])
    assert_close(
        mx_grads(lambda X: ml.cholesky_inv(X, upper, stream=CPU), F),
        torch_grads(lambda X: torch.cholesky_inverse(tri(X), upper=upper), F),
        HARD_TOL,
    )

    def inverse_of_product(X):  # (F F^T)^-1 or (F^T F)^-1 in torch ops (torch's forward AD
        # of cholesky_inverse itself differs from central differences by about 1%)
        t = tri(X)
        return torch.linalg.inv(t.mT @ t if upper else t @ t.mT)

    dF = weights(F.shape, 24)
    assert_close(
        [mx_jvp(lambda X: ml.cholesky_inv(X, upper, stream=CPU), [F], [dF])],
        [torch_jvp(inverse_of_product, [F], [dF])],
        HARD_TOL,
    )


# ---- transformations: vmap, compile; one graph node ----


def test_vmap():
    rng = rng_(25)
    A = f32(rng.standard_normal((4, 3, 3)) + 3 * np.eye(3))
    B = f32(rng.standard_normal((3, 2)))
    got = mx.vmap(lambda a: ml.solve(a, mxa(B), stream=CPU))(mxa(A))
    np.testing.assert_allclose(np64(got), np.linalg.solve(A, B), rtol=1e-5, atol=1e-6)
    # a mapped axis that is not the first, on B only
    Bs = f32(rng.standard_normal((3, 2, 5)))
    got = mx.vmap(lambda b: ml.solve_triangular(mxa(A), b, upper=True, stream=CPU), in_axes=2)(
        mxa(Bs)
    )
    ref = np.linalg.solve(np.triu(A)[None], np.moveaxis(Bs, 2, 0)[:, None])
    assert got.shape == (5, 4, 3, 2)
    np.testing.assert_allclose(np64(got), ref, rtol=1e-4, atol=1e-5)
    got = mx.vmap(lambda a: ml.lu_factor(a, stream=CPU)[0])(mxa(A))
    # The same stream on both sides (the GPU's kernels and LAPACK may differ in the last bit).
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ml.lu_factor(mxa(A), stream=CPU)[0]))
    got = mx.vmap(lambda a: ml.cholesky_inv(a, stream=CPU), in_axes=1)(mxa(np.swapaxes(A, 0, 1)))
    np.testing.assert_allclose(np64(got), np64(ml.cholesky_inv(mxa(A), stream=CPU)), rtol=1e-6)
    # per-matrix gradients
    S = f32(A @ np.swapaxes(A, -1, -2))
    per = mx.vmap(mx.grad(lambda a: ml.cholesky(a, stream=CPU).sum()))(mxa(S))
    ref = torch.vmap(torch.func.grad(lambda a: torch.linalg.cholesky(a).sum()))(torch.as_tensor(S))
    assert_close([np64(per)], [ref.numpy()])
    # A failed matrix under vmap: nothing can be evaluated there, so no error; NaN for it and
    # the info in the _ex form.
    Z = A.copy()
    Z[2] = 0
    X, info = mx.vmap(lambda a: ml.inv_ex(a, stream=CPU))(mxa(Z))
    X = np.asarray(X)
    assert np.asarray(info).tolist() == [0, 0, 1, 0]
    assert np.isnan(X[2]).all() and np.isfinite(X[[0, 1, 3]]).all()
    assert np.isnan(np.asarray(mx.vmap(lambda a: ml.inv(a, stream=CPU))(mxa(Z)))[2]).all()


def test_compile():
    rng = rng_(26)
    A = mxa(rng.standard_normal((3, 5, 5)) + 5 * np.eye(5))
    B = mxa(rng.standard_normal((3, 5, 2)))

    def fn(a, b):
        x = ml.solve(a, b, stream=CPU)
        return x, ml.inv(a, stream=CPU), ml.solve_triangular(a, b, upper=True, stream=CPU)

    for got, want in zip(mx.compile(fn)(A, B), fn(A, B)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-7)
    # a singular matrix inside compile: no error can be raised there, a NaN result
    X = mx.compile(lambda a: ml.inv(a, stream=CPU))(mx.zeros((2, 3, 3)))
    assert np.isnan(np.asarray(X)).all()


def graph_nodes(*outputs) -> list:
    dot = io.StringIO()
    mx.export_to_dot(dot, *outputs)
    return [
        line.split('label ="')[1].split('"')[0]
        for line in dot.getvalue().splitlines()
        if 'label ="' in line
    ]


def test_one_lazy_node_per_call():
    A = mxa(rng_(27).standard_normal((4, 40, 40)) + 40 * np.eye(40))
    B = mxa(rng_(28).standard_normal((40, 3)))
    mx.eval(A, B)
    calls = {
        "MetalLinalgCholesky": lambda: ml.cholesky_ex(A @ mx.swapaxes(A, -1, -2), stream=CPU),
        "MetalLinalgLuFactor": lambda: ml.lu_factor_ex(A, stream=CPU),
        "MetalLinalgSolve": lambda: ml.solve_ex(A, B, stream=CPU),
        "MetalLinalgInv": lambda: ml.inv_ex(A, stream=CPU),
        "MetalLinalgSolveTriangular": lambda: (ml.solve_triangular(A, B, stream=CPU),),
        "MetalLinalgTriInv": lambda: (ml.tri_inv(A, stream=CPU),),
        "MetalLinalgCholeskyInv": lambda: (ml.cholesky_inv(A, stream=CPU),),
    }
    for name, call in calls.items():
        out = call()
        nodes = graph_nodes(*out)
        assert nodes.count(name) == 1, (name, nodes)
        assert sum(n.startswith("MetalLinalg") for n in nodes) == 1, nodes
    # with mx.stream(...) is honoured, and the plain forms return the evaluated result
    with mx.stream(CPU):
        np.testing.assert_allclose(np.asarray(ml.inv(A)), np.asarray(ml.inv_ex(A)[0]))


def test_queries():
    from metal_linalg._shared import queries

    linsys = ["cholesky", "solve", "inv", "solve_triangular", "lu_factor"]
    assert queries.LINSYS_OPS == linsys and queries.POLICY_OPS == [*queries.OPS, *linsys]
    for op in linsys:
        assert op in queries.ALL_OPS and op not in queries.OPS  # not a decomposition
        assert op in ml.calibration_status()  # a routing policy to calibrate
        assert ml._queries.policy_source(op) == getattr(ml, f"{op}_policy_source")()
        backend = getattr(ml, f"{op}_backend")
        # The CPU's kernels across SIMD lanes for small n (from 4 matrices at n = 32, 8 up to
        # 64), LAPACK for one matrix beyond n = 16 and for large n.
        lanes = "cpu:kernel:linsys_lanes"
        assert backend(8, 4, stream=CPU) == lanes == backend(32, 4, stream=CPU)
        assert backend(64, 8, stream=CPU) == lanes
        assert backend(32, stream=CPU) == "cpu:lapack" == backend(300, 1000, stream=CPU)
        # Without a stream: the default stream's answer, the CUDA kernels on a CUDA MLX's GPU.
        default = backend(300)
        assert default == backend(300, stream=mx.default_stream(mx.default_device()))
        on_cuda = mx.default_device() == mx.gpu and ml.gpu_path() == "cuda"
        assert default == (f"cuda:blocked_{op}" if on_cuda else "cpu:lapack")
        assert f"{op}_backend" in ml.__all__ and f"set_{op}_policy" in ml.__all__
    assert ml.cholesky_backend.__name__ == "cholesky_backend"
    with pytest.raises(ValueError):
        ml.solve_backend(0)
    # The ops with a right-hand side answer for nrhs columns of B.
    assert queries.RHS_OPS == ["solve", "solve_triangular"]
    lanes = "cpu:kernel:linsys_lanes"
    assert ml.solve_backend(64, 8, nrhs=16, stream=CPU) == lanes
    assert ml.solve_triangular_backend(300, 2, nrhs=5, stream=CPU) == "cpu:lapack"
    with pytest.raises(ValueError, match="nrhs must be >= 1"):
        ml.solve_triangular_backend(8, 4, nrhs=0, stream=CPU)
    with pytest.raises(TypeError):
        ml.inv_backend(8, 4, nrhs=2)


# ---- lu, det, slogdet (lu_factor's node and MLX ops, as mx.linalg's) ----


def take_rows(L: np.ndarray, p: np.ndarray) -> np.ndarray:
    """L[p] for each matrix of a batch (mx.linalg.lu's a = L[p] @ U)."""
    return np.take_along_axis(L, p[..., None].astype(np.int64), axis=-2)


def cofactors(a: np.ndarray) -> np.ndarray:
    """The matrix of cofactors adj(a)^T of a small matrix in float64, from its minors (exact
    where a is singular, unlike det a^-T)."""
    n = a.shape[-1]
    c = np.empty_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, -2), j, -1)
            c[..., i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    return c


@pytest.mark.parametrize("shape", [(6, 6), (33, 33), (9, 4), (4, 9), (1, 1)])
def test_lu_as_mx_linalg(shape):
    m, n = shape
    k = min(m, n)
    rng = rng_(30)
    A = np.stack([square(f, max(m, n), rng)[:m, :n] for f in SOLVE_FAMILIES])
    p, L, U = ml.lu(mxa(A), stream=CPU)
    assert p.dtype == mx.uint32 and L.dtype == U.dtype == mx.float32
    assert (p.shape, L.shape, U.shape) == ((6, m), (6, m, k), (6, k, n))
    p, L, U = np.asarray(p), np64(L), np64(U)
    assert (np.sort(p, axis=-1) == np.arange(m)).all()
    assert np.array_equal(np.triu(L), np.broadcast_to(np.eye(m, k), L.shape))
    assert not np.tril(U, -1).any() and np.abs(L).max() <= 1  # partial pivoting: |L| <= 1
    ratio = norms1(take_rows(L, p) @ U - A) / (n * norms1(A) * ULP)
    assert ratio.max() < LIMIT, ratio
    # p inverts lu_factor's permutation (LAPACK's 1-based interchanges)
    piv = np.asarray(ml.lu_factor(mxa(A), stream=CPU)[1])
    assert all((permutation(piv[i], m)[p[i]] == np.arange(m)).all() for i in range(6))
    # mx.linalg.lu (CPU stream) on the random matrix: the same rows, the same factors
    rp, rL, rU = mx.linalg.lu(mxa(A[0]), stream=CPU)
    assert np.array_equal(p[0], np.asarray(rp))
    np.testing.assert_allclose(L[0], np64(rL), atol=1e-5)
    np.testing.assert_allclose(U[0], np64(rU), rtol=1e-5, atol=1e-5)


def test_lu_singular_nan_and_empty():
    A = square_batch(5, ("random",) * 4, seed=31)
    A[1, :, 2] = 0.0  # singular: a factorization with U[2,2] = 0, no error
    A[2, 1, 3] = np.nan
    p, L, U = ml.lu(mxa(A), stream=CPU)
    p, L, U = np.asarray(p), np64(L), np64(U)
    assert U[1, 2, 2] == 0 and np.isfinite(L[[0, 1, 3]]).all() and np.isfinite(U[[0, 1, 3]]).all()
    np.testing.assert_allclose(take_rows(L, p)[1] @ U[1], A[1], atol=1e-5)
    assert np.isnan(np.tril(L[2], -1)[np.tril_indices(5, -1)]).all()
    assert np.isnan(U[2][np.triu_indices(5)]).all() and p[2].tolist() == [0, 1, 2, 3, 4]
    alone = ml.lu(mxa(A[[0, 1, 3]]), stream=CPU)
    for got, ref in zip((p, L, U), alone):
        assert_rest_exact(got, ref, [0, 1, 3])
    for shape, k in (((2, 0, 3), 0), ((0, 4, 4), 4), ((0, 0), 0)):
        p, L, U = ml.lu(mx.zeros(shape), stream=CPU)
        assert p.dtype == mx.uint32 and (p.shape, L.shape, U.shape) == (
            shape[:-1],
            (*shape[:-1], k),
            (*shape[:-2], k, shape[-1]),
        )
    assert ml.det(mx.zeros((0, 0)), stream=CPU).item() == 1.0  # the empty product
    assert [x.item() for x in ml.slogdet(mx.zeros((0, 0)), stream=CPU)] == [1.0, 0.0]
    assert ml.det(mx.zeros((3, 0, 0)), stream=CPU).shape == (3,)


def equilibrated_cond(a: np.ndarray) -> np.ndarray:
    """cond of each matrix with rows, then columns, scaled to 1 (graded matrices are easy)."""
    a = a / np.abs(a).max(axis=-1, keepdims=True)
    return np.linalg.cond(a / np.abs(a).max(axis=-2, keepdims=True))


@pytest.mark.parametrize("n", [1, 6, 33])
def test_det_and_slogdet_values(n):
    A = square_batch(n, seed=32)
    d = np64(ml.det(mxa(A), stream=CPU))
    sign, logabs = (np64(x) for x in ml.slogdet(mxa(A), stream=CPU))
    ref_sign, ref_log = np.linalg.slogdet(A)
    assert np.array_equal(sign, ref_sign)
    # log|det| moves by about tr(A^-1 dA) for a backward error dA: n ulp cond(A) at most
    bound = 4 * n * ULP * (np.abs(ref_log) + equilibrated_cond(A))
    assert (np.abs(logabs - ref_log) <= bound).all(), (logabs - ref_log, bound)
    # slogdet stays finite where det leaves float32's range ("tiny" 1e-30 and "huge" 1e30
    # entries): det is 0 where the exact one underflows and +-inf where it overflows
    with np.errstate(over="ignore", under="ignore"):
        ref = ref_sign * np.exp(ref_log)
    tiny, huge = float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max)
    normal = (np.abs(ref) > 1e4 * tiny) & (np.abs(ref) < huge / 1e4)
    rel = np.abs(d[normal] - ref[normal]) / np.abs(ref[normal])
    assert (rel <= np.expm1(bound[normal]) + 1e-6).all(), rel
    under, over = np.abs(ref) < tiny / 1e4, np.abs(ref) > huge * 1e4
    assert (np.abs(d[under]) < tiny).all() and (d[over] == np.inf * ref_sign[over]).all()
    if n == 33:
        assert np.isinf(d[4]) and d[3] == 0 and np.isfinite(logabs).all()
    # mx.linalg's on the CPU stream, where its det and slogdet are in range (the random one)
    np.testing.assert_allclose(d[0], np64(mx.linalg.det(mxa(A[0]), stream=CPU)), rtol=1e-5)
    ms, ml_ = mx.linalg.slogdet(mxa(A[0]), stream=CPU)
    assert sign[0] == ms.item() and abs(logabs[0] - ml_.item()) < 1e-5 * max(1, abs(ref_log[0]))


def test_det_and_slogdet_singular_and_nan_in_a_batch():
    A = square_batch(5, ("random",) * 5, seed=33)
    A[1, :, 3] = 0.0  # exactly singular
    A[2, 4, 0] = np.nan
    A[3, 0, 0] = np.inf
    A[4] = np.outer(np.arange(1.0, 6.0), [1.0, -2.0, 0.5, 4.0, 3.0])  # rank one, no zero column
    d = np64(ml.det(mxa(A), stream=CPU))
    sign, logabs = (np64(x) for x in ml.slogdet(mxa(A), stream=CPU))
    assert np.isnan(d[[2, 3]]).all() and np.isnan(logabs[[2, 3]]).all()
    assert sign[[2, 3]].tolist() == [0, 0]  # (0, NaN) as mx.linalg.slogdet and torch's
    assert d[1] == 0 and d[4] == 0 and sign[[1, 4]].tolist() == [0, 0]
    assert np.isneginf(logabs[[1, 4]]).all()
    assert not np.signbit(d[[1, 4]]).any()  # 0, not -0
    assert_rest_exact(d, ml.det(mxa(A[[0]]), stream=CPU), [0])
    assert_rest_exact(logabs, ml.slogdet(mxa(A[[0]]), stream=CPU)[1], [0])
    # mx.linalg's on the singular ones: the same
    md = np64(mx.linalg.det(mxa(A[[1, 4]]), stream=CPU))
    ms, mlog = (np64(x) for x in mx.linalg.slogdet(mxa(A[[1, 4]]), stream=CPU))
    assert (md == 0).all() and (ms == 0).all() and np.isneginf(mlog).all()


def test_det_and_slogdet_gradients_and_jvp():
    rng = rng_(34)
    A = f32(rng.standard_normal((3, 5, 5)) + 2 * np.eye(5))
    H = hard_matrix(5, rng)[None]
    slog = (lambda X: ml.slogdet(X, stream=CPU)[1], lambda X: torch.linalg.slogdet(X)[1])
    det = (lambda X: ml.det(X, stream=CPU), torch.linalg.det)
    for X, tol in ((A, TOL), (H, HARD_TOL)):
        for mine, ref in (det, slog):
            assert_close(mx_grads(mine, X), torch_grads(ref, X), tol)
            dX = weights(X.shape, 35)
            assert_close([mx_jvp(mine, [X], [dX])], [torch_jvp(ref, [X], [dX])], tol)
    # second order: the derivative's own nodes (solve_ex, inv_ex) are differentiable
    gg = mx.grad(lambda Y: mx.grad(lambda Z: ml.det(Z, stream=CPU))(Y).sum())(mxa(A[0]))
    At = torch.tensor(A[0], dtype=F64, requires_grad=True)
    (g,) = torch.autograd.grad(torch.linalg.det(At), At, create_graph=True)
    (ref,) = torch.autograd.grad(g.sum(), At)
    assert_close([np64(gg)], [ref.numpy()])


def test_det_gradient_of_degenerate_matrices():
    rng = rng_(36)
    A = f32(rng.standard_normal((4, 4, 4)))
    A[0, :, 1] = 0.0  # rank 3, a zero column: det A^-T is 0 * inf; the cofactors are not 0
    A[1] = f32(rng.standard_normal((4, 3)) @ rng.standard_normal((3, 4)))  # rank 3 (float32)
    A[2] = f32(rng.standard_normal((4, 2)) @ rng.standard_normal((2, 4)))  # rank 2: gradient ~0
    A[3] = f32(A[3] * 1e-12)  # det ~1e-48 underflows float32; its cofactors (1e-36) do not
    g = np64(mx.grad(lambda X: ml.det(X, stream=CPU).sum())(mxa(A)))
    ref = cofactors(A)
    assert np.isfinite(g).all()
    err = np.linalg.norm(g - ref, axis=(-2, -1)) / np.linalg.norm(ref[[0, 1, 3]]).max()
    assert err[[0, 3]].max() < TOL and err[2] < 1e-5, err
    rel = np.linalg.norm(g[3] - ref[3]) / np.linalg.norm(ref[3])
    assert rel < TOL, rel
    # A[1] is singular in exact arithmetic only (det 7e-7 in float32): det A^-T from A's own LU
    # (a solve with A^T, factored anew, meets an exact zero pivot there)
    assert np.linalg.norm(g[1] - ref[1]) / np.linalg.norm(ref[1]) < 1e-4
    # the same under vmap and jvp (nothing evaluated there: both branches computed)
    gv = np64(mx.vmap(mx.grad(lambda X: ml.det(X, stream=CPU)))(mxa(A)))
    np.testing.assert_allclose(gv, g, rtol=1e-6, atol=1e-12)
    dA = weights(A.shape, 37)
    t = mx_jvp(lambda X: ml.det(X, stream=CPU), [A], [dA])
    np.testing.assert_allclose(t, (g * dA).sum(axis=(-2, -1)), rtol=1e-5, atol=1e-12)
    # (torch.linalg.det's first-order gradient at an exactly singular matrix is 0, not the
    # cofactors.) slogdet: log|det| has no finite derivative at an exactly singular matrix: an error
    # naming it (under vmap, where nothing can be read, NaN for it only)
    with pytest.raises(ml.LinearSystemError, match=r"slogdet\] .*\(batch index 0\).*not finite"):
        mx.grad(lambda X: ml.slogdet(X, stream=CPU)[1].sum())(mxa(A))
    with pytest.raises(ValueError, match=r"slogdet\] the input matrix is singular"):
        mx.jvp(lambda X: ml.slogdet(X, stream=CPU)[1], [mxa(A[0])], [mxa(dA[0])])
    gv = np64(mx.vmap(mx.grad(lambda X: ml.slogdet(X, stream=CPU)[1]))(mxa(A[[0, 3]])))
    assert np.isnan(gv[0]).all() and np.isfinite(gv[1]).all()


def test_lu_gradients():
    rng = rng_(38)
    A = f32(rng.standard_normal((2, 5, 5)))
    A[1, 0, 0] = 0.0  # the first step must pivot
    dA = weights(A.shape, 39)
    for mine, ref in (
        (lambda X: ml.lu(X, stream=CPU)[1], lambda X: torch.linalg.lu(X).L),
        (lambda X: ml.lu(X, stream=CPU)[2], lambda X: torch.linalg.lu(X).U),
    ):
        assert_close(mx_grads(mine, A), torch_grads(ref, A))
        assert_close([mx_jvp(mine, [A], [dA])], [torch_jvp(ref, [A], [dA])])
    # lu_factor's derivative is for square matrices: a non-square lu's raises, naming lu
    W = mxa(A[0, :, :3])
    with pytest.raises(ValueError, match=r"\[metal_linalg\.lu\] gradients .* square .* 5 x 3"):
        mx.grad(lambda X: ml.lu(X, stream=CPU)[2].sum())(W)
    with pytest.raises(ValueError, match=r"\[metal_linalg\.lu\] gradients .* square .* 3 x 5"):
        mx.jvp(lambda X: ml.lu(X, stream=CPU)[1], [W.T], [W.T])
    with pytest.raises(ValueError, match=r"\[metal_linalg\.lu\] gradients"):
        mx.vjp(lambda X: ml.lu(X, stream=CPU)[1], [W], [mx.ones((5, 3))])


def test_lu_det_slogdet_vmap_compile_and_streams():
    rng = rng_(40)
    A = f32(rng.standard_normal((3, 4, 6, 6)))
    A[1, 2, :, 0] = 0.0  # one singular matrix
    X = mxa(A)
    want = [ml.det(X, stream=CPU), *ml.slogdet(X, stream=CPU), *ml.lu(X, stream=CPU)]

    def fn(x):
        return ml.det(x, stream=CPU), *ml.slogdet(x, stream=CPU), *ml.lu(x, stream=CPU)

    moved = mx.vmap(fn, in_axes=1, out_axes=1)(X)
    for got in (moved, mx.compile(fn)(X), mx.vmap(mx.vmap(fn))(X)):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    # streams: an mx.Stream, a Device, the default inside `with mx.stream`
    for stream in (mx.default_stream(CPU), CPU):
        assert np.array_equal(np.asarray(ml.det(X, stream=stream)), np.asarray(want[0]))
    with mx.stream(CPU):
        assert np.array_equal(np.asarray(ml.slogdet(X)[1]), np.asarray(want[2]))
        assert np.array_equal(np.asarray(ml.lu(X)[0]), np.asarray(want[3]))
    for name in ("lu", "det", "slogdet"):
        fn = getattr(ml, name)
        assert name in ml.__all__
        with pytest.raises(TypeError, match=rf"{name}\] stream must be"):
            fn(X, stream="cpu")
        with pytest.raises(ValueError, match=rf"{name}\] .*\[\.\.\., M?N?, N\]"):
            fn(mx.zeros(3))
        with pytest.raises(TypeError, match="complex"):
            fn(mx.zeros((3, 3), dtype=mx.complex64))
        if not mx.is_available(mx.gpu):
            with pytest.raises(ValueError, match="no GPU backend"):
                fn(X, stream=mx.gpu)
    for name in ("det", "slogdet"):
        with pytest.raises(ValueError, match=rf"{name}\] A must be square"):
            getattr(ml, name)(mx.zeros((3, 4)))
    # integer and NumPy input as mx.linalg.det takes them
    assert ml.det(mx.array([[1, 2], [3, 4]]), stream=CPU).item() == pytest.approx(-2.0)
    assert ml.slogdet(np.array([[2.0, 0.0], [0.0, 3.0]]), stream=CPU)[1].item() == pytest.approx(
        np.log(6.0)
    )
