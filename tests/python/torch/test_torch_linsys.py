"""The linear systems (cholesky, solve, inv, solve_triangular and the *_ex forms) against
torch.linalg in float64: LAPACK's test ratios (docs/design.md section 7) on hard matrix
families, a NaN matrix in a batch, singular and indefinite matrices, torch's error messages,
gradients against float64 torch autograd, broadcasting, the custom ops under opcheck,
torch.compile, vmap and jit.trace, and the transformations they do not serve (clear errors).
"""

from __future__ import annotations

import metal_linalg_torch as mlt
import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as fwAD
from accuracy import THRESH, ULP
from metal_linalg_torch import linsys

F64 = torch.float64
LIMIT = THRESH["linsys"]
NONFINITE = linsys.INFO_NONFINITE


def _rng(seed):
    return np.random.default_rng(seed)


def _orth(n, rng):
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diag(r))


def general(family: str, n: int, seed: int) -> np.ndarray:
    """A square float64 matrix of a hard family (rounded to float32 values)."""
    rng = _rng(seed)
    if family == "random":
        a = rng.standard_normal((n, n))
    elif family == "ill":  # condition number 1/ulp, geometric singular values
        s = ULP ** (np.arange(n) / max(n - 1, 1))
        a = _orth(n, rng) @ np.diag(s) @ _orth(n, rng).T
    elif family == "graded":  # rows and columns scaled over 2^-12 .. 2^12
        g = np.diag(2.0 ** np.linspace(-12, 12, n))
        a = g @ rng.standard_normal((n, n)) @ g
    elif family == "tiny":
        a = rng.standard_normal((n, n)) * 1e-30
    elif family == "huge":
        a = rng.standard_normal((n, n)) * 1e30
    elif family == "nearly_singular":  # one singular value at ulp / 4 of the others
        s = np.ones(n)
        s[-1] = ULP / 4
        a = _orth(n, rng) @ np.diag(s) @ _orth(n, rng).T
    else:
        raise ValueError(family)
    return a.astype(np.float32).astype(np.float64)


def spd(family: str, n: int, seed: int) -> np.ndarray:
    """A symmetric positive-definite float64 matrix of a hard family (float32 values)."""
    rng = _rng(seed)
    q = _orth(n, rng)
    if family == "random":
        s = rng.uniform(0.5, 2.0, n)
    elif family == "ill":
        s = 10 * ULP ** (np.arange(n) / max(n - 1, 1))  # condition ~ 1/ulp, still definite
    elif family == "graded":
        g = np.diag(2.0 ** np.linspace(-10, 10, n))
        b = rng.standard_normal((n, n))
        a = g @ (b @ b.T + n * np.eye(n)) @ g
        return ((a + a.T) / 2).astype(np.float32).astype(np.float64)
    elif family in ("tiny", "huge"):
        s = rng.uniform(0.5, 2.0, n) * (1e-30 if family == "tiny" else 1e30)
    else:
        raise ValueError(family)
    a = q @ np.diag(s) @ q.T
    return ((a + a.T) / 2).astype(np.float32).astype(np.float64)


FAMILIES = ("random", "ill", "graded", "tiny", "huge", "nearly_singular")
SPD_FAMILIES = ("random", "ill", "graded", "tiny", "huge")


def _norm1(x: torch.Tensor) -> torch.Tensor:
    """LAPACK's 1-norm of each matrix of a batch."""
    return torch.linalg.matrix_norm(x, ord=1)


def _t(a) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a), dtype=F64)


def _batch(fn, families, n, seed=0):
    return torch.stack([_t(fn(f, n, seed + i)) for i, f in enumerate(families)])


# ---- accuracy: LAPACK's ratios ----


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("n", [1, 7, 40])
def test_cholesky_residual(upper, n):
    A = _batch(spd, SPD_FAMILIES, n)
    # The triangle not read holds garbage: the result must not depend on it.
    noise = torch.randn(A.shape, dtype=F64) * 1e3
    A_in = A + (noise.tril(-1) if upper else noise.triu(1))
    L = mlt.cholesky(A_in.float(), upper=upper).to(F64)
    assert L.dtype == F64 and torch.isfinite(L).all()
    assert (L.tril(-1) if upper else L.triu(1)).abs().max() == 0
    prod = L.mT @ L if upper else L @ L.mT
    ratio = _norm1(prod - A) / (n * _norm1(A) * ULP)
    assert float(ratio.max()) < LIMIT, ratio
    ref = torch.linalg.cholesky(A, upper=upper)
    rel = torch.linalg.matrix_norm(L - ref) / torch.linalg.matrix_norm(ref)
    # Forward error of a backward-stable factor: bounded by cond(A) * ulp, and tight where
    # the condition is moderate.
    assert float(rel[0]) < 1e-5 and float(rel[3]) < 1e-5 and float(rel[4]) < 1e-5


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("n,k", [(1, 1), (6, 3), (33, 5)])
def test_solve_backward_error(left, n, k):
    A = _batch(general, FAMILIES, n)
    B = torch.randn(len(FAMILIES), n, k, dtype=F64) if left else torch.randn(6, k, n, dtype=F64)
    scale = torch.tensor([1.0, 1.0, 1.0, 1e-30, 1e30, 1.0], dtype=F64).view(-1, 1, 1)
    B = (B * scale).float().to(F64)
    X, info = mlt.solve_ex(A.float(), B.float(), left=left)
    assert (info == 0).all()
    X = X.to(F64)
    assert torch.isfinite(X).all()
    resid = A @ X - B if left else X @ A - B
    ratio = _norm1(resid) / (_norm1(A) * _norm1(X) * n * ULP)
    assert float(ratio.max()) < LIMIT, ratio
    ref = torch.linalg.solve(A, B, left=left)
    rel = torch.linalg.matrix_norm(X - ref) / torch.linalg.matrix_norm(ref)
    assert float(rel[0]) < 1e-3  # the well-conditioned random matrix


@pytest.mark.parametrize("n", [1, 6, 33])
def test_inv_residual(n):
    A = _batch(general, FAMILIES, n)
    X = mlt.inv(A.float()).to(F64)
    assert torch.isfinite(X).all()
    eye = torch.eye(n, dtype=F64)
    ratio = _norm1(A @ X - eye) / (n * _norm1(A) * _norm1(X) * ULP)
    assert float(ratio.max()) < LIMIT, ratio
    X2, info = mlt.inv_ex(A.float())
    assert (info == 0).all() and torch.equal(X2.to(F64), X)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("n", [17, 40])
def test_solve_triangular_backward_error(upper, left, unit, n):
    k = 4
    full = _batch(general, ("random", "graded", "tiny", "huge"), n)
    if unit:  # unit diagonal: off-diagonals of norm 1 keep the growth of X bounded
        full = full / _norm1(full).view(-1, 1, 1)
    else:  # a dominant diagonal of each family's magnitude
        full = (
            full
            + 4
            * torch.diag_embed(full.diagonal(dim1=-2, dim2=-1).sign())
            * _norm1(full).view(-1, 1, 1)
            / n
        )
    B = torch.randn(4, n, k, dtype=F64) if left else torch.randn(4, k, n, dtype=F64)
    X = mlt.solve_triangular(
        full.float(), B.float(), upper=upper, left=left, unitriangular=unit
    ).to(F64)
    T = full.triu() if upper else full.tril()
    if unit:
        T = T - torch.diag_embed(T.diagonal(dim1=-2, dim2=-1)) + torch.eye(n, dtype=F64)
    B = B.float().to(F64)
    resid = T @ X - B if left else X @ T - B
    ratio = _norm1(resid) / (_norm1(T) * _norm1(X) * n * ULP)
    assert float(ratio.max()) < LIMIT, ratio
    ref = torch.linalg.solve_triangular(T, B, upper=upper, left=left, unitriangular=unit)
    rel = torch.linalg.matrix_norm(X - ref) / torch.linalg.matrix_norm(ref)
    assert float(rel[0]) < 1e-3


@pytest.mark.parametrize("shape", [(6, 6), (9, 4), (4, 9), (1, 1), (40, 40)])
def test_lu_factor_residual(shape):
    m, n = shape
    mats = [general(f, max(m, n), i)[:m, :n] for i, f in enumerate(FAMILIES)]
    A = torch.stack([_t(a) for a in mats])
    LU, piv = mlt.lu_factor(A.float())
    assert LU.shape == A.shape and piv.shape == (len(FAMILIES), min(m, n))
    assert piv.dtype == torch.int32
    P, L, U = torch.lu_unpack(LU.to(F64), piv)
    ratio = _norm1(P @ L @ U - A) / (n * _norm1(A) * ULP)
    assert float(ratio.max()) < LIMIT, ratio
    ref_lu, ref_piv = torch.linalg.lu_factor(A[:1])  # the random matrix: the same pivots
    assert torch.equal(piv[:1], ref_piv)
    torch.testing.assert_close(LU[:1].to(F64), ref_lu, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "op,n",
    [
        ("cholesky", 40),
        ("cholesky", 64),
        ("solve", 64),
        ("solve", 128),
        ("inv", 96),
        ("solve_triangular", 96),
        ("lu_factor", 128),
    ],
)
def test_lanes_on_hard_families_at_large_n(op, n):
    # Batches of 18-20 take the kernels across SIMD lanes up to each op's bound: LAPACK's
    # ratios on every family there (the tests above, with batches of 4-6, take LAPACK).
    families = (SPD_FAMILIES if op == "cholesky" else FAMILIES) * 4
    A = _batch(spd if op == "cholesky" else general, families[: 20 if op == "cholesky" else 18], n)
    batch = A.shape[0]
    assert getattr(mlt, f"{op}_backend")(n, batch) == "cpu:kernel:linsys_lanes"
    norm = _norm1(A)
    if op == "cholesky":
        L = mlt.cholesky(A.float()).to(F64)
        ratio = _norm1(L @ L.mT - A) / (n * norm * ULP)
    elif op == "lu_factor":
        LU, piv = mlt.lu_factor(A.float())
        P, L, U = torch.lu_unpack(LU.to(F64), piv)
        ratio = _norm1(P @ L @ U - A) / (n * norm * ULP)
        ref_piv = torch.linalg.lu_factor(A[:1]).pivots  # random: LAPACK's pivots
        assert torch.equal(piv[:1], ref_piv)
    elif op == "inv":
        X = mlt.inv(A.float()).to(F64)
        ratio = _norm1(A @ X - torch.eye(n, dtype=F64)) / (n * norm * _norm1(X) * ULP)
    else:
        T = A.tril() if op == "solve_triangular" else A
        if op == "solve_triangular":  # a dominant diagonal of each matrix's magnitude
            T = T + 4 * torch.diag_embed(T.diagonal(dim1=-2, dim2=-1).sign()) * (
                _norm1(T).view(-1, 1, 1) / n
            )
        B = torch.randn(batch, n, 3, dtype=F64).float().to(F64)
        if op == "solve":
            X = mlt.solve(T.float(), B.float()).to(F64)
        else:
            X = mlt.solve_triangular(T.float(), B.float(), upper=False).to(F64)
        ratio = _norm1(T @ X - B) / (_norm1(T) * _norm1(X) * n * ULP)
    assert torch.isfinite(ratio).all() and float(ratio.max()) < LIMIT, ratio


# ---- failures: NaN for that matrix only, info set, torch's errors ----


def test_plain_forms_raise_from_any_batch_and_keep_no_stale_words():
    # The plain forms read the info words of CPU calls from a per-thread array (no tensor):
    # one matrix, a batch larger than the array so far, a failure then a success.
    spd_ok = torch.eye(3) * 2
    bad = torch.tensor([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    with pytest.raises(torch.linalg.LinAlgError, match="leading minor of order 2"):
        mlt.cholesky(bad)
    torch.testing.assert_close(mlt.cholesky(spd_ok), torch.eye(3) * 2**0.5)
    big = spd_ok.expand(1000, 3, 3).clone()
    big[777] = bad
    with pytest.raises(torch.linalg.LinAlgError, match=r"\(Batch element 777\).*order 2"):
        mlt.cholesky(big)
    big[777] = spd_ok
    assert torch.isfinite(mlt.cholesky(big)).all()
    singular = torch.zeros(70, 4, 4)
    singular[:] = torch.eye(4)
    singular[69, 2, 2] = 0
    with pytest.raises(torch.linalg.LinAlgError, match=r"\(Batch element 69\)"):
        mlt.inv(singular)
    with pytest.raises(torch.linalg.LinAlgError, match=r"\(Batch element 69\)"):
        mlt.lu_factor(singular)
    with pytest.raises(torch.linalg.LinAlgError, match=r"\(Batch element 69\)"):
        mlt.solve(singular, torch.ones(70, 4, 1))
    # A NaN is no error of solve (a NaN result, as torch), nor is a zero diagonal of
    # solve_triangular; the next call's words start clean.
    nan = torch.eye(4).expand(70, 4, 4).clone()
    nan[5, 0, 0] = float("nan")
    X = mlt.solve(nan, torch.ones(70, 4, 1))
    assert X[5].isnan().all() and torch.equal(X[6], torch.ones(4, 1))
    assert mlt.solve_triangular(singular, torch.ones(70, 4, 1), upper=False)[69].isnan().all()
    torch.testing.assert_close(
        mlt.inv(torch.eye(4).expand(70, 4, 4)), torch.eye(4).expand(70, 4, 4)
    )


def test_cholesky_indefinite_and_nan_in_a_batch():
    A = _batch(spd, ("random",) * 4, 5)
    A[1, 2, 2] = -1.0  # the leading minor of order 3 is not positive definite
    A[3, 4, 1] = float("nan")
    ref = torch.linalg.cholesky(A[0])
    L, info = mlt.cholesky_ex(A.float())
    assert info.tolist() == [0, 3, 0, NONFINITE]
    assert torch.isnan(L[1]).all() and torch.isnan(L[3]).all()
    assert torch.isfinite(L[0]).all() and torch.isfinite(L[2]).all()
    torch.testing.assert_close(L[0].to(F64), ref, rtol=1e-5, atol=1e-6)
    _, torch_info = torch.linalg.cholesky_ex(A[:3])
    assert info[:3].tolist() == torch_info.tolist()  # LAPACK's order of the minor, as torch
    with pytest.raises(torch.linalg.LinAlgError) as mine:
        mlt.cholesky(A[:3].float())
    with pytest.raises(torch.linalg.LinAlgError) as theirs:
        torch.linalg.cholesky(A[:3])
    assert str(mine.value) == str(theirs.value)
    with pytest.raises(torch.linalg.LinAlgError) as mine:
        mlt.cholesky(A[1].float(), upper=True)
    with pytest.raises(torch.linalg.LinAlgError) as theirs:
        torch.linalg.cholesky(A[1], upper=True)
    assert str(mine.value) == str(theirs.value)
    with pytest.raises(torch.linalg.LinAlgError, match=r"\(Batch element 1\).*NaN or Inf"):
        mlt.cholesky(A[2:].float())
    with pytest.raises(torch.linalg.LinAlgError, match="leading minor of order 3"):
        mlt.cholesky_ex(A.float(), check_errors=True)
    # NaN in the triangle not read is no error.
    B = A[0].clone()
    B[0, 3] = float("nan")
    torch.testing.assert_close(mlt.cholesky(B.float()).to(F64), ref, rtol=1e-5, atol=1e-6)


def test_solve_singular_and_nan_in_a_batch():
    A = _batch(general, ("random",) * 4, 6)
    A[1, :, 2] = 0.0  # exactly singular
    A[2, 0, 0] = float("inf")
    B = torch.randn(4, 6, 2, dtype=F64)
    B[3, 1, 1] = float("nan")
    X, info = mlt.solve_ex(A.float(), B.float())
    assert info[0] == 0 and 1 <= info[1] <= 6 and info[2] == NONFINITE and info[3] == NONFINITE
    assert torch.isnan(X[1:]).all() and torch.isfinite(X[0]).all()
    torch.testing.assert_close(X[0].to(F64), torch.linalg.solve(A[0], B[0]), rtol=1e-4, atol=1e-5)
    with pytest.raises(torch.linalg.LinAlgError) as mine:
        mlt.solve(A[:2].float(), B[:2].float())
    with pytest.raises(torch.linalg.LinAlgError) as theirs:
        torch.linalg.solve(A[:2], B[:2])
    assert str(mine.value) == str(theirs.value)
    with pytest.raises(torch.linalg.LinAlgError, match="^torch.linalg.solve: The solver failed"):
        mlt.solve(A[1].float(), B[1].float())
    with pytest.raises(torch.linalg.LinAlgError):
        mlt.solve_ex(A.float(), B.float(), check_errors=True)
    # A NaN input is no error (as in torch): a NaN result for that matrix.
    X = mlt.solve(A[2:].float(), B[2:].float())
    assert torch.isnan(X).all()


def test_inv_singular_and_nan_in_a_batch():
    A = _batch(general, ("random",) * 3, 5)
    A[1, :, 0] = 0.0  # U(1,1) = 0: info 1, the first zero pivot (LAPACK's documented info)
    A[2, 3, 3] = float("nan")
    X, info = mlt.inv_ex(A.float())
    assert info.tolist() == [0, 1, NONFINITE]
    assert torch.isnan(X[1:]).all() and torch.isfinite(X[0]).all()
    torch.testing.assert_close(X[0].to(F64), torch.linalg.inv(A[0]), rtol=1e-4, atol=1e-5)
    with pytest.raises(torch.linalg.LinAlgError) as mine:
        mlt.inv(A[:2].float())
    with pytest.raises(torch.linalg.LinAlgError) as theirs:
        torch.linalg.inv(A[:2])
    assert str(mine.value) == str(theirs.value)
    with pytest.raises(torch.linalg.LinAlgError, match="^linalg.inv: The diagonal element 1"):
        mlt.inv_ex(A[1].float(), check_errors=True)


def test_lu_factor_singular_and_nan_in_a_batch():
    A = _batch(general, ("random",) * 3, 5)
    A[1, :, 2] = 0.0  # U(3,3) = 0: the factorization is kept, info 3
    A[2, 1, 1] = float("nan")
    LU, piv, info = mlt.lu_factor_ex(A.float())
    ref = torch.linalg.lu_factor_ex(A[:2])
    assert info.tolist() == [0, 3, NONFINITE] and info[:2].tolist() == ref.info.tolist()
    assert torch.isfinite(LU[:2]).all() and torch.isnan(LU[2]).all()
    assert piv[2].tolist() == [1, 2, 3, 4, 5]
    P, L, U = torch.lu_unpack(LU[1].to(F64), piv[1])
    torch.testing.assert_close(P @ L @ U, A[1], rtol=1e-5, atol=1e-5)
    with pytest.raises(torch.linalg.LinAlgError) as mine:
        mlt.lu_factor(A[:2].float())
    with pytest.raises(RuntimeError) as theirs:
        torch.linalg.lu_factor(A[:2])
    assert str(mine.value) == str(theirs.value)
    with pytest.raises(torch.linalg.LinAlgError, match="U\\[3,3\\] is zero"):
        mlt.lu_factor_ex(A[1].float(), check_errors=True)
    mlt.lu_factor(A[2].float())  # NaN input: no error (as torch), a NaN LU
    with pytest.raises(NotImplementedError, match="pivot=False"):
        mlt.lu_factor(A[0], pivot=False)


def test_det_and_slogdet():
    A = _batch(general, ("random", "graded", "tiny", "random", "random"), 6)
    A[3, :, 4] = 0.0  # exactly singular: det 0, slogdet (0, -inf)
    A[4, 2, 2] = float("nan")
    got = mlt.det(A.float()).to(F64)
    ref = torch.linalg.det(A)
    sign, logabs = mlt.slogdet(A.float())
    rsign, rlogabs = torch.linalg.slogdet(A)
    assert torch.equal(sign[:4].to(F64), rsign[:4]) and got[3] == 0 and torch.isnan(got[4])
    assert logabs[3] == -float("inf") and torch.isnan(logabs[4])
    # log|det| to a few ulp of log-magnitude per entry of U (n of them), whatever the scale
    assert float((logabs[:3].to(F64) - rlogabs[:3]).abs().max()) < 6 * 64 * ULP
    torch.testing.assert_close(got[:1], ref[:1], rtol=1e-5, atol=0)
    assert mlt.det(torch.randn(2, 0, 0)).tolist() == [1.0, 1.0]
    assert mlt.det(torch.randn(0, 3, 3)).shape == (0,)


def test_det_and_slogdet_gradients():
    A = torch.randn(3, 5, 5, dtype=F64) + 2 * torch.eye(5, dtype=F64)
    _close(_grads(mlt.det, A), _grads(torch.linalg.det, A))
    _close(
        _grads(lambda X: mlt.slogdet(X).logabsdet, A),
        _grads(lambda X: torch.linalg.slogdet(X).logabsdet, A),
    )


def test_solve_triangular_zero_diagonal_and_nan():
    A = torch.randn(3, 5, 5, dtype=F64).triu() + 3 * torch.eye(5, dtype=F64)
    A[1, 2, 2] = 0.0
    A[2, 1, 4] = float("nan")
    A[0, 3, 1] = float("nan")  # below the diagonal: not read
    B = torch.randn(3, 5, 2, dtype=F64)
    X = mlt.solve_triangular(A.float(), B.float(), upper=True)
    assert torch.isnan(X[1:]).all()
    ref = torch.linalg.solve_triangular(A[0].triu(), B[0], upper=True)
    torch.testing.assert_close(X[0].to(F64), ref, rtol=1e-5, atol=1e-6)
    # unitriangular: the zero diagonal is not read
    X = mlt.solve_triangular(A[1].float(), B[1].float(), upper=True, unitriangular=True)
    ref = torch.linalg.solve_triangular(A[1], B[1], upper=True, unitriangular=True)
    torch.testing.assert_close(X.to(F64), ref, rtol=1e-4, atol=1e-5)


# ---- shapes, broadcasting, dtypes, argument errors ----


def test_broadcasting_and_vector_case():
    A = torch.randn(2, 1, 4, 4, dtype=F64) + 4 * torch.eye(4, dtype=F64)
    B = torch.randn(3, 4, 2, dtype=F64)
    X = mlt.solve(A, B)
    assert X.shape == (2, 3, 4, 2) and X.dtype == torch.float32
    torch.testing.assert_close(X.to(F64), torch.linalg.solve(A, B), rtol=1e-4, atol=1e-5)
    b = torch.randn(4, dtype=F64)
    x = mlt.solve(A[0, 0], b)
    assert x.shape == (4,)
    torch.testing.assert_close(x.to(F64), torch.linalg.solve(A[0, 0], b), rtol=1e-4, atol=1e-5)
    Ab = A.expand(2, 3, 4, 4)
    bb = torch.randn(2, 3, 4, dtype=F64)  # A's shape without its last dim: vectors
    assert mlt.solve(Ab, bb).shape == torch.linalg.solve(Ab, bb).shape == (2, 3, 4)
    Xr = mlt.solve(A, B.mT, left=False)
    torch.testing.assert_close(
        Xr.to(F64), torch.linalg.solve(A, B.mT, left=False), rtol=1e-4, atol=1e-5
    )
    T = A.triu()
    Xt = mlt.solve_triangular(T, B, upper=True)
    assert Xt.shape == (2, 3, 4, 2)
    torch.testing.assert_close(
        Xt.to(F64), torch.linalg.solve_triangular(T, B, upper=True), rtol=1e-4, atol=1e-5
    )
    # non-contiguous and negative views
    An = torch.randn(4, 4, 3, dtype=F64).permute(2, 0, 1) + 4 * torch.eye(4, dtype=F64)
    torch.testing.assert_close(mlt.inv(-An).to(F64), torch.linalg.inv(-An), rtol=1e-4, atol=1e-5)


def test_empty_shapes():
    assert mlt.cholesky(torch.randn(0, 3, 3)).shape == (0, 3, 3)
    assert mlt.inv(torch.randn(2, 0, 0)).shape == (2, 0, 0)
    X, info = mlt.solve_ex(torch.randn(2, 3, 3), torch.randn(2, 3, 0))
    assert X.shape == (2, 3, 0) and info.shape == (2,)
    assert mlt.solve_triangular(
        torch.randn(3, 3), torch.randn(0, 3), upper=True, left=False
    ).shape == (0, 3)


def test_argument_errors():
    with pytest.raises(ValueError, match="square"):
        mlt.cholesky(torch.randn(3, 4))
    with pytest.raises(ValueError, match=r"AX = B \(3x3 and 4x2\)"):
        mlt.solve(torch.randn(3, 3), torch.randn(4, 2))
    with pytest.raises(ValueError, match=r"XA = B \(3x3 and 3x1\)"):
        mlt.solve(torch.randn(3, 3), torch.randn(3), left=False)
    with pytest.raises(ValueError, match="do not broadcast"):
        mlt.solve(torch.randn(2, 3, 3), torch.randn(4, 3, 1))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        mlt.solve_triangular(torch.randn(3, 3), torch.randn(3), upper=True)
    with pytest.raises(TypeError, match="complex"):
        mlt.inv(torch.randn(3, 3, dtype=torch.complex64))
    with pytest.raises(TypeError, match="upper must be a bool"):
        mlt.cholesky(torch.eye(3), upper="yes")


# ---- gradients against float64 torch autograd ----


def _grads(fn, *inputs):
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    out = fn(*leaves)
    weights = torch.randn(out.shape, dtype=F64, generator=torch.Generator().manual_seed(5))
    (out.to(F64) * weights).sum().backward()
    return [leaf.grad for leaf in leaves]


def _close(got, ref, tol=2e-4):
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype
        err = float((g - r).norm() / r.norm())
        assert err < tol, err


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_gradient(upper):
    A = _batch(spd, ("random",) * 3, 5)
    _close(
        _grads(lambda X: mlt.cholesky(X, upper=upper), A),
        _grads(lambda X: torch.linalg.cholesky(X, upper=upper), A),
    )
    _close(
        _grads(lambda X: mlt.cholesky_ex(X, upper=upper).L, A),
        _grads(lambda X: torch.linalg.cholesky_ex(X, upper=upper).L, A),
    )


@pytest.mark.parametrize("left", [True, False])
def test_solve_gradient_with_broadcasting(left):
    A = torch.randn(3, 5, 5, dtype=F64) + 5 * torch.eye(5, dtype=F64)
    B = torch.randn(2, 1, 5, 4, dtype=F64)
    B = B if left else B.mT
    _close(
        _grads(lambda X, Y: mlt.solve(X, Y, left=left), A, B),
        _grads(lambda X, Y: torch.linalg.solve(X, Y, left=left), A, B),
    )
    b = torch.randn(5, dtype=F64)
    _close(
        _grads(lambda X, y: mlt.solve_ex(X, y).result, A[0], b),
        _grads(lambda X, y: torch.linalg.solve(X, y), A[0], b),
    )


def test_inv_gradient():
    A = torch.randn(2, 6, 6, dtype=F64) + 6 * torch.eye(6, dtype=F64)
    _close(_grads(mlt.inv, A), _grads(torch.linalg.inv, A))
    _close(_grads(lambda X: mlt.inv_ex(X).inverse, A), _grads(torch.linalg.inv, A))


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular_gradient(upper, left, unit):
    A = torch.randn(2, 5, 5, dtype=F64) + 5 * torch.eye(5, dtype=F64)
    B = torch.randn(2, 5, 3, dtype=F64)
    B = B if left else B.mT
    kw = {"upper": upper, "left": left, "unitriangular": unit}
    _close(
        _grads(lambda X, Y: mlt.solve_triangular(X, Y, **kw), A, B),
        _grads(lambda X, Y: torch.linalg.solve_triangular(X, Y, **kw), A, B),
    )


def test_lu_factor_gradient():
    A = torch.randn(3, 5, 5, dtype=F64)
    _close(
        _grads(lambda X: mlt.lu_factor(X).LU, A),
        _grads(lambda X: torch.linalg.lu_factor(X).LU, A),
    )
    _close(
        _grads(lambda X: mlt.lu_factor_ex(X).LU, A),
        _grads(lambda X: torch.linalg.lu_factor_ex(X).LU, A),
    )
    for shape in ((5, 3), (3, 5)):  # torch.linalg.lu's formula for non-square A
        W = torch.randn(shape, dtype=F64)
        _close(
            _grads(lambda X: mlt.lu_factor(X).LU, W),
            _grads(lambda X: torch.linalg.lu_factor(X).LU, W),
        )


def test_double_backward_runs_through_torch_ops():
    A = (torch.randn(4, 4, dtype=F64) + 4 * torch.eye(4, dtype=F64)).requires_grad_(True)
    (g,) = torch.autograd.grad(mlt.inv(A).sum(), A, create_graph=True)
    (gg,) = torch.autograd.grad(g.to(F64).sum(), A)
    Ar = A.detach().clone().requires_grad_(True)
    (gr,) = torch.autograd.grad(torch.linalg.inv(Ar).sum(), Ar, create_graph=True)
    (ggr,) = torch.autograd.grad(gr.sum(), Ar)
    assert float((gg - ggr).norm() / ggr.norm()) < 1e-3


# ---- custom ops, compile, vmap, trace, transformations ----


def _spd32(*shape):
    b = torch.randn(*shape)
    return b @ b.mT + shape[-1] * torch.eye(shape[-1])


OPCHECK = [
    ("cholesky", lambda: (_spd32(3, 4, 4).requires_grad_(), False)),
    ("cholesky", lambda: (_spd32(4, 4), True)),
    (
        "solve",
        lambda: (
            (torch.randn(2, 4, 4) + 4 * torch.eye(4)).requires_grad_(),
            torch.randn(3, 1, 4, 2, requires_grad=True),
            True,
        ),
    ),
    ("solve", lambda: (torch.randn(4, 4) + 4 * torch.eye(4), torch.randn(2, 4), False)),
    ("inv", lambda: ((torch.randn(3, 4, 4) + 4 * torch.eye(4)).requires_grad_(),)),
    (
        "solve_triangular",
        lambda: (
            (torch.randn(2, 4, 4) + 4 * torch.eye(4)).requires_grad_(),
            torch.randn(2, 4, 3, requires_grad=True),
            True,
            True,
            False,
        ),
    ),
    (
        "solve_triangular",
        lambda: (torch.randn(4, 4) + 4 * torch.eye(4), torch.randn(3, 4), False, False, True),
    ),
    ("lu_factor", lambda: (torch.randn(3, 4, 4, requires_grad=True),)),
    ("lu_factor", lambda: (torch.randn(2, 6, 3),)),
]


@pytest.mark.parametrize("i", range(len(OPCHECK)), ids=[c[0] for c in OPCHECK])
def test_opcheck(i):
    name, make = OPCHECK[i]
    torch.manual_seed(i)
    torch.library.opcheck(getattr(torch.ops.metal_linalg, name).default, make())


def test_compile_fullgraph_matches_eager():
    torch.manual_seed(0)
    A, S = torch.randn(3, 5, 5) + 5 * torch.eye(5), _spd32(3, 5, 5)
    B = torch.randn(3, 5, 2)
    cases = [
        (lambda x, b: mlt.cholesky_ex(x, upper=True).L, S, B),
        (lambda x, b: mlt.solve_ex(x, b).result, A, B),
        (lambda x, b: mlt.solve_ex(x, b.mT, left=False).result, A, B),
        (lambda x, b: mlt.inv_ex(x).inverse, A, B),
        (lambda x, b: mlt.solve_triangular(x, b, upper=False, unitriangular=True), A, B),
        (lambda x, b: tuple(mlt.lu_factor_ex(x)), A, B),
    ]
    for fn, x, b in cases:
        torch._dynamo.reset()
        got = torch.compile(fn, fullgraph=True, backend="eager")(x, b)
        torch.testing.assert_close(got, fn(x, b))


def test_vmap_and_jit_trace():
    torch.manual_seed(1)
    A = torch.randn(4, 3, 3) + 3 * torch.eye(3)
    B = torch.randn(3, 2)
    got = torch.vmap(lambda a: mlt.solve(a, B))(A)
    torch.testing.assert_close(got, mlt.solve(A, B))
    got = torch.vmap(mlt.inv)(A)
    torch.testing.assert_close(got, mlt.inv(A))
    Bs = torch.randn(3, 2, 5)
    got = torch.vmap(lambda b: mlt.solve_triangular(A, b, upper=True), in_dims=2)(Bs)
    ref = mlt.solve_triangular(A, Bs.permute(2, 0, 1).unsqueeze(1), upper=True)
    torch.testing.assert_close(got, ref)
    traced = torch.jit.trace(lambda a: mlt.cholesky(a @ a.mT + torch.eye(3)), (A,))
    torch.testing.assert_close(traced(A), mlt.cholesky(A @ A.mT + torch.eye(3)))
    g = torch.func.grad(lambda a: mlt.inv(a).sum())(A[0])
    torch.testing.assert_close(g, torch.func.grad(lambda a: torch.linalg.inv(a).sum())(A[0]))
    A64, B64 = A.double(), B.double()
    jac = torch.func.jacrev(lambda a, b: mlt.solve(a, b), argnums=(0, 1))(A64[0], B64)
    ref = torch.func.jacrev(lambda a, b: torch.linalg.solve(a, b), argnums=(0, 1))(A64[0], B64)
    for got, want in zip(jac, ref):
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5)
    per = torch.vmap(torch.func.grad(lambda a: mlt.cholesky(a @ a.mT + torch.eye(3)).sum()))(A)
    want = torch.vmap(
        torch.func.grad(lambda a: torch.linalg.cholesky(a @ a.mT + torch.eye(3)).sum())
    )(A)
    torch.testing.assert_close(per, want, rtol=1e-4, atol=1e-5)
    # A failed matrix under vmap: NaN for it (no error can be raised there), info in the _ex form.
    Z = A.clone()
    Z[2] = 0
    X, info = torch.vmap(mlt.inv_ex)(Z)
    assert torch.isnan(X[2]).all() and info[2] == 1 and torch.isfinite(X[[0, 1, 3]]).all()


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: mlt.cholesky(a @ a.mT + torch.eye(3)),
        lambda a: mlt.inv(a),
        lambda a: mlt.solve(a, torch.ones(3, 1)),
        lambda a: mlt.solve_triangular(a, torch.ones(3, 1), upper=True),
        lambda a: mlt.lu_factor(a),
    ],
    ids=["cholesky", "inv", "solve", "solve_triangular", "lu_factor"],
)
def test_forward_mode_ad_is_a_clear_error(fn):
    A = torch.randn(3, 3) + 3 * torch.eye(3)
    with fwAD.dual_level():
        dual = fwAD.make_dual(A, torch.randn(3, 3))
        with pytest.raises(RuntimeError, match="forward"):
            fn(dual)


def test_queries_and_table():
    assert mlt.queries.OP_ID["cholesky"] > mlt.queries.OP_ID["svdvals"]
    linsys = ["cholesky", "solve", "inv", "solve_triangular", "lu_factor"]
    assert mlt.queries.LINSYS_OPS == linsys  # the table's order
    assert "cholesky" not in mlt.queries.OPS  # the decompositions
    assert mlt.queries.POLICY_OPS == [*mlt.queries.OPS, *linsys]  # all calibrated
    # The kernels across SIMD lanes up to each op's bound (cholesky 64, solve_triangular 96,
    # the others 128) from the batch at which a lane group pays (any up to n = 16, then 4, 8
    # and 16 matrices up to 32, 64 and beyond), LAPACK otherwise; the policy moves the bound.
    lanes, lapack = "cpu:kernel:linsys_lanes", "cpu:lapack"
    assert mlt.solve_backend(8, 4) == lanes == mlt.cholesky_backend(16) == mlt.inv_backend(32, 4)
    assert mlt.cholesky_backend(32) == lapack == mlt.inv_backend(32, 3) == mlt.solve_backend(64, 7)
    assert mlt.solve_backend(64, 8) == lanes == mlt.lu_factor_backend(128, 16)
    assert mlt.lu_factor_backend(128, 15) == lapack == mlt.cholesky_backend(65, 1000)
    assert mlt.solve_triangular_backend(96, 16) == lanes == mlt.cholesky_backend(64, 8)
    assert mlt.solve_triangular_backend(97, 1000) == lapack == mlt.inv_backend(129, 1000)
    assert mlt.cholesky_backend(300) == lapack == mlt.lu_factor_backend(129, 33)
    # The ops with a right-hand side answer for nrhs columns of B (the host route takes none).
    assert mlt.queries.RHS_OPS == ["solve", "solve_triangular"]
    assert (
        mlt.solve_backend(64, 8, nrhs=16) == lanes == mlt.solve_triangular_backend(96, 16, nrhs=3)
    )
    assert mlt.solve_backend(64, 7, nrhs=16) == lapack
    assert mlt.queries._q.backend("solve", 64, 64, 8, nrhs=16) == lanes
    with pytest.raises(ValueError, match="nrhs must be >= 1"):
        mlt.solve_backend(8, 4, nrhs=0)
    with pytest.raises(ValueError, match="no right-hand side"):
        mlt.queries._q.backend("inv", 8, 8, 4, nrhs=2)
    with pytest.raises(TypeError):
        mlt.cholesky_backend(8, 4, nrhs=2)
    try:
        mlt.set_solve_policy(cpu_kernel_max_n=8)
        assert mlt.solve_policy_source() == "user"
        assert mlt.solve_backend(8, 1000) == lanes
        assert mlt.solve_backend(9, 1000) == lapack
        mlt.set_solve_policy(cpu_kernel_max_n=0)
        assert mlt.solve_backend(2, 1000) == lapack
        assert mlt.inv_backend(2, 1000) == lanes  # one op's policy only
    finally:
        mlt.reset_solve_policy()
    assert mlt.solve_backend(9, 1000) == lanes
    assert set(mlt.calibration_status()) == set(mlt.queries.POLICY_OPS)
    for op in linsys:
        assert {"cpu_kernel_max_n", "gpu_simd_max_n"} <= set(getattr(mlt, f"{op}_policy")())
        assert f"set_{op}_policy" in mlt.__all__ and f"{op}_policy_source" in mlt.__all__


def test_gpu_lines_not_yet_timed_are_off_by_default():
    # The built-in policy keeps the GPU group kernels for the linear systems whose SIMD lines
    # have not been timed on a GPU (gpu_simd_max_n 0), cholesky_simd on (measured), and
    # cholesky's register-column lines behind an empty gpu_alt window.
    q = mlt.queries
    for op in ("solve", "inv", "lu_factor", "solve_triangular"):
        assert q.policy_source(op) == "default:untuned-device"
        assert q.policy(op)["gpu_simd_max_n"] == 0, op
    assert q.policy("cholesky")["gpu_simd_max_n"] >= 32
    assert q.policy("cholesky")["gpu_alt_max_n"] == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")
def test_cuda_tensors_stay_on_the_device():
    # The GPU kernels where the core has them (tests/python/cuda/test_cuda_linsys.py checks
    # the routes), else a host copy: results on A's device either way, as the CPU's.
    A = (torch.randn(3, 4, 4) + 4 * torch.eye(4)).cuda()
    B = torch.randn(3, 4, 2).cuda()
    X, info = mlt.solve_ex(A, B)
    assert X.is_cuda and info.is_cuda and (info == 0).all()
    torch.testing.assert_close(X.cpu(), mlt.solve(A.cpu(), B.cpu()), rtol=1e-5, atol=1e-5)
    L = mlt.cholesky(A @ A.mT)
    assert L.is_cuda
    torch.testing.assert_close(L.cpu(), mlt.cholesky((A @ A.mT).cpu()), rtol=1e-5, atol=1e-5)
    assert mlt.inv(A).is_cuda and mlt.solve_triangular(A, B, upper=True).is_cuda
