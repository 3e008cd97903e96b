"""eigvalsh of large matrices on CUDA: the blocked one-stage tridiagonalisation against the
two-stage one (dense -> band -> tridiagonal, core/src/blocked_eigh2.cpp: the chase in one launch
or by wavefront launches) and the peers (torch.linalg, CuPy, JAX), in one run. Each
configuration runs in its own process (the CUDA backend reads METAL_LINALG_EIGH_* once).

    python3 benchmarks/twostage_h200.py --out DIR [--budget-s 110] [--points 1024x1,4096x1]
        [--configs one-stage,b16]
    python3 benchmarks/twostage_h200.py --report DIR/nvidia-h200-twostage.json

Times: CUDA events around one call after a warm-up call, best and median of up to 5 calls (fewer
past ~1 s per point). Each two-stage point also records the largest eigenvalue error against
torch.linalg.eigvalsh in float64 as a ratio max|w - w64| / (n ulp ||A||_1).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

# The grid: n 256..4096, batch 1, 8, 64 with batch n^3 <= 2^36.
POINTS = [(n, b) for n in (256, 512, 1024, 2048, 4096) for b in (1, 8, 64) if b * n**3 <= 2**36]
TWO = {"METAL_LINALG_EIGH_TWO_STAGE_MIN_N": "1"}
# name: environment of the process. bN: band N, the chase in one launch (groups of 32 lanes up
# to band 32: the tasks in registers; b16l64: groups of 64 lanes, the cross in shared memory);
# waveN: band N, two tasks per wavefront launch (the earlier chase).
CONFIGS = {
    "one-stage": {"METAL_LINALG_EIGH_TWO_STAGE_MIN_N": "0"},
    "b16": {**TWO, "METAL_LINALG_EIGH_BAND": "16", "METAL_LINALG_EIGH_CHASE_TASKS": "0"},
    "b32": {**TWO, "METAL_LINALG_EIGH_BAND": "32", "METAL_LINALG_EIGH_CHASE_TASKS": "0"},
    "b8": {**TWO, "METAL_LINALG_EIGH_BAND": "8", "METAL_LINALG_EIGH_CHASE_TASKS": "0"},
    "b16l64": {
        **TWO,
        "METAL_LINALG_EIGH_BAND": "16",
        "METAL_LINALG_EIGH_CHASE_TASKS": "0",
        "METAL_LINALG_EIGH_CHASE_LANES": "64",
    },
    "wave16": {**TWO, "METAL_LINALG_EIGH_BAND": "16", "METAL_LINALG_EIGH_CHASE_TASKS": "2"},
    "torch": {},
    "cupy": {},
    "jax": {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
}
PEERS = ("torch", "cupy", "jax")


def routed_config(n: int, batch: int) -> str:
    """The configuration the CUDA backend's default routing takes (cuda/cuda_backend.cu)."""
    return "b8" if 512 <= n <= 2048 and batch >= 64 else "one-stage"


def _time(fn, sync, limit_s: float = 1.0) -> tuple[float, float]:
    fn()
    sync()
    ts: list[float] = []
    t0 = time.perf_counter()
    while len(ts) < 5 and (len(ts) < 2 or time.perf_counter() - t0 < limit_s):
        s = time.perf_counter()
        fn()
        sync()
        ts.append((time.perf_counter() - s) * 1e3)
    ts.sort()
    return ts[0], ts[len(ts) // 2]


def _matrix(n: int, batch: int):
    import torch

    g = torch.Generator().manual_seed(n + batch)
    a = torch.randn(batch, n, n, generator=g)
    return ((a + a.mT) / 2).cuda()


def worker(config: str, points: list[tuple[int, int]]) -> None:
    import torch

    sync = torch.cuda.synchronize
    for n, batch in points:
        a = _matrix(n, batch)
        rec = {"config": config, "op": "eigvalsh", "n": n, "batch": batch}
        if config == "torch":
            fn = lambda a=a: torch.linalg.eigvalsh(a)
        elif config == "cupy":
            import cupy as cp

            x = cp.asarray(a)
            fn = lambda x=x: cp.linalg.eigvalsh(x)
        elif config == "jax":
            import jax
            import jax.numpy as jnp

            x = jnp.asarray(a.cpu().numpy())
            f = jax.jit(jnp.linalg.eigvalsh)
            fn = lambda x=x, f=f: f(x).block_until_ready()
        else:
            import metal_linalg_torch as mlt

            rec["backend"] = mlt.eigvalsh_backend(n, batch, device="cuda")
            fn = lambda a=a: mlt.eigvalsh(a)
        try:
            rec["best_ms"], rec["median_ms"] = _time(fn, sync)
        except (RuntimeError, ValueError, MemoryError) as e:  # a peer without this size
            rec["error"] = str(e)[:200]
        if config not in PEERS and "error" not in rec:
            import metal_linalg_torch as mlt

            w = mlt.eigvalsh(a).double()
            w64 = torch.linalg.eigvalsh(a.double())
            an = a.double().abs().sum(-2).amax(-1)
            ulp = torch.finfo(torch.float32).eps
            rec["err_ratio"] = float(((w - w64).abs().amax(-1) / (n * ulp * an)).max())
        print(json.dumps(rec), flush=True)
        del a
        torch.cuda.empty_cache()


def report(path: str) -> str:
    with open(path) as f:
        recs = json.load(f)["records"]
    rows: dict = {}
    for r in recs:
        if "best_ms" in r:
            rows.setdefault((r["n"], r["batch"]), {})[r["config"]] = r
    ours = [c for c in CONFIGS if c not in PEERS and any(c in v for v in rows.values())]
    peers = [c for c in PEERS if any(c in v for v in rows.values())]
    cols = ours + peers
    out = ["# eigvalsh by one and two stages on the H200 (ms, best of up to 5 calls)", ""]
    out.append(
        "| n x batch | "
        + " | ".join(cols)
        + " | as routed | as routed / best peer | worst two-stage error ratio |"
    )
    out.append("|---" * (len(cols) + 4) + "|")
    for (n, b), byc in sorted(rows.items()):
        cells = [f"{byc[c]['best_ms']:.2f}" if c in byc else "-" for c in cols]
        routed = routed_config(n, b)
        mine = byc[routed]["best_ms"] if routed in byc else None
        theirs = [byc[c]["best_ms"] for c in peers if c in byc]
        cells.append(f"{routed}")
        sp = f"{min(theirs) / mine:.2f}x" if mine and theirs else "-"
        errs = [byc[c]["err_ratio"] for c in byc if "err_ratio" in byc[c] and c != "one-stage"]
        err = f"{max(errs):.3g}" if errs else "-"
        out.append(f"| {n} x{b} | " + " | ".join(cells) + f" | {sp} | {err} |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--budget-s", type=float, default=110)
    ap.add_argument("--points", help="e.g. 1024x1,4096x1 (default: the grid)")
    ap.add_argument("--configs", help="comma-separated names of CONFIGS (default: all)")
    ap.add_argument("--worker")
    ap.add_argument("--report")
    args = ap.parse_args()
    points = (
        [tuple(int(v) for v in p.split("x")) for p in args.points.split(",")]
        if args.points
        else POINTS
    )
    if args.worker:
        worker(args.worker, points)
        return
    if args.report:
        md = report(args.report)
        with open(args.report[: -len(".json")] + ".md", "w") as f:
            f.write(md)
        print(md)
        return
    configs = args.configs.split(",") if args.configs else list(CONFIGS)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "nvidia-h200-twostage.json")
    t0 = time.perf_counter()
    recs: list[dict] = []
    for config in configs:
        left = args.budget_s - (time.perf_counter() - t0)
        if left < 5:
            print(f"== {config}: skipped (budget)", flush=True)
            continue
        print(f"== {config}", flush=True)
        cmd = [sys.executable, __file__, "--worker", config]
        if args.points:
            cmd += ["--points", args.points]
        try:
            p = subprocess.run(
                cmd,
                env={**os.environ, **CONFIGS[config]},
                capture_output=True,
                check=False,
                text=True,
                timeout=left,
            )
            lines, err = p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            lines = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = "timeout"
        for line in lines.splitlines():
            if line.startswith("{"):
                recs.append(json.loads(line))
                print(line, flush=True)
        if err.strip():
            print(err[-1500:], flush=True)
        with open(path, "w") as f:
            json.dump({"device": "NVIDIA H200", "records": recs}, f, indent=1)
    md = report(path)
    with open(path[: -len(".json")] + ".md", "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
