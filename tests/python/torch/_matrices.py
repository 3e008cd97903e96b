"""Test matrices (LAPACK latms-style families) and LAPACK's accuracy ratios (docs/design.md section 7).

Matrices are built in float64 with NumPy and rounded to float32; ratios are computed in float64 and
use the 1-norm as LAPACK's testing routines do. Thresholds: tests/python/accuracy.py.
"""

from __future__ import annotations

import numpy as np
import torch
from accuracy import THRESH, TINY, ULP  # noqa: F401 (re-exported to the suite)
from families import FAMILIES, orthogonal, spectrum


def symmetric(family: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Symmetric n x n matrix of the family (float64, exactly representable in float32 after rounding)."""
    if family == "zero":
        return np.zeros((n, n))
    if family == "identity":
        return np.eye(n)
    if family == "diagonal":
        return np.diag(rng.uniform(-1.0, 1.0, n))
    if family == "random":
        b = rng.standard_normal((n, n))
        return (b + b.T) / 2
    if family == "graded":
        b = rng.standard_normal((n, n))
        dg = np.diag(2.0 ** np.linspace(-10, 10, n)) if n > 1 else np.eye(n)
        return dg @ ((b + b.T) / 2) @ dg
    if family in ("scaled_tiny", "scaled_huge"):
        scale = 1e-30 if family == "scaled_tiny" else 1e37
        d = rng.uniform(-1.0, 1.0, n) * scale
        q = orthogonal(n, rng)
        return (q * d) @ q.T
    d = spectrum(family, n, rng) * rng.choice([-1.0, 1.0], n)
    if family == "repeated":
        d = np.abs(d) * np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    q = orthogonal(n, rng)
    return (q * d) @ q.T


def general(family: str, m: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """m x n matrix of the family (float64)."""
    k = min(m, n)
    if family == "zero":
        return np.zeros((m, n))
    if family == "identity":
        return np.eye(m, n)
    if family == "diagonal":
        return np.eye(m, n) * rng.uniform(-1.0, 1.0, n)
    if family == "random":
        return rng.standard_normal((m, n))
    if family == "graded":
        b = rng.standard_normal((m, n))
        return (2.0 ** np.linspace(-10, 10, m))[:, None] * b * (2.0 ** np.linspace(10, -10, n))
    if family in ("scaled_tiny", "scaled_huge"):
        scale = 1e-30 if family == "scaled_tiny" else 1e37
        return rng.uniform(-1.0, 1.0, (m, n)) * scale
    s = spectrum(family, k, rng)
    u = orthogonal(m, rng)[:, :k]
    v = orthogonal(n, rng)[:, :k]
    return (u * s) @ v.T


def batch(kind: str, m: int, n: int, seed: int = 0, families=FAMILIES) -> torch.Tensor:
    """One float32 tensor [len(families), m, n] holding every family (kind: 'sym' or 'gen')."""
    rng = np.random.default_rng(seed)
    mats = [symmetric(f, n, rng) if kind == "sym" else general(f, m, n, rng) for f in families]
    return torch.from_numpy(np.stack(mats).reshape(len(families), m, n).astype(np.float32))


# ---- LAPACK ratios, float64 ----


def _norm1(x: np.ndarray) -> float:
    if x.size == 0:
        return 0.0
    return float(np.abs(x).sum(axis=-2).max())


def _scaled(resid: float, anorm: float, size: int) -> float:
    """resid / (anorm * size * ulp), guarded as LAPACK's ssyt21 guards a tiny ||A||."""
    size = max(size, 1)
    anorm = max(anorm, TINY)
    if anorm > resid:
        return (resid / anorm) / (size * ULP)
    if anorm < 1.0:
        return (min(resid, size * anorm) / anorm) / (size * ULP)
    return min(resid / anorm, float(size)) / (size * ULP)


def _np(t) -> np.ndarray:
    return (
        t.detach().cpu().double().numpy()
        if isinstance(t, torch.Tensor)
        else np.asarray(t, np.float64)
    )


def orth_ratio(q, size: int) -> float:
    """||I - Q^T Q|| / (size ulp)."""
    q = _np(q)
    if q.size == 0:
        return 0.0
    return _norm1(np.eye(q.shape[-1]) - q.T @ q) / (max(size, 1) * ULP)


def eigh_ratios(a, w, v) -> tuple:
    """(||A - V diag(w) V^T|| / (||A|| n ulp), ||I - V^T V|| / (n ulp))."""
    a, w, v = _np(a), _np(w), _np(v)
    n = a.shape[-1]
    resid = _norm1(a - (v * w) @ v.T)
    return _scaled(resid, _norm1(a), n), orth_ratio(v, n)


def svd_ratios(a, u, s, vh) -> tuple:
    """(||A - U S V^T|| / (||A|| max(m,n) ulp), ||I - U^T U|| / (m ulp), ||I - V^T V|| / (n ulp))."""
    a, u, s, vh = _np(a), _np(u), _np(s), _np(vh)
    m, n = a.shape
    resid = _norm1(a - (u * s) @ vh)
    return _scaled(resid, _norm1(a), max(m, n)), orth_ratio(u, m), orth_ratio(vh.T, n)


def qr_ratios(a, q, r) -> tuple:
    """(||A - Q R|| / (m ||A|| ulp), ||I - Q^T Q|| / (m ulp))."""
    a, q, r = _np(a), _np(q), _np(r)
    m = a.shape[0]
    resid = _norm1(a - q @ r)
    return _scaled(resid, _norm1(a), m), orth_ratio(q, m)


def values_ratio(x, ref, anorm: float, size: int) -> float:
    """max |x - ref| / (||A|| size ulp): computed eigen/singular values vs float64 LAPACK."""
    x, ref = _np(x), _np(ref)
    if x.size == 0:
        return 0.0
    return _scaled(float(np.abs(x - ref).max()), anorm, size)


def eigvals_ref(a) -> np.ndarray:
    return np.linalg.eigvalsh(_np(a))


def svdvals_ref(a) -> np.ndarray:
    return np.linalg.svd(_np(a), compute_uv=False)


def norm1(a) -> float:
    return _norm1(_np(a))
