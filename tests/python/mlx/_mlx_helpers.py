"""Test matrices and LAPACK's accuracy ratios (docs/design.md section 7) for the MLX package tests.

Matrices are made in float64 and rounded to float32 (the rounded matrix is the one tested);
ratios are computed in float64 with 1-norms, as LAPACK's testing routines do.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from accuracy import THRESH, TINY, ULP  # noqa: F401 (re-exported to the suite)
from families import FAMILIES, orthogonal, spectrum  # noqa: F401 (re-exported to the suite)

# Every op with a routing policy, in the core's table order: the decompositions, then the linear
# systems.
DECOMPOSITIONS = ("qr", "eigh", "eigvalsh", "svd", "svdvals")
LINSYS = ("cholesky", "solve", "inv", "solve_triangular", "lu_factor")
POLICY_OPS = DECOMPOSITIONS + LINSYS

SCALE = {"scaled_tiny": 1e-30, "scaled_huge": 1e37}


def np32(x) -> np.ndarray:
    """An mx.array (or anything array-like) as a float64 NumPy array."""
    if isinstance(x, mx.array):
        x = np.array(x)
    return np.asarray(x, dtype=np.float64)


def symmetric(family: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """A symmetric n x n float32 matrix (as float64) of the family."""
    if family == "zero":
        a = np.zeros((n, n))
    elif family == "identity":
        a = np.eye(n)
    elif family == "diagonal":
        a = np.diag(rng.uniform(-1.0, 1.0, n))
    elif family in ("random", "scaled_tiny", "scaled_huge"):
        b = rng.standard_normal((n, n))
        a = (b + b.T) / 2 * SCALE.get(family, 1.0)
    elif family == "graded":
        b = rng.standard_normal((n, n))
        g = np.diag(2.0 ** np.linspace(-10, 10, n))
        a = g @ ((b + b.T) / 2) @ g
    else:
        d = spectrum(family, n, rng) * rng.choice([-1.0, 1.0], n)
        q = orthogonal(n, rng)
        a = (q * d) @ q.T
        a = (a + a.T) / 2
    return a.astype(np.float32).astype(np.float64)


def general(family: str, m: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """An m x n float32 matrix (as float64) of the family."""
    k = min(m, n)
    if family == "zero":
        a = np.zeros((m, n))
    elif family == "identity":
        a = np.eye(m, n)
    elif family == "diagonal":
        a = np.eye(m, n) * np.concatenate([rng.uniform(-1.0, 1.0, k), np.zeros(max(m, n) - k)])[:n]
    elif family in ("random", "scaled_tiny", "scaled_huge"):
        a = rng.standard_normal((m, n)) * SCALE.get(family, 1.0)
    elif family == "graded":
        a = np.diag(2.0 ** np.linspace(-10, 10, m)) @ rng.standard_normal((m, n))
        a = a @ np.diag(2.0 ** np.linspace(-10, 10, n))
    else:
        s = spectrum(family, k, rng)
        a = (orthogonal(m, rng)[:, :k] * s) @ orthogonal(n, rng)[:k, :]
    return a.astype(np.float32).astype(np.float64)


def norm1(a: np.ndarray) -> float:
    return float(np.abs(a).sum(axis=-2).max()) if a.size else 0.0


def _den(x: float) -> float:
    return max(x, TINY)


def eigh_ratios(a, w, v) -> dict:
    a, w, v = np32(a), np32(w), np32(v)
    n = a.shape[-1]
    an = norm1(a)
    return {
        "residual": norm1(a - (v * w) @ v.T) / (_den(an) * n * ULP) if an else norm1((v * w) @ v.T),
        "orthogonality": norm1(np.eye(n) - v.T @ v) / (n * ULP),
    }


def eigvals_ratio(a, w) -> float:
    """max |w - w_float64| / (||A||_1 n ulp), w_float64 from LAPACK in float64."""
    a, w = np32(a), np32(w)
    n = a.shape[-1]
    ref = np.linalg.eigvalsh(a)
    an = norm1(a)
    err = float(np.abs(w - ref).max())
    return err / (_den(an) * n * ULP) if an else err


def svd_ratios(a, u, s, vt) -> dict:
    a, u, s, vt = np32(a), np32(u), np32(s), np32(vt)
    m, n = a.shape
    an = norm1(a)
    rec = (u * s) @ vt
    return {
        "residual": norm1(a - rec) / (_den(an) * max(m, n) * ULP) if an else norm1(rec),
        "u_orthogonality": norm1(np.eye(u.shape[1]) - u.T @ u) / (m * ULP),
        "v_orthogonality": norm1(np.eye(vt.shape[0]) - vt @ vt.T) / (n * ULP),
    }


def svals_ratio(a, s) -> float:
    a, s = np32(a), np32(s)
    ref = np.linalg.svd(a, compute_uv=False)
    an = norm1(a)
    err = float(np.abs(s - ref).max()) if s.size else 0.0
    return err / (_den(an) * max(a.shape) * ULP) if an else err


def qr_ratios(a, q, r) -> dict:
    a, q, r = np32(a), np32(q), np32(r)
    m = a.shape[0]
    an = norm1(a)
    return {
        "residual": norm1(a - q @ r) / (_den(an) * m * ULP) if an else norm1(q @ r),
        "orthogonality": norm1(np.eye(q.shape[1]) - q.T @ q) / (m * ULP),
    }


def columns_match_up_to_sign(x: np.ndarray, y: np.ndarray, atol: float) -> bool:
    """Columns of x equal columns of y up to a per-column sign, within atol."""
    x, y = np32(x), np32(y)
    sign = np.sign(np.sum(x * y, axis=-2, keepdims=True))
    sign[sign == 0] = 1.0
    return bool(np.allclose(x * sign, y, atol=atol, rtol=0))
