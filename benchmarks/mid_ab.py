"""Small and mid-size matrices (n <= 235) at batch 1 and 64 on one CUDA device: ours under
routing variants against torch.linalg, CuPy and JAX (run_gpu.py's implementations, inputs
and CUDA-event timing; JAX by wall clock after two untimed calls, so its compilation is never
timed).

Variants are policy fields set through the C API for the one op being timed (then reset):
  table    the built-in table for this device, as shipped
  blocked  the blocked algorithms at every n and batch (gpu_blocked_min_n 1)
  simd64   qr with the simdgroup lines up to 64 (gpu_simd_max_n 64)
  simd32   eigvalsh with the simdgroup Jacobi line up to 32 (gpu_simd_max_n 32)
  kernel   the table's kernels, never the blocked path (gpu_blocked_min_n 2^30)
  alt      the op's alternative group kernel at every n (gpu_alt window 0..2^20; eigh:
           eigh_tridiag_bisect, eigvalsh: eigvalsh_tridiag_ql, svd / svdvals: the group
           one-sided Jacobi), never the blocked path
  old      the H200 table before 2026-12-04 (its qr, eigh, eigvalsh and svdvals fields that
           changed then, set per op)
Process-wide switches (environment variables read once) need a process each: run the script
once per setting with --label (the variant names get it as a suffix) and --no-peers, then
--merge the JSON files into one table.

    python benchmarks/mid_ab.py --out OUT [--label L] [--no-peers] [--variants table blocked]
    python benchmarks/mid_ab.py --merge OUT/a.json OUT/b.json --out OUT --name mid_ab
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ab_table import variant_rows

VARIANTS = {
    "table": {},
    "blocked": {"gpu_blocked_min_n": 1, "gpu_blocked_max_batch": 1 << 40},
    "simd64": {"gpu_simd_max_n": 64},
    "simd32": {"gpu_simd_max_n": 32},
    "kernel": {"gpu_blocked_min_n": 1 << 30},
    "alt": {"gpu_alt_min_n": 0, "gpu_alt_max_n": 1 << 20, "gpu_blocked_min_n": 1 << 30},
}
# The fields of the H200 table that changed on 2026-12-04, as they were before.
OLD = {
    "qr": {"gpu_simd_max_n": 32, "gpu_blocked_min_n": 64, "gpu_blocked_max_batch": 8},
    "eigh": {"gpu_blocked_min_n": 100, "gpu_blocked_max_batch": 64, "gpu_alt_max_n": 0},
    "eigvalsh": {"gpu_simd_max_n": 24, "gpu_blocked_min_n": 1 << 30},
    "svd": {},
    "svdvals": {"gpu_blocked_min_n": 1 << 30},
}
SMALL = (16, 17, 24, 32)
MID = (48, 64, 100, 127, 128, 192, 235)
EXTRA = (33, 40, 137)
EIGH = (33, 40, 48, 64, 100, 127, 128, 137)
JACOBI = (33, 40, 48, 64, 80, 100, 127, 128, 160, 192, 235)
JACOBI_RECT = ((100, 40), (96, 48), (128, 64), (64, 128), (200, 100))


def points(which: str):
    pts = []
    for b in (1, 64):
        if which in ("all", "small"):
            for op in ("svd", "svdvals", "qr", "eigh", "eigvalsh"):
                for n in SMALL:
                    pts.append((op, n, n, b))
        if which in ("all", "mid", "final"):
            for op in ("eigh", "eigvalsh", "svd", "svdvals", "qr"):
                for n in MID:
                    pts.append((op, n, n, b))
            for op in ("qr", "svd", "svdvals"):
                pts.append((op, 64, 32, b))
                pts.append((op, 100, 40, b))
        if which == "eigh":
            for n in EIGH:
                pts.append(("eigh", n, n, b))
        if which == "jacobi":
            for op in ("svd", "svdvals"):
                for n in JACOBI:
                    pts.append((op, n, n, b))
                for m, n in JACOBI_RECT:
                    pts.append((op, m, n, b))
        if which in ("all", "extra", "final"):
            for op in ("eigh", "eigvalsh", "qr"):
                for n in EXTRA:
                    pts.append((op, n, n, b))
    return pts


def applicable(v: str, op: str, m: int, n: int) -> bool:
    big = max(m, n)
    if v in ("table", "old"):
        return True
    if v in ("blocked", "kernel"):
        return big >= 48
    if v == "simd64":
        return op == "qr" and 32 < big <= 64
    if v == "simd32":
        return op == "eigvalsh" and 24 < big <= 32
    if v == "alt":
        return op in ("eigh", "eigvalsh", "svd", "svdvals") and big > 32
    return False


def timed(rg, impl, call, cap_ms: float, reps: int):
    warm = rg.time_calls(impl, call, 1)[0]
    if not impl.events:  # JAX: a second untimed call after the compiling one
        warm = rg.time_calls(impl, call, 1)[0]
    if warm > 4 * cap_ms:
        ts = [warm]
    else:
        t1 = rg.time_calls(impl, call, 1)[0]
        ts = [t1] if t1 > cap_ms else [t1] + rg.time_calls(impl, call, reps)
    return {"best_ms": min(ts), "median_ms": statistics.median(ts), "n": len(ts)}


def run(args) -> dict:
    import run_gpu as rg

    torch = rg.torch
    OPS = rg.OPS
    impls = {}
    classes = [rg.Ours] + ([] if args.no_peers else [rg.Torch, rg.CuPy, rg.Jax])
    for cls in classes:
        try:
            impls[cls.name] = cls()
        except Exception as exc:  # noqa: BLE001  (a missing peer is recorded, not fatal)
            print(f"{cls.name}: unavailable: {rg.short_error(exc)}")
    ours = impls["ours"]
    lib = ours.lib.lib
    rg.warm_up(impls)
    started = time.monotonic()
    rows = []
    for op, m, n, batch in points(args.points):
        x = rg.make_input(op, m, n, batch, seed=m * 131 + n * 7 + batch)
        row = {"op": op, "m": m, "n": n, "batch": batch, "ours": {}, "peers": {}}
        i = OPS.index(op)
        for v in args.variants:
            if not applicable(v, op, m, n):
                continue
            for f, val in (OLD[op] if v == "old" else VARIANTS[v]).items():
                assert lib.ml_policy_set(i, f.encode(), val) == 0, (op, f)
            name = ours.backend(op, m, n, batch)
            try:
                r = timed(rg, ours, ours.fn(op, x), args.cap_ms, args.reps)
            except Exception as exc:  # noqa: BLE001
                r = {"error": rg.short_error(exc)}
            r["backend"] = name
            row["ours"][v + args.label] = r
            lib.ml_policy_reset(i)
        for pname in ("torch", "cupy", "jax"):
            if pname not in impls:
                continue
            if time.monotonic() - started > args.budget_s:
                row["peers"][pname] = {"skipped": "time budget"}
                continue
            impl = impls[pname]
            try:
                row["peers"][pname] = timed(
                    rg, impl, impl.fn(op, impl.prepare(x)), args.cap_ms, args.reps
                )
            except Exception as exc:  # noqa: BLE001
                row["peers"][pname] = {"error": rg.short_error(exc)}
        del x
        rows.append(row)
        cells = [
            f"{v} {r.get('best_ms', float('nan')):.3f} ({r['backend']})"
            for v, r in row["ours"].items()
        ]
        peers = [f"{k} {r['best_ms']:.3f}" for k, r in row["peers"].items() if "best_ms" in r]
        print(
            f"{op:8s} {m}x{n} x{batch}: " + ", ".join(cells) + " | " + ", ".join(peers), flush=True
        )
    meta = {
        "device": torch.cuda.get_device_name(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "torch": torch.__version__,
        "elapsed_s": round(time.monotonic() - started, 1),
        "command": " ".join(sys.argv),
    }
    for k in ("cupy", "jax"):
        mod = sys.modules.get(k)
        meta[k] = getattr(mod, "__version__", "unavailable") if mod else "unavailable"
    return {"meta": meta, "points": rows}


def merge(files: list[Path]) -> dict:
    out, index = None, {}
    for f in files:
        data = json.loads(f.read_text())
        if out is None:
            out = {"meta": data["meta"], "points": [], "commands": []}
        out["commands"].append(data["meta"]["command"])
        for row in data["points"]:
            key = (row["op"], row["m"], row["n"], row["batch"])
            if key not in index:
                index[key] = {**row, "ours": dict(row["ours"]), "peers": dict(row["peers"])}
                out["points"].append(index[key])
            else:
                index[key]["ours"].update(row["ours"])
                for k, v in row["peers"].items():
                    index[key]["peers"].setdefault(k, v)
    return out


def markdown(data: dict, title: str) -> str:
    meta = data["meta"]

    cmds = data.get("commands", [meta["command"]])
    lines = [
        f"# {title}",
        "",
        (
            f"Date {meta['date']}, {meta['device']}; torch {meta['torch']}, cupy {meta['cupy']}, "
            f"jax {meta['jax']}. Best (median) ms of one call after warm-up; CUDA events (JAX: wall "
            "clock after two untimed calls). speedup = best peer / ours (the variant's best); "
            "`best ours` = the fastest variant's speedup."
        ),
        "Commands: " + "; ".join(f"`{c}`" for c in cmds),
        "",
        "| op | shape | batch | variant | backend | ours ms | torch | cupy | jax | best peer | speedup |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += variant_rows(data["points"])
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="bench-out")
    p.add_argument("--name", default="mid_ab")
    p.add_argument("--title", default="Small and mid-size matrices: routing variants and peers")
    p.add_argument("--label", default="")
    p.add_argument(
        "--points",
        default="all",
        choices=("all", "small", "mid", "extra", "eigh", "final", "jacobi"),
    )
    p.add_argument("--variants", nargs="+", default=["table", "blocked", "alt", "simd64", "simd32"])
    p.add_argument("--no-peers", action="store_true")
    p.add_argument("--budget-s", type=float, default=200.0, help="then peers are skipped")
    p.add_argument("--cap-ms", type=float, default=40.0)
    p.add_argument("--reps", type=int, default=8)
    p.add_argument("--merge", nargs="*", type=Path)
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = merge(args.merge) if args.merge else run(args)
    (out / f"{args.name}.json").write_text(json.dumps(data, indent=1))
    (out / f"{args.name}.md").write_text(markdown(data, args.title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
