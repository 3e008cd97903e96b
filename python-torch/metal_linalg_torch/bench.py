"""The benchmark over torch tensors: the shared grid, timing and reports (`_shared.bench`) with
this package's peers (torch.linalg and NumPy on the CPU; torch.linalg, CuPy and JAX on CUDA).
benchmarks/ scripts import this module."""

from __future__ import annotations

from ._frontend import frontend
from ._shared import bench as _shared
from ._shared.bench import (  # noqa: F401 (re-exported)
    BATCHES,
    MAX_WORK,
    OPS,
    QUICK_BATCHES,
    QUICK_SHAPES,
    SQUARE_N,
    TALL,
    Point,
    Record,
    geomean,
    grid,
    load_records,
    markdown_table,
    nominal_flops,
    roofline_ms,
)


def implementations(device: str, peers=None) -> list:
    return frontend().implementations(device, peers)


def run_grid(points, device="cpu", peers=None, **kwargs) -> list:
    return _shared.run_grid(frontend(), points, device, peers, **kwargs)


def write_results(records, out_dir: str, device: str, name: str | None = None) -> dict:
    return _shared.write_results(frontend(), records, out_dir, device, name)
