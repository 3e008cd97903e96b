"""Gradients (vjp) and forward derivatives (jvp) of the MLX primitives against float64 references.

The references are central differences in float64 through NumPy's decompositions of the same
(float32-rounded) matrices. Losses are invariant to the sign of each eigen/singular vector (and
Q column / R row), so both sides compute the same function. Spectra are well separated, so the
derivatives are well conditioned and float32 results agree to far better than 1e-3.
"""

from __future__ import annotations

import io

import metal_linalg as ml
import mlx.core as mx
import numpy as np
import pytest

CPU = mx.cpu
RTOL = 1e-3
H = 1e-6


def rel_err(got, want) -> float:
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def orth(n, rng):
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return q


def separated_symmetric(batch, n, rng):
    out = []
    for _ in range(int(np.prod(batch))):
        w = np.cumsum(rng.uniform(0.6, 1.4, n)) - n / 2
        q = orth(n, rng)
        out.append(q @ np.diag(w) @ q.T)
    return np.asarray(out, dtype=np.float32).reshape(*batch, n, n)


def separated_general(batch, m, n, rng):
    k = min(m, n)
    out = []
    for _ in range(int(np.prod(batch))):
        s = np.sort(np.cumsum(rng.uniform(0.6, 1.4, k)) + 0.5)[::-1]
        u = orth(m, rng)[:, :k]
        v = orth(n, rng)[:, :k]
        out.append(u @ np.diag(s) @ v.T)
    return np.asarray(out, dtype=np.float32).reshape(*batch, m, n)


def fd_grad(loss_np, a: np.ndarray) -> np.ndarray:
    """Central-difference gradient of loss_np at a (float64)."""
    a = a.astype(np.float64)
    g = np.zeros_like(a)
    flat, gflat = a.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        keep = flat[i]
        flat[i] = keep + H
        up = loss_np(a)
        flat[i] = keep - H
        down = loss_np(a)
        flat[i] = keep
        gflat[i] = (up - down) / (2 * H)
    return g


def fd_dir(loss_np, a: np.ndarray, t: np.ndarray) -> float:
    a = a.astype(np.float64)
    t = t.astype(np.float64)
    return (loss_np(a + H * t) - loss_np(a - H * t)) / (2 * H)


def sym(x):
    return (x + np.swapaxes(x, -1, -2)) / 2


def msym(x):
    return (x + mx.swapaxes(x, -1, -2)) / 2


# Losses: (MLX version, NumPy float64 version) with fixed random weights for every output.
def eigh_losses(shape, rng, uplo="L"):
    n = shape[-1]
    cw = rng.standard_normal(shape[:-1])
    cv = rng.standard_normal(shape)

    def f_mx(b):
        w, v = ml.eigh(msym(b), UPLO=uplo)
        return (w * mx.array(cw, mx.float32)).sum() + (v * v * mx.array(cv, mx.float32)).sum()

    def f_np(b):
        w, v = np.linalg.eigh(sym(b))
        return float((w * cw).sum() + (v * v * cv).sum())

    assert n > 0
    return f_mx, f_np


def eigvalsh_losses(shape, rng, uplo="L"):
    cw = rng.standard_normal(shape[:-1])

    def f_mx(b):
        return (ml.eigvalsh(msym(b), UPLO=uplo) * mx.array(cw, mx.float32)).sum()

    def f_np(b):
        return float((np.linalg.eigvalsh(sym(b)) * cw).sum())

    return f_mx, f_np


def svd_losses(shape, rng):
    m, n = shape[-2:]
    k = min(m, n)
    batch = shape[:-2]
    cs = rng.standard_normal((*batch, k))
    cu = rng.standard_normal((*batch, m, k))
    cvt = rng.standard_normal((*batch, k, n))
    cj = rng.standard_normal((*batch, m, n))
    d = rng.standard_normal((*batch, k))

    def f_mx(b):
        u, s, vt = ml.svd(b)
        joint = (u * mx.array(d, mx.float32)[..., None, :]) @ vt
        return (
            (s * mx.array(cs, mx.float32)).sum()
            + (u * u * mx.array(cu, mx.float32)).sum()
            + (vt * vt * mx.array(cvt, mx.float32)).sum()
            + (joint * mx.array(cj, mx.float32)).sum()
        )

    def f_np(b):
        u, s, vt = np.linalg.svd(b, full_matrices=False)
        joint = (u * d[..., None, :]) @ vt
        return float(
            (s * cs).sum() + (u * u * cu).sum() + (vt * vt * cvt).sum() + (joint * cj).sum()
        )

    return f_mx, f_np


def svdvals_losses(shape, rng):
    k = min(shape[-2:])
    cs = rng.standard_normal((*shape[:-2], k))

    def f_mx(b):
        return (ml.svdvals(b) * mx.array(cs, mx.float32)).sum()

    def f_np(b):
        return float((np.linalg.svd(b, compute_uv=False) * cs).sum())

    return f_mx, f_np


def qr_losses(shape, rng, mode="reduced"):
    m, n = shape[-2:]
    k = m if mode == "complete" else min(m, n)
    batch = shape[:-2]
    cq = rng.standard_normal((*batch, m, k))
    cr = rng.standard_normal((*batch, k, n))
    cj = rng.standard_normal((*batch, m, n))
    d = rng.standard_normal((*batch, k))

    def f_mx(b):
        q, r = ml.qr(b, mode=mode)
        joint = (q * mx.array(d, mx.float32)[..., None, :]) @ r
        return (
            (q * q * mx.array(cq, mx.float32)).sum()
            + (r * r * mx.array(cr, mx.float32)).sum()
            + (joint * mx.array(cj, mx.float32)).sum()
        )

    def f_np(b):
        q, r = np.linalg.qr(b, mode=mode)
        joint = (q * d[..., None, :]) @ r
        return float((q * q * cq).sum() + (r * r * cr).sum() + (joint * cj).sum())

    return f_mx, f_np


CASES = [
    ("eigh", (4, 4), eigh_losses, separated_symmetric),
    ("eigh", (2, 5, 5), eigh_losses, separated_symmetric),
    ("eigvalsh", (2, 5, 5), eigvalsh_losses, separated_symmetric),
    ("svd", (5, 5), svd_losses, separated_general),
    ("svd", (2, 6, 4), svd_losses, separated_general),
    ("svd", (2, 4, 6), svd_losses, separated_general),
    ("svdvals", (2, 6, 4), svdvals_losses, separated_general),
    ("svdvals", (3, 5), svdvals_losses, separated_general),
    ("qr", (5, 5), qr_losses, separated_general),
    ("qr", (2, 6, 4), qr_losses, separated_general),
    ("qr", (2, 4, 6), qr_losses, separated_general),
    ("qr", (3, 5), qr_losses, separated_general),
]


def make(shape, gen, rng):
    if gen is separated_symmetric:
        return gen(shape[:-2], shape[-1], rng)
    return gen(shape[:-2], shape[-2], shape[-1], rng)


@pytest.mark.parametrize("op,shape,losses,gen", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_vjp_matches_float64_central_differences(op, shape, losses, gen):
    rng = np.random.default_rng(1)
    a = make(shape, gen, rng)
    f_mx, f_np = losses(shape, rng)
    g = mx.grad(f_mx)(mx.array(a))
    want = fd_grad(f_np, a)
    assert g.shape == a.shape and g.dtype == mx.float32
    assert rel_err(np.array(g), want) < RTOL


@pytest.mark.parametrize("op,shape,losses,gen", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_jvp_matches_float64_central_differences(op, shape, losses, gen):
    rng = np.random.default_rng(2)
    a = make(shape, gen, rng)
    t = rng.standard_normal(a.shape).astype(np.float32)
    f_mx, f_np = losses(shape, rng)
    _, (dl,) = mx.jvp(lambda x: f_mx(x), [mx.array(a)], [mx.array(t)])
    want = fd_dir(f_np, a, t)
    assert abs(dl.item() - want) <= RTOL * max(1.0, abs(want))


def test_jvp_of_values_directly():
    """Tangents of the gauge-free outputs (eigenvalues, singular values) element by element."""
    rng = np.random.default_rng(3)
    a = separated_symmetric((3,), 5, rng)
    t = sym(rng.standard_normal(a.shape)).astype(np.float32)
    _, (dw,) = mx.jvp(lambda x: ml.eigvalsh(x), [mx.array(a)], [mx.array(t)])
    want = (
        np.linalg.eigvalsh(a + H * t.astype(np.float64))
        - np.linalg.eigvalsh(a - H * t.astype(np.float64))
    ) / (2 * H)
    assert rel_err(np.array(dw), want) < RTOL
    b = separated_general((2,), 6, 4, rng)
    tb = rng.standard_normal(b.shape).astype(np.float32)
    _, (ds,) = mx.jvp(lambda x: ml.svdvals(x), [mx.array(b)], [mx.array(tb)])
    b64, tb64 = b.astype(np.float64), tb.astype(np.float64)
    want = (
        np.linalg.svd(b64 + H * tb64, compute_uv=False)
        - np.linalg.svd(b64 - H * tb64, compute_uv=False)
    ) / (2 * H)
    assert rel_err(np.array(ds), want) < RTOL


def test_eigh_grad_upper_matches_lower():
    rng = np.random.default_rng(4)
    a = mx.array(separated_symmetric((2,), 4, rng))
    f_l, _ = eigh_losses((2, 4, 4), np.random.default_rng(5), "L")
    f_u, _ = eigh_losses((2, 4, 4), np.random.default_rng(5), "U")
    assert rel_err(np.array(mx.grad(f_u)(a)), np.array(mx.grad(f_l)(a))) < 1e-5


def test_svd_grad_of_values_only_closed_form():
    """d(sum S)/dA = U Vt (thin SVD), also across repeated singular values (identity)."""
    rng = np.random.default_rng(6)
    a = separated_general((), 5, 3, rng)
    g = mx.grad(lambda x: ml.svd(x)[1].sum())(mx.array(a))
    u, _, vt = np.linalg.svd(a.astype(np.float64), full_matrices=False)
    assert rel_err(np.array(g), u @ vt) < 1e-4
    eye = mx.eye(4)
    g = mx.grad(lambda x: ml.svd(x)[1].sum())(eye)
    assert np.allclose(np.array(g), np.eye(4), atol=1e-5)
    g = mx.grad(lambda x: ml.eigh(x)[0].sum())(eye)
    assert np.allclose(np.array(g), np.eye(4), atol=1e-5)


def test_value_and_grad_and_second_use_of_outputs():
    rng = np.random.default_rng(7)
    a = mx.array(separated_symmetric((), 4, rng))
    val, g = mx.value_and_grad(lambda x: (ml.eigvalsh(msym(x)) ** 2).sum())(a)
    # sum(w^2) = ||A||_F^2 for symmetric A: gradient 2A.
    assert abs(val.item() - float((np.array(a, dtype=np.float64) ** 2).sum())) < 1e-3
    assert rel_err(np.array(g), 2 * np.array(a)) < 1e-5


def test_unsupported_gradients_raise_clearly():
    # A tall complete Q's last M - N columns are not unique: no derivative (as torch).
    a = mx.array(np.random.default_rng(8).standard_normal((5, 3)).astype(np.float32))
    with pytest.raises(ValueError, match="mode='complete' and M > N"):
        mx.grad(lambda x: ml.qr(x, mode="complete")[1].sum())(a)
    with pytest.raises(ValueError, match="mode='complete' and M > N"):
        mx.jvp(lambda x: ml.qr(x, mode="complete")[0], [a], [a])


def test_grad_through_compile_and_vmap():
    rng = np.random.default_rng(9)
    a = separated_symmetric((3,), 4, rng)
    f_mx, f_np = eigvalsh_losses((3, 4, 4), rng)
    g_c = mx.compile(mx.grad(f_mx))(mx.array(a))
    assert rel_err(np.array(g_c), fd_grad(f_np, a)) < RTOL
    # per-matrix gradients through vmap: d(sum w)/dA = I for symmetric input
    g_v = mx.vmap(mx.grad(lambda x: ml.eigvalsh(x).sum()))(mx.array(a))
    assert np.allclose(np.array(g_v), np.broadcast_to(np.eye(4), a.shape), atol=1e-5)


def test_qr_complete_square_and_svd_full_square_grads():
    rng = np.random.default_rng(10)
    a = separated_general((2,), 4, 4, rng)
    f_mx, f_np = qr_losses((2, 4, 4), rng, mode="complete")
    g = mx.grad(f_mx)(mx.array(a))
    assert rel_err(np.array(g), fd_grad(f_np, a)) < RTOL
    c = mx.array(rng.standard_normal((2, 4, 4)).astype(np.float32))

    def loss(full):
        return lambda x: (ml.svd(x, full_matrices=full)[0] ** 2 * c).sum() + ml.svd(x)[1].sum()

    g_full, g_thin = mx.grad(loss(True))(mx.array(a)), mx.grad(loss(False))(mx.array(a))
    assert rel_err(np.array(g_full), np.array(g_thin)) < 1e-5
    assert np.linalg.norm(np.array(g_thin)) > 0.1


def _orth64(n, seed):
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    return q


def _with_values(values, m, n, seed):
    k = len(values)
    return _orth64(m, seed)[:, :k] @ np.diag(values) @ _orth64(n, seed + 1)[:, :k].T


# Matrices with repeated or zero eigen/singular values, where the gradient of the values alone
# is defined: d(sum w)/dA = I, d(sum w^2)/dA = 2A (symmetric), d(sum s^2)/dA = 2A, and
# d(sum s)/dA = U V^T when no singular value is zero.
REPEATED_SYMMETRIC = {
    "identity": np.eye(3),
    "zero": np.zeros((4, 4)),
    "block": _orth64(5, 12) @ np.diag([1.0, 2.0, 2.0, 2.0, 5.0]) @ _orth64(5, 12).T,
}
REPEATED_GENERAL = {
    "2 identity": (2 * np.eye(3), True),
    "zero": (np.zeros((3, 3)), False),
    "5x3 zero column": (np.hstack([_with_values([3.0, 1.0], 5, 2, 13), np.zeros((5, 1))]), False),
    "3x5 zero row": (np.vstack([_with_values([3.0, 1.0], 2, 5, 14), np.zeros((1, 5))]), False),
    "6x4 block": (_with_values([3.0, 3.0, 3.0, 1.0], 6, 4, 15), True),
}


def _close_abs(got, want, tol=1e-4):
    got = np.asarray(got, dtype=np.float64)
    assert np.isfinite(got).all(), got
    assert np.linalg.norm(got - want) <= tol * max(1.0, np.linalg.norm(want))


@pytest.mark.parametrize("case", REPEATED_SYMMETRIC, ids=list(REPEATED_SYMMETRIC))
@pytest.mark.parametrize(
    "values",
    [
        lambda x: ml.eigvalsh(x),
        lambda x: ml.eigh(x)[0],
        lambda x: ml.eigh(x, UPLO="U")[0],
        lambda x: ml.eigvalsh_ex(x)[0],
        lambda x: ml.eigh_ex(x)[0],
    ],
    ids=["eigvalsh", "eigh[0]", "eigh[0] U", "eigvalsh_ex", "eigh_ex[0]"],
)
def test_eigenvalue_grad_at_repeated_values(case, values):
    a64 = REPEATED_SYMMETRIC[case]
    a = mx.array(a64.astype(np.float32))
    _close_abs(mx.grad(lambda x: values(x).sum())(a), np.eye(len(a64)))
    _close_abs(mx.grad(lambda x: (values(x) ** 2).sum())(a), 2 * a64)


@pytest.mark.parametrize("case", REPEATED_GENERAL, ids=list(REPEATED_GENERAL))
@pytest.mark.parametrize(
    "values",
    [
        lambda x: ml.svdvals(x),
        lambda x: ml.svd(x)[1],
        lambda x: ml.svdvals_ex(x)[0],
        lambda x: ml.svd_ex(x)[1],
    ],
    ids=["svdvals", "svd[1]", "svdvals_ex", "svd_ex[1]"],
)
def test_singular_value_grad_at_repeated_and_zero_values(case, values):
    a64, unique_sum = REPEATED_GENERAL[case]
    a = mx.array(a64.astype(np.float32))
    _close_abs(mx.grad(lambda x: (values(x) ** 2).sum())(a), 2 * a64)
    if unique_sum:
        u, _, vt = np.linalg.svd(a64, full_matrices=False)
        _close_abs(mx.grad(lambda x: values(x).sum())(a), u @ vt)


def r_losses(shape, rng):
    """A loss of R alone, invariant to the sign of each row of R."""
    k = min(shape[-2:])
    cr = rng.standard_normal((*shape[:-2], k, shape[-1]))

    def f_mx(b):
        r = ml.qr(b, mode="r")
        return (r * r * mx.array(cr, mx.float32)).sum()

    def f_np(b):
        return float((np.linalg.qr(b, mode="r") ** 2 * cr).sum())

    return f_mx, f_np


@pytest.mark.parametrize("shape", [(5, 5), (2, 6, 4), (7, 3), (2, 3, 5)])
def test_qr_mode_r_gradient_and_jvp(shape):
    # mode="r" computes no Q; its derivatives come from a reduced factorization of the input.
    rng = np.random.default_rng(12)
    a = separated_general(shape[:-2], *shape[-2:], rng)
    f_mx, f_np = r_losses(shape, rng)
    g = mx.grad(f_mx)(mx.array(a))
    assert rel_err(np.array(g), fd_grad(f_np, a)) < RTOL
    t = rng.standard_normal(a.shape)
    _, (dl,) = mx.jvp(f_mx, [mx.array(a)], [mx.array(t.astype(np.float32))])
    want = (f_np(a + H * t) - f_np(a - H * t)) / (2 * H)
    assert abs(dl.item() - want) <= RTOL * max(1.0, abs(want))
    # R's tangent is the reduced mode's.
    _, (dr,) = mx.jvp(lambda x: ml.qr(x, mode="r"), [mx.array(a)], [mx.array(t, mx.float32)])
    _, (dr_reduced,) = mx.jvp(lambda x: ml.qr(x)[1], [mx.array(a)], [mx.array(t, mx.float32)])
    np.testing.assert_allclose(np.array(dr), np.array(dr_reduced), rtol=1e-5, atol=1e-5)


def test_qr_gradient_solves_through_the_packages_own_triangular_solve():
    # The R^-1 of qr's vjp and jvp is this package's solve_triangular node on the call's stream
    # (MLX's own runs on the CPU only, via an Inverse node).
    a = mx.array(separated_general((2,), 6, 4, np.random.default_rng(13)))
    gq = mx.vjp(lambda x: ml.qr(x)[0], [a], [mx.ones((2, 6, 4))])[1][0]
    dr = mx.jvp(lambda x: ml.qr(x, mode="r"), [a], [mx.ones((2, 6, 4))])[1][0]
    for out in (gq, dr):
        dot = io.StringIO()
        mx.export_to_dot(dot, out)
        nodes = [
            line.split('label ="')[1].split('"')[0]
            for line in dot.getvalue().splitlines()
            if 'label ="' in line
        ]
        assert "MetalLinalgSolveTriangular" in nodes and "Inverse" not in nodes, nodes
