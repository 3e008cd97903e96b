"""The decompositions: argument checks here, the work in lazy MLX primitives (_ext).

Signatures follow mx.linalg's (svd's second positional argument is compute_uv). Each call
returns unevaluated mx.array outputs of one graph node; `mx.eval` (or any use that needs the
values) runs it on the stream given by the keyword-only `stream` (None: the default stream of
MLX's default device; an mx.Stream; or an mx.Device / mx.cpu / mx.gpu for its default stream).
A small call on a CPU stream (at most 32x32 matrices, batch x N^3 <= 32^3) whose input is
already evaluated runs at once instead and returns evaluated outputs (the same values: a
graph node would cost more than the kernel there); inside mx.compile, mx.vmap and the
gradient transforms the inputs are traced, so the calls stay graph nodes.
The `*_ex` variants add the per-matrix info word (int32 [...]; 0 = converged and finite; bits
ML_INFO_* of the C API: 1 not converged, 2 non-finite input, 4 rank deficient; bits 16..31 the
sweep count) as their last output.
"""

from __future__ import annotations

import warnings

import mlx.core as mx
import numpy as np

from ._loader import ext
from ._shared.queries import OP_ID

ML_QR_MODES = {"reduced": 0, "r": 1, "complete": 2}
ML_UPLO = {"L": 0, "U": 1, "l": 0, "u": 1}
# Each function's op id, from the core's op table.
OP_QR = OP_ID["qr"]
OP_EIGH = OP_ID["eigh"]
OP_EIGVALSH = OP_ID["eigvalsh"]
OP_SVD = OP_ID["svd"]
OP_SVDVALS = OP_ID["svdvals"]

INFO_NOT_CONVERGED = 0x1
INFO_NONFINITE = 0x2
INFO_RANK_DEFICIENT = 0x4
INFO_SWEEPS_SHIFT = 16


class LinAlgError(RuntimeError):
    """check_errors=True of an *_ex function: a matrix did not converge or had NaN/Inf entries
    (as torch.linalg.LinAlgError)."""


def check_info(info: mx.array, name: str) -> None:
    """Evaluates info and raises LinAlgError for the first matrix that did not converge or had
    a non-finite entry (the message of the torch package's check_errors)."""
    flat = np.asarray(info).reshape(-1)
    bad = np.flatnonzero(flat & (INFO_NOT_CONVERGED | INFO_NONFINITE))
    if bad.size:
        i = int(bad[0])
        why = "did not converge" if flat[i] & INFO_NOT_CONVERGED else "has NaN/Inf entries"
        where = f" (batch index {i})" if info.ndim else ""
        raise LinAlgError(f"[metal_linalg.{name}] the input matrix{where} {why}")


def _checked(out, check_errors: bool, name: str) -> tuple:
    out = tuple(out)
    if check_errors:
        check_info(out[-1], name)
    return out


def _as_array(a, op: str) -> mx.array:
    """a as an mx.array of a real dtype (the cast to float32 is an MLX op in the graph)."""
    if isinstance(a, mx.array):
        dtype = a.dtype
        if dtype == mx.float32:  # the common case, without the two subtype queries
            return a
        if mx.issubdtype(dtype, mx.complexfloating):
            raise TypeError(f"[metal_linalg.{op}] complex input is not supported (got {a.dtype})")
        if not (mx.issubdtype(dtype, mx.floating) or mx.issubdtype(dtype, mx.integer)):
            raise TypeError(f"[metal_linalg.{op}] expected a real numeric array, got {a.dtype}")
        return a
    arr = np.asarray(a)
    if arr.dtype.kind == "c":
        raise TypeError(f"[metal_linalg.{op}] complex input is not supported (got {arr.dtype})")
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"[metal_linalg.{op}] expected a real numeric array, got {arr.dtype}")
    # float32 on the NumPy side: MLX has no float64 on every device.
    return mx.array(np.ascontiguousarray(arr, dtype=np.float32))


_GPU_PATH = ext.gpu_path()
_warned_no_gpu_path = False


def _note_cpu_placement(device) -> None:
    """One warning per process when MLX's GPU stream is asked for but this build has no GPU
    path for it (gpu_path() == "none" on an MLX with a GPU, e.g. a Metal MLX where the core was
    built without its Metal backend): the work runs on the CPU stream."""
    global _warned_no_gpu_path
    if _warned_no_gpu_path or _GPU_PATH != "none" or device != mx.gpu:
        return
    _warned_no_gpu_path = True
    warnings.warn(
        "this metal_linalg build has no path on MLX's GPU stream: calls on it run on the CPU "
        "stream (MLX orders the two); pass stream=mx.cpu to silence this",
        RuntimeWarning,
        stacklevel=6,
    )


_CPU_TYPE = mx.DeviceType.cpu


def resolve_stream(stream, name: str, warn: bool = True) -> mx.Stream:
    """The mx.Stream a call with `stream` runs on (None: the default stream of MLX's default
    device). The GPU on an MLX without one (mlx[cpu]) is a ValueError, as in mx.linalg."""
    if stream is None:
        device = mx.default_device()
    elif isinstance(stream, mx.Stream):
        device = stream.device
    elif isinstance(stream, (mx.Device, mx.DeviceType)):
        device = mx.Device(stream) if isinstance(stream, mx.DeviceType) else stream
    else:
        raise TypeError(
            f"[metal_linalg.{name}] stream must be None, an mx.Stream or an mx.Device, "
            f"got {type(stream).__name__}"
        )
    if device.type is _CPU_TYPE:
        pass  # the common case, nothing to check (enum equality costs 0.3 us, identity 0.03)
    elif device.type == mx.DeviceType.gpu and not mx.is_available(mx.gpu):
        raise ValueError(
            f"[metal_linalg.{name}] stream={stream!r}: this MLX has no GPU backend (mlx[cpu]); "
            "use stream=mx.cpu or install a GPU flavour of MLX"
        )
    elif warn:
        _note_cpu_placement(device)
    if isinstance(stream, mx.Stream):
        return stream
    return mx.default_stream(device)


def _stream(stream, op: str):
    """The mx.Stream a call runs on, or None for the default stream of the default device."""
    if stream is None and mx.default_device().type is _CPU_TYPE:
        return None  # the common case, with nothing to check
    s = resolve_stream(stream, op)
    return None if stream is None else s


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
        raise ValueError(f"[metal_linalg.{op}] UPLO must be 'L', 'U', 'l' or 'u', got {UPLO!r}")
    return ML_UPLO[UPLO]


def _qr(a, mode, stream, with_info):
    if mode not in ML_QR_MODES:
        raise ValueError(
            f"[metal_linalg.qr] mode must be 'reduced', 'r' or 'complete', got {mode!r}"
        )
    s = _stream(stream, "qr")
    a = _as_array(a, "qr")
    m, n = _matrix_dims(a, "qr")
    if mode == "complete" and m > n:
        batch = tuple(a.shape[:-2])
        if n == 0:  # no reflector: Q is the identity
            q = mx.broadcast_to(mx.eye(m, dtype=mx.float32), (*batch, m, m))
            info = [mx.zeros(batch, dtype=mx.int32)] if with_info else []
            return [q, mx.zeros((*batch, m, 0), dtype=mx.float32), *info]

        # A tall complete Q's last m - n columns are any orthonormal basis of the complement
        # of a's range: no derivative (as torch). The primitive runs on a stop_gradient input
        # so that the transforms reach these rules (forward mode would differentiate it first).
        def no_derivative(*_):
            raise ValueError(
                "[metal_linalg.qr] the QR decomposition is not differentiable when "
                f"mode='complete' and M > N (got {m}x{n}: Q's last {m - n} columns are not "
                "unique); use mode='reduced'"
            )

        complete = mx.custom_function(
            lambda x: tuple(
                ext.decompose(mx.stop_gradient(x), OP_QR, ML_QR_MODES[mode], with_info, s)
            )
        )
        complete.vjp(no_derivative)
        complete.jvp(no_derivative)
        return list(complete(a))
    return ext.decompose(a, OP_QR, ML_QR_MODES[mode], with_info, s)


def qr(a, mode: str = "reduced", *, stream=None):
    """QR factorization of each matrix in a [..., M, N]; K = min(M, N).

    mode="reduced": (Q [..., M, K], R [..., K, N]); "r": R only (as numpy.linalg.qr);
    "complete": (Q [..., M, M], R [..., M, N], R's rows below N zero; for M <= N the same as
    "reduced"). Differentiable for any M, N (mode="r" too: its derivatives compute Q from a
    reduced factorization of a), except a tall
    (M > N) "complete" (Q's last M - N columns are not unique: mx.grad / mx.jvp raise).
    """
    out = _qr(a, mode, stream, False)
    return out[0] if mode == "r" else tuple(out)


def qr_ex(a, mode: str = "reduced", *, check_errors: bool = False, stream=None):
    """qr plus the per-matrix info word: (Q, R, info), or (R, info) for mode="r".
    check_errors=True evaluates the call and raises LinAlgError for a non-finite matrix."""
    return _checked(_qr(a, mode, stream, True), check_errors, "qr_ex")


def _eigh(a, UPLO, stream, op, with_info):
    uplo = _uplo(UPLO, "eigh" if op == OP_EIGH else "eigvalsh")
    name = "eigh" if op == OP_EIGH else "eigvalsh"
    s = _stream(stream, name)
    a = _as_array(a, name)
    _square(a, name)
    return ext.decompose(a, op, uplo, with_info, s)


def eigh(a, UPLO: str = "L", *, stream=None):
    """Eigenvalues (ascending) and eigenvectors (columns) of symmetric matrices a [..., N, N].

    Only the UPLO triangle is read. Returns (w [..., N], V [..., N, N]) as mx.linalg.eigh.
    """
    return tuple(_eigh(a, UPLO, stream, OP_EIGH, False))


def eigh_ex(a, UPLO: str = "L", *, check_errors: bool = False, stream=None):
    """eigh plus the per-matrix info word: (w, V, info). check_errors=True evaluates the call
    and raises LinAlgError for a matrix that did not converge or had NaN/Inf entries."""
    return _checked(_eigh(a, UPLO, stream, OP_EIGH, True), check_errors, "eigh_ex")


def eigvalsh(a, UPLO: str = "L", *, stream=None):
    """Eigenvalues (ascending) of symmetric matrices a [..., N, N]; only the UPLO triangle is read."""
    return _eigh(a, UPLO, stream, OP_EIGVALSH, False)[0]


def eigvalsh_ex(a, UPLO: str = "L", *, check_errors: bool = False, stream=None):
    """eigvalsh plus the per-matrix info word: (w, info); check_errors as eigh_ex."""
    return _checked(_eigh(a, UPLO, stream, OP_EIGVALSH, True), check_errors, "eigvalsh_ex")


def _svd(a, full_matrices, stream, with_info):
    s = _stream(stream, "svd")
    a = _as_array(a, "svd")
    m, n = _matrix_dims(a, "svd")
    if full_matrices and m != n:
        raise NotImplementedError(
            f"[metal_linalg.svd] full_matrices=True needs square matrices for now, got {m}x{n}"
        )
    return ext.decompose(a, OP_SVD, 1 if full_matrices else 0, with_info, s)


def _svdvals(a, stream, with_info):
    s = _stream(stream, "svdvals")
    a = _as_array(a, "svdvals")
    _matrix_dims(a, "svdvals")
    return ext.decompose(a, OP_SVDVALS, 0, with_info, s)


def svd(a, compute_uv: bool = True, *, full_matrices: bool = False, stream=None):
    """Singular value decomposition of each matrix in a [..., M, N]; K = min(M, N).

    Returns (U [..., M, K], S [..., K] descending, Vt [..., K, N]) with a = U diag(S) Vt,
    or S alone when compute_uv=False (as mx.linalg.svd). full_matrices=True needs square
    matrices for now (then it is the same as the thin result).
    """
    if not compute_uv:
        return _svdvals(a, stream, False)[0]
    return tuple(_svd(a, full_matrices, stream, False))


def svd_ex(
    a,
    compute_uv: bool = True,
    *,
    full_matrices: bool = False,
    check_errors: bool = False,
    stream=None,
):
    """svd plus the per-matrix info word: (U, S, Vt, info), or (S, info) when compute_uv=False;
    check_errors as eigh_ex."""
    if not compute_uv:
        return _checked(_svdvals(a, stream, True), check_errors, "svd_ex")
    return _checked(_svd(a, full_matrices, stream, True), check_errors, "svd_ex")


def svdvals(a, *, stream=None):
    """Singular values (descending) of each matrix in a [..., M, N]: [..., min(M, N)]."""
    return _svdvals(a, stream, False)[0]


def svdvals_ex(a, *, check_errors: bool = False, stream=None):
    """svdvals plus the per-matrix info word: (S, info); check_errors as eigh_ex."""
    return _checked(_svdvals(a, stream, True), check_errors, "svdvals_ex")


def gpu_path() -> str:
    """What this build runs on MLX's GPU stream: "cuda" (the core's CUDA kernels on MLX's CUDA
    stream), "metal" (the core's Metal kernels encoded into MLX's Metal command encoder; written
    and type-checked against mlx-metal 0.32.4's headers, not yet built or run on a Mac) or
    "none" (no GPU path in this build: calls on the GPU stream run on the CPU stream)."""
    return ext.gpu_path()
