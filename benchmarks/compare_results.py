"""Compare our timings of two benchmark result files (run_gpu.py JSON) point by point.

Prints, for every point both files have with max(m, n) <= --max-n, our best time in each, their
ratio (new / old) and the backend each run reported; exits 1 when a point with batch >= --min-batch
is slower than old by more than --tolerance, or when a point's backend (kernel and launch kind)
differs. OLD and NEW may each name several runs, comma-separated: a point then takes the best of
its runs (runs of old and new code alternated in one session are the fair comparison). --md and --png
write the comparison as a Markdown table and a plot of new/old per point. Example (after a refactor,
on the same GPU):
  python3 benchmarks/compare_results.py benchmarks/results/nvidia-h200.json bench-out/NVIDIA_H200.json
"""

import argparse
import json
import math
import sys


def points(paths: str) -> dict[tuple, dict]:
    out = {}
    for path in paths.split(","):
        with open(path) as f:
            data = json.load(f)
        for p in data["points"]:
            ours = p.get("impls", {}).get("ours")
            if ours and ours.get("best_ms"):
                key = (p["op"], p["m"], p["n"], p["batch"])
                if key not in out or ours["best_ms"] < out[key]["ms"]:
                    out[key] = {"ms": ours["best_ms"], "backend": p.get("backend")}
    return out


def write_md(path: str, rows: list, args) -> None:
    ratios = [r[2] / r[1] for r in rows if r[0][3] >= args.min_batch]
    geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else float("nan")
    lines = [
        f"# Our times, new code vs old, max(m, n) <= {args.max_n}",
        "",
        f"old: `{args.old}`  ",
        f"new: `{args.new}`  ",
        (
            f"Best of the runs per point; geometric mean new/old at batch >= {args.min_batch}: "
            f"{geo:.3f} over {len(ratios)} points."
        ),
        "",
        "| op | m | n | batch | old ms | new ms | new/old | backend |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k, o, n, backend, flag in rows:
        lines.append(
            f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {o:.4f} | {n:.4f} | {n / o:.3f}{flag} | "
            f"`{backend}` |"
        )
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def write_png(path: str, rows: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{k[0]} {k[1]}x{k[2]} x{k[3]}" for k, *_ in rows]
    ratios = [n / o for _, o, n, _, _ in rows]
    fig, ax = plt.subplots(figsize=(8, max(4, 0.16 * len(rows))))
    ax.barh(range(len(rows)), [r - 1 for r in ratios], left=1, color="tab:blue")
    ax.axvline(1, color="black", lw=0.8)
    ax.axvline(1.05, color="tab:red", lw=0.6, ls="--")
    ax.set_yticks(range(len(rows)), labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("new / old time (best of runs; right of 1 = slower)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--max-n", type=int, default=64)
    ap.add_argument("--min-batch", type=int, default=1024)
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--md", help="write the comparison as a Markdown table here")
    ap.add_argument("--png", help="write a plot of new/old per point here")
    args = ap.parse_args()
    old, new = points(args.old), points(args.new)
    keys = sorted(k for k in old.keys() & new.keys() if max(k[1], k[2]) <= args.max_n)
    if not keys:
        print("no common points")
        return 1
    bad = 0
    rows = []
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
        rows.append((k, o["ms"], n["ms"], n["backend"], flag))
        print(
            f"{k[0]:9} {k[1]:5} {k[2]:5} {k[3]:6} {o['ms']:9.4f} {n['ms']:9.4f} {ratio:8.3f}  {n['backend']}{flag}"
        )
    print(f"{len(keys)} points compared, {bad} flagged")
    if args.md:
        write_md(args.md, rows, args)
    if args.png:
        write_png(args.png, rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
