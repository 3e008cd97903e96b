"""Hypothesis fuzzing of what a caller can hand the ops: dtypes, strides, lazy negative and
conjugate views, shapes up to tall-skinny 10^6 x n, NaN/Inf placement (also in the triangle
eigh does not read) and both UPLO values in either case. Every result is compared with
torch.linalg in float64 on the same float32 values; non-finite matrices must give NaN there
and nowhere else."""

from __future__ import annotations

import math

import metal_linalg_torch as mlt
import torch
from accuracy import THRESH, ULP
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32]
FLOAT_LAYOUTS = ["neg", "neg_transposed", "conj_imag"]
LAYOUTS = ["contiguous", "transposed", "strided", "expanded"]


def _build(base: torch.Tensor, layout: str, dtype) -> torch.Tensor:
    """A tensor with base's values (float64, [..., m, n]) in the given layout and dtype."""
    if layout == "transposed":
        return base.mT.contiguous().to(dtype).mT
    if layout == "strided":
        *b, m, n = base.shape
        big = torch.zeros(*b, 2 * m + 1, 3 * n + 1, dtype=dtype)
        big[..., 1::2, ::3][..., :m, :n] = base.to(dtype)
        return big[..., 1::2, ::3][..., :m, :n]
    if layout == "expanded" and base.dim() > 2 and base.shape[0] > 0:
        return base[:1].to(dtype).expand(base.shape)
    if layout == "neg":
        return torch._neg_view((-base).to(dtype))
    if layout == "neg_transposed":
        return torch._neg_view((-base).mT.contiguous().to(dtype)).mT
    if layout == "conj_imag":
        cplx = torch.complex64 if dtype == torch.float32 else torch.complex128
        z = torch.complex(torch.randn_like(base), -base).to(cplx)
        return z.conj().imag  # the negative bit set: -(-base)
    return base.to(dtype)


@st.composite
def cases(draw, square: bool):
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    tall = not square and draw(st.integers(0, 5)) == 0
    if tall:  # tall-skinny (or its transpose): many rows, n tiny
        rows = draw(st.sampled_from([1000, 30_000, 200_000, 1_000_000]))
        cols = draw(st.integers(1, 3))
        batch, (m, n) = [], (rows, cols) if draw(st.booleans()) else (cols, rows)
    else:
        batch = draw(st.lists(st.integers(0, 3), max_size=2))
        m = draw(st.integers(0, 12))
        n = m if square else draw(st.integers(0, 12))
    dtype = draw(st.sampled_from(DTYPES))
    layouts = LAYOUTS + (FLOAT_LAYOUTS if dtype in (torch.float32, torch.float64) else [])
    layout = draw(st.sampled_from(layouts))
    scale = 50.0 if dtype == torch.int32 else draw(st.sampled_from([1.0, 1e-20, 1e20]))
    base = torch.randn(*batch, m, n, generator=g, dtype=torch.float64) * scale
    if dtype == torch.int32:
        base = base.round()
    if square:
        base = (base + base.mT) / 2
    bad = None
    count = math.prod(batch)
    if m and n and count and draw(st.booleans()):
        bad = (
            draw(st.integers(0, count - 1)),
            draw(st.integers(0, m - 1)),
            draw(st.integers(0, n - 1)),
            draw(st.sampled_from([math.nan, math.inf, -math.inf])),
        )
        flat = base.reshape(count, m, n)
        flat[bad[0], bad[1], bad[2]] = bad[3]
        if layout == "expanded":
            layout = "contiguous"  # one bad entry would be shared by every matrix
    uplo = draw(st.sampled_from(["L", "U", "l", "u"]))
    a = _build(base, layout, dtype)
    return a, uplo, bad


FUZZ = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _reference_input(a: torch.Tensor) -> torch.Tensor:
    """The float32 values the ops compute on, in float64, batch-flattened."""
    x = a.resolve_neg().to(torch.float32).to(torch.float64)
    return x.reshape(-1, *a.shape[-2:])


def _bad_matrices(x: torch.Tensor, uplo: str | None = None) -> torch.Tensor:
    """Which matrices hold a non-finite entry (for eigh: in the triangle UPLO reads)."""
    if uplo is not None:
        x = x.tril() if uplo.upper() == "L" else x.triu()
    return ~torch.isfinite(x).flatten(1).all(1)


def _close(got, ref, scale, what, tol):
    err = (got.double() - ref).abs().max().item() if ref.numel() else 0.0
    assert err <= tol * scale + 1e-300, f"{what}: error {err:.3g} vs scale {scale:.3g}"


@FUZZ
@given(cases(square=False))
def test_fuzz_qr_svd_against_float64(case):
    a, _, _ = case
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    q, r = mlt.qr(a)
    s = mlt.svdvals(a)
    u, s2, vh = mlt.svd(a)
    assert q.shape == (*a.shape[:-2], m, k) and r.shape == (*a.shape[:-2], k, n)
    assert s.shape == (*a.shape[:-2], k) and u.shape == (*a.shape[:-2], m, k)
    if not (m and n):
        return
    x = _reference_input(a)
    bad = _bad_matrices(x)
    q, r, s, u, s2, vh = (t.reshape(-1, *t.shape[a.dim() - 2 :]) for t in (q, r, s, u, s2, vh))
    # Rows of 10^6: float32 sums over many terms; the bound grows like sqrt(max(m, n)). QR's
    # threshold, the tightest, for the SVD too.
    tol = THRESH["qr"] * ULP * math.sqrt(max(m, n))
    for i in range(x.shape[0]):
        if bad[i]:
            for t in (q[i], r[i], s[i], u[i], s2[i], vh[i]):
                assert torch.isnan(t).all(), "a non-finite matrix must give NaN"
            continue
        ref = torch.linalg.svdvals(x[i])
        scale = ref[0].item() if k else 0.0
        _close(s[i], ref, scale, "svdvals", tol)
        _close(s2[i], ref, scale, "svd S", tol)
        _close(q[i].double() @ r[i].double(), x[i], scale, "Q R", tol)
        _close(u[i].double() * s2[i].double() @ vh[i].double(), x[i], scale, "U S Vh", tol)
        eye = torch.eye(k, dtype=torch.float64)
        _close(q[i].double().mT @ q[i].double(), eye, 1.0, "Q^T Q", tol)
        _close(u[i].double().mT @ u[i].double(), eye, 1.0, "U^T U", tol)
        _close(vh[i].double() @ vh[i].double().mT, eye, 1.0, "Vh Vh^T", tol)


@FUZZ
@given(cases(square=True))
def test_fuzz_eigh_against_float64(case):
    a, uplo, _ = case
    n = a.shape[-1]
    w, v = mlt.eigh(a, uplo)
    w2 = mlt.eigvalsh(a, uplo)
    assert w.shape == (*a.shape[:-2], n) and v.shape == a.shape
    if not n:
        return
    x = _reference_input(a)
    bad = _bad_matrices(x, uplo)
    w, v, w2 = w.reshape(-1, n), v.reshape(-1, n, n), w2.reshape(-1, n)
    tol = THRESH["eig"] * ULP * math.sqrt(n)
    for i in range(x.shape[0]):
        if bad[i]:
            assert torch.isnan(w[i]).all() and torch.isnan(v[i]).all() and torch.isnan(w2[i]).all()
            continue
        # The matrix the op reads: the UPLO triangle mirrored (the other may hold NaN).
        tri = x[i].tril() if uplo.upper() == "L" else x[i].triu()
        sym = tri + tri.mT - torch.diag(tri.diagonal())
        ref = torch.linalg.eigvalsh(sym)
        scale = ref.abs().max().item()
        _close(w[i], ref, scale, "eigh w", tol)
        _close(w2[i], ref, scale, "eigvalsh", tol)
        vd = v[i].double()
        _close(vd * w[i].double() @ vd.mT, sym, scale, "V W V^T", tol)
        _close(vd.mT @ vd, torch.eye(n, dtype=torch.float64), 1.0, "V^T V", tol)
