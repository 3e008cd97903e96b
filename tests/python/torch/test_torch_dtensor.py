"""DTensor: a batch sharded across two CPU processes (gloo) is decomposed locally, the outputs
keep the input's placements, the values equal the unsharded call's, and no collective runs
inside the op (every custom op: the decompositions, their *_ex forms' info words and the linear
systems) (CommDebugMode; the same counter sees torch.linalg's all-gather of the same input,
so it can fail). The plain import leaves torch.distributed.tensor alone (checked in each rank
before it imports DTensor)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import pytest

WORKER = r"""
import os, sys
import torch
import torch.distributed as dist
import metal_linalg_torch as ml
# The plain import leaves torch.distributed.tensor alone; importing it registers the rules.
assert "torch.distributed.tensor" not in sys.modules and not ml._dtensor._registered
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.debug import CommDebugMode

assert ml._dtensor._registered
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (world,))
g = torch.Generator().manual_seed(0)  # the same global input on every rank
checked = 0


def sym(a):
    return (a + a.mT) / 2


def run(name, fn, a, placement, sharded_dim):
    global checked
    full = fn(a)  # the unsharded call, on this rank's whole copy
    full = full if isinstance(full, tuple) else (full,)
    da = distribute_tensor(a, mesh, [placement])
    with CommDebugMode() as comm:
        out = fn(da)
    out = out if isinstance(out, tuple) else (out,)
    assert comm.get_total_counts() == 0, (name, comm.get_comm_counts())
    assert len(out) == len(full), name
    for d, f in zip(out, full):
        assert isinstance(d, DTensor), (name, type(d))
        assert tuple(d.placements) == (placement,), (name, d.placements)
        assert tuple(d.shape) == tuple(f.shape), (name, d.shape, f.shape)
        local = d.to_local()
        if sharded_dim is None:
            want = f
        else:
            want = f.chunk(world, dim=sharded_dim)[rank]
        assert local.shape == want.shape, (name, local.shape, want.shape)
        assert torch.allclose(local, want, rtol=0, atol=1e-5), (name, (local - want).abs().max())
    checked += 1


cases = [
    ("eigh", lambda x: tuple(ml.eigh(x)), sym(torch.randn(8, 6, 6, generator=g))),
    ("eigh U", lambda x: tuple(ml.eigh(x, UPLO="U")), sym(torch.randn(8, 6, 6, generator=g))),
    ("eigvalsh", lambda x: ml.eigvalsh(x), sym(torch.randn(8, 6, 6, generator=g))),
    ("qr", lambda x: tuple(ml.qr(x)), torch.randn(8, 7, 4, generator=g)),
    ("qr complete", lambda x: tuple(ml.qr(x, mode="complete")), torch.randn(8, 5, 5, generator=g)),
    ("svd", lambda x: tuple(ml.svd(x)), torch.randn(8, 4, 6, generator=g)),
    ("svdvals", lambda x: ml.svdvals(x), torch.randn(8, 9, 5, generator=g)),
    ("svd 40x40", lambda x: tuple(ml.svd(x)), torch.randn(4, 40, 40, generator=g)),
]
for name, fn, a in cases:
    run(name, fn, a, Shard(0), 0)
    run(name + " replicated", fn, a, Replicate(), None)
# A second batch dimension, sharded; and qr's R alone.
b = torch.randn(3, 4, 5, 5, generator=g)
run("eigh dim 1", lambda x: tuple(ml.eigh(x)), sym(b), Shard(1), 1)
a = torch.randn(6, 5, 3, generator=g)
run("qr r", lambda x: ml.qr(x, mode="r")[1], a, Shard(0), 0)
q = ml.qr(distribute_tensor(a, mesh, [Shard(0)]), mode="r")[0]  # torch.linalg's empty Q
assert tuple(q.placements) == (Replicate(),) and tuple(q.shape) == (0,), (q.placements, q.shape)



def run_n(name, fn, inputs, sharded_dim):
    # run() for ops of several inputs: inputs is [(tensor, placement)], every output sharded on
    # sharded_dim (or replicated when it is None).
    global checked
    full = fn(*(a for a, _ in inputs))
    full = full if isinstance(full, tuple) else (full,)
    dist_in = [distribute_tensor(a, mesh, [p]) for a, p in inputs]
    with CommDebugMode() as comm:
        out = fn(*dist_in)
    out = out if isinstance(out, tuple) else (out,)
    assert comm.get_total_counts() == 0, (name, comm.get_comm_counts())
    assert len(out) == len(full), name
    for i, (dt, f) in enumerate(zip(out, full)):
        dim = sharded_dim
        placement = Replicate() if dim is None else Shard(dim)
        assert isinstance(dt, DTensor), (name, i, type(dt))
        assert tuple(dt.placements) == (placement,), (name, i, dt.placements)
        local = dt.to_local()
        want = f if dim is None else f.chunk(world, dim=dim)[rank]
        assert local.shape == want.shape, (name, i, local.shape, want.shape)
        if f.is_floating_point():
            err = (local - want).abs().max()
            assert torch.allclose(local, want, rtol=0, atol=1e-4), (name, i, err)
        else:
            assert torch.equal(local, want), (name, i)
    checked += 1


# The *_ex forms (their info words are an op of their own) and the linear systems.
spd = sym(torch.randn(8, 5, 5, generator=g)) + 6 * torch.eye(5)
gen = torch.randn(8, 5, 5, generator=g) + 4 * torch.eye(5)
rhs = torch.randn(8, 5, 3, generator=g)
ex_cases = [
    ("eigh_ex", lambda x: tuple(ml.eigh_ex(x)), spd),
    ("eigvalsh_ex", lambda x: tuple(ml.eigvalsh_ex(x)), spd),
    ("qr_ex", lambda x: tuple(ml.qr_ex(x)), torch.randn(8, 7, 4, generator=g)),
    ("svd_ex", lambda x: tuple(ml.svd_ex(x)), torch.randn(8, 4, 6, generator=g)),
    ("svdvals_ex", lambda x: tuple(ml.svdvals_ex(x)), torch.randn(8, 6, 4, generator=g)),
    ("cholesky", lambda x: ml.cholesky(x), spd),
    ("cholesky_ex upper", lambda x: tuple(ml.cholesky_ex(x, upper=True)), spd),
    ("inv", lambda x: ml.inv(x), gen),
    ("inv_ex", lambda x: tuple(ml.inv_ex(x)), gen),
    ("lu_factor", lambda x: tuple(ml.lu_factor(x)), gen),
    ("lu_factor_ex wide", lambda x: tuple(ml.lu_factor_ex(x)), torch.randn(8, 4, 6, generator=g)),
    ("lu", lambda x: tuple(ml.lu(x)), gen),
    ("det", lambda x: ml.det(x), gen),
    ("slogdet", lambda x: tuple(ml.slogdet(x)), gen),
]
for name, fn, a in ex_cases:
    run_n(name, fn, [(a, Shard(0))], 0)
    run_n(name + " replicated", fn, [(a, Replicate())], None)
for name, fn in (
    ("solve", lambda a, b: ml.solve(a, b)),
    ("solve_ex right", lambda a, b: tuple(ml.solve_ex(a, b.mT, left=False))),
    ("solve_triangular", lambda a, b: ml.solve_triangular(a, b, upper=False, left=True)),
    ("lu_solve", lambda a, b: ml.lu_solve(*ml.lu_factor(a), b)),
):
    a = gen.tril() if name == "solve_triangular" else gen  # tril of a DTensor would gather
    run_n(name, fn, [(a, Shard(0)), (rhs, Shard(0))], 0)
    run_n(name + " replicated", fn, [(a, Replicate()), (rhs, Replicate())], None)
# Broadcast batches: one A for a sharded batch of B, and B with a batch dimension of size 1.
a1, b4 = gen[:1], torch.randn(2, 8, 5, 3, generator=g)
run_n("solve broadcast A", lambda a, b: ml.solve(a, b), [(a1, Replicate()), (b4, Shard(1))], 1)
tri = lambda a, b: ml.solve_triangular(a, b, upper=True)  # noqa: E731
run_n("solve_triangular B of 1", tri, [(gen.triu(), Shard(0)), (rhs[:1], Replicate())], 0)

# The counter sees communication: torch.linalg.eigh replicates a batch-sharded input, and a
# matrix dimension sharded is redistributed before our op runs.
da = distribute_tensor(sym(torch.randn(8, 6, 6, generator=g)), mesh, [Shard(0)])
with CommDebugMode() as comm:
    torch.linalg.eigh(da)
assert comm.get_total_counts() > 0, "torch.linalg.eigh ran without communication"
dm = distribute_tensor(sym(torch.randn(8, 6, 6, generator=g)), mesh, [Shard(2)])
with CommDebugMode() as comm:
    w = ml.eigvalsh(dm)
assert comm.get_total_counts() > 0, "a matrix dimension was not redistributed"
want = ml.eigvalsh(dm.full_tensor())
assert torch.allclose(w.full_tensor(), want, rtol=0, atol=1e-5)

dist.barrier()
dist.destroy_process_group()
print(f"rank {rank}: {checked} cases ok", flush=True)
sys.stderr.flush()
# Every check is done: leave without the interpreter's teardown, where torch.distributed's
# threads aborted a rank once on a loaded 2-core machine ("terminate called without an active
# exception" after the line above).
os._exit(0)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(rank: int, world: int, port: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("METAL_LINALG_")}
    env.update(
        METAL_LINALG_NO_CALIBRATION_NOTICE="1",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        OMP_NUM_THREADS="1",
        METAL_LINALG_CPU_THREADS="1",
    )
    return env


@pytest.mark.skipif(sys.platform == "win32", reason="gloo process group on POSIX only")
def test_batch_sharded_over_two_gloo_ranks_runs_locally():
    world, port = 2, _free_port()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(WORKER)],
            env=_env(rank, world, port),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(world)
    ]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=240))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for rank, (p, (out, err)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {rank}:\n{out}\n{err[-4000:]}"
        assert f"rank {rank}: 56 cases ok" in out, out


def test_dtensor_bench_world_size_one_on_gloo(tmp_path):
    """benchmarks/dtensor_bench.py's logic without a launcher (world size 1) on the CPU."""
    import json
    from pathlib import Path

    script = Path(__file__).resolve().parents[3] / "benchmarks" / "dtensor_bench.py"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(METAL_LINALG_NO_CALIBRATION_NOTICE="1", MASTER_PORT=str(_free_port()))
    r = subprocess.run(
        [sys.executable, str(script), "--device", "cpu", "--cases", "6x8", "3x20"]
        + ["--runs", "1", "--out", str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    data = json.loads((tmp_path / "dtensor-cpu-w1.json").read_text())
    assert data["meta"]["world"] == 1
    rows = data["results"]
    assert [(x["op"], x["batch"], x["n"]) for x in rows] == [
        (op, b, n) for b, n in ((6, 8), (3, 20)) for op in ("eigh", "svd", "qr")
    ]
    for x in rows:
        assert x["ok"] and x["collectives_in_op"] == 0 and x["placements_kept"], x
        assert x["exactly_equal"] and x["max_residual"] < 1e-4, x
        assert x["single_best_ms"] > 0 and x["sharded_best_ms"] > 0
    assert "| eigh | 6 x 8x8 |" in (tmp_path / "dtensor-cpu-w1.md").read_text()
    # the multicast switches are set before torch loads
    text = script.read_text()
    for var in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
        assert text.index(f'os.environ["{var}"]') < text.index("import torch")
