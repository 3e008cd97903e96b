"""Loader of the packaged C core (libmetal_linalg.so) with ctypes.

Every C function gets its argtypes/restype here once; ctypes.CDLL calls release the
GIL, so decompositions in different Python threads run concurrently in the core.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import warnings

from ._shared.queries import bind_ops

ML_OK = 0
ML_INVALID_ARGUMENT = 1
ML_RUNTIME_ERROR = 2
ML_OUT_OF_MEMORY = 3

ML_MEMORY_HOST = 0
ML_MEMORY_CUDA = 1

ML_QR_REDUCED = 0
ML_QR_R = 1
ML_QR_COMPLETE = 2

ML_LOWER = 0
ML_UPPER = 1

ML_DTYPE_FLOAT32 = 0
ML_DTYPE_INT32 = 1

_f32p = ctypes.c_void_p  # raw addresses from tensor.data_ptr()
_i64 = ctypes.c_int64
_i32 = ctypes.c_int32


class MlExec(ctypes.Structure):
    """Mirror of struct ml_exec (metal_linalg.h)."""

    _fields_ = [
        ("memory", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_int64),
        ("reserved", ctypes.c_int64 * 4),
    ]


_i64p = ctypes.POINTER(ctypes.c_int64)
_SIGNATURES = {
    # inputs, sizes and outputs as raw addresses of the caller's ctypes arrays (cheapest)
    "ml_run": (_i32, [ctypes.c_void_p, _i32, _f32p, _f32p, _i32, _f32p, _f32p]),
    "ml_plan": (
        _i32,
        [ctypes.c_void_p, _i32, _f32p, _i32, ctypes.POINTER(_i32), _i64p, ctypes.c_void_p],
    ),
    "ml_workspace_size": (
        _i32,
        [ctypes.c_void_p, _i32, _i64, _i64, _i64, _i32, ctypes.POINTER(ctypes.c_int64)],
    ),
    "ml_op_count": (_i32, []),
    "ml_op_name": (ctypes.c_char_p, [_i32]),
    "ml_output_count": (_i32, [_i32]),
    "ml_op_inputs": (_i32, [_i32]),
    "ml_op_kernels": (_i32, [_i32]),
    "ml_op_linear_system": (_i32, [_i32]),
    "ml_output_desc": (
        _i32,
        [_i32, _i32, _i32, ctypes.c_void_p, ctypes.POINTER(_i32), ctypes.c_char_p, ctypes.c_void_p],
    ),
    "ml_last_error": (ctypes.c_char_p, []),
    "ml_api_version": (_i32, []),
    "ml_version_string": (ctypes.c_char_p, []),
    "ml_device_name": (ctypes.c_char_p, []),
    "ml_backend_available": (_i32, [ctypes.c_char_p]),
    "ml_backend": (ctypes.c_char_p, [_i32, _i32, _i64, _i64, _i64]),
    "ml_backend_rhs": (ctypes.c_char_p, [_i32, _i32, _i64, _i64, _i64]),
    "ml_policy_get": (
        _i32,
        [_i32, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
    ),
    "ml_policy_set": (_i32, [_i32, ctypes.c_char_p, _i64]),
    "ml_policy_reset": (_i32, [_i32]),
    "ml_policy_source": (ctypes.c_char_p, [_i32]),
    "ml_calibration_status": (ctypes.c_char_p, [_i32]),
    "ml_policy_file": (ctypes.c_char_p, []),
    "ml_policy_reload": (_i32, []),
    "ml_set_cpu_threads": (_i32, [_i32]),
    "ml_get_cpu_threads": (_i32, []),
    "ml_set_lapack": (_i32, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]),
    "ml_lapack_info": (ctypes.c_char_p, []),
    "ml_take_warnings": (
        _i32,
        [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
    ),
    "ml_pending_warnings": (_i32, []),
    "ml_set_iteration_cap": (_i32, [_i32]),
}

# Per-matrix info word bits (metal_linalg.h); bits 16+ count sweeps.
ML_INFO_NOT_CONVERGED = 0x1
ML_INFO_NONFINITE = 0x2
ML_INFO_RANK_DEFICIENT = 0x4

API_VERSION = 1


def _library_path() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    names = {"darwin": "libmetal_linalg*.dylib", "win32": "metal_linalg*.dll"}
    hits = sorted(glob.glob(os.path.join(here, names.get(sys.platform, "libmetal_linalg.so*"))))
    if not hits:
        raise ImportError(
            f"[metal_linalg_torch] the core library is missing from {here}; "
            "reinstall with `pip install ./python-torch`"
        )
    return hits[0]


def _openblas_path() -> str | None:
    """libscipy_openblas from the scipy-openblas32 wheel, or None (e.g. macOS: Accelerate)."""
    try:
        import scipy_openblas32 as sob
    except ImportError:
        return None
    lib_dir, stem = sob.get_lib_dir(), sob.get_library()
    for pattern in (f"lib{stem}.so*", f"lib{stem}*.dylib", f"{stem}*.dll", f"lib{stem}*"):
        hits = sorted(glob.glob(os.path.join(lib_dir, pattern)))
        if hits:
            return hits[0]
    return None


def _load() -> ctypes.CDLL:
    lib = ctypes.CDLL(_library_path())
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    version = lib.ml_api_version()
    if version != API_VERSION:
        raise ImportError(
            f"[metal_linalg_torch] core library API version {version}, expected {API_VERSION}"
        )
    # Claim the core's warnings: from now on they queue for emit_warnings() instead of
    # going to stderr.
    lib.ml_take_warnings(None, 0, None)
    openblas = _openblas_path()
    if openblas is not None and lib.ml_set_lapack(openblas.encode(), b"scipy_", b"_") != ML_OK:
        raise ImportError(
            f"[metal_linalg_torch] cannot use LAPACK from {openblas}: " + text(lib.ml_last_error())
        )
    return lib


class MetalLinalgError(RuntimeError):
    """The core reported a runtime failure."""


class MetalLinalgWarning(UserWarning):
    """A setting was ignored or adjusted where it took effect (a garbage METAL_LINALG_* value,
    a forced GPU backend without a GPU, an unreadable or malformed policy file, ...)."""


def emit_warnings() -> None:
    """Raise the core's pending warnings as MetalLinalgWarning (each distinct text once)."""
    buf = ctypes.create_string_buffer(4096)
    while lib.ml_pending_warnings() > 0:
        lib.ml_take_warnings(buf, len(buf), None)
        for line in buf.value.decode(errors="replace").splitlines():
            if line:
                warnings.warn(line, MetalLinalgWarning, stacklevel=3)


def check(status: int, name: str) -> None:
    """Raise the core's per-thread error message for a non-OK status of function `name`;
    hand on the core's pending warnings first."""
    if lib.ml_pending_warnings():
        emit_warnings()
    if status == ML_OK:
        return
    message = (lib.ml_last_error() or b"").decode(errors="replace")
    # The core's message names its function already ("[metal_linalg::qr] ...").
    text = f"{message} (status {status})" if message else f"[metal_linalg.{name}] failed"
    if status == ML_INVALID_ARGUMENT:
        raise ValueError(text)
    if status == ML_OUT_OF_MEMORY:
        raise MemoryError(text)
    raise MetalLinalgError(text)


def text(raw: bytes | None) -> str:
    return (raw or b"").decode(errors="replace")


lib = _load()

# Op names in ml_op order, from the core's op table; also the names of policy files and
# environment variables. OPS: the decompositions with GPU kernels (the benchmark's default grid);
# ALL_OPS adds the linear systems (linsys.py, LAPACK's info words: ml_op_linear_system; on CUDA
# tensors they run the core's kernels where it has them); OP_ID: the ml_op value of every name.
# The shared code's lists (queries.OPS, LINSYS_OPS, POLICY_OPS) are bound below.
ALL_OPS = tuple(text(lib.ml_op_name(i)) for i in range(lib.ml_op_count()))
OPS = tuple(
    name
    for i, name in enumerate(ALL_OPS)
    if lib.ml_op_kernels(i) and not lib.ml_op_linear_system(i)
)
OP_ID = {name: i for i, name in enumerate(ALL_OPS)}


def output_symbols(op: int, flags: int) -> tuple:
    """Per output of op under flags (the table's order): its dimensions as 'm', 'n', 'k'
    (= min(m, n)) symbols, or None where the op has no such output (q of qr mode 'r')."""
    out = []
    for i in range(lib.ml_output_count(op)):
        ndim = _i32(0)
        dims = ctypes.create_string_buffer(2)
        check(lib.ml_output_desc(op, flags, i, None, ctypes.byref(ndim), dims, None), ALL_OPS[op])
        out.append(tuple(dims.raw[: ndim.value].decode()) if ndim.value else None)
    return tuple(out)


bind_ops(
    ALL_OPS,
    lambda op: [d for d in output_symbols(op, 0) if d is not None],
    lambda op: bool(lib.ml_op_kernels(op)),
    lambda op: bool(lib.ml_op_linear_system(op)),
    lambda op: int(lib.ml_op_inputs(op)),
)
