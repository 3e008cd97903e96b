"""The blocked algorithms' matrix product on CUDA (core/src/blocked.cpp gemm(): the dialect step of
core/kernels/gemm.h, or cuBLAS behind the Runner hook) against float64 on odd shapes.

Calls the library's product entry ml_cuda_blocked_gemm (not in the public header) over a workspace
tensor; skips without a GPU or a library built with the CUDA backend. The same product runs through
the CPU runner in CI (tests/kernels/test_blocked.cpp, suite gemm).
"""

from __future__ import annotations

import ctypes

import pytest
from accuracy import GEMM_LIMIT, ULP

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
mlt = pytest.importorskip("metal_linalg_torch")
from metal_linalg_torch import _lib

if not _lib.lib.ml_backend_available(b"cuda") or not hasattr(_lib.lib, "ml_cuda_blocked_gemm"):
    pytest.skip("metal_linalg built without the CUDA backend", allow_module_level=True)

DEV = torch.device("cuda")
TRANS_A, TRANS_B = 1, 2
DIALECT, CUBLAS = 1, 2

_gemm = _lib.lib.ml_cuda_blocked_gemm
_gemm.restype = ctypes.c_int32
_i32, _i64, _f = ctypes.c_int32, ctypes.c_int64, ctypes.c_float
_gemm.argtypes = [_i32, _i32, _i32, _i32, _i32, _i32, _i32, _f, _f, ctypes.c_void_p]
_gemm.argtypes += [_i64, _i32, _i64, _i32, _i64, _i32, _i64, _i64, _i64, _i64, ctypes.c_void_p]
_lib.lib.ml_cuda_cublas_available.restype = ctypes.c_int32
HAVE_CUBLAS = _lib.lib.ml_cuda_cublas_available() == 1


def view(ws, off, rows, cols, ld, batch, stride):
    """Column-major matrices (rows x cols, leading dimension ld) at float offset off of ws."""
    return ws.as_strided((batch, rows, cols), (stride, 1, ld), off)


def run_case(impl, m, n, k, flags, alpha, beta, *, batch=3, aligned=False, tile=(0, 0), split=0):
    ta, tb = flags & TRANS_A, flags & TRANS_B
    ar, ac = (k, m) if ta else (m, k)
    br, bc = (n, k) if tb else (k, n)

    def ld_of(rows, pad):
        return (rows + 3) // 4 * 4 + 4 if aligned else rows + pad

    lda, ldb, ldc = ld_of(ar, 3), ld_of(br, 1), ld_of(m, 2)
    a_floats, b_floats, c_floats = lda * ac, ldb * bc, ldc * n
    stride = a_floats + b_floats + c_floats + split * m * n + (0 if aligned else 3)
    stride = (stride + 3) // 4 * 4 if aligned else stride
    oa = 4 if aligned else 5
    ob, oc = oa + a_floats, oa + a_floats + b_floats
    op = oc + c_floats
    ws = torch.full((oa + batch * stride + 64,), float("nan"), device=DEV)
    gen = torch.Generator(device=DEV).manual_seed(m * 7919 + n * 31 + k + flags)
    A, B, C = (
        view(ws, o, r, c, ld, batch, stride)
        for o, r, c, ld in ((oa, ar, ac, lda), (ob, br, bc, ldb), (oc, m, n, ldc))
    )
    A.copy_(torch.randn(A.shape, device=DEV, generator=gen))
    B.copy_(torch.randn(B.shape, device=DEV, generator=gen))
    if beta != 0:
        C.copy_(torch.randn(C.shape, device=DEV, generator=gen))
    before = ws.clone()
    opa = A.double().mT if ta else A.double()
    opb = B.double().mT if tb else B.double()
    c0 = C.double() if beta != 0 else torch.zeros(C.shape, dtype=torch.float64, device=DEV)
    ref = alpha * (opa @ opb) + beta * c0
    scale = abs(alpha) * (opa.abs() @ opb.abs()) + abs(beta) * c0.abs()
    stream = torch.cuda.current_stream().cuda_stream
    st = _gemm(
        impl,
        tile[0],
        tile[1],
        flags,
        m,
        n,
        k,
        alpha,
        beta,
        ws.data_ptr(),
        oa,
        lda,
        ob,
        ldb,
        oc,
        ldc,
        batch,
        stride,
        op if split else 0,
        split * m * n,
        stream,
    )
    _lib.check(st, "ml_cuda_blocked_gemm")
    torch.cuda.synchronize()
    got = C.double()
    assert torch.isfinite(got).all(), "non-finite result (C read although beta == 0?)"
    ratio = ((got - ref).abs() / (max(k, 1) * ULP * scale.clamp_min(1e-300))).max().item()
    assert ratio <= GEMM_LIMIT, f"ratio {ratio:.3g}"
    # Outside C (and the split-k scratch) nothing changed: the padding rows, A, B, the guard.
    mask = torch.ones_like(ws, dtype=torch.bool)
    view(mask, oc, m, n, ldc, batch, stride).fill_(False)
    if split:
        view(mask, op, m * n, split, m * n, batch, stride).fill_(False)
    same = (ws[mask] == before[mask]) | (ws[mask].isnan() & before[mask].isnan())
    assert same.all(), "the product wrote outside C"


SHAPES = [(1, 1, 1), (37, 29, 53), (130, 67, 21), (257, 131, 300), (33, 500, 700), (600, 17, 999)]
IMPLS = [DIALECT] + ([CUBLAS] if HAVE_CUBLAS else [])


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: "dialect" if i == DIALECT else "cublas")
@pytest.mark.parametrize("flags", range(4))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_product_odd_shapes(impl, flags, shape):
    m, n, k = shape
    run_case(impl, m, n, k, flags, 1.0, 0.0)
    run_case(impl, m, n, k, flags, -1.0, 1.0, aligned=True)
    run_case(impl, m, n, k, flags, 0.5, 2.0, batch=1)


@pytest.mark.parametrize("tile", [(16, 8), (16, 4), (8, 4), (4, 4)], ids=str)
@pytest.mark.parametrize("flags", range(4))
def test_dialect_tiles(tile, flags):
    """Every tile variant of the step, aligned (vector loads) and not, tails in m, n and k."""
    for aligned in (False, True):
        run_case(DIALECT, 259, 141, 77, flags, 1.0, 0.0, aligned=aligned, tile=tile)
        run_case(DIALECT, 300, 260, 45, flags, -1.0, 1.0, aligned=aligned, tile=tile, batch=2)


@pytest.mark.parametrize("flags", range(4))
def test_dialect_split_k(flags):
    """Few tiles and a long k: split k through the scratch, summed by gemm_sum."""
    run_case(DIALECT, 40, 33, 2000, flags, 1.0, 0.0, split=16, batch=1)
    run_case(DIALECT, 129, 20, 1501, flags, -1.0, 1.0, split=16, batch=2, aligned=True)


def test_large_square_both_agree():
    """1024^2 x k 1024 through both: each within the bound of float64."""
    for impl in IMPLS:
        run_case(impl, 1024, 1024, 1024, 0, 1.0, 0.0, batch=1, aligned=True)
        run_case(impl, 1000, 1030, 990, TRANS_B, -1.0, 1.0, batch=2)


def test_default_route():
    """The routed default (METAL_LINALG_CUDA_GEMM unset: the step for thin products it can split,
    cuBLAS for the rest) on both kinds of product."""
    run_case(0, 4096, 32, 1024, 0, 1.0, 0.0, batch=1, aligned=True, split=16)
    run_case(0, 32, 700, 999, TRANS_A, -1.0, 1.0, batch=2, split=16)
    run_case(0, 300, 257, 129, TRANS_B, 1.0, 0.0, batch=2)
