"""The blocked algorithms for large matrices (core/src/blocked.h: sequences of step kernels over a
device workspace) through metal_linalg_torch on CUDA tensors and the C API.

Runs on a machine with an NVIDIA GPU and a library built with the CUDA backend; skips elsewhere (CI,
where the same algorithms run through the CPU runner: tests/kernels/test_blocked*.cpp). Values are
checked with LAPACK's test ratios against torch.linalg in float64 (the helpers of test_cuda_ops.py).
"""

from __future__ import annotations

import ctypes

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
mlt = pytest.importorskip("metal_linalg_torch")
from metal_linalg_torch import _dispatch, _lib

if not _lib.lib.ml_backend_available(b"cuda"):
    pytest.skip("metal_linalg built without the CUDA backend", allow_module_level=True)

from test_cuda_ops import OPS, call_op, check_outputs, gen_family, sym_family

DEV = torch.device("cuda")
# The ops with a blocked algorithm.
BLOCKED = ("qr", "eigh", "eigvalsh", "svd", "svdvals")


def set_blocked(min_n: int) -> None:
    for op in range(len(OPS)):
        assert _lib.lib.ml_policy_set(op, b"gpu_min_batch", 1) == 0
        assert _lib.lib.ml_policy_set(op, b"gpu_max_n", 1 << 20) == 0
        assert _lib.lib.ml_policy_set(op, b"gpu_lane_max_n", 0) == 0
        assert _lib.lib.ml_policy_set(op, b"gpu_global_max_n", 0) == 0
        assert _lib.lib.ml_policy_set(op, b"gpu_blocked_min_n", min_n) == 0


@pytest.fixture(autouse=True)
def _blocked_on():
    """Blocked algorithms from n = 200 (inside the shared window too), global launches off."""
    set_blocked(200)
    yield
    for op in range(len(OPS)):
        _lib.lib.ml_policy_reset(op)


def backend(op: str, m: int, n: int, batch: int, memory=_lib.ML_MEMORY_CUDA) -> str:
    return _lib.text(_lib.lib.ml_backend(OPS.index(op), memory, m, n, batch))


def _input(op: str, m: int, n: int, batch: int, family: str = "random", seed: int = 0):
    if op.startswith("eig"):
        return sym_family(family, n, batch, seed=seed)
    return gen_family(family, m, n, batch, seed=seed)


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
    a = _input(op, n, n, batch, seed=n + batch).to(DEV)
    outs = call_op(op, a)
    for o in outs:
        assert o.device == a.device and o.dtype == torch.float32
    check_outputs(op, a, outs, f"{op} {n}x{n} x{batch} blocked")


@pytest.mark.parametrize("op", [o for o in ("qr", "svd", "svdvals") if o in BLOCKED])
@pytest.mark.parametrize("mnb", RECT, ids=[f"{m}x{n}x{b}" for m, n, b in RECT])
def test_rect_values(op: str, mnb: tuple[int, int, int]) -> None:
    m, n, batch = mnb
    assert backend(op, m, n, batch) == f"cuda:blocked_{op}"
    a = _input(op, m, n, batch, seed=m + n).to(DEV)
    check_outputs(op, a, call_op(op, a), f"{op} {m}x{n} x{batch} blocked")
    if op == "qr":  # R only runs blocked too
        r = mlt.qr(a, mode="r")[1]
        check_outputs("qr", a, (None, r), f"qr mode=r {m}x{n} blocked")


def test_qr_complete() -> None:
    """Square complete QR (the package's complete mode) on the blocked path."""
    a = gen_family("random", 300, 300, 2, seed=8).to(DEV)
    check_outputs("qr", a, tuple(mlt.qr(a, mode="complete")), "qr complete 300 blocked")


@pytest.mark.parametrize("op", BLOCKED)
@pytest.mark.parametrize("family", ["graded", "clustered", "rankdef", "tiny", "huge"])
def test_hard_families(op: str, family: str) -> None:
    a = _input(op, 300, 300, 2, family=family, seed=5).to(DEV)
    check_outputs(op, a, call_op(op, a), f"{op} {family} 300x300 blocked")


@pytest.mark.parametrize("op", BLOCKED)
def test_large(op: str) -> None:
    """One 2048 x 2048 matrix: many panels, grid-wide products."""
    a = _input(op, 2048, 2048, 1, seed=9).to(DEV)
    check_outputs(op, a, call_op(op, a), f"{op} 2048 blocked")


# eigvalsh on hard families over many panels and sweeps, n not a multiple of the band: by two
# stages when METAL_LINALG_EIGH_TWO_STAGE_MIN_N is at most n (the run that tests that path sets
# it), by one stage otherwise.
EIG_HARD = ["ata", "clustered", "graded", "geometric", "tiny", "huge"]


@pytest.mark.parametrize("family", EIG_HARD)
@pytest.mark.parametrize("nb", [(1001, 3), (2049, 1)], ids=["1001x3", "2049x1"])
def test_eigvalsh_hard_large(family: str, nb: tuple[int, int]) -> None:
    n, batch = nb
    if family == "ata":  # A^T A of a random A: clustered near 0, condition ~ n^2
        g = torch.randn(
            batch, n, n, dtype=torch.float64, generator=torch.Generator().manual_seed(n)
        )
        a = (g.mT @ g).float()
    else:
        a = sym_family(family, n, batch, seed=n)
    a = a.to(DEV)
    check_outputs("eigvalsh", a, call_op("eigvalsh", a), f"eigvalsh {family} {n}x{batch} blocked")


# eigh on the same hard families over many panels and sweeps: by two stages when
# METAL_LINALG_EIGH_VEC_TWO_STAGE_MIN_N is at most n (the run that tests that path sets it), by
# one stage otherwise.
@pytest.mark.parametrize("family", EIG_HARD)
def test_eigh_hard_large(family: str) -> None:
    n, batch = 1001, 2
    if family == "ata":
        g = torch.randn(
            batch, n, n, dtype=torch.float64, generator=torch.Generator().manual_seed(n)
        )
        a = (g.mT @ g).float()
    else:
        a = sym_family(family, n, batch, seed=n)
    a = a.to(DEV)
    check_outputs("eigh", a, call_op("eigh", a), f"eigh {family} {n}x{batch} blocked")


@pytest.mark.parametrize("op", BLOCKED)
def test_nonfinite_isolated(op: str) -> None:
    a = _input(op, 260, 260, 3, seed=3)
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
    ex = _lib.MlExec()
    ex.memory = _lib.ML_MEMORY_CUDA
    ex.device = torch.cuda.current_device()
    need = ctypes.c_int64()
    _lib.check(
        _lib.lib.ml_workspace_size(
            ctypes.byref(ex), _lib.OP_ID["qr"], batch, n, n, 0, ctypes.byref(need)
        ),
        "workspace_size",
    )
    # W, V and Q per matrix at least.
    assert need.value >= 3 * batch * n * n * 4, need.value
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    q, r = mlt.qr(a)
    torch.cuda.synchronize()
    assert torch.cuda.max_memory_allocated() - base >= need.value
    check_outputs("qr", a, (q, r), "qr 300 blocked through the torch package")
    # The package's one routing query (ml_plan) runs it on the GPU with that workspace.
    assert _dispatch._cuda_plan(_dispatch._cuda_exec(a), "qr", batch, n, n, 0) == need.value
    assert mlt.qr_backend(n, n, batch, device="cuda") == "cuda:blocked_qr"


def test_cuda_graph() -> None:
    """A blocked call captured in a CUDA graph (its workspace from the graph's pool)."""
    n, batch = 320, 2
    static = gen_family("random", n, n, batch, seed=21).to(DEV)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        mlt.qr(static)  # one-time kernel set-up outside capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        q_static, r_static = mlt.qr(static)
    for seed in (22, 23):
        fresh = gen_family("random", n, n, batch, seed=seed).to(DEV)
        static.copy_(fresh)
        graph.replay()
        torch.cuda.synchronize()
        check_outputs("qr", fresh, (q_static, r_static), f"blocked graph replay seed {seed}")


def test_host_tensors() -> None:
    """Host tensors take the blocked plan when host_gpu_min_work sends them to the GPU."""
    for op in BLOCKED:
        assert _lib.lib.ml_policy_set(OPS.index(op), b"host_gpu_min_work", 1) == 0
        assert backend(op, 300, 300, 2, memory=_lib.ML_MEMORY_HOST) == f"cuda:blocked_{op}"
        a = _input(op, 300, 300, 2, seed=41)
        check_outputs(op, a, call_op(op, a), f"{op} host tensors blocked")
