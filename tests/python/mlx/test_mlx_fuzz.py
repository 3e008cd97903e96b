"""Property-based fuzzing of shapes, dtypes and strides (hypothesis): every call either
returns float32 results of the documented shapes that reconstruct the input, or raises
a clear Python exception."""

from __future__ import annotations

import metal_linalg as ml
import mlx.core as mx
import numpy as np
from _mlx_helpers import np32
from hypothesis import given, settings
from hypothesis import strategies as st

DTYPES = [mx.float32, mx.float16, mx.bfloat16, mx.int32, mx.float64]


@st.composite
def arrays(draw):
    batch = draw(st.lists(st.integers(0, 3), min_size=0, max_size=2))
    m, n = draw(st.integers(0, 9)), draw(st.integers(0, 9))
    transpose = draw(st.booleans())
    step = draw(st.sampled_from([1, 2]))
    seed = draw(st.integers(0, 2**16))
    dtype = draw(st.sampled_from(DTYPES))
    shape = (*batch, n * step, m) if transpose else (*batch, m * step, n)
    base = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    # MLX's GPU backends have no float64: build such views on the CPU stream.
    with mx.stream(mx.cpu if dtype == mx.float64 else mx.default_device()):
        a = mx.array(base).astype(dtype)
        a = a[..., ::step, :] if not transpose else mx.swapaxes(a[..., ::step, :], -1, -2)
    return a


@settings(max_examples=60, deadline=None)
@given(arrays())
def test_svd_and_qr_fuzz(a):
    *b, m, n = a.shape
    k = min(m, n)
    ref = np32(a.astype(mx.float32, stream=mx.cpu))
    scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
    u, s, vt = ml.svd(a)
    assert (u.shape, s.shape, vt.shape) == ((*b, m, k), (*b, k), (*b, k, n))
    assert u.dtype == s.dtype == vt.dtype == mx.float32
    rec = (np32(u) * np32(s)[..., None, :]) @ np32(vt)
    assert np.allclose(rec, ref, atol=1e-4 * scale * max(m, n, 1))
    q, r = ml.qr(a)
    assert (q.shape, r.shape) == ((*b, m, k), (*b, k, n))
    assert np.allclose(np32(q) @ np32(r), ref, atol=1e-4 * scale * max(m, n, 1))


@settings(max_examples=40, deadline=None)
@given(arrays(), st.sampled_from(["L", "U"]))
def test_eigh_fuzz(a, uplo):
    *b, m, n = a.shape
    with mx.stream(mx.cpu if a.dtype == mx.float64 else mx.default_device()):
        a = a[..., :n, :n] if m >= n else a[..., :m, :m]
    n = a.shape[-1]
    ref = np32(a.astype(mx.float32, stream=mx.cpu))
    tri = np.tril(ref) if uplo == "L" else np.triu(ref)
    full = tri + np.swapaxes(tri, -1, -2) - np.eye(n) * ref * (n > 0)
    w, v = ml.eigh(a, UPLO=uplo)
    assert w.shape == (*b, n) and v.shape == (*b, n, n) and w.dtype == mx.float32
    scale = max(1.0, float(np.abs(full).max())) if full.size else 1.0
    rec = (np32(v) * np32(w)[..., None, :]) @ np.swapaxes(np32(v), -1, -2)
    assert np.allclose(rec, full, atol=1e-4 * scale * max(n, 1))
