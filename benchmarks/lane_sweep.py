"""Block-per-matrix vs lane-per-matrix CUDA launches of every op, on device tensors.

Usage (GPU machine, metal_linalg_torch with the CUDA backend installed):
    python3 benchmarks/lane_sweep.py --out DIR [--budget-s 120]
Writes DIR/lane_sweep.json and prints a table: best-of-reps milliseconds per call (CUDA events).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import metal_linalg_torch as mlt
import torch
from metal_linalg_torch import queries

OPS = ("qr", "eigh", "eigvalsh", "svd", "svdvals")
SIZES = (2, 3, 4, 6, 8, 12, 16, 24, 32)
BATCHES = (256, 1024, 4096, 16384, 65536)


def time_call(fn, x, reps: int = 5) -> float:
    fn(x)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(x)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end))
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--budget-s", type=float, default=120)
    ap.add_argument("--ops", nargs="*", default=list(OPS))
    ap.add_argument("--sizes", nargs="*", type=int, default=list(SIZES))
    ap.add_argument("--batches", nargs="*", type=int, default=list(BATCHES))
    ap.add_argument("--block-only", action="store_true", help="time the block variant alone")
    ap.add_argument("--tag", default="", help="suffix of the JSON file name")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    t_end = time.time() + args.budget_s
    rows = []
    print(f"{'op':9s} {'n':>3s} {'batch':>6s} {'block ms':>9s} {'lane ms':>9s} {'lane/block':>10s}")
    for op in args.ops:
        fn = getattr(mlt, op)
        for n in args.sizes:
            for batch in args.batches:
                if time.time() > t_end:
                    break
                g = torch.Generator(device="cuda").manual_seed(n * 131 + batch)
                x = torch.randn(batch, n, n, device="cuda", generator=g)
                if op.startswith("eig"):
                    x = x + x.mT
                res = {}
                variants = (("block", 0),) if args.block_only else (("block", 0), ("lane", 1 << 20))
                for variant, lane_max in variants:
                    queries.set_policy(
                        op,
                        gpu_min_batch=1,
                        gpu_lane_max_n=lane_max,
                        gpu_small_max_n=0,
                        gpu_lane_min_batch=1,
                    )
                    args_b = (n,) if op.startswith("eig") else (n, n)
                    name = getattr(mlt, f"{op}_backend")(*args_b, batch, device="cuda")
                    res[variant] = (time_call(fn, x), name)
                queries.reset_policy(op)
                rows.append(
                    {
                        "op": op,
                        "n": n,
                        "batch": batch,
                        "block_ms": res["block"][0],
                        "lane_ms": res["lane"][0] if "lane" in res else None,
                        "block_backend": res["block"][1],
                        "lane_backend": res["lane"][1] if "lane" in res else None,
                    }
                )
                lane_ms = res["lane"][0] if "lane" in res else float("nan")
                print(
                    f"{op:9s} {n:3d} {batch:6d} {res['block'][0]:9.3f} {lane_ms:9.3f} "
                    f"{lane_ms / res['block'][0]:10.2f}",
                    flush=True,
                )
    meta = {
        "env": {k: v for k, v in os.environ.items() if k.startswith("METAL_LINALG_")},
        "device": mlt.device_name(),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with open(os.path.join(args.out, f"lane_sweep{args.tag}.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
