"""Hypothesis fuzzing of shapes, dtypes and strides: outputs match torch.linalg's shapes and LAPACK ratios."""

from __future__ import annotations

import metal_linalg_torch as mlt
import numpy as np
import torch
from _matrices import THRESH, eigh_ratios, qr_ratios, svd_ratios
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DTYPES = [torch.float32, torch.float64, torch.float16, torch.int16]


@st.composite
def tensors(draw, square=False):
    batch = draw(st.lists(st.integers(0, 3), min_size=0, max_size=3))
    m = draw(st.integers(0, 12))
    n = m if square else draw(st.integers(0, 12))
    dtype = draw(st.sampled_from(DTYPES))
    seed = draw(st.integers(0, 2**31 - 1))
    layout = draw(st.sampled_from(["contiguous", "transposed", "strided", "expanded"]))
    rng = np.random.default_rng(seed)
    if layout == "transposed":
        base = torch.from_numpy(rng.standard_normal((*batch, n, m)) * 3).mT
    elif layout == "strided":
        base = torch.from_numpy(rng.standard_normal((*batch, 2 * m + 1, 2 * n + 1)) * 3)[
            ..., 1::2, ::2
        ]
        base = base[..., :m, :n]
    elif layout == "expanded" and batch:
        one = torch.from_numpy(rng.standard_normal((1, *batch[1:], m, n)) * 3)
        base = one.expand(*batch, m, n)
    else:
        base = torch.from_numpy(rng.standard_normal((*batch, m, n)) * 3)
    if square:
        base = (base + base.mT) / 2
    return base.to(dtype)


def _flat(t, k):
    return t.reshape(-1, *t.shape[-k:]) if t.numel() else t


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(tensors())
def test_fuzz_qr_svd(a):
    q, r = mlt.qr(a)
    tq, tr = torch.linalg.qr(a.float())
    assert q.shape == tq.shape and r.shape == tr.shape and q.dtype == torch.float32
    u, s, vh = mlt.svd(a)
    tu, ts, tvh = torch.linalg.svd(a.float(), full_matrices=False)
    assert (u.shape, s.shape, vh.shape) == (tu.shape, ts.shape, tvh.shape)
    assert torch.equal(mlt.svdvals(a), mlt.svdvals(a.contiguous()))
    if a.numel():
        af = a.float().reshape(-1, *a.shape[-2:])
        for i in range(af.shape[0]):
            assert max(qr_ratios(af[i], _flat(q, 2)[i], _flat(r, 2)[i])) < THRESH["qr"]
            assert (
                max(svd_ratios(af[i], _flat(u, 2)[i], _flat(s, 1)[i], _flat(vh, 2)[i]))
                < THRESH["svd"]
            )


@FUZZ
@given(tensors(square=True))
def test_fuzz_eigh(a):
    w, v = mlt.eigh(a)
    tw, tv = torch.linalg.eigh(a.float())
    assert w.shape == tw.shape and v.shape == tv.shape and w.dtype == torch.float32
    assert torch.equal(mlt.eigvalsh(a), mlt.eigvalsh(a.contiguous()))
    if a.numel():
        af = a.float().reshape(-1, *a.shape[-2:])
        for i in range(af.shape[0]):
            assert max(eigh_ratios(af[i], _flat(w, 1)[i], _flat(v, 2)[i])) < THRESH["eig"]
