"""metal_linalg.qr(mode="complete") of non-square matrices: Q [..., M, M], R [..., M, N] with
LAPACK's ratios on the shared hard families, R's rows below N exactly zero, the reduced factors
in the first columns, a NaN matrix in a batch, empty matrices, the transforms (vmap, compile)
and the derivative a tall complete QR does not have (mx.grad and mx.jvp raise)."""

from __future__ import annotations

import metal_linalg as ml
import mlx.core as mx
import numpy as np
import pytest
from _mlx_helpers import FAMILIES, THRESH, general, np32, qr_ratios


def _batch(m, n, seed):
    rng = np.random.default_rng(seed)
    return np.stack([general(f, m, n, rng) for f in FAMILIES]).astype(np.float32)


@pytest.mark.parametrize("shape", [(9, 4), (33, 7), (6, 1), (60, 50), (4, 9)])
def test_complete_factors_on_every_family(shape):
    m, n = shape
    a = _batch(m, n, seed=m * n)
    q, r = ml.qr(mx.array(a), mode="complete")
    assert q.shape == (len(FAMILIES), m, m) and r.shape == (len(FAMILIES), m, n)
    q, r = np32(q), np32(r)
    k = min(m, n)
    assert np.all(np.tril(r, -1) == 0) and np.all(r[:, k:, :] == 0)
    for i, f in enumerate(FAMILIES):
        ratios = qr_ratios(a[i], q[i], r[i])
        assert max(ratios.values()) < THRESH["qr"], (f, ratios)
    # The first k columns of Q and R's first k rows are the reduced factorization's.
    q_red, r_red = (np32(x) for x in ml.qr(mx.array(a)))
    assert np.array_equal(r[:, :k, :], r_red)
    assert np.allclose(q[..., :k], q_red, atol=1e-5, rtol=0)
    q2, r2, info = ml.qr_ex(mx.array(a), mode="complete")
    assert np.array_equal(np32(q2), q) and np.array_equal(np32(r2), r) and info.shape == (len(a),)


def test_nan_in_a_batch_and_empty_matrices():
    a = np.random.default_rng(1).standard_normal((3, 7, 3)).astype(np.float32)
    a[1, 2, 0] = np.nan
    q, r, info = ml.qr_ex(mx.array(a), mode="complete")
    q, r, info = np32(q), np32(r), np.array(info)
    assert np.isnan(q[1]).all() and np.isnan(r[1]).all() and info[1] & 2
    assert np.isfinite(q[[0, 2]]).all() and np.isfinite(r[[0, 2]]).all()
    assert info[0] == 0 and info[2] == 0
    q, r = ml.qr(mx.zeros((2, 4, 0)), mode="complete")
    assert np.array_equal(np32(q), np.broadcast_to(np.eye(4), (2, 4, 4))) and r.shape == (2, 4, 0)
    q, r, info = ml.qr_ex(mx.zeros((4, 0)), mode="complete")
    assert np.array_equal(np32(q), np.eye(4)) and info.shape == ()
    q, r = ml.qr(mx.zeros((0, 5, 2)), mode="complete")
    assert q.shape == (0, 5, 5) and r.shape == (0, 5, 2)


def test_transforms_and_no_derivative():
    a = mx.array(np.random.default_rng(2).standard_normal((3, 6, 2)).astype(np.float32))
    q, r = ml.qr(a, mode="complete")
    vq, vr = mx.vmap(lambda x: ml.qr(x, mode="complete"))(a)
    assert np.array_equal(np32(vq), np32(q)) and np.array_equal(np32(vr), np32(r))
    cq, cr = mx.compile(lambda x: ml.qr(x, mode="complete"))(a)
    assert np.array_equal(np32(cq), np32(q)) and np.array_equal(np32(cr), np32(r))
    with pytest.raises(ValueError, match="mode='complete' and M > N"):
        mx.grad(lambda x: ml.qr(x, mode="complete")[1].sum())(a)
    with pytest.raises(ValueError, match="mode='complete' and M > N"):
        mx.jvp(lambda x: ml.qr(x, mode="complete")[0], [a], [a])
    # Square complete (the reduced factorization) keeps its gradient.
    s = mx.array(np.random.default_rng(3).standard_normal((4, 4)).astype(np.float32))
    g_complete = mx.grad(lambda x: ml.qr(x, mode="complete")[1].sum())(s)
    g_reduced = mx.grad(lambda x: ml.qr(x)[1].sum())(s)
    assert np.array_equal(np32(g_complete), np32(g_reduced))
