"""metal_linalg's decompositions on mx.array: against mx.linalg on the CPU stream, shapes,
batch dims, zero-size inputs, input kinds and dtypes, NaN isolation and errors."""

from __future__ import annotations

import threading

import metal_linalg as ml
import mlx.core as mx
import numpy as np
import pytest
from _mlx_helpers import columns_match_up_to_sign, np32

CPU = mx.cpu


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def sym(*shape, seed=0):
    a = randn(*shape, seed=seed)
    return (a + np.swapaxes(a, -1, -2)) / 2


def check_qr(a, q, r):
    a, q, r = np32(a), np32(q), np32(r)
    scale = max(1.0, np.abs(a).max())
    assert np.allclose(q @ r, a, atol=1e-4 * scale)
    k = q.shape[-1]
    assert np.allclose(np.swapaxes(q, -1, -2) @ q, np.eye(k), atol=1e-5)
    assert np.all(np.tril(r, -1) == 0)


# ---- agreement with mx.linalg on the CPU stream ----


@pytest.mark.parametrize("n", [1, 2, 5, 16, 33, 64])
def test_eigh_matches_mx_linalg(n):
    a = mx.array(sym(3, n, n, seed=n))
    w, v = ml.eigh(a)
    w_ref, v_ref = mx.linalg.eigh(a, stream=CPU)
    assert w.dtype == mx.float32 and v.dtype == mx.float32
    assert w.shape == (3, n) and v.shape == (3, n, n)
    assert np.allclose(np32(w), np32(w_ref), atol=2e-5 * n, rtol=0)
    # random symmetric matrices have well-separated eigenvalues: vectors agree up to sign
    for b in range(3):
        assert columns_match_up_to_sign(np32(v)[b], np32(v_ref)[b], atol=2e-3)
    assert np.allclose(np32(ml.eigvalsh(a)), np32(mx.linalg.eigvalsh(a, stream=CPU)), atol=2e-5 * n)


@pytest.mark.parametrize("shape", [(1, 1), (6, 6), (32, 32), (40, 17), (17, 40), (1, 9), (9, 1)])
def test_svd_matches_mx_linalg(shape):
    m, n = shape
    k = min(m, n)
    a = mx.array(randn(2, m, n, seed=m * 100 + n))
    u, s, vt = ml.svd(a)
    u_ref, s_ref, vt_ref = mx.linalg.svd(a, stream=CPU)  # full U, Vt
    assert u.shape == (2, m, k) and s.shape == (2, k) and vt.shape == (2, k, n)
    assert np.allclose(np32(s), np32(s_ref), atol=1e-5 * max(m, n), rtol=0)
    for b in range(2):
        assert columns_match_up_to_sign(np32(u)[b], np32(u_ref)[b, :, :k], atol=2e-3)
        assert columns_match_up_to_sign(np32(vt)[b].T, np32(vt_ref)[b, :k, :].T, atol=2e-3)
    assert np.allclose(np32(ml.svdvals(a)), np32(s_ref), atol=1e-5 * max(m, n), rtol=0)
    assert np.allclose(np32(ml.svd(a, compute_uv=False)), np32(s_ref), atol=1e-5 * max(m, n))


@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (24, 24), (30, 12), (12, 30), (7, 1), (1, 7)])
def test_qr_matches_mx_linalg(shape):
    m, n = shape
    a = mx.array(randn(3, m, n, seed=m * 31 + n))
    q, r = ml.qr(a)
    k = min(m, n)
    assert q.shape == (3, m, k) and r.shape == (3, k, n)
    q_ref, r_ref = mx.linalg.qr(a, stream=CPU)
    # Householder QR is unique up to the signs of R's diagonal (A has full rank here)
    sq = np.sign(np.diagonal(np32(r), axis1=-2, axis2=-1))
    sr = np.sign(np.diagonal(np32(r_ref), axis1=-2, axis2=-1))
    flip = (sq * sr)[..., None, :]
    assert np.allclose(np32(q) * flip, np32(q_ref), atol=2e-4)
    assert np.allclose(np32(r) * np.swapaxes(flip, -1, -2), np32(r_ref), atol=2e-4 * max(m, n))
    check_qr(a, q, r)


def test_qr_modes():
    a = mx.array(randn(2, 6, 6, seed=3))
    _, r = ml.qr(a)
    r_only = ml.qr(a, mode="r")
    assert isinstance(r_only, mx.array) and r_only.shape == (2, 6, 6)
    assert np.allclose(np.abs(np32(r_only)), np.abs(np32(r)), atol=1e-5)
    qc, rc = ml.qr(a, mode="complete")
    assert qc.shape == (2, 6, 6) and rc.shape == (2, 6, 6)
    check_qr(a, qc, rc)
    tall = mx.array(randn(9, 4, seed=4))
    assert ml.qr(tall, mode="r").shape == (4, 4)


def test_svd_full_matrices_square():
    a = mx.array(randn(3, 5, 5, seed=5))
    u, s, vt = ml.svd(a, full_matrices=True)
    assert u.shape == (3, 5, 5) and vt.shape == (3, 5, 5)
    assert np.allclose(np32(u) * np32(s)[..., None, :] @ np32(vt), np32(a), atol=1e-4)


def test_eigh_uses_the_chosen_triangle():
    s = sym(4, 4, seed=7)
    lower = np.tril(s) + np.triu(np.full((4, 4), 100.0, np.float32), 1)
    upper = np.triu(s) + np.tril(np.full((4, 4), -100.0, np.float32), -1)
    w_ref = np.linalg.eigvalsh(s.astype(np.float64))
    assert np.allclose(np32(ml.eigvalsh(lower, UPLO="L")), w_ref, atol=1e-5)
    assert np.allclose(np32(ml.eigvalsh(upper, UPLO="U")), w_ref, atol=1e-5)
    w, v = ml.eigh(upper, UPLO="U")
    assert np.allclose(np32(v) * np32(w)[None, :] @ np32(v).T, s, atol=1e-5)


# ---- shapes, batch dims, zero-size ----


def test_any_number_of_batch_dims():
    a = sym(2, 3, 4, 5, 5, seed=8)
    w, v = ml.eigh(a)
    assert w.shape == (2, 3, 4, 5) and v.shape == (2, 3, 4, 5, 5)
    flat = np32(ml.eigvalsh(a.reshape(24, 5, 5))).reshape(2, 3, 4, 5)
    assert np.array_equal(np32(w), flat)
    u, s, vt = ml.svd(randn(2, 2, 6, 3, seed=9))
    assert u.shape == (2, 2, 6, 3) and s.shape == (2, 2, 3) and vt.shape == (2, 2, 3, 3)
    q, r = ml.qr(randn(3, 1, 4, 6, seed=10))
    assert q.shape == (3, 1, 4, 4) and r.shape == (3, 1, 4, 6)


@pytest.mark.parametrize(
    "shape", [(0, 3, 3), (2, 0, 0), (0, 0, 0), (3, 0, 4), (3, 4, 0), (0, 5, 2)]
)
def test_zero_size(shape):
    a = mx.zeros(shape)
    *b, m, n = shape
    k = min(m, n)
    q, r = ml.qr(a)
    assert q.shape == (*b, m, k) and r.shape == (*b, k, n) and q.dtype == mx.float32
    u, s, vt = ml.svd(a)
    assert u.shape == (*b, m, k) and s.shape == (*b, k) and vt.shape == (*b, k, n)
    assert ml.svdvals(a).shape == (*b, k)
    if m == n:
        w, v = ml.eigh(a)
        assert w.shape == (*b, n) and v.shape == (*b, n, n) and w.dtype == mx.float32
        assert ml.eigvalsh(a).shape == (*b, n)


def test_non_contiguous_inputs():
    base = mx.array(randn(4, 10, 12, seed=11))
    views = [base[:, ::2, 1::2], mx.swapaxes(base, -1, -2), base[::3, 2:8, 3:9]]
    for x in views:
        dense = np.ascontiguousarray(np32(x)).astype(np.float32)
        assert np.array_equal(np32(ml.svdvals(x)), np32(ml.svdvals(dense)))
        q, r = ml.qr(x)
        check_qr(x, q, r)
    half = mx.swapaxes(base.astype(mx.float16), -1, -2)[:, 1:]
    ref = np.linalg.svd(np32(half), compute_uv=False)
    assert np.allclose(np32(ml.svdvals(half)), ref, atol=1e-4)
    bcast = mx.broadcast_to(mx.array(sym(5, 5, seed=12)), (3, 5, 5))
    w = np32(ml.eigvalsh(bcast))
    assert np.array_equal(w[0], w[2])


# ---- input kinds and dtypes ----


def test_numpy_and_list_inputs():
    a = sym(5, 5, seed=13)
    w = np32(ml.eigvalsh(mx.array(a)))
    from_np = ml.eigvalsh(a)
    from_list = ml.eigvalsh(a.tolist())
    assert isinstance(from_np, mx.array) and isinstance(from_list, mx.array)
    assert np.array_equal(np32(from_np), w) and np.array_equal(np32(from_list), w)
    q, r = ml.qr([[1, 2], [3, 4]])
    assert q.dtype == mx.float32
    check_qr(np.array([[1, 2], [3, 4]], np.float32), q, r)


@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16, mx.int32, mx.uint8, mx.int64])
def test_other_real_mx_dtypes_are_converted(dtype):
    a = mx.array(np.array([[2, 1, 0], [1, 3, 1], [0, 1, 4]], np.float32)).astype(dtype)
    w, v = ml.eigh(a)
    assert w.dtype == mx.float32 and v.dtype == mx.float32
    ref = np.linalg.eigvalsh(np.array(a.astype(mx.float32), np.float64))
    assert np.allclose(np32(w), ref, atol=1e-5)
    assert ml.svd(a)[1].dtype == mx.float32 and ml.qr(a)[0].dtype == mx.float32


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int16, np.float16])
def test_other_real_numpy_dtypes_are_converted(dtype):
    a = np.array([[4, 1], [1, 3]], dtype=dtype)
    s = ml.svdvals(a)
    assert s.dtype == mx.float32
    assert np.allclose(np32(s), np.linalg.svd(a.astype(np.float64), compute_uv=False), atol=1e-5)


def test_complex_raises_type_error():
    for a in (
        mx.array(np.eye(3, dtype=np.complex64)),
        np.eye(3, dtype=np.complex128),
        [[1 + 1j, 0], [0, 1]],
    ):
        for fn in (ml.qr, ml.eigh, ml.eigvalsh, ml.svd, ml.svdvals):
            with pytest.raises(TypeError, match="complex"):
                fn(a)


def test_bool_and_object_inputs_raise_type_error():
    with pytest.raises(TypeError):
        ml.svdvals(mx.array(np.eye(3, dtype=bool)))
    with pytest.raises(TypeError):
        ml.svdvals(np.array([["a", "b"], ["c", "d"]]))


# ---- errors ----


def test_errors():
    with pytest.raises(ValueError, match="at least 2|M, N"):
        ml.svd(mx.array([1.0, 2.0]))
    with pytest.raises(ValueError):
        ml.qr(mx.array(3.0))
    with pytest.raises(ValueError, match="square"):
        ml.eigh(mx.zeros((3, 4)))
    with pytest.raises(ValueError, match="square"):
        ml.eigvalsh(mx.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="UPLO"):
        ml.eigh(mx.eye(3), UPLO="X")
    with pytest.raises(ValueError, match="mode"):
        ml.qr(mx.eye(3), mode="economic")
    with pytest.raises(NotImplementedError):
        ml.svd(mx.zeros((5, 3)), full_matrices=True)


# ---- non-finite isolation ----


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_matrix_gives_nan_for_itself_only(bad):
    a = sym(5, 6, 6, seed=14)
    a[1, 2, 3] = a[1, 3, 2] = bad
    a[3, 0, 0] = bad
    clean = [0, 2, 4]
    for name, fn in (
        ("eigh", ml.eigh),
        ("eigvalsh", ml.eigvalsh),
        ("svd", ml.svd),
        ("svdvals", ml.svdvals),
        ("qr", ml.qr),
    ):
        out = fn(a)
        ref = fn(a[clean])
        outs = out if isinstance(out, tuple) else (out,)
        refs = ref if isinstance(ref, tuple) else (ref,)
        for x, y in zip(outs, refs):
            x = np32(x)
            assert np.all(np.isnan(x[1])) and np.all(np.isnan(x[3])), name
            assert np.allclose(x[clean], np32(y), atol=1e-6, rtol=0), name


# ---- threads ----


def test_threads_give_identical_results():
    a = mx.array(sym(16, 12, 12, seed=15))
    ref = np32(ml.eigh(a)[1])
    errors = []

    def worker():
        for _ in range(30):
            if not np.array_equal(np32(ml.eigh(a)[1]), ref):
                errors.append("mismatch")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_mx_linalg_call_forms_work_unchanged():
    a = mx.array(sym(3, 4, 4, seed=16))
    s = ml.svd(a, False)  # mx.linalg.svd's second positional argument is compute_uv
    assert isinstance(s, mx.array) and s.shape == (3, 4)
    assert np.allclose(np32(s), np32(mx.linalg.svd(a, False, stream=CPU)), atol=1e-5)
    for fn, ref in (
        (ml.qr, mx.linalg.qr),
        (ml.eigh, mx.linalg.eigh),
        (ml.eigvalsh, mx.linalg.eigvalsh),
        (ml.svd, mx.linalg.svd),
    ):
        out, want = fn(a, stream=CPU), ref(a, stream=CPU)
        outs = out if isinstance(out, tuple) else (out,)
        wants = want if isinstance(want, tuple) else (want,)
        assert len(outs) == len(wants)
    assert ml.svdvals(a, stream=mx.cpu).shape == (3, 4)
    w = ml.eigvalsh(a, "U", stream=CPU)
    assert np.allclose(np32(w), np32(mx.linalg.eigvalsh(a, "U", stream=CPU)), atol=1e-5)
