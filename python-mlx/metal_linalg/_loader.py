"""Loads the compiled module after checking it was built against the running MLX,
and points the core at a LAPACK provider."""

from __future__ import annotations

import glob
import os
import sys

import mlx.core as mx

from . import _build_info
from ._shared.queries import bind_ops


def _release(version: str) -> str:
    """ "0.32.4" from "0.32.4", "0.32.4.dev20261001+abc" or "0.32.4rc1"."""
    parts = []
    for piece in version.split(".")[:3]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(digits or "0")
    return ".".join(parts)


def check_mlx_version(built: str, running: str) -> None:
    """Raise ImportError unless the running MLX is the release this build was compiled against.

    MLX has no stable C++ ABI, so the compiled module only works with that release.
    """
    if _release(built) != _release(running):
        raise ImportError(
            f"metal_linalg was built against MLX {built} but MLX {running} is installed; "
            f"install mlx=={built} or rebuild metal_linalg (pip install --force-reinstall "
            "--no-cache-dir metal-linalg) against the installed MLX"
        )


def _installed_flavour() -> str:
    """ "cuda" when an mlx-cuda-* distribution is installed, else "other"."""
    import importlib.metadata as md

    for dist in md.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name.startswith("mlx-cuda"):
            return "cuda"
    return "other"


def check_mlx_flavour(built: str, installed: str) -> None:
    """Raise ImportError when a module built for MLX's CUDA flavour meets another flavour."""
    if built == "cuda" and installed != "cuda":
        raise ImportError(
            "metal_linalg was built for MLX's CUDA flavour (mlx[cuda13]) but the installed MLX "
            "is not it; install mlx[cuda13]==0.32.4 or rebuild metal_linalg against the "
            "installed MLX"
        )


check_mlx_version(_build_info.MLX_VERSION, mx.__version__)
if getattr(_build_info, "MLX_FLAVOUR", "cpu") == "cuda":
    check_mlx_flavour("cuda", _installed_flavour())

# only after the version check
from . import _ext


def _openblas_path() -> str | None:
    """libscipy_openblas from the scipy-openblas32 wheel, or None where it is absent."""
    try:
        import scipy_openblas32 as sob
    except ImportError:
        return None
    found = sorted(glob.glob(os.path.join(sob.get_lib_dir(), "libscipy_openblas*.so*")))
    return found[0] if found else None


def _set_lapack() -> None:
    if sys.platform == "darwin":
        # Accelerate's classic Fortran LAPACK interface: sgeqrf_, ssyevd_, ...
        _ext.set_lapack("/System/Library/Frameworks/Accelerate.framework/Accelerate", "", "_")
        return
    path = _openblas_path()
    if path is None:
        # The core falls back to its build-time provider, then METAL_LINALG_LAPACK.
        return
    try:
        _ext.set_lapack(path, "scipy_", "_")
    except (ValueError, RuntimeError) as err:
        raise ImportError(f"metal_linalg cannot use LAPACK from {path}: {err}") from err


_set_lapack()
ext = _ext
# The op list of the shared code, from the core's op table.
bind_ops(
    ext.op_names(),
    lambda op: [tuple(d) for d in ext.output_symbols(op, 0) if d],
    ext.op_kernels,
    ext.op_linear_system,
    ext.op_inputs,
)
