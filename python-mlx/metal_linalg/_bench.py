"""The benchmark over MLX arrays: the shared grid, timing and reports (`_shared.bench`) against
mx.linalg on MLX's CPU stream and NumPy; with `--device gpu` our ops run with stream=mx.gpu, and
where torch with CUDA is installed the torch package on the same data is shown for reference."""

from __future__ import annotations

from ._frontend import frontend
from ._shared import bench as _shared
from ._shared.bench import OPS, Point, Record, grid  # noqa: F401 (re-exported)


def run_grid(points, device="cpu", peers=None, **kwargs) -> list:
    return _shared.run_grid(frontend(), points, device, peers, **kwargs)


def write_results(records, out_dir: str, device: str, name: str | None = None) -> dict:
    return _shared.write_results(frontend(), records, out_dir, device, name)
