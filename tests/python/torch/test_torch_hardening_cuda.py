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
