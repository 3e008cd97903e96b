"""A/B of the blocked path's settings on one CUDA device: each variant (a set of METAL_LINALG_*
environment variables, read once per process) runs in its own child process over the same points,
torch.linalg in the same run. Each point: one random float32 input (eigh / eigvalsh: A + A^T),
a warm-up, then best and median of --reps calls timed with CUDA events; its accuracy in float64
(qr: ||A - QR|| / (m ||A|| ulp), ||I - Q^T Q|| / (m ulp); eigh: ||A Z - Z diag(w)|| / (n ||A|| ulp),
||I - Z^T Z|| / (n ulp); svd: ||A - U S V^T|| / (m ||A|| ulp); values only: the largest difference
from torch.linalg's in float64 over ||A|| ulp).

    python3 benchmarks/env_variants.py --out OUT --slug ws \\
        --point qr:4096x4096x1 --point eigh:2048x2048x1 \\
        --variant base: --variant nows:METAL_LINALG_CUBLAS_WORKSPACE_MB=0 [--torch]

Writes <slug>.json and <slug>.md (and <slug>.png where matplotlib is installed) into --out and
prints the table. `--replot RESULT.json` draws the plot of an earlier run again, beside it.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

ULP = 2.0**-23


def parse_point(s: str) -> tuple[str, int, int, int]:
    op, shape = s.split(":")
    m, n, b = (int(x) for x in shape.split("x"))
    return op, m, n, b


def child(points: list[str], reps: int, which: str) -> None:
    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    from cuda_events import best_and_median_ms

    if which == "ours":
        import metal_linalg_torch as lib
    else:
        lib = torch.linalg
    out = []
    for spec in points:
        op, m, n, b = parse_point(spec)
        g = torch.Generator(device="cuda").manual_seed(7)
        a = torch.randn(b, m, n, device="cuda", generator=g)
        if op in ("eigh", "eigvalsh"):
            a = a + a.mT
        fn = getattr(lib, op)
        if op == "svd":  # the thin SVD on both sides (torch's default is full_matrices=True)
            fn = functools.partial(fn, full_matrices=False)
        res = fn(a)
        torch.cuda.synchronize()
        best, med = best_and_median_ms(lambda fn=fn, a=a: fn(a), reps)
        a64 = a.double()
        na = torch.linalg.matrix_norm(a64, ord=1).clamp_min(1e-30)
        acc = {}
        if op == "qr":
            q, r = (x.double() for x in res)
            k = q.shape[-1]
            eye = torch.eye(k, dtype=torch.float64, device="cuda")
            acc["resid"] = float(
                (torch.linalg.matrix_norm(a64 - q @ r, ord=1) / (m * na * ULP)).max()
            )
            acc["orth"] = float((torch.linalg.matrix_norm(eye - q.mT @ q, ord=1) / (m * ULP)).max())
        elif op == "eigh":
            w, z = (x.double() for x in res)
            eye = torch.eye(n, dtype=torch.float64, device="cuda")
            acc["resid"] = float(
                (
                    torch.linalg.matrix_norm(a64 @ z - z * w[..., None, :], ord=1) / (n * na * ULP)
                ).max()
            )
            acc["orth"] = float((torch.linalg.matrix_norm(eye - z.mT @ z, ord=1) / (n * ULP)).max())
        elif op == "svd":
            u, s, vh = (x.double() for x in res)
            acc["resid"] = float(
                (
                    torch.linalg.matrix_norm(a64 - (u * s[..., None, :]) @ vh, ord=1)
                    / (m * na * ULP)
                ).max()
            )
        elif op in ("eigvalsh", "svdvals"):
            ref = getattr(torch.linalg, op)(a64)
            acc["value"] = float(((res.double() - ref).abs().amax(-1) / (na * ULP)).max())
        del res
        out.append({"point": spec, "best_ms": best, "median_ms": med, **acc})
        print(f"  {which} {spec}: {best:.3f} ms", file=sys.stderr, flush=True)
    print(json.dumps(out))


def plot(runs: dict, path: Path, title: str) -> bool:
    """Best ms per point (log scale), a bar per variant, the fastest variant of each point named
    under it; False where matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = list(runs)
    points = [r["point"] for r in next((v["rows"] for v in runs.values() if v["rows"]), [])]
    if not points:
        return False
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(max(8.0, 0.9 * len(points)), 5.0))
    for k, nm in enumerate(names):
        rows = {r["point"]: r["best_ms"] for r in runs[nm]["rows"]}
        xs = [i + (k - (len(names) - 1) / 2) * width for i in range(len(points))]
        ax.bar(xs, [rows.get(p, 0.0) for p in points], width, label=nm)
    labels = []
    for p in points:
        times = {nm: r["best_ms"] for nm in names for r in runs[nm]["rows"] if r["point"] == p}
        best = min(times, key=times.get) if times else "-"
        labels.append(f"{p.replace(':', chr(10))}\nbest: {best}")
    ax.set_xticks(range(len(points)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("ms (best of the calls, log scale)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replot", default="", help="an earlier run's JSON: draw its plot again")
    if "--replot" in sys.argv:
        src = Path(ap.parse_known_args()[0].replot)
        ok = plot(json.loads(src.read_text()), src.with_suffix(".png"), src.stem)
        sys.exit(0 if ok else 1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--slug", default="env-variants")
    ap.add_argument("--point", action="append", required=True)
    ap.add_argument("--variant", action="append", default=[], help="name:ENV=V,ENV=V")
    ap.add_argument("--torch", action="store_true")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--child", default="")
    args = ap.parse_args()
    if args.child:
        child(args.point, args.reps, args.child)
        return
    runs = {}
    variants = [(v.split(":", 1)[0], v.split(":", 1)[1]) for v in args.variant]
    if args.torch:
        variants.append(("torch", None))
    for name, env_s in variants:
        env = dict(os.environ)
        if env_s:
            for kv in env_s.split(","):
                k, v = kv.split("=", 1)
                env[k] = v
        cmd = [
            sys.executable,
            __file__,
            "--out",
            args.out,
            "--child",
            "torch" if env_s is None else "ours",
            "--reps",
            str(args.reps),
        ]
        for p in args.point:
            cmd += ["--point", p]
        print(f"== {name} {env_s or ''}", file=sys.stderr, flush=True)
        r = subprocess.run(cmd, check=False, env=env, stdout=subprocess.PIPE, text=True)
        try:
            runs[name] = {"env": env_s, "rows": json.loads(r.stdout.strip().splitlines()[-1])}
        except (json.JSONDecodeError, IndexError):
            runs[name] = {"env": env_s, "rows": [], "error": f"exit {r.returncode}"}
    names = list(runs)
    lines = ["| point | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for i, p in enumerate(args.point):
        cells = []
        for nm in names:
            rows = runs[nm]["rows"]
            if i < len(rows):
                r = rows[i]
                acc = ", ".join(f"{k} {r[k]:.2g}" for k in ("resid", "orth", "value") if k in r)
                cells.append(
                    f"{r['best_ms']:.3f} ({r['median_ms']:.3f}){'; ' + acc if acc else ''}"
                )
            else:
                cells.append(runs[nm].get("error", "-"))
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.slug}.json").write_text(json.dumps(runs, indent=1))
    envs = "\n".join(f"- {nm}: `{runs[nm]['env']}`" for nm in names if runs[nm]["env"] is not None)
    (out / f"{args.slug}.md").write_text(
        f"# {args.slug}\n\nms best (median) of {args.reps} calls, CUDA events; accuracy ratios in float64.\n\n"
        f"{envs}\n\n{table}\n"
    )
    plot(runs, out / f"{args.slug}.png", args.slug)


if __name__ == "__main__":
    main()
