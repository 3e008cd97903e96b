"""LAPACK's accuracy ratios (docs/design.md section 7) for metal_linalg on the matrix families,
on both CPU paths (the core's kernels for small n and LAPACK), through the MLX frontend."""

from __future__ import annotations

import metal_linalg as ml
import numpy as np
import pytest
from _mlx_helpers import (
    FAMILIES,
    THRESH,
    eigh_ratios,
    eigvals_ratio,
    general,
    qr_ratios,
    svals_ratio,
    svd_ratios,
    symmetric,
)

SQUARE = (1, 3, 8, 17, 40)
RECT = ((12, 5), (5, 12), (1, 6), (6, 1), (33, 20))


@pytest.fixture(params=["default", "lapack"])
def cpu_path(request):
    """Run each case as routed by default and with the small-matrix kernels turned off."""
    ops = ("qr", "eigh", "eigvalsh", "svd", "svdvals")
    if request.param == "lapack":
        for op in ops:
            getattr(ml, f"set_{op}_policy")(cpu_kernel_max_n=0)
    yield request.param
    for op in ops:
        getattr(ml, f"reset_{op}_policy")()


@pytest.mark.parametrize("family", FAMILIES)
def test_eigh_ratios(family, cpu_path):
    rng = np.random.default_rng(FAMILIES.index(family) * 7)
    for n in SQUARE:
        # a batch of 3 of the same family and size, so batching is covered too
        a = np.stack([symmetric(family, n, rng) for _ in range(3)]).astype(np.float32)
        w, v = ml.eigh(a)
        wv = ml.eigvalsh(a)
        for b in range(3):
            r = eigh_ratios(a[b], np.array(w)[b], np.array(v)[b])
            assert r["residual"] < THRESH["eig"], (family, n, r)
            assert r["orthogonality"] < THRESH["eig"], (family, n, r)
            assert eigvals_ratio(a[b], np.array(w)[b]) < THRESH["eig"], (family, n)
            assert eigvals_ratio(a[b], np.array(wv)[b]) < THRESH["eig"], (family, n)
            assert np.all(np.diff(np.array(w)[b]) >= 0)


@pytest.mark.parametrize("family", FAMILIES)
def test_svd_ratios(family, cpu_path):
    rng = np.random.default_rng(FAMILIES.index(family) * 7 + 1)
    for m, n in tuple((k, k) for k in SQUARE) + RECT:
        a = np.stack([general(family, m, n, rng) for _ in range(2)]).astype(np.float32)
        u, s, vt = (np.array(x) for x in ml.svd(a))
        sv = np.array(ml.svdvals(a))
        for b in range(2):
            r = svd_ratios(a[b], u[b], s[b], vt[b])
            assert all(x < THRESH["svd"] for x in r.values()), (family, m, n, r)
            assert svals_ratio(a[b], s[b]) < THRESH["svd"], (family, m, n)
            assert svals_ratio(a[b], sv[b]) < THRESH["svd"], (family, m, n)
            assert np.all(np.diff(s[b]) <= 0) and np.all(s[b] >= 0)


@pytest.mark.parametrize("family", FAMILIES)
def test_qr_ratios(family, cpu_path):
    rng = np.random.default_rng(FAMILIES.index(family) * 7 + 2)
    for m, n in tuple((k, k) for k in SQUARE) + RECT:
        a = np.stack([general(family, m, n, rng) for _ in range(2)]).astype(np.float32)
        q, r = (np.array(x) for x in ml.qr(a))
        for b in range(2):
            ratios = qr_ratios(a[b], q[b], r[b])
            assert all(x < THRESH["qr"] for x in ratios.values()), (family, m, n, ratios)
            assert np.all(np.tril(r[b], -1) == 0)
