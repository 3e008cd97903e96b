"""The CUDA backend's global launch (a group kernel with its scratch in device memory, for shapes
beyond the shared-memory window) through metal_linalg_torch on CUDA tensors and the C API.

Runs on a machine with an NVIDIA GPU and a library built with the CUDA backend; skips elsewhere (CI).
Values are checked with LAPACK's test ratios against torch.linalg in float64 (the helpers of
test_cuda_ops.py).
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap

import _cuda
import pytest
from _cuda import DEV, OPS, _lib, backend, mlt, torch
from metal_linalg_torch import _dispatch
from test_cuda_ops import (
    HARD_FAMILIES,
    c_ml_eigh,
    check_call,
    check_eigh,
    check_family,
    check_graph_replay,
    check_outputs,
    family_input,
    sym_family,
)

KERNEL = {
    "qr": "qr_householder",
    "eigh": "eigh_tridiag_ql",
    "eigvalsh": "eigvalsh_tridiag_bisect",
    "svd": "svd_bidiag_qr",
    "svdvals": "svdvals_bidiag_bisect",
}


def set_global(max_n: int) -> None:
    # The blocked algorithms, which take these shapes first, off (test_cuda_blocked.py).
    _cuda.set_policies(
        **_cuda.GPU_ALWAYS, gpu_global_max_n=max_n, gpu_global_min_batch=1, gpu_blocked_min_n=0
    )


# Global launches on for every op up to 4096 (the policy default is off).
_global_on = _cuda.policy_fixture(set_global, 4096)


def test_routing_names_the_global_plan() -> None:
    for op in OPS:
        assert backend(op, 300, 300, 2) == f"cuda:{KERNEL[op]}/global", op
        # Within the shared window: the shared-memory launches.
        assert backend(op, 200, 200, 2) == f"cuda:{KERNEL[op]}", op
    set_global(0)
    for op in OPS:
        assert backend(op, 300, 300, 2) == "cpu:lapack", op


SQUARE = [(256, 3), (300, 2), (257, 1)]
RECT = [(513, 257, 2), (257, 513, 2), (1024, 300, 1)]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("nb", SQUARE, ids=[f"{n}x{n}x{b}" for n, b in SQUARE])
def test_square_values(op: str, nb: tuple[int, int]) -> None:
    n, batch = nb
    assert backend(op, n, n, batch).endswith("/global")
    check_call(
        op, family_input(op, n, n, batch, seed=n + batch).to(DEV), f"{op} {n}x{n} x{batch} global"
    )


@pytest.mark.parametrize("op", ["qr", "svd", "svdvals"])
@pytest.mark.parametrize("mnb", RECT, ids=[f"{m}x{n}x{b}" for m, n, b in RECT])
def test_rect_values(op: str, mnb: tuple[int, int, int]) -> None:
    m, n, batch = mnb
    assert backend(op, m, n, batch).endswith("/global")
    a = check_family(op, m, n, batch, f"{op} {m}x{n} x{batch} global", seed=m + n)
    if op == "qr":  # R only and complete (square) run global too
        r = mlt.qr(a, mode="r")[1]
        check_outputs("qr", a, (None, r), f"qr mode=r {m}x{n} global")
        sq = a[..., : min(m, n), : min(m, n)].contiguous()
        check_outputs("qr", sq, tuple(mlt.qr(sq, mode="complete")), "qr complete global")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("family", HARD_FAMILIES)
def test_hard_families(op: str, family: str) -> None:
    check_family(op, 300, 300, 2, f"{op} {family} 300x300 global", family=family, seed=5)


def test_nonfinite_isolated() -> None:
    a = sym_family("random", 260, 3, seed=3)
    a[1, 7, 5] = float("nan")  # the lower triangle, the one eigh reads
    a = a.to(DEV)
    w, v = mlt.eigh(a)
    assert torch.isnan(w[1]).all() and torch.isnan(v[1]).all()
    good = [0, 2]
    check_eigh(a[good], w[good], v[good], "eigh global, finite neighbours of a NaN matrix")


def test_torch_workspace_and_cache() -> None:
    """The torch package sizes the workspace per plan: off, a shape goes through the host with no
    workspace; on, the same shape's entry is the core's ml_workspace_size, nonzero, and the
    call's peak memory holds it (torch's allocator)."""
    n, batch = 300, 2
    a = sym_family("random", n, batch, seed=11).to(DEV)
    set_global(0)
    check_eigh(a, *mlt.eigh(a), "eigh 300 through the host")
    set_global(4096)
    ex = _cuda.cuda_exec()
    need = _cuda.workspace_size(ex, "eigh", batch, n)
    # The kernel's scratch (about n^2 floats) per matrix in flight, all of a small batch.
    assert need >= batch * n * n * 4, need
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    w, v = mlt.eigh(a)
    torch.cuda.synchronize()
    assert torch.cuda.max_memory_allocated() - base >= need + v.numel() * 4
    check_eigh(a, w, v, "eigh 300 global through the torch package")
    # The package's one routing query (ml_plan) runs it on the GPU with that workspace.
    assert _dispatch._cuda_plan(_dispatch._cuda_exec(a), "eigh", batch, n, n, 0) == need
    assert mlt.eigh_backend(n, batch, device="cuda") == "cuda:eigh_tridiag_ql/global"
    set_global(0)
    assert _cuda.workspace_size(ex, "eigh", batch, n, check=False) == 0


def test_c_api_rejects_a_short_workspace() -> None:
    n, batch = 300, 2
    a = sym_family("random", n, batch, seed=12).to(DEV)
    w = torch.empty(batch, n, device=DEV)
    v = torch.empty(batch, n, n, device=DEV)
    ex = _cuda.cuda_exec()
    ex.stream = torch.cuda.current_stream().cuda_stream
    short = torch.empty(
        _cuda.workspace_size(ex, "eigh", batch, n, check=False) - 4, dtype=torch.uint8, device=DEV
    )
    ex.workspace = short.data_ptr()
    ex.workspace_bytes = short.numel()
    status = c_ml_eigh()(
        ctypes.byref(ex), a.data_ptr(), batch, n, 0, w.data_ptr(), v.data_ptr(), None
    )
    assert status != _lib.ML_OK
    assert "workspace" in _lib.text(_lib.lib.ml_last_error())


def test_cuda_graph() -> None:
    """A global launch captured in a CUDA graph (the workspace from the graph's pool)."""
    n, batch = 256, 2
    static = sym_family("random", n, batch, seed=21).to(DEV)
    check_graph_replay(
        mlt.eigh,
        static,
        (22, 23),
        lambda seed: sym_family("random", n, batch, seed=seed).to(DEV),
        lambda fresh, outs, seed: check_eigh(fresh, *outs, f"global graph replay seed {seed}"),
    )


def test_chunks_reuse_the_workspace() -> None:
    """Two matrices in flight (METAL_LINALG_CUDA_GLOBAL_MATRICES, read once per process: a
    subprocess) on a batch of 5: three launches one after another reuse one workspace."""
    script = textwrap.dedent(
        """
        import ctypes, torch, metal_linalg_torch as mlt
        from metal_linalg_torch import _lib
        from test_cuda_ops import check_eigh, check_outputs, gen_family, sym_family
        for op in range(5):
            for field, value in ((b"gpu_global_max_n", 4096), (b"gpu_global_min_batch", 1),
                                 (b"gpu_min_batch", 1), (b"gpu_max_n", 1 << 20),
                                 (b"gpu_blocked_min_n", 0)):
                assert _lib.lib.ml_policy_set(op, field, value) == 0
        n, batch = 260, 5
        ex = _lib.MlExec()
        ex.memory = _lib.ML_MEMORY_CUDA
        need = ctypes.c_int64()
        eigh = _lib.OP_ID["eigh"]
        _lib.lib.ml_workspace_size(ctypes.byref(ex), eigh, batch, n, n, 0, ctypes.byref(need))
        one = ctypes.c_int64()
        _lib.lib.ml_workspace_size(ctypes.byref(ex), eigh, 1, n, n, 0, ctypes.byref(one))
        assert 0 < one.value and need.value == 2 * one.value, (need.value, one.value)
        a = sym_family("random", n, batch, seed=31).cuda()
        check_eigh(a, *mlt.eigh(a), "eigh 260 x5 in chunks of 2")
        g = gen_family("random", 300, 270, batch, seed=32).cuda()
        check_outputs("svd", g, tuple(mlt.svd(g)), "svd 300x270 x5 in chunks of 2")
        print("ok")
        """
    )
    env = dict(os.environ, METAL_LINALG_CUDA_GLOBAL_MATRICES="2")
    here = os.path.dirname(os.path.abspath(__file__))
    # The suite's modules: this folder's and the shared helpers one level up (accuracy.py).
    env["PYTHONPATH"] = os.pathsep.join([here, os.path.dirname(here), env.get("PYTHONPATH", "")])
    r = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
