"""The matrix families of docs/design.md section 7 that the torch and MLX suites share: their
names, Haar-random orthogonal factors and spectra (NumPy, float64; each suite builds its matrices
from these: tests/python/torch/_matrices.py, tests/python/mlx/_mlx_helpers.py).
"""

from __future__ import annotations

import numpy as np
from accuracy import ULP

# Families of docs/design.md section 7; "scaled_*" are magnitudes near underflow and overflow.
FAMILIES = (
    "zero",
    "identity",
    "diagonal",
    "clustered",
    "geometric",
    "arithmetic",
    "random_log",
    "graded",
    "rank_deficient",
    "repeated",
    "random",
    "scaled_tiny",
    "scaled_huge",
)


def orthogonal(n: int, rng: np.random.Generator) -> np.ndarray:
    """Haar-random orthogonal n x n."""
    if n == 0:
        return np.zeros((0, 0))
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.where(np.diag(r) == 0, 1.0, np.diag(r)))


def spectrum(family: str, k: int, rng: np.random.Generator) -> np.ndarray:
    """k nonnegative magnitudes (descending-ish) for a spectral family, largest 1."""
    i = np.arange(k, dtype=np.float64)
    if k == 0:
        return np.zeros(0)
    if family == "clustered":
        d = np.full(k, ULP)
        d[0] = 1.0
    elif family == "geometric":
        d = ULP ** (i / max(k - 1, 1))
    elif family == "arithmetic":
        d = 1.0 - (1.0 - ULP) * i / max(k - 1, 1)
    elif family == "random_log":
        d = np.exp(rng.uniform(np.log(ULP), 0.0, k))
    elif family == "rank_deficient":
        d = rng.uniform(0.5, 1.0, k)
        d[k // 2 :] = 0.0
    elif family == "repeated":
        d = np.array([1.0, 2.0, 3.0])[np.arange(k) % 3]
    else:
        d = rng.uniform(0.1, 1.0, k)
    return d
