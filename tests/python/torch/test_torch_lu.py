"""lu, lu_solve, det, slogdet and non-square qr(mode="complete") of the torch package against
torch.linalg in float64: LAPACK's ratios on the shared hard families and permutation-heavy
matrices, exactly singular matrices, a NaN matrix in a batch, gradients against float64 torch
autograd (also where det's gradient is degenerate), argument errors, vmap, torch.compile,
jit.trace and opcheck.
"""

from __future__ import annotations

import metal_linalg_torch as mlt
import numpy as np
import pytest
import torch
from _matrices import FAMILIES, general, norm1, qr_ratios
from accuracy import THRESH, ULP

F64 = torch.float64
LIMIT = THRESH["linsys"]
# Well conditioned (forward errors checked), and hard ones (condition up to 1/ulp, graded, at
# float32's range ends: backward errors only). rank_deficient and zero are singular.
WELL = ("identity", "repeated", "random")
HARD = ("diagonal", "arithmetic", "graded", "clustered", "geometric", "random_log")
HARD += ("scaled_tiny", "scaled_huge")


def _rng(seed):
    return np.random.default_rng(seed)


def _family_batch(families, m, n, seed=0) -> torch.Tensor:
    """float64 matrices of the families, rounded to float32 values."""
    rng = _rng(seed)
    mats = [general(f, m, n, rng) for f in families]
    return torch.from_numpy(np.stack(mats).astype(np.float32)).to(F64)


def _permuting(n: int, seed: int) -> torch.Tensor:
    """A matrix whose partial pivoting swaps at every step: in each column the entries below
    the diagonal grow downwards, so the last row is the pivot each time (float32 values)."""
    rng = _rng(seed)
    a = rng.uniform(0.5, 1.0, (n, n)) * (2.0 ** np.arange(n))[:, None]
    return torch.from_numpy(a.astype(np.float32)).to(F64)


def _perm_matrix(n: int, seed: int) -> torch.Tensor:
    p = torch.from_numpy(_rng(seed).permutation(n))
    return torch.eye(n, dtype=F64)[p]


def _norm1(x: torch.Tensor) -> torch.Tensor:
    return torch.linalg.matrix_norm(x, ord=1)


def _ratio(resid, anorm, size):
    """LAPACK's scaled residual, guarded for a zero matrix (resid 0 / anorm 0)."""
    return resid / (torch.clamp(anorm, min=2.0**-126) * size * ULP)


# ---- lu: P L U ----


def _check_lu(A: torch.Tensor, P, L, U) -> None:
    m, n = A.shape[-2:]
    k = min(m, n)
    assert P.shape == (*A.shape[:-2], m, m) and L.shape[-2:] == (m, k) and U.shape[-2:] == (k, n)
    assert P.dtype == L.dtype == U.dtype == torch.float32
    # P is a permutation matrix, L unit lower with |l| <= 1 (partial pivoting), U upper.
    assert ((P == 0) | (P == 1)).all() and (P.sum(-1) == 1).all() and (P.sum(-2) == 1).all()
    assert (L.diagonal(dim1=-2, dim2=-1) == 1).all() and (L.triu(1) == 0).all()
    assert (L.abs() <= 1).all() and (U.tril(-1) == 0).all()
    P, L, U = P.to(F64), L.to(F64), U.to(F64)
    ratio = _ratio(_norm1(P @ L @ U - A), _norm1(A), max(m, n))
    assert float(ratio.max()) < LIMIT, ratio


@pytest.mark.parametrize("shape", [(7, 7), (9, 4), (4, 9), (1, 1), (33, 33)])
def test_lu_reconstruction_on_every_family(shape):
    m, n = shape
    A = _family_batch(FAMILIES, m, n, seed=m + n)
    P, L, U = mlt.lu(A.float())
    _check_lu(A, P, L, U)
    # The random matrix has no pivot ties: torch's factors exactly where float32 LU agrees.
    i = FAMILIES.index("random")
    ref = torch.linalg.lu(A[i].float())
    assert torch.equal(P[i], ref.P)
    torch.testing.assert_close(L[i], ref.L, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(U[i], ref.U, rtol=1e-4, atol=1e-5)


def test_lu_permutation_heavy():
    n = 12
    A = torch.stack([_permuting(n, 0), _perm_matrix(n, 1), _perm_matrix(n, 2) * 3.0])
    P, L, U = mlt.lu(A.float())
    _check_lu(A, P, L, U)
    # Every step of the first matrix swaps: its pivots are no row's own.
    _, piv = mlt.lu_factor(A[0].float())
    assert (piv != torch.arange(1, n + 1, dtype=torch.int32)).sum() >= n // 2
    # A permutation matrix factors exactly: P = A, L = I, U = I (times the scale).
    eye = torch.eye(n)
    assert torch.equal(P[1], A[1].float()) and torch.equal(L[1], eye) and torch.equal(U[1], eye)
    assert torch.equal(P[2], A[2].float() / 3) and torch.equal(U[2], 3 * eye)


def test_lu_singular_nan_and_empty():
    A = _family_batch(("random",) * 4, 5, 5)
    A[1, :, 2] = 0.0  # exactly singular: no error, U(3,3) = 0
    A[2, 3, 1] = float("nan")
    P, L, U = mlt.lu(A.float())
    assert U[1, 2, 2] == 0 and torch.isfinite(L[1]).all() and torch.isfinite(U[1]).all()
    _check_lu(A[[0, 1, 3]], P[[0, 1, 3]], L[[0, 1, 3]], U[[0, 1, 3]])
    # NaN for that matrix only (P the identity; L's unit diagonal and zeros above stay).
    upper, lower = torch.ones(5, 5, dtype=torch.bool).triu(), torch.ones(5, 5).tril(-1) == 1
    assert torch.isnan(U[2][upper]).all() and torch.isnan(L[2][lower]).all()
    assert torch.equal(P[2], torch.eye(5))
    ref = torch.linalg.lu(torch.randn(2, 3, 0))
    got = mlt.lu(torch.randn(2, 3, 0))
    assert all(g.shape == r.shape for g, r in zip(got, ref)) and torch.equal(got.P, ref.P)
    assert mlt.lu(torch.randn(0, 4, 2)).L.shape == (0, 4, 2)


# ---- lu_solve ----


def _op(A, adjoint):
    return A.mT if adjoint else A


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
@pytest.mark.parametrize("n", [1, 6, 33])
def test_lu_solve_backward_error(left, adjoint, n):
    A = torch.cat([_family_batch(WELL + HARD, n, n, seed=n), _permuting(n, 3)[None]])
    b = len(A)
    LU, piv = mlt.lu_factor(A.float())
    B = torch.randn(b, n, 3, dtype=F64) if left else torch.randn(b, 3, n, dtype=F64)
    B = B.float().to(F64)
    X = mlt.lu_solve(LU, piv, B.float(), left=left, adjoint=adjoint)
    assert X.dtype == torch.float32 and X.shape == B.shape and torch.isfinite(X).all()
    X = X.to(F64)
    opA = _op(A, adjoint)
    resid = opA @ X - B if left else X @ opA - B
    ratio = _ratio(_norm1(resid), _norm1(A) * _norm1(X), n)
    assert float(ratio.max()) < LIMIT, ratio
    # Forward error against float64 where the matrix is well conditioned.
    ref = torch.linalg.solve(opA[: len(WELL)], B[: len(WELL)], left=left)
    rel = torch.linalg.matrix_norm(X[: len(WELL)] - ref) / torch.linalg.matrix_norm(ref)
    assert float(rel.max()) < 1e-4, rel
    # torch's own lu_solve of the same float32 factorization.
    theirs = torch.linalg.lu_solve(LU, piv, B.float(), left=left, adjoint=adjoint)
    i = WELL.index("random")
    torch.testing.assert_close(X[i].float(), theirs[i], rtol=1e-4, atol=1e-5)


def test_lu_solve_broadcasting_singular_nan_and_empty():
    A = _family_batch(("random",) * 4, 5, 5, seed=4)
    A[1, :, 3] = 0.0  # U(4,4) = 0: NaN for that matrix
    A[2, 0, 4] = float("inf")
    LU, piv, info = mlt.lu_factor_ex(A.float())
    assert info[1] == 4
    B = torch.randn(3, 1, 5, 2, dtype=F64)
    X = mlt.lu_solve(LU, piv, B.float())
    assert X.shape == (3, 4, 5, 2)
    assert torch.isnan(X[:, 1:3]).all() and torch.isfinite(X[:, [0, 3]]).all()
    ref = torch.linalg.solve(A[[0, 3]], B)
    torch.testing.assert_close(X[:, [0, 3]].to(F64), ref, rtol=1e-4, atol=1e-5)
    # A NaN in one right-hand side's matrix stays in it.
    B2 = torch.randn(4, 5, 2)
    B2[3, 2, 0] = float("nan")
    X2 = mlt.lu_solve(LU[[0, 3, 0, 3]], piv[[0, 3, 0, 3]], B2, left=True, adjoint=True)
    assert torch.isfinite(X2[:3]).all() and torch.isnan(X2[3]).any()
    # Empty shapes, float64 input converted.
    assert mlt.lu_solve(LU, piv, torch.randn(4, 5, 0)).shape == (4, 5, 0)
    assert mlt.lu_solve(LU[:0], piv[:0], torch.randn(0, 5, 2)).shape == (0, 5, 2)
    x = mlt.lu_solve(LU[0].double(), piv[0], B[0, 0], left=True)
    assert x.dtype == torch.float32


def test_lu_solve_argument_errors():
    LU, piv = mlt.lu_factor(torch.randn(2, 4, 4))
    B = torch.randn(2, 4, 3)
    with pytest.raises(TypeError, match="pivots must be int32"):
        mlt.lu_solve(LU, piv.long(), B)
    with pytest.raises(ValueError, match=r"pivots must have LU's shape .*\(2, 4\)"):
        mlt.lu_solve(LU, piv[:1], B)
    with pytest.raises(ValueError, match=r"pivots must be in \[1, 4\]"):
        mlt.lu_solve(LU, piv * 0, B)
    with pytest.raises(ValueError, match=r"pivots must be in \[1, 4\]"):
        mlt.lu_solve(LU, piv + 4, B)
    with pytest.raises(ValueError, match="LU must be batches of square"):
        mlt.lu_solve(LU[..., :3], piv, B)
    with pytest.raises(ValueError, match=r"AX = B \(4x4 and 3x3\)"):
        mlt.lu_solve(LU, piv, B[:, :3])
    with pytest.raises(ValueError, match=r"XA = B \(4x4 and 4x3\)"):
        mlt.lu_solve(LU, piv, B, left=False)
    with pytest.raises(ValueError, match="do not broadcast"):
        mlt.lu_solve(LU, piv, torch.randn(3, 4, 1))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        mlt.lu_solve(LU, piv, torch.randn(4))
    with pytest.raises(TypeError, match="adjoint must be a bool"):
        mlt.lu_solve(LU, piv, B, adjoint="yes")
    with pytest.raises(TypeError, match="complex"):
        mlt.lu_solve(LU, piv, B.to(torch.complex64))
    with pytest.raises(NotImplementedError, match="pivot=False"):
        mlt.lu(torch.randn(3, 3), pivot=False)
    with pytest.raises(ValueError, match="square"):
        mlt.det(torch.randn(2, 3))
    with pytest.raises(ValueError, match="square"):
        mlt.slogdet(torch.randn(3, 2))


# ---- det, slogdet ----


def test_det_and_slogdet_on_hard_matrices():
    n = 10
    fams = ("random", "graded", "repeated", "scaled_tiny", "scaled_huge")
    A = torch.cat(
        [_family_batch(fams, n, n, seed=7), _permuting(n, 8)[None], _perm_matrix(n, 9)[None]]
    )
    sign, logabs = mlt.slogdet(A.float())
    rsign, rlogabs = torch.linalg.slogdet(A)
    assert torch.equal(sign.to(F64), rsign)
    # log|det| = sum log|u_ii| of a backward-stable factorization A + E, |E| ~ n ulp |A|:
    # off by tr(A^-1 E) <= n cond(A) ulp to first order, whatever the scale (1e-30 ** 10 and
    # 1e37 ** 10 included).
    bound = 4 * n * torch.linalg.cond(A, p=1) * ULP
    err = (logabs.to(F64) - rlogabs).abs()
    assert (err <= bound).all() and float(bound[0]) < 1e-3, (err, bound)
    det = mlt.det(A.float())
    rdet = torch.linalg.det(A.float())  # float32: under/overflows where torch's does
    ok = torch.isfinite(rdet) & (rdet != 0)
    assert torch.equal(torch.isinf(det), torch.isinf(rdet)) and torch.equal(det == 0, rdet == 0)
    rel = ((det - rdet) / rdet).abs()[ok]
    assert float(rel.max()) < 1e-4, rel
    # A permutation matrix's determinant is its parity exactly; a triangular matrix's the
    # product of its diagonal.
    assert det[-1] == torch.linalg.det(A[-1]) and det[-1].abs() == 1
    T = torch.randn(6, 6).triu() + 2 * torch.eye(6)
    torch.testing.assert_close(mlt.det(T), T.diagonal().prod(), rtol=1e-6, atol=0)


def test_det_and_slogdet_singular_nan_and_empty():
    A = _family_batch(("random",) * 5, 6, 6, seed=11)
    A[1, :, 0] = 0.0  # a zero column: U(1,1) = 0
    A[2, 4] = 0.0  # a zero row
    A[3] = torch.diag(torch.ones(5, dtype=F64), 1)  # the shift: two zero pivots, rank 5
    A[4, 2, 3] = float("nan")
    det = mlt.det(A.float())
    sign, logabs = mlt.slogdet(A.float())
    assert det[0] != 0 and (det[1:4] == 0).all() and torch.isnan(det[4])
    assert (sign[1:4] == 0).all() and (logabs[1:4] == -float("inf")).all()
    assert sign[4] == 0 and torch.isnan(logabs[4])  # torch's sign of a NaN matrix: 0
    rsign, rlogabs = torch.linalg.slogdet(A[:4])
    assert torch.equal(sign[:4].to(F64), rsign) and torch.equal(logabs[1:4].to(F64), rlogabs[1:])
    assert mlt.det(torch.randn(3, 0, 0)).tolist() == [1.0] * 3
    assert mlt.slogdet(torch.randn(0, 2, 2)).logabsdet.shape == (0,)


# ---- gradients against float64 torch autograd ----


def _grads(fn, *inputs, seed=5):
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    out = fn(*leaves)
    outs = out if isinstance(out, tuple) else (out,)
    gen = torch.Generator().manual_seed(seed)
    loss = sum((o.to(F64) * torch.randn(o.shape, dtype=F64, generator=gen)).sum() for o in outs)
    loss.backward()
    return [leaf.grad for leaf in leaves]


def _close(got, ref, tol=2e-4):
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype and g.shape == r.shape
        err = float((g - r).norm() / r.norm())
        assert err < tol, err


@pytest.mark.parametrize("shape", [(5, 5), (7, 4), (4, 7)])
def test_lu_gradient(shape):
    A = torch.randn(3, *shape, dtype=F64, generator=torch.Generator().manual_seed(1))
    _close(
        _grads(lambda X: tuple(mlt.lu(X))[1:], A),
        _grads(lambda X: tuple(torch.linalg.lu(X))[1:], A),
    )
    # lu_factor's packed factors: the same formula, now for non-square A too.
    _close(
        _grads(lambda X: mlt.lu_factor(X).LU, A), _grads(lambda X: torch.linalg.lu_factor(X).LU, A)
    )


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_gradient(left, adjoint):
    gen = torch.Generator().manual_seed(2)
    A = torch.randn(3, 1, 5, 5, dtype=F64, generator=gen) + 3 * torch.eye(5, dtype=F64)
    LU, piv = torch.linalg.lu_factor(A)
    B = torch.randn(2, 5, 4, dtype=F64, generator=gen)
    B = B if left else B.mT
    kw = {"left": left, "adjoint": adjoint}
    _close(
        _grads(lambda F, Y: mlt.lu_solve(F, piv, Y, **kw), LU, B),
        _grads(lambda F, Y: torch.linalg.lu_solve(F, piv, Y, **kw), LU, B),
    )
    # Through lu_factor: the gradient of A itself.
    _close(
        _grads(lambda X, Y: mlt.lu_solve(*mlt.lu_factor(X), Y, **kw), A, B),
        _grads(lambda X, Y: torch.linalg.lu_solve(*torch.linalg.lu_factor(X), Y, **kw), A, B),
    )


def test_det_and_slogdet_gradients():
    A = torch.randn(4, 6, 6, dtype=F64, generator=torch.Generator().manual_seed(3))
    A[3] = _permuting(6, 4)
    _close(_grads(mlt.det, A), _grads(torch.linalg.det, A))
    _close(
        _grads(lambda X: mlt.slogdet(X).logabsdet, A),
        _grads(lambda X: torch.linalg.slogdet(X).logabsdet, A),
    )
    # double backward: det's gradient is differentiable (torch ops over the custom op)
    X = A[0].clone().requires_grad_(True)
    (g,) = torch.autograd.grad(mlt.det(X), X, create_graph=True)
    (gg,) = torch.autograd.grad((g.to(F64) ** 2).sum(), X)
    Xr = A[0].clone().requires_grad_(True)
    (gr,) = torch.autograd.grad(torch.linalg.det(Xr), Xr, create_graph=True)
    (ggr,) = torch.autograd.grad((gr**2).sum(), Xr)
    assert float((gg - ggr).norm() / ggr.norm()) < 1e-3


def _cofactors(A: torch.Tensor) -> torch.Tensor:
    """adj(A)^T entry by entry (float64 minors), the reference for det's gradient."""
    n = A.shape[-1]
    C = torch.empty_like(A)
    for i in range(n):
        for j in range(n):
            keep_r = [r for r in range(n) if r != i]
            keep_c = [c for c in range(n) if c != j]
            C[..., i, j] = (-1) ** (i + j) * torch.linalg.det(A[..., keep_r, :][..., keep_c])
    return C


def test_det_gradient_at_singular_matrices():
    gen = torch.Generator().manual_seed(6)
    A = torch.randn(6, 5, 5, dtype=F64, generator=gen).float().to(F64)
    A[0, :, 2] = 0.0  # rank 4, one zero pivot: the gradient is adj(A)^T, nonzero
    A[1, 3] = A[1, 0]  # rank 4 from two equal rows (in float32 LU: a zero or a tiny pivot)
    A[2] = torch.diag(torch.ones(4, dtype=F64), 1)  # rank 4, two zero pivots
    A[3, :, :2] = 0.0  # rank 3: the gradient is zero
    A[4] = A[4] * 1e-9  # nonsingular, its determinant below float32's range (det = 0)
    A[5, 1, 1] = float("nan")
    got = _grads(mlt.det, A, seed=0)[0]
    weights = torch.randn(6, dtype=F64, generator=torch.Generator().manual_seed(0))
    ref = weights[:, None, None] * _cofactors(A)
    for i in range(4):
        err = float((got[i] - ref[i]).norm() / max(float(ref[i].norm()), 1e-300))
        assert (err < 1e-5) if i < 3 else float(got[i].abs().max()) < 1e-6, (i, err)
    assert float(got[2].abs().max()) > 0.5  # the shift's adjugate: one entry +-1
    # A nonsingular matrix whose det is subnormal in float32: its tiny cofactors, accurate.
    _close([got[4]], [ref[4]], tol=1e-4)
    assert torch.isnan(got[5]).all()
    # torch's create_graph path (the SVD formula) agrees; its first-order path gives 0 for A[0].
    Ar = A[:4].clone().requires_grad_(True)
    (gr,) = torch.autograd.grad((torch.linalg.det(Ar) * weights[:4]).sum(), Ar, create_graph=True)
    _close([got[:3]], [gr[:3].detach()], tol=1e-5)


def test_slogdet_gradient_at_a_singular_matrix_is_not_finite():
    A = torch.randn(2, 4, 4, dtype=F64)
    A[1, :, 1] = 0.0
    (g,) = _grads(lambda X: mlt.slogdet(X).logabsdet, A)
    (gr,) = _grads(lambda X: torch.linalg.slogdet(X).logabsdet, A)
    assert torch.isfinite(g[0]).all() and not torch.isfinite(g[1]).all()
    assert not torch.isfinite(gr[1]).all()  # torch: inf/NaN too
    torch.testing.assert_close(g[0], gr[0], rtol=1e-4, atol=1e-6)


# ---- qr(mode="complete") for non-square A ----


@pytest.mark.parametrize("shape", [(9, 4), (33, 7), (4, 9), (6, 1), (60, 50)])
def test_qr_complete_non_square(shape):
    m, n = shape
    A = _family_batch(FAMILIES, m, n, seed=m * n)
    Q, R = mlt.qr(A.float(), mode="complete")
    assert Q.shape == (len(FAMILIES), m, m) and R.shape == (len(FAMILIES), m, n)
    assert (R.tril(-1) == 0).all()
    k = min(m, n)
    assert (R[..., k:, :] == 0).all()  # the rows below n: exactly zero
    for a, q, r in zip(A, Q, R):
        resid, orth = qr_ratios(a, q, r)
        assert resid < THRESH["qr"] and orth < THRESH["qr"], (resid, orth)
    # The first k columns and R's first k rows are the reduced factorization's.
    Qr, Rr = mlt.qr(A.float())
    torch.testing.assert_close(R[..., :k, :], Rr, rtol=0, atol=1e-6 * norm1(A[0]) + 1e-30)
    torch.testing.assert_close(Q[..., :k], Qr, rtol=0, atol=1e-5)
    Q2, R2, info = mlt.qr_ex(A.float(), mode="complete")
    assert torch.equal(Q2, Q) and torch.equal(R2, R) and info.shape == (len(FAMILIES),)


def test_qr_complete_nan_empty_and_gradient_error():
    A = torch.randn(3, 7, 3)
    A[1, 2, 0] = float("nan")
    Q, R, info = mlt.qr_ex(A, mode="complete")
    assert torch.isnan(Q[1]).all() and torch.isnan(R[1]).all() and info[1] & 2
    assert torch.isfinite(Q[[0, 2]]).all() and torch.isfinite(R[[0, 2]]).all()
    ref = torch.linalg.qr(torch.randn(2, 4, 0), mode="complete")
    got = mlt.qr(torch.randn(2, 4, 0), mode="complete")
    assert torch.equal(got.Q, ref.Q) and got.R.shape == ref.R.shape
    assert mlt.qr(torch.randn(0, 5, 2), mode="complete").Q.shape == (0, 5, 5)
    # A tall complete QR is not differentiable (its last m - n columns of Q are not unique):
    # the backward raises, as torch's; wide and square complete are.
    X = torch.randn(5, 3, requires_grad=True)
    Q, R = mlt.qr(X, mode="complete")
    with pytest.raises(RuntimeError, match="mode='complete' and nrows > ncols"):
        R.sum().backward()
    with pytest.raises(RuntimeError, match="mode='complete' and nrows > ncols"):
        torch.ops.metal_linalg.qr(X, "complete")[0].sum().backward()
    with pytest.raises(RuntimeError, match="mode='complete' and nrows > ncols"):
        torch.func.jvp(lambda a: mlt.qr(a, mode="complete").R, (X.detach(),), (torch.ones(5, 3),))
    W = torch.randn(3, 5, dtype=F64)
    _close(
        _grads(lambda a: tuple(mlt.qr(a, mode="complete")), W),
        _grads(lambda a: tuple(torch.linalg.qr(a, mode="complete")), W),
    )


# ---- transforms: vmap, compile, jit.trace, opcheck ----


def test_vmap_and_func():
    gen = torch.Generator().manual_seed(7)
    A = torch.randn(4, 5, 5, generator=gen) + 3 * torch.eye(5)
    LU, piv = mlt.lu_factor(A)
    B = torch.randn(4, 5, 2, generator=gen)
    for fn in (mlt.det, lambda a: tuple(mlt.slogdet(a)), lambda a: tuple(mlt.lu(a))):
        torch.testing.assert_close(torch.vmap(fn)(A), fn(A))
    got = torch.vmap(lambda f, p, b: mlt.lu_solve(f, p, b, adjoint=True))(LU, piv, B)
    torch.testing.assert_close(got, mlt.lu_solve(LU, piv, B, adjoint=True))
    Bs = torch.randn(4, 5, 2, 3, generator=gen)
    got = torch.vmap(lambda b: mlt.lu_solve(LU, piv, b, left=True), in_dims=3)(Bs)
    torch.testing.assert_close(got, mlt.lu_solve(LU, piv, Bs.permute(3, 0, 1, 2)))
    T = torch.randn(3, 7, 4, generator=gen)
    torch.testing.assert_close(
        torch.vmap(lambda a: tuple(mlt.qr(a, mode="complete")))(T), tuple(mlt.qr(T, "complete"))
    )
    # a singular matrix under vmap: its gradient from the SVD branch, the others from solve
    S = A.double()
    S[2, :, 1] = 0
    per = torch.vmap(torch.func.grad(mlt.det))(S)
    loop = torch.stack([torch.func.grad(mlt.det)(s) for s in S])
    torch.testing.assert_close(per, loop, rtol=1e-5, atol=1e-6)
    assert float(per[2].abs().max()) > 0
    A64, B64 = A[0].double(), B[0].double()
    jac = torch.func.jacrev(lambda f, b: mlt.lu_solve(f, piv[0], b), argnums=(0, 1))(
        LU[0].double(), B64
    )
    ref = torch.func.jacrev(lambda f, b: torch.linalg.lu_solve(f, piv[0], b), argnums=(0, 1))(
        LU[0].double(), B64
    )
    for g, r in zip(jac, ref):
        torch.testing.assert_close(g.double(), r, rtol=1e-4, atol=1e-5)
    g = torch.func.grad(lambda a: mlt.slogdet(a).logabsdet)(A64)
    torch.testing.assert_close(g.double(), torch.linalg.inv(A64).mT, rtol=1e-4, atol=1e-5)


def test_compile_fullgraph_and_trace():
    gen = torch.Generator().manual_seed(8)
    A = torch.randn(3, 5, 5, generator=gen) + 3 * torch.eye(5)
    B = torch.randn(3, 5, 2, generator=gen)
    T = torch.randn(2, 6, 3, generator=gen)
    cases = [
        (lambda a, b: tuple(mlt.lu(a)), A, B),
        (lambda a, b: mlt.lu_solve(*mlt.lu_factor_ex(a)[:2], b, adjoint=True), A, B),
        (lambda a, b: mlt.lu_solve(*mlt.lu_factor_ex(a)[:2], b.mT, left=False), A, B),
        (lambda a, b: (mlt.det(a), *mlt.slogdet(a)), A, B),
        (lambda a, b: tuple(mlt.qr(a, mode="complete")), T, B),
    ]
    for fn, a, b in cases:
        torch._dynamo.reset()
        got = torch.compile(fn, fullgraph=True, backend="eager")(a, b)
        torch.testing.assert_close(got, fn(a, b))
    # the gradient through compile: det's registered backward
    torch._dynamo.reset()
    x = A.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(torch.compile(mlt.det, backend="aot_eager")(x).sum(), x)
    torch.testing.assert_close(g, torch.linalg.inv(A).mT * torch.linalg.det(A)[:, None, None])
    traced = torch.jit.trace(lambda a: mlt.det(a), (A,))
    torch.testing.assert_close(traced(A), mlt.det(A))


@pytest.mark.parametrize(
    "args",
    [
        lambda: ((torch.randn(3, 4, 4) + 2 * torch.eye(4)).requires_grad_(),),
        lambda: (torch.randn(5, 5),),
    ],
    ids=["det_grad", "det"],
)
def test_opcheck_det(args):
    torch.manual_seed(9)
    torch.library.opcheck(torch.ops.metal_linalg.det.default, args())


def test_opcheck_qr_complete_non_square():
    torch.manual_seed(10)
    torch.library.opcheck(torch.ops.metal_linalg.qr.default, (torch.randn(2, 6, 3), "complete"))
    torch.library.opcheck(
        torch.ops.metal_linalg.qr.default, (torch.randn(3, 5, requires_grad=True), "complete")
    )


def test_forward_mode_ad_is_a_clear_error():
    A = torch.randn(3, 3) + 3 * torch.eye(3)
    for fn in (
        mlt.det,
        lambda a: mlt.slogdet(a).logabsdet,
        lambda a: mlt.lu(a).U,
        lambda a: mlt.lu_solve(*mlt.lu_factor(a), torch.ones(3, 1)),
    ):
        with pytest.raises(RuntimeError, match="forward"):
            torch.func.jvp(fn, (A,), (torch.randn(3, 3),))
