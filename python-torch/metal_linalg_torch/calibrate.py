"""Measure this machine and write the per-machine policy file the core reads: the shared
calibration (`_shared.calibrate`, whose docstring lists what is measured) over torch tensors."""

from __future__ import annotations

from ._frontend import frontend
from ._shared import calibrate as _shared
from ._shared.calibrate import (  # noqa: F401 (the pure parts, re-exported)
    BLOCKED_BATCHES,
    BLOCKED_SIZES,
    FIELD_ORDER,
    LANE_BATCHES,
    LANE_SIZES,
    OPS,
    POLICY_OPS,
    SIMD_BATCHES,
    SIMD_SIZES,
    Budget,
    choose_blocked,
    choose_host_gpu_min_work,
    choose_lane,
    choose_simd,
    format_table,
    merge_policy_file,
    plan_phases,
    table_file_name,
    table_notes,
    write_json,
    write_table,
)


def cuda_usable() -> bool:
    """Whether torch has a CUDA device and the core a CUDA backend."""
    return frontend().gpu is not None


def has_lane_fields(op: str = "qr") -> bool:
    return _shared.has_lane_fields(frontend(), op)


def measure(ops=POLICY_OPS, *, cpu=True, cuda=None, budget_s=None, log=print) -> dict:
    """The measurements (see `_shared.calibrate.measure`); cuda: measure the GPU fields
    (default: when torch and the core both have CUDA)."""
    if cuda is None:
        cuda = cuda_usable()
    return _shared.measure(frontend(), ops, cpu=cpu, gpu=cuda, budget_s=budget_s, log=log)
