"""The blocked algorithms for large matrices (core/src/blocked.h: sequences of step kernels over a
device workspace) through metal_linalg_torch on CUDA tensors and the C API.

Runs on a machine with an NVIDIA GPU and a library built with the CUDA backend; skips elsewhere (CI,
where the same algorithms run through the CPU runner: tests/kernels/test_blocked*.cpp). Values are
checked with LAPACK's test ratios against torch.linalg in float64 (the helpers of test_cuda_ops.py).
"""

from __future__ import annotations

import _cuda
import pytest
from _cuda import DEV, OPS, _lib, backend, mlt, torch
from metal_linalg_torch import _dispatch
from test_cuda_ops import (
    HARD_FAMILIES,
    ata,
    call_op,
    check_call,
    check_family,
    check_graph_replay,
    check_outputs,
    family_input,
    gen_family,
    sym_family,
)

# The ops with a blocked algorithm.
BLOCKED = ("qr", "eigh", "eigvalsh", "svd", "svdvals")


def set_blocked(min_n: int) -> None:
    _cuda.set_policies(
        **_cuda.GPU_ALWAYS,
        gpu_global_max_n=0,
        gpu_blocked_min_n=min_n,
        gpu_blocked_max_batch=1 << 30,
    )


# Blocked algorithms from n = 200 at any batch (inside the shared window too), global launches
# off.
_blocked_on = _cuda.policy_fixture(set_blocked, 200)


def test_routing_names_the_blocked_plan() -> None:
    for op in BLOCKED:
        assert backend(op, 300, 300, 2) == f"cuda:blocked_{op}", op
        assert backend(op, 200, 200, 2) == f"cuda:blocked_{op}", op
        assert backend(op, 199, 199, 2) != f"cuda:blocked_{op}", op
    set_blocked(0)
    for op in BLOCKED:
        assert backend(op, 300, 300, 2) == "cpu:lapack", op


SQUARE = [(256, 3), (300, 2), (513, 1), (1024, 1)]
RECT = [(513, 257, 2), (257, 513, 2), (1024, 300, 1), (200, 1000, 1)]


@pytest.mark.parametrize("op", BLOCKED)
@pytest.mark.parametrize("nb", SQUARE, ids=[f"{n}x{n}x{b}" for n, b in SQUARE])
def test_square_values(op: str, nb: tuple[int, int]) -> None:
    n, batch = nb
    assert backend(op, n, n, batch) == f"cuda:blocked_{op}"
    check_call(
        op, family_input(op, n, n, batch, seed=n + batch).to(DEV), f"{op} {n}x{n} x{batch} blocked"
    )


@pytest.mark.parametrize("op", [o for o in ("qr", "svd", "svdvals") if o in BLOCKED])
@pytest.mark.parametrize("mnb", RECT, ids=[f"{m}x{n}x{b}" for m, n, b in RECT])
def test_rect_values(op: str, mnb: tuple[int, int, int]) -> None:
    m, n, batch = mnb
    assert backend(op, m, n, batch) == f"cuda:blocked_{op}"
    a = check_family(op, m, n, batch, f"{op} {m}x{n} x{batch} blocked", seed=m + n)
    if op == "qr":  # R only runs blocked too
        r = mlt.qr(a, mode="r")[1]
        check_outputs("qr", a, (None, r), f"qr mode=r {m}x{n} blocked")


def test_qr_complete() -> None:
    """Square complete QR (the package's complete mode) on the blocked path."""
    a = gen_family("random", 300, 300, 2, seed=8).to(DEV)
    check_outputs("qr", a, tuple(mlt.qr(a, mode="complete")), "qr complete 300 blocked")


@pytest.mark.parametrize("op", BLOCKED)
@pytest.mark.parametrize("family", HARD_FAMILIES)
def test_hard_families(op: str, family: str) -> None:
    check_family(op, 300, 300, 2, f"{op} {family} 300x300 blocked", family=family, seed=5)


@pytest.mark.parametrize("op", BLOCKED)
def test_large(op: str) -> None:
    """One 2048 x 2048 matrix: many panels, grid-wide products."""
    check_family(op, 2048, 2048, 1, f"{op} 2048 blocked", seed=9)


# eigvalsh on hard families over many panels and sweeps, n not a multiple of the band: by two
# stages when METAL_LINALG_EIGH_TWO_STAGE_MIN_N is at most n (the run that tests that path sets
# it), by one stage otherwise.
EIG_HARD = ["ata", "clustered", "graded", "geometric", "tiny", "huge"]


@pytest.mark.parametrize("family", EIG_HARD)
@pytest.mark.parametrize("nb", [(1001, 3), (2049, 1)], ids=["1001x3", "2049x1"])
def test_eigvalsh_hard_large(family: str, nb: tuple[int, int]) -> None:
    n, batch = nb
    a = (ata(n, batch) if family == "ata" else sym_family(family, n, batch, seed=n)).to(DEV)
    check_outputs("eigvalsh", a, call_op("eigvalsh", a), f"eigvalsh {family} {n}x{batch} blocked")


# eigh on the same hard families over many panels and sweeps: by two stages when
# METAL_LINALG_EIGH_VEC_TWO_STAGE_MIN_N is at most n (the run that tests that path sets it), by
# one stage otherwise.
@pytest.mark.parametrize("family", EIG_HARD)
def test_eigh_hard_large(family: str) -> None:
    n, batch = 1001, 2
    a = (ata(n, batch) if family == "ata" else sym_family(family, n, batch, seed=n)).to(DEV)
    check_outputs("eigh", a, call_op("eigh", a), f"eigh {family} {n}x{batch} blocked")


@pytest.mark.parametrize("op", BLOCKED)
def test_nonfinite_isolated(op: str) -> None:
    a = family_input(op, 260, 260, 3, seed=3)
    a[1, 7, 5] = float("nan")  # the lower triangle (the one eigh reads)
    a[2, 9, 0] = float("inf")
    a = a.to(DEV)
    outs = call_op(op, a)
    for o in outs:
        if o is not None:
            assert torch.isnan(o[1]).all() and torch.isnan(o[2]).all(), op
    check_outputs(op, a[:1], tuple(o[:1] if o is not None else None for o in outs), f"{op} finite")


def test_torch_workspace() -> None:
    """The torch package takes the blocked plan's workspace (ml_workspace_size, nonzero) from its
    caching allocator and caches the size under the plan name."""
    n, batch = 300, 2
    a = gen_family("random", n, n, batch, seed=11).to(DEV)
    need = _cuda.workspace_size(_cuda.cuda_exec(), "qr", batch, n)
    # W, V and Q per matrix at least.
    assert need >= 3 * batch * n * n * 4, need
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    q, r = mlt.qr(a)
    torch.cuda.synchronize()
    assert torch.cuda.max_memory_allocated() - base >= need
    check_outputs("qr", a, (q, r), "qr 300 blocked through the torch package")
    # The package's one routing query (ml_plan) runs it on the GPU with that workspace.
    assert _dispatch._cuda_plan(_dispatch._cuda_exec(a), "qr", batch, n, n, 0) == need
    assert mlt.qr_backend(n, n, batch, device="cuda") == "cuda:blocked_qr"


def test_cuda_graph() -> None:
    """A blocked call captured in a CUDA graph (its workspace from the graph's pool)."""
    n, batch = 320, 2
    static = gen_family("random", n, n, batch, seed=21).to(DEV)
    check_graph_replay(
        mlt.qr,
        static,
        (22, 23),
        lambda seed: gen_family("random", n, n, batch, seed=seed).to(DEV),
        lambda fresh, outs, seed: check_outputs(
            "qr", fresh, outs, f"blocked graph replay seed {seed}"
        ),
    )


def test_host_tensors() -> None:
    """Host tensors take the blocked plan when host_gpu_min_work sends them to the GPU."""
    for op in BLOCKED:
        assert _lib.lib.ml_policy_set(OPS.index(op), b"host_gpu_min_work", 1) == 0
        assert backend(op, 300, 300, 2, memory=_lib.ML_MEMORY_HOST) == f"cuda:blocked_{op}"
        a = family_input(op, 300, 300, 2, seed=41)
        check_outputs(op, a, call_op(op, a), f"{op} host tensors blocked")
