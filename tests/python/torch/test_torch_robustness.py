"""Non-finite matrices stay isolated inside a batch; extreme magnitudes stay accurate."""

from __future__ import annotations

import math

import metal_linalg_torch as mlt
import pytest
import torch
from _matrices import THRESH, eigh_ratios, qr_ratios, svd_ratios


def _sym(b):
    return (b + b.mT) / 2


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("n", [3, 40])
def test_nonfinite_matrix_isolated(bad, n):
    g = torch.Generator().manual_seed(n)
    a = torch.randn(5, n, n, generator=g)
    s = _sym(a)
    a_bad, s_bad = a.clone(), s.clone()
    a_bad[2, n // 2, 1] = bad
    s_bad[2, n // 2, 1] = s_bad[2, 1, n // 2] = bad
    keep = [0, 1, 3, 4]
    for fn, x, xb in (
        (lambda t: tuple(mlt.qr(t)), a, a_bad),
        (lambda t: tuple(mlt.svd(t)), a, a_bad),
        (lambda t: (mlt.svdvals(t),), a, a_bad),
        (lambda t: tuple(mlt.eigh(t)), s, s_bad),
        (lambda t: (mlt.eigvalsh(t),), s, s_bad),
    ):
        clean, dirty = fn(x), fn(xb)
        for c, d in zip(clean, dirty):
            assert torch.equal(c[keep], d[keep]), "a non-finite matrix changed its neighbours"
            assert torch.isnan(d[2]).all(), "the non-finite matrix must give NaN"


@pytest.mark.parametrize("scale", [1e-30, 1e-20, 1e20, 1e37])
@pytest.mark.parametrize("m,n", [(8, 8), (33, 33), (20, 9), (9, 20)])
def test_extreme_scales(scale, m, n):
    g = torch.Generator().manual_seed(m + n)
    a = (torch.randn(3, m, n, generator=g, dtype=torch.float64) * scale / 4).float()
    assert torch.isfinite(a).all()
    q, r = mlt.qr(a)
    u, s, vh = mlt.svd(a)
    for i in range(3):
        assert max(qr_ratios(a[i], q[i], r[i])) < THRESH["qr"]
        assert max(svd_ratios(a[i], u[i], s[i], vh[i])) < THRESH["svd"]
    if m == n:
        sa = _sym(a.double()).float()
        w, v = mlt.eigh(sa)
        for i in range(3):
            assert max(eigh_ratios(sa[i], w[i], v[i])) < THRESH["eig"]
        assert torch.isfinite(mlt.eigvalsh(sa)).all()
    assert torch.isfinite(mlt.svdvals(a)).all()
