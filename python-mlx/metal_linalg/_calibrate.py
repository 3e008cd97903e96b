"""Measure this machine and write the per-machine policy file the core reads: the shared
calibration (`_shared.calibrate`, whose docstring lists what is measured) over MLX arrays on
MLX's CPU stream (host data)."""

from __future__ import annotations

from ._frontend import frontend
from ._shared import calibrate as _shared
from ._shared.calibrate import POLICY_OPS


def measure(ops=POLICY_OPS, *, cpu=True, gpu=None, budget_s=None, log=print) -> dict:
    """The measurements (see `_shared.calibrate.measure`); gpu: also host_gpu_min_work
    (default: when the core has a GPU backend)."""
    return _shared.measure(frontend(), ops, cpu=cpu, gpu=gpu, budget_s=budget_s, log=log)
