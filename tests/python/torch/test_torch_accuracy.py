"""Accuracy of every op on the LAPACK matrix families, by LAPACK's ratios (docs/design.md section 7).

Each test runs one batch holding every family, so a family that disturbs its neighbours shows too.
"""

from __future__ import annotations

import metal_linalg_torch as mlt
import numpy as np
import pytest
import torch
from _matrices import (
    FAMILIES,
    THRESH,
    batch,
    eigh_ratios,
    eigvals_ref,
    norm1,
    qr_ratios,
    svd_ratios,
    svdvals_ref,
    values_ratio,
)

SIZES = [1, 2, 3, 5, 8, 16, 17, 31, 32, 33, 64, 65, 100, 128, 256]
RECT = [
    (2, 1),
    (1, 2),
    (1, 7),
    (7, 1),
    (17, 5),
    (5, 17),
    (64, 32),
    (32, 64),
    (100, 7),
    (7, 100),
    (130, 65),
    (65, 130),
    (256, 128),
]


def _report(name, ratios):
    bad = {f: r for f, r in ratios.items() if not r <= name[1]}
    assert not bad, f"{name[0]}: ratios over {name[1]}: {bad}"


@pytest.mark.parametrize("n", SIZES)
def test_eigh_families(n):
    a = batch("sym", n, n, seed=n)
    w, v = mlt.eigh(a)
    wl = mlt.eigvalsh(a)
    wu, vu = mlt.eigh(a, UPLO="U")
    assert w.dtype == v.dtype == torch.float32
    assert w.shape == (len(FAMILIES), n) and v.shape == (len(FAMILIES), n, n)
    ratios = {}
    for i, fam in enumerate(FAMILIES):
        ref = eigvals_ref(a[i])
        anorm = norm1(a[i])
        r = eigh_ratios(a[i], w[i], v[i]) + eigh_ratios(a[i], wu[i], vu[i])
        r += (values_ratio(w[i], ref, anorm, n), values_ratio(wl[i], ref, anorm, n))
        ratios[fam] = max(r)
        assert torch.all(w[i][1:] >= w[i][:-1]), f"{fam}: eigenvalues not ascending"
    _report(("eigh", THRESH["eig"]), ratios)


@pytest.mark.parametrize("m,n", [(k, k) for k in SIZES] + RECT)
def test_svd_families(m, n):
    a = batch("gen", m, n, seed=m * 1000 + n)
    u, s, vh = mlt.svd(a)
    sv = mlt.svdvals(a)
    k = min(m, n)
    assert u.shape == (len(FAMILIES), m, k) and s.shape == (len(FAMILIES), k)
    assert vh.shape == (len(FAMILIES), k, n) and sv.shape == s.shape
    ratios = {}
    for i, fam in enumerate(FAMILIES):
        ref = svdvals_ref(a[i])
        anorm = norm1(a[i])
        r = svd_ratios(a[i], u[i], s[i], vh[i])
        r += (values_ratio(s[i], ref, anorm, max(m, n)), values_ratio(sv[i], ref, anorm, max(m, n)))
        ratios[fam] = max(r)
        assert torch.all(s[i][1:] <= s[i][:-1]) and torch.all(s[i] >= 0), f"{fam}: bad order/sign"
    _report(("svd", THRESH["svd"]), ratios)


@pytest.mark.parametrize("m,n", [(k, k) for k in SIZES] + RECT)
def test_qr_families(m, n):
    a = batch("gen", m, n, seed=m * 1000 + n + 7)
    q, r = mlt.qr(a)
    k = min(m, n)
    assert q.shape == (len(FAMILIES), m, k) and r.shape == (len(FAMILIES), k, n)
    _, r_only = mlt.qr(a, mode="r")
    ratios = {}
    for i, fam in enumerate(FAMILIES):
        ratios[fam] = max(qr_ratios(a[i], q[i], r[i]))
        assert torch.equal(r[i].tril(-1), torch.zeros_like(r[i])), f"{fam}: R not upper triangular"
        # R alone is R of the reduced factorisation up to row signs.
        np.testing.assert_allclose(
            r_only[i].abs().numpy(),
            r[i].abs().numpy(),
            rtol=1e-3,
            atol=1e-4 * float(r[i].abs().max()),
        )
    _report(("qr", THRESH["qr"]), ratios)


def test_square_complete_and_full_match_reduced():
    a = batch("gen", 9, 9, seed=3)
    q1, r1 = mlt.qr(a)
    q2, r2 = mlt.qr(a, mode="complete")
    assert torch.equal(q1, q2) and torch.equal(r1, r2)
    u1, s1, v1 = mlt.svd(a)
    u2, s2, v2 = mlt.svd(a, full_matrices=True)
    assert torch.equal(u1, u2) and torch.equal(s1, s2) and torch.equal(v1, v2)
