"""The lazy negative/conjugate bits and the *_ex info words on CUDA tensors, both on the GPU
kernels' path and through host memory. Needs an NVIDIA GPU and a CUDA build (skips elsewhere)."""

from __future__ import annotations

import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
import metal_linalg_torch as mlt
from metal_linalg_torch import _lib

if not _lib.lib.ml_backend_available(b"cuda"):
    pytest.skip("metal_linalg built without the CUDA backend", allow_module_level=True)
from test_torch_hardening import iteration_cap


@pytest.mark.parametrize("n", [2, 16, 64])  # register and group kernels
def test_negative_view_on_cuda(n):
    base = torch.randn(3, n, n, dtype=torch.float64)
    base = (base + base.mT) / 2
    neg = torch._neg_view(base.float().cuda())
    assert neg.is_neg()
    expected = torch.linalg.eigvalsh(-base).float()
    torch.testing.assert_close(mlt.eigvalsh(neg).cpu(), expected, atol=1e-4, rtol=1e-4)
    z = torch.complex(torch.randn_like(base), base).to(torch.complex64).cuda()
    im = z.conj().imag  # -base, with the negative bit
    torch.testing.assert_close(mlt.eigvalsh(im).cpu(), expected, atol=1e-4, rtol=1e-4)
    q, r = mlt.qr(neg)
    torch.testing.assert_close((q @ r).cpu(), -base.float(), atol=1e-4, rtol=0)


def test_ex_on_cuda():
    a = torch.randn(4, 8, 8, device="cuda")
    a = a + a.mT
    a[2, 1, 1] = float("nan")
    w, _v, info = mlt.eigh_ex(a)
    assert info.device == a.device and info.dtype == torch.int32 and info.shape == (4,)
    flags = (info & 0xFFFF).cpu()
    assert flags[2] & _lib.ML_INFO_NONFINITE and (flags[[0, 1, 3]] == 0).all()
    assert torch.isnan(w[2]).all() and torch.isfinite(w[[0, 1, 3]]).all()
    with pytest.raises(torch.linalg.LinAlgError):
        mlt.svdvals_ex(a, check_errors=True)


def test_tall_skinny_on_cuda():
    a = torch.randn(200_000, 3, device="cuda")
    torch.testing.assert_close(
        mlt.svdvals(a).cpu(), torch.linalg.svdvals(a.double().cpu()).float(), rtol=1e-5, atol=0
    )


# ---- non-convergence on the GPU kernels: NaN outputs and the info bit ----

_KERNELS = {  # launch kind -> (n, policy fields, eigh/svd kernel names as ml_backend reports them)
    "register": (
        6,
        {"gpu_small_max_n": 8, "gpu_simd_max_n": 0},
        ("eigh_jacobi_small", "svd_jacobi_small"),
    ),
    "lane": (
        12,
        {"gpu_small_max_n": 0, "gpu_simd_max_n": 0, "gpu_lane_max_n": 64, "gpu_lane_min_batch": 1},
        ("eigh_tridiag_ql/lane", "svd_bidiag_qr/lane"),
    ),
    "block": (
        12,
        {"gpu_small_max_n": 0, "gpu_simd_max_n": 0, "gpu_lane_max_n": 0},
        ("eigh_tridiag_ql", "svd_bidiag_qr"),
    ),
}


@pytest.fixture
def cap_one_on_gpu():
    """One sweep/iteration for every kernel; policies reset afterwards."""
    with iteration_cap(1):
        yield


# "block16": a batch of at least 16 matrices per SM, where cuda/launch_config.h runs n <= 16 in
# 16-lane groups, two matrices per warp (one capped, its neighbour converged).
@pytest.mark.parametrize("kind", ["register", "lane", "block", "block16"])
def test_not_converged_is_nan_on_cuda(cap_one_on_gpu, kind):
    n, fields, (eigh_kernel, svd_kernel) = _KERNELS["block" if kind == "block16" else kind]
    units = torch.cuda.get_device_properties(0).multi_processor_count
    batch = 32 * units if kind == "block16" else 4
    for op in ("eigh", "eigvalsh", "svd", "svdvals"):
        getattr(mlt, f"set_{op}_policy")(gpu_min_batch=1, gpu_max_n=1024, **fields)
    assert mlt.eigh_backend(n, batch, device="cuda") == "cuda:" + eigh_kernel
    assert mlt.svd_backend(n, n, batch, device="cuda") == "cuda:" + svd_kernel
    g = torch.Generator().manual_seed(7)
    a = torch.randn(batch, n, n, generator=g, dtype=torch.float64)
    a = a + a.mT  # symmetric: eigh and svd both need more than one sweep
    diag = torch.arange(1.0, n + 1.0, dtype=torch.float64) * torch.tensor([1.0, -1.0]).repeat(n)[:n]
    a[1::2] = torch.diag(diag)  # every other matrix diagonal: converges without a sweep
    a = a.float().cuda()
    capped, fine = torch.arange(0, batch, 2), torch.arange(1, batch, 2)
    NC = _lib.ML_INFO_NOT_CONVERGED

    w, v, info = mlt.eigh_ex(a)
    _check_capped(info, (w, v), capped, fine, NC)
    torch.testing.assert_close(w[fine].cpu(), diag.sort().values.float().expand(len(fine), n))
    u, s, vh, info = mlt.svd_ex(a)
    _check_capped(info, (u, s, vh), capped, fine, NC)
    s_ref = diag.abs().sort(descending=True).values.float()
    torch.testing.assert_close(s[fine].cpu(), s_ref.expand(len(fine), n))
    torch.testing.assert_close((u[fine] * s[fine, None, :]) @ vh[fine], a[fine], atol=1e-5, rtol=0)
    # Without an info array (the plain functions) the capped matrices are NaN too.
    for out in (mlt.eigvalsh(a), mlt.svdvals(a)):
        assert torch.isnan(out[capped]).all() and torch.isfinite(out[fine]).all()
    _lib.lib.ml_set_iteration_cap(0)  # the default cap: everything converges
    for fn in (mlt.eigh_ex, mlt.svd_ex):
        res = fn(a)
        assert not (res.info & NC).any(), (fn.__name__, res.info)
        assert all(torch.isfinite(t).all() for t in res[:-1]), fn.__name__


def _check_capped(info, outs, capped, fine, nc):
    info = info.cpu()
    assert (info[capped] & nc).all() and not (info[fine] & nc).any(), info
    assert not (info & _lib.ML_INFO_NONFINITE).any(), info
    for t in outs:
        assert t.is_cuda and torch.isnan(t[capped]).all() and torch.isfinite(t[fine]).all()
