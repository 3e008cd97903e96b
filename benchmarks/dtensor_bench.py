"""A batch sharded over the ranks (DTensor, Shard(0)) against one GPU doing the whole batch.

    torchrun --nproc-per-node=8 benchmarks/dtensor_bench.py [--out DIR]
    python benchmarks/dtensor_bench.py                      # world size 1, no launcher
    python benchmarks/dtensor_bench.py --device cpu --cases 64x8 --runs 2   # the logic, on gloo

One process per GPU (NCCL; the world size comes from torchrun's environment). For each case
(batch x n x n, default 16384 x 32x32, 1024 x 128x128, 8 x 2048x2048) and op (eigh, svd, qr):

- single: rank 0 decomposes the whole batch on its GPU (best and median of --runs calls);
- sharded: every rank decomposes its shard of the batch as a DTensor; a run's time is the
  slowest rank's (max over ranks, gathered after the timing);
- checks: the op ran no collective (CommDebugMode around one call), its outputs are DTensors
  sharded like the input, and each rank's values equal its slice of the single-GPU call's
  (eigenvalues / singular values / |diag R| within 1e-4 of the largest; exact equality is
  reported too: the kernels' launch kind may depend on the batch size) with a small
  reconstruction residual.

Rank 0 writes <out>/dtensor-<device>-w<world>.json and .md. NVLink multicast stays off (NCCL
NVLS, symmetric memory, NVSHMEM): this machine's GPUs must not use it.
"""

from __future__ import annotations

import os

# Before torch or NCCL is loaded.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import argparse
import datetime
import json
import socket
import statistics
import sys
import time

import metal_linalg_torch as ml
import torch
import torch.distributed as dist

DEFAULT_CASES = ("16384x32", "1024x128", "8x2048")
OPS = ("eigh", "svd", "qr")
TOL = 1e-4


def parse_case(text: str) -> tuple[int, int]:
    """ "16384x32" -> (batch 16384, n 32)."""
    try:
        batch, n = (int(p) for p in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"case {text!r}: expected BATCHxN, e.g. 1024x128"
        ) from None
    if batch < 1 or n < 1:
        raise argparse.ArgumentTypeError(f"case {text!r}: sizes must be >= 1")
    return batch, n


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init(device: str):
    """The process group and a 1-D mesh over every rank; a world of one without a launcher."""
    if "RANK" not in os.environ:
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
    from torch.distributed.device_mesh import init_device_mesh

    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if device == "cuda" else "gloo")
    return init_device_mesh(device, (dist.get_world_size(),))


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def call(op: str, a):
    """The op's outputs as a tuple (torch.linalg's order)."""
    if op == "eigh":
        return tuple(ml.eigh(a))
    if op == "svd":
        return tuple(ml.svd(a, full_matrices=False))
    return tuple(ml.qr(a))


def timed(op: str, a, device: str, runs: int) -> list:
    """Milliseconds of each of `runs` calls after a warm-up call."""
    call(op, a)
    sync(device)
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        call(op, a)
        sync(device)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def values(op: str, outs) -> torch.Tensor:
    """The basis-free part of an op's result: eigenvalues, singular values, |diag R|."""
    if op == "eigh":
        return outs[0]
    if op == "svd":
        return outs[1]
    return outs[1].diagonal(dim1=-2, dim2=-1).abs()


def residual(op: str, a: torch.Tensor, outs) -> float:
    """max over matrices of ||A - product of the factors|| / ||A||."""
    if op == "eigh":
        w, v = outs
        rebuilt = v @ torch.diag_embed(w) @ v.mT
    elif op == "svd":
        u, s, vt = outs
        rebuilt = u @ torch.diag_embed(s) @ vt
    else:
        q, r = outs
        rebuilt = q @ r
    norm = torch.linalg.matrix_norm(a).clamp_min(1e-30)
    return float((torch.linalg.matrix_norm(a - rebuilt) / norm).max())


def backend(op: str, n: int, batch: int, device: str) -> str:
    """What one rank's call runs (ml.<op>_backend for its shard)."""
    dims = (n,) if op == "eigh" else (n, n)
    return getattr(ml, f"{op}_backend")(*dims, max(batch, 1), device=device)


def make_input(op: str, batch: int, n: int, device: str) -> torch.Tensor:
    """The same global batch on every rank (a fixed CPU generator, then moved)."""
    g = torch.Generator().manual_seed(batch * 7919 + n)
    a = torch.randn(batch, n, n, generator=g)
    if op == "eigh":
        a = (a + a.mT) / 2
    return a.to(device)


def run_case(op: str, batch: int, n: int, device: str, mesh, runs: int) -> dict:
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.debug import CommDebugMode

    rank, world = dist.get_rank(), dist.get_world_size()
    a = make_input(op, batch, n, device)
    single = call(op, a)  # every rank: the reference for its own slice
    sync(device)
    single_ms = timed(op, a, device, runs) if rank == 0 else []
    dist.barrier()

    # Each rank holds the whole input: its shard is a local slice, no scatter needed.
    chunks = a.chunk(world, dim=0)
    local = chunks[rank].contiguous() if rank < len(chunks) else a[:0].contiguous()
    da = DTensor.from_local(
        local, mesh, [Shard(0)], run_check=False, shape=a.shape, stride=a.stride()
    )
    with CommDebugMode() as comm:
        outs = call(op, da)
        sync(device)
    collectives = comm.get_total_counts()
    placements_ok = all(isinstance(o, DTensor) and tuple(o.placements) == (Shard(0),) for o in outs)
    mine = [o.to_local() for o in outs]
    start = sum(c.shape[0] for c in chunks[:rank])
    want = [o[start : start + local.shape[0]] for o in single]
    exact = all(torch.equal(x, y) for x, y in zip(mine, want))
    got_v, want_v = values(op, mine), values(op, want)
    scale = float(want_v.abs().max()) if want_v.numel() else 1.0
    diff = float((got_v - want_v).abs().max()) / max(scale, 1e-30) if want_v.numel() else 0.0
    res = residual(op, local, mine) if local.shape[0] else 0.0

    sharded_local = timed(op, da, device, runs)
    # The slowest rank's time per run (a collective, after the timing).
    t = torch.tensor(sharded_local, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    sharded_ms = t.cpu().tolist()
    checks = torch.tensor(
        [collectives, 0 if placements_ok else 1, diff, res, 0 if exact else 1],
        dtype=torch.float64,
        device=device,
    )
    dist.all_reduce(checks, op=dist.ReduceOp.MAX)
    collectives, bad_place, diff, res, inexact = checks.cpu().tolist()
    row = {
        "op": op,
        "batch": batch,
        "n": n,
        "world": world,
        "backend": backend(op, n, local.shape[0], device),
        "single_best_ms": min(single_ms) if single_ms else None,
        "single_median_ms": statistics.median(single_ms) if single_ms else None,
        "sharded_best_ms": min(sharded_ms),
        "sharded_median_ms": statistics.median(sharded_ms),
        "collectives_in_op": int(collectives),
        "placements_kept": bad_place == 0,
        "max_value_diff_rel": diff,
        "max_residual": res,
        "exactly_equal": inexact == 0,
    }
    row["ok"] = row["collectives_in_op"] == 0 and row["placements_kept"] and diff <= TOL
    row["ok"] = row["ok"] and res <= TOL * max(n, 1)
    if row["single_best_ms"]:
        row["speedup"] = row["single_best_ms"] / row["sharded_best_ms"]
    return row


def markdown(meta: dict, rows: list) -> str:
    lines = [
        f"# DTensor batch sharding on {meta['device_name']} x{meta['world']} ({meta['date']})",
        "",
        (
            f"`{meta['command']}`; torch {meta['torch']}; best (median) ms of {meta['runs']} "
            "calls after a warm-up. single: one device (rank 0), the whole batch; sharded: "
            "Shard(0) over the ranks, the slowest rank per call. collectives: counted by "
            "CommDebugMode inside the op."
        ),
        "",
        (
            "| op | batch x n | backend per shard | single ms | sharded ms | speedup | "
            "collectives | values vs single | exact | ok |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        single = (
            f"{r['single_best_ms']:.3g} ({r['single_median_ms']:.3g})"
            if r["single_best_ms"]
            else "-"
        )
        lines.append(
            f"| {r['op']} | {r['batch']} x {r['n']}x{r['n']} | `{r['backend']}` | {single} | "
            f"{r['sharded_best_ms']:.3g} ({r['sharded_median_ms']:.3g}) | "
            f"{r.get('speedup', float('nan')):.2f}x | {r['collectives_in_op']} | "
            f"{r['max_value_diff_rel']:.1e} | {'yes' if r['exactly_equal'] else 'no'} | "
            f"{'yes' if r['ok'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--cases", nargs="+", type=parse_case, default=None, metavar="BATCHxN")
    p.add_argument("--ops", nargs="+", choices=OPS, default=list(OPS))
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--out", default="dtensor-out")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device (use --device cpu to check the logic)")
    cases = args.cases or [parse_case(c) for c in DEFAULT_CASES]
    mesh = init(args.device)
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        os.makedirs(args.out, exist_ok=True)  # before measuring: a bad --out fails now
    rows = []
    for batch, n in cases:
        for op in args.ops:
            row = run_case(op, batch, n, args.device, mesh, args.runs)
            rows.append(row)
            if rank == 0:
                print(json.dumps(row), flush=True)
    if rank == 0:
        device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
        meta = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": args.device,
            "device_name": device_name,
            "world": world,
            "runs": args.runs,
            "torch": torch.__version__,
            "metal_linalg": ml.version(),
            "command": " ".join(["dtensor_bench.py", *(argv or sys.argv[1:])]),
        }
        stem = os.path.join(args.out, f"dtensor-{args.device}-w{world}")
        with open(stem + ".json", "w") as f:
            json.dump({"meta": meta, "results": rows}, f, indent=1)
        with open(stem + ".md", "w") as f:
            f.write(markdown(meta, rows))
        print(f"wrote {stem}.json, {stem}.md")
    dist.barrier()
    dist.destroy_process_group()
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
