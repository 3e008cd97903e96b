"""What the CUDA suites share: their skips (no CUDA device, or a library built without the CUDA
backend: every suite here skips on CI's machines), the device, the core's routing query and the
policy settings each suite routes its calls with."""

from __future__ import annotations

import ctypes

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
mlt = pytest.importorskip("metal_linalg_torch")
from metal_linalg_torch import _lib
from metal_linalg_torch._lib import OPS

if not _lib.lib.ml_backend_available(b"cuda"):
    pytest.skip("metal_linalg built without the CUDA backend", allow_module_level=True)

DEV = torch.device("cuda")


def backend(op: str, m: int, n: int, batch: int, memory=_lib.ML_MEMORY_CUDA) -> str:
    """The core's route for a call of op on `batch` m x n matrices in that memory."""
    return _lib.text(_lib.lib.ml_backend(OPS.index(op), memory, m, n, batch))


# Every shape to the GPU kernels, whatever the batch, without the thread-per-matrix (lane) ones.
GPU_ALWAYS = {"gpu_min_batch": 1, "gpu_max_n": 1 << 20, "gpu_lane_max_n": 0}


def set_policies(**fields: int) -> None:
    """The same policy fields, in this order, for every op (each set must succeed)."""
    for op in range(len(OPS)):
        for field, value in fields.items():
            assert _lib.lib.ml_policy_set(op, field.encode(), value) == 0, (OPS[op], field)


def reset_policies() -> None:
    for op in range(len(OPS)):
        _lib.lib.ml_policy_reset(op)


def policy_fixture(set_routing, value: int):
    """An autouse fixture: set_routing(value) before each test of the module, every op's policy
    reset after it."""

    @pytest.fixture(autouse=True)
    def routed():
        set_routing(value)
        yield
        reset_policies()

    return routed


def cuda_exec() -> _lib.MlExec:
    """An execution context for device memory on the current CUDA device."""
    ex = _lib.MlExec()
    ex.memory = _lib.ML_MEMORY_CUDA
    ex.device = torch.cuda.current_device()
    return ex


def workspace_size(ex: _lib.MlExec, op: str, batch: int, n: int, *, check: bool = True) -> int:
    """ml_workspace_size of op on `batch` n x n matrices (flags 0); check: a failed call raises,
    else the size stays -1."""
    need = ctypes.c_int64(-1)
    status = _lib.lib.ml_workspace_size(
        ctypes.byref(ex), _lib.OP_ID[op], batch, n, n, 0, ctypes.byref(need)
    )
    if check:
        _lib.check(status, "workspace_size")
    return need.value
