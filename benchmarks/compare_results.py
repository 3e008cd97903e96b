"""Compare our timings of two benchmark result files (run_gpu.py JSON) point by point.

Prints, for every point both files have with max(m, n) <= --max-n, our best time in each, their
ratio (new / old) and the backend each run reported; exits 1 when a point with batch >= --min-batch
is slower than old by more than --tolerance, or when a point's backend (kernel and launch kind)
differs. Example (after a refactor, on the same GPU):
  python3 benchmarks/compare_results.py benchmarks/results/nvidia-h200.json bench-out/NVIDIA_H200.json
"""

import argparse
import json
import sys


def points(path: str) -> dict[tuple, dict]:
    with open(path) as f:
        data = json.load(f)
    out = {}
    for p in data["points"]:
        ours = p.get("impls", {}).get("ours")
        if ours and ours.get("best_ms"):
            out[(p["op"], p["m"], p["n"], p["batch"])] = {
                "ms": ours["best_ms"],
                "backend": p.get("backend"),
            }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--max-n", type=int, default=64)
    ap.add_argument("--min-batch", type=int, default=1024)
    ap.add_argument("--tolerance", type=float, default=0.05)
    args = ap.parse_args()
    old, new = points(args.old), points(args.new)
    keys = sorted(k for k in old.keys() & new.keys() if max(k[1], k[2]) <= args.max_n)
    if not keys:
        print("no common points")
        return 1
    bad = 0
    print(
        f"{'op':9} {'m':>5} {'n':>5} {'batch':>6} {'old ms':>9} {'new ms':>9} {'new/old':>8}  backend"
    )
    for k in keys:
        o, n = old[k], new[k]
        ratio = n["ms"] / o["ms"]
        same = o["backend"] == n["backend"]
        slow = k[3] >= args.min_batch and ratio > 1 + args.tolerance
        flag = " SLOWER" if slow else ""
        flag += "" if same else f" BACKEND {o['backend']} -> {n['backend']}"
        bad += slow or not same
        print(
            f"{k[0]:9} {k[1]:5} {k[2]:5} {k[3]:6} {o['ms']:9.4f} {n['ms']:9.4f} {ratio:8.3f}  {n['backend']}{flag}"
        )
    print(f"{len(keys)} points compared, {bad} flagged")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
