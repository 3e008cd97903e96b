"""The decompositions: argument checks and conversions here, the work in _ext (C API).

Signatures follow mx.linalg's (svd's second positional argument is compute_uv). Each takes
a keyword-only `stream` so calls written for mx.linalg run unchanged; the decomposition
itself runs in metal_linalg's backends as its routing policy says, not on an MLX stream.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from ._loader import ext

ML_QR_MODES = {"reduced": 0, "r": 1, "complete": 2}
ML_UPLO = {"L": 0, "U": 1}


def _as_array(a, op: str) -> mx.array:
    """a as an mx.array of a real dtype (cast to float32 happens in _ext)."""
    if isinstance(a, mx.array):
        if mx.issubdtype(a.dtype, mx.complexfloating):
            raise TypeError(f"[metal_linalg.{op}] complex input is not supported (got {a.dtype})")
        if not (mx.issubdtype(a.dtype, mx.floating) or mx.issubdtype(a.dtype, mx.integer)):
            raise TypeError(f"[metal_linalg.{op}] expected a real numeric array, got {a.dtype}")
        return a
    arr = np.asarray(a)
    if arr.dtype.kind == "c":
        raise TypeError(f"[metal_linalg.{op}] complex input is not supported (got {arr.dtype})")
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"[metal_linalg.{op}] expected a real numeric array, got {arr.dtype}")
    # float32 on the NumPy side: MLX has no float64 on every device.
    return mx.array(np.ascontiguousarray(arr, dtype=np.float32))


def _matrix_dims(a: mx.array, op: str) -> tuple[int, int]:
    if a.ndim < 2:
        raise ValueError(
            f"[metal_linalg.{op}] expected an array of matrices [..., M, N], got shape {tuple(a.shape)}"
        )
    return a.shape[-2], a.shape[-1]


def _square(a: mx.array, op: str) -> None:
    m, n = _matrix_dims(a, op)
    if m != n:
        raise ValueError(
            f"[metal_linalg.{op}] expected square matrices, got shape {tuple(a.shape)}"
        )


def _uplo(UPLO: str, op: str) -> int:
    if UPLO not in ML_UPLO:
        raise ValueError(f"[metal_linalg.{op}] UPLO must be 'L' or 'U', got {UPLO!r}")
    return ML_UPLO[UPLO]


def qr(a, mode: str = "reduced", *, stream=None):
    """QR factorization of each matrix in a [..., M, N]; K = min(M, N).

    mode="reduced": (Q [..., M, K], R [..., K, N]); "r": R only (as numpy.linalg.qr);
    "complete": (Q [..., M, M], R [..., M, N]), square matrices only for now.
    """
    if mode not in ML_QR_MODES:
        raise ValueError(
            f"[metal_linalg.qr] mode must be 'reduced', 'r' or 'complete', got {mode!r}"
        )
    a = _as_array(a, "qr")
    m, n = _matrix_dims(a, "qr")
    if mode == "complete" and m != n:
        raise NotImplementedError(
            f"[metal_linalg.qr] mode='complete' needs square matrices for now, got {m}x{n}"
        )
    q, r = ext.qr(a, ML_QR_MODES[mode])
    return r if mode == "r" else (q, r)


def eigh(a, UPLO: str = "L", *, stream=None):
    """Eigenvalues (ascending) and eigenvectors (columns) of symmetric matrices a [..., N, N].

    Only the UPLO triangle is read. Returns (w [..., N], V [..., N, N]) as mx.linalg.eigh.
    """
    uplo = _uplo(UPLO, "eigh")
    a = _as_array(a, "eigh")
    _square(a, "eigh")
    return ext.eigh(a, uplo)


def eigvalsh(a, UPLO: str = "L", *, stream=None):
    """Eigenvalues (ascending) of symmetric matrices a [..., N, N]; only the UPLO triangle is read."""
    uplo = _uplo(UPLO, "eigvalsh")
    a = _as_array(a, "eigvalsh")
    _square(a, "eigvalsh")
    return ext.eigvalsh(a, uplo)


def svd(a, compute_uv: bool = True, *, full_matrices: bool = False, stream=None):
    """Singular value decomposition of each matrix in a [..., M, N]; K = min(M, N).

    Returns (U [..., M, K], S [..., K] descending, Vt [..., K, N]) with a = U diag(S) Vt,
    or S alone when compute_uv=False (as mx.linalg.svd). full_matrices=True needs square
    matrices for now (then it is the same as the thin result).
    """
    a = _as_array(a, "svd")
    m, n = _matrix_dims(a, "svd")
    if not compute_uv:
        return ext.svdvals(a)
    if full_matrices and m != n:
        raise NotImplementedError(
            f"[metal_linalg.svd] full_matrices=True needs square matrices for now, got {m}x{n}"
        )
    return ext.svd(a, bool(full_matrices))


def svdvals(a, *, stream=None):
    """Singular values (descending) of each matrix in a [..., M, N]: [..., min(M, N)]."""
    a = _as_array(a, "svdvals")
    _matrix_dims(a, "svdvals")
    return ext.svdvals(a)
