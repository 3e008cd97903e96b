"""Arguments, result types, shapes, dtypes, layouts and every error path of the public functions."""

from __future__ import annotations

import metal_linalg_torch as mlt
import pytest
import torch
from _matrices import THRESH, eigh_ratios, qr_ratios, svd_ratios


def _sym(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    b = torch.randn(*shape, generator=g)
    return (b + b.mT) / 2


def _gen(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_result_types_and_fields():
    a = _gen(4, 6, 3)
    res = mlt.qr(a)
    assert isinstance(res, torch.return_types.linalg_qr)
    assert res.Q.shape == (4, 6, 3) and res.R.shape == (4, 3, 3)
    s = _sym(4, 5, 5)
    res = mlt.eigh(s)
    assert isinstance(res, torch.return_types.linalg_eigh)
    assert res.eigenvalues.shape == (4, 5) and res.eigenvectors.shape == (4, 5, 5)
    res = mlt.svd(a)
    assert isinstance(res, torch.return_types.linalg_svd)
    assert res.U.shape == (4, 6, 3) and res.S.shape == (4, 3) and res.Vh.shape == (4, 3, 3)
    assert mlt.eigvalsh(s).shape == (4, 5)
    assert mlt.svdvals(a).shape == (4, 3)


def test_qr_mode_r_matches_torch_layout():
    a = _gen(2, 3, 5, 4)
    q, r = mlt.qr(a, mode="r")
    tq, tr = torch.linalg.qr(a, mode="r")
    assert q.shape == tq.shape == (0,)
    assert r.shape == tr.shape


@pytest.mark.parametrize("batch", [(), (3,), (2, 3), (2, 1, 2)])
def test_batch_dims_match_per_matrix_calls(batch):
    a = _gen(*batch, 7, 5, seed=1)
    s = _sym(*batch, 6, 6, seed=2)
    q, r = mlt.qr(a)
    _, sv, vh = mlt.svd(a)
    w, v = mlt.eigh(s)
    flat_a, flat_s = a.reshape(-1, 7, 5), s.reshape(-1, 6, 6)
    for i in range(flat_a.shape[0]):
        qi, ri = mlt.qr(flat_a[i])
        assert torch.equal(qi, q.reshape(-1, 7, 5)[i]) and torch.equal(ri, r.reshape(-1, 5, 5)[i])
        _, si, _ = mlt.svd(flat_a[i])
        assert torch.allclose(si, sv.reshape(-1, 5)[i], atol=1e-5)
        wi, _ = mlt.eigh(flat_s[i])
        assert torch.allclose(wi, w.reshape(-1, 6)[i], atol=1e-5)
    assert q.shape == (*batch, 7, 5) and v.shape == (*batch, 6, 6) and vh.shape == (*batch, 5, 5)


@pytest.mark.parametrize(
    "shape",
    [(0, 4, 4), (3, 0, 0), (0, 0), (5, 0), (0, 5), (2, 5, 0), (2, 0, 5), (0, 3, 5), (2, 0, 3, 3)],
)
def test_zero_size_shapes_match_torch(shape):
    a = torch.zeros(shape)
    for mode in ("reduced", "r"):
        got, ref = mlt.qr(a, mode=mode), torch.linalg.qr(a, mode=mode)
        assert got.Q.shape == ref.Q.shape and got.R.shape == ref.R.shape, mode
    got, ref = mlt.svd(a), torch.linalg.svd(a, full_matrices=False)
    assert [t.shape for t in got] == [t.shape for t in ref]
    assert mlt.svdvals(a).shape == torch.linalg.svdvals(a).shape
    if shape[-1] == shape[-2]:
        got, ref = mlt.eigh(a), torch.linalg.eigh(a)
        assert [t.shape for t in got] == [t.shape for t in ref]
        assert mlt.eigvalsh(a).shape == torch.linalg.eigvalsh(a).shape
        assert mlt.qr(a, mode="complete").Q.shape == torch.linalg.qr(a, mode="complete").Q.shape
        assert [t.shape for t in mlt.svd(a, full_matrices=True)] == [
            t.shape for t in torch.linalg.svd(a, full_matrices=True)
        ]
    for t in (*mlt.qr(a), *mlt.svd(a)):
        assert t.dtype == torch.float32


def test_non_contiguous_inputs():
    base = _gen(6, 20, 16, seed=4)
    views = [base.mT, base[:, ::2, :], base[::2, 1:9, 3:11], base.permute(1, 0, 2)[:, :, :6]]
    for a in views:
        assert not a.is_contiguous()
        q, r = mlt.qr(a)
        q2, r2 = mlt.qr(a.contiguous())
        assert torch.equal(q, q2) and torch.equal(r, r2)
        u, s, vh = mlt.svd(a)
        for i in range(a.shape[0]):
            assert max(qr_ratios(a[i], q[i], r[i])) < THRESH["qr"]
            assert max(svd_ratios(a[i], u[i], s[i], vh[i])) < THRESH["svd"]
    sym = _sym(4, 18, 18, seed=5)
    for a in (sym.mT, sym[:, ::2, ::2], sym[::2, 1:8, 1:8]):  # symmetric views with odd strides
        assert not a.is_contiguous()
        w, v = mlt.eigh(a)
        for i in range(a.shape[0]):
            assert max(eigh_ratios(a[i], w[i], v[i])) < THRESH["eig"]
        assert torch.equal(mlt.eigvalsh(a), mlt.eigvalsh(a.contiguous()))
    assert torch.equal(mlt.svdvals(base.mT), mlt.svdvals(base.mT.contiguous()))


@pytest.mark.parametrize(
    "dtype", [torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64]
)
def test_other_real_dtypes_convert_to_float32(dtype):
    a = (_gen(3, 5, 4, seed=6) * 4).to(dtype)
    s = (_sym(3, 4, 4, seed=7) * 4).to(dtype)
    a32, s32 = a.to(torch.float32), s.to(torch.float32)
    for got, ref in (
        (mlt.qr(a), mlt.qr(a32)),
        (mlt.svd(a), mlt.svd(a32)),
        (mlt.eigh(s), mlt.eigh(s32)),
        ((mlt.eigvalsh(s),), (mlt.eigvalsh(s32),)),
        ((mlt.svdvals(a),), (mlt.svdvals(a32),)),
    ):
        for g, r in zip(got, ref):
            assert g.dtype == torch.float32 and torch.equal(g, r)


def test_outputs_stay_float32_when_the_default_dtype_changes_between_calls():
    # The host outputs are allocated without dtype= while float32 is the default dtype; the
    # default is read on every call.
    a, s = _gen(2, 5, 4, seed=8), _sym(2, 4, 4, seed=9)
    calls = (
        lambda: mlt.qr(a),
        lambda: mlt.qr(a, mode="r"),
        lambda: mlt.svd(a),
        lambda: mlt.eigh(s),
        lambda: (mlt.eigvalsh(s),),
        lambda: (mlt.svdvals(a),),
        lambda: mlt.eigh_ex(s),
    )
    ref = [call() for call in calls]
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        got = [call() for call in calls]
    finally:
        torch.set_default_dtype(previous)
    again = [call() for call in calls]
    for outs in (got, again):
        for out, want in zip(outs, ref, strict=True):
            for g, r in zip(out, want, strict=True):
                assert g.dtype == r.dtype and g.shape == r.shape and torch.equal(g, r)
    assert all(t.dtype == torch.float32 for out in got for t in out[:2])


def test_input_is_not_modified():
    a = _gen(3, 6, 6, seed=8)
    s = (a + a.mT) / 2
    ca, cs = a.clone(), s.clone()
    mlt.qr(a), mlt.svd(a), mlt.svdvals(a), mlt.eigh(s), mlt.eigvalsh(s), mlt.eigh(s, UPLO="U")
    assert torch.equal(a, ca) and torch.equal(s, cs)


def test_uplo_reads_only_its_triangle():
    s = _sym(3, 6, 6, seed=9)
    noisy_upper = s.tril() + torch.triu(torch.full_like(s, 1e3), 1)
    noisy_lower = s.triu() + torch.tril(torch.full_like(s, -1e3), -1)
    assert torch.allclose(mlt.eigvalsh(noisy_upper, UPLO="L"), mlt.eigvalsh(s), atol=1e-5)
    assert torch.allclose(mlt.eigvalsh(noisy_lower, UPLO="U"), mlt.eigvalsh(s), atol=1e-5)
    assert torch.allclose(mlt.eigh(noisy_lower, UPLO="U").eigenvalues, mlt.eigvalsh(s), atol=1e-5)


def test_results_match_torch_linalg_values():
    a = _gen(5, 12, 8, seed=10)
    s = _sym(5, 8, 8, seed=11)
    assert torch.allclose(mlt.svdvals(a), torch.linalg.svdvals(a), rtol=1e-5, atol=1e-5)
    assert torch.allclose(mlt.eigvalsh(s), torch.linalg.eigvalsh(s), rtol=1e-5, atol=1e-5)
    q, r = mlt.qr(a)
    tq, tr = torch.linalg.qr(a)
    assert torch.allclose((q @ r), (tq @ tr), atol=1e-5)


# ---- errors ----


def test_complex_raises_type_error():
    c = torch.randn(3, 3, dtype=torch.complex64)
    for fn in (mlt.qr, mlt.eigh, mlt.eigvalsh, mlt.svd, mlt.svdvals):
        with pytest.raises(TypeError, match="complex"):
            fn(c)
    with pytest.raises(TypeError, match="complex"):
        torch.ops.metal_linalg.svd(c, False)


def test_non_tensor_raises_type_error():
    for fn in (mlt.qr, mlt.eigh, mlt.eigvalsh, mlt.svd, mlt.svdvals):
        with pytest.raises(TypeError, match="torch.Tensor"):
            fn([[1.0, 0.0], [0.0, 1.0]])


@pytest.mark.parametrize("shape", [(), (3,), (0,)])
def test_wrong_rank_raises(shape):
    a = torch.zeros(shape)
    for fn in (mlt.qr, mlt.eigh, mlt.eigvalsh, mlt.svd, mlt.svdvals):
        with pytest.raises(ValueError, match=r"\[\.\.\., M, N\]"):
            fn(a)
    with pytest.raises(ValueError, match="at least 2 dims"):
        torch.ops.metal_linalg.qr(a, "reduced")


def test_non_square_eigh_raises():
    a = torch.zeros(2, 3, 4)
    for fn in (mlt.eigh, mlt.eigvalsh):
        with pytest.raises(ValueError, match="square"):
            fn(a)


def test_bad_arguments_raise_value_error():
    a = _gen(3, 3)
    with pytest.raises(ValueError, match="mode"):
        mlt.qr(a, mode="economic")
    with pytest.raises(ValueError, match="UPLO"):
        mlt.eigh(a, UPLO="X")
    with pytest.raises(ValueError, match="UPLO"):
        mlt.eigvalsh(a, UPLO="lower")


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 1)])
def test_non_square_full_matrices_not_implemented(shape):
    a = torch.zeros(shape)
    with pytest.raises(NotImplementedError, match="full_matrices"):
        mlt.svd(a, full_matrices=True)
    with pytest.raises(NotImplementedError):
        torch.ops.metal_linalg.svd(a, True)


def test_errors_raise_before_anything_runs_for_empty_batches():
    with pytest.raises(NotImplementedError):
        mlt.svd(torch.zeros(0, 5, 3), full_matrices=True)
    with pytest.raises(ValueError):
        mlt.eigh(torch.zeros(0, 2, 3))


def test_meta_tensors_give_shapes():
    a = torch.empty(7, 9, 4, device="meta")
    q, r = torch.ops.metal_linalg.qr(a, "reduced")
    assert q.shape == (7, 9, 4) and r.shape == (7, 4, 4) and q.device.type == "meta"
    u, s, vh = torch.ops.metal_linalg.svd(a, False)
    assert (u.shape, s.shape, vh.shape) == ((7, 9, 4), (7, 4), (7, 4, 4))


def test_dispatcher_path_matches_eager_fast_path():
    """Public functions skip the dispatcher for plain eager tensors; both paths give the same bits."""
    a = _gen(3, 7, 5, seed=12)
    s = _sym(3, 5, 5, seed=13)
    pairs = [
        (mlt.qr(a), torch.ops.metal_linalg.qr(a, "reduced")),
        (mlt.qr(a, mode="r")[1:], torch.ops.metal_linalg.qr(a, "r")[1:]),
        (mlt.eigh(s, UPLO="U"), torch.ops.metal_linalg.eigh(s, "U")),
        ((mlt.eigvalsh(s),), (torch.ops.metal_linalg.eigvalsh(s, "L"),)),
        (mlt.svd(a), torch.ops.metal_linalg.svd(a, False)),
        ((mlt.svdvals(a),), (torch.ops.metal_linalg.svdvals(a),)),
    ]
    for got, ref in pairs:
        assert all(torch.equal(x, y) for x, y in zip(got, ref, strict=True))


def test_vmap_matches_batched_call():
    a = _gen(4, 3, 6, 5, seed=14)
    s = _sym(4, 3, 5, 5, seed=15)
    vm = torch.vmap(lambda x: tuple(mlt.svd(x)), in_dims=1)(a.transpose(0, 1))
    assert all(torch.equal(x, y) for x, y in zip(vm, mlt.svd(a), strict=True))
    vm = torch.vmap(lambda x: tuple(mlt.eigh(x)))(s)
    assert all(torch.equal(x, y) for x, y in zip(vm, mlt.eigh(s), strict=True))
    assert torch.equal(torch.vmap(mlt.eigvalsh)(s), mlt.eigvalsh(s))
    assert torch.equal(torch.vmap(mlt.svdvals)(a), mlt.svdvals(a))
    q, r = torch.vmap(lambda x: tuple(mlt.qr(x)))(a)
    assert torch.equal(q, mlt.qr(a).Q) and torch.equal(r, mlt.qr(a).R)
    q, r = torch.vmap(lambda x: tuple(mlt.qr(x, mode="r")))(a)
    assert q.numel() == 0 and torch.equal(r, mlt.qr(a, mode="r").R)
