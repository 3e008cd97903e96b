"""Single and mid-size matrices on one CUDA device: ours under routing variants against
torch.linalg, CuPy and JAX, in one process (run_gpu.py's implementations and timing).

Variants are policy fields set through the C API for the one op being timed (then reset):
  table    the built-in table for this device, as shipped
  simd     svd/svdvals on the simdgroup Jacobi kernel (gpu_simd_max_n 32, gpu_simd_min_n 0)
  blocked  the blocked algorithms from n = 64 (gpu_blocked_min_n 64)
Points: svd/svdvals n = 9..32 at batch 1, 64, 1024, 16384 (table vs simd); eigh/svd n = 64..235
and qr 64x64, 64x32, 128x128 at batch 1 and 64 (table vs blocked); eigh 32x32 x16384 and
64x64 x1024. Peers whose benchmarks/peers file estimate exceeds --cap-ms are skipped.

    python benchmarks/small_n_ab.py --out OUT [--budget-s 100]

Writes OUT/small_n_ab.json and OUT/small_n_ab.md (best and median ms of the timed calls).
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
import run_gpu as rg
from ab_table import variant_rows

torch = rg.torch
OPS = rg.OPS

SIMD = {"gpu_simd_max_n": 32, "gpu_simd_min_n": 0}
BLOCKED = {"gpu_blocked_min_n": 64}


def points():
    pts = []
    for op in ("svd", "svdvals"):
        for n in (9, 12, 16, 17, 24, 32):
            for b in (1, 64, 1024, 16384):
                pts.append((op, n, n, b, ("table", "simd")))
    for op in ("eigh", "svd"):
        for n in (64, 100, 127, 128, 192, 235):
            for b in (1, 64):
                pts.append((op, n, n, b, ("table", "blocked")))
    for m, n in ((64, 64), (64, 32), (128, 128)):
        for b in (1, 64):
            pts.append(("qr", m, n, b, ("table", "blocked")))
    pts.append(("eigh", 32, 32, 16384, ("table",)))
    pts.append(("eigh", 64, 64, 1024, ("table",)))
    return pts


def timed(impl, call, args):
    ts = rg.measure(impl, call, args, False)
    return {"best_ms": min(ts), "median_ms": statistics.median(ts), "n": len(ts)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="bench-out")
    p.add_argument("--budget-s", type=float, default=100.0, help="then peers are skipped")
    p.add_argument("--cap-ms", type=float, default=60.0)
    p.add_argument("--point-ms", type=float, default=25.0)
    p.add_argument("--reps", type=int, default=8)
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    impls = {}
    for cls in (rg.Ours, rg.Torch, rg.CuPy, rg.Jax):
        try:
            impls[cls.name] = cls()
        except Exception as exc:  # noqa: BLE001  (a missing peer is recorded, not fatal)
            print(f"{cls.name}: unavailable: {rg.short_error(exc)}")
    ours = impls["ours"]
    lib = ours.lib.lib
    rg.warm_up(impls)
    known = rg.load_known(HERE / "peers" / "h200.md")
    started = time.monotonic()
    rows = []
    for op, m, n, batch, variants in points():
        x = rg.make_input(op, m, n, batch, seed=m * 131 + n * 7 + batch)
        row = {"op": op, "m": m, "n": n, "batch": batch, "ours": {}, "peers": {}}
        i = OPS.index(op)
        for v in variants:
            fields = {"table": {}, "simd": SIMD, "blocked": BLOCKED}[v]
            for f, val in fields.items():
                assert lib.ml_policy_set(i, f.encode(), val) == 0, (op, f)
            name = ours.backend(op, m, n, batch)
            try:
                r = timed(ours, ours.fn(op, x), args)
            except Exception as exc:  # noqa: BLE001
                r = {"error": rg.short_error(exc)}
            r["backend"] = name
            row["ours"][v] = r
            lib.ml_policy_reset(i)
        for pname in ("torch", "cupy", "jax"):
            if pname not in impls:
                continue
            est, _ = rg.estimate(known, pname, op, m, n, batch)
            if est is not None and est > args.cap_ms:
                row["peers"][pname] = {"skipped": f"peers file: {est:.0f} ms"}
                continue
            if time.monotonic() - started > args.budget_s:
                row["peers"][pname] = {"skipped": "time budget"}
                continue
            impl = impls[pname]
            try:
                row["peers"][pname] = timed(impl, impl.fn(op, impl.prepare(x)), args)
            except Exception as exc:  # noqa: BLE001
                row["peers"][pname] = {"error": rg.short_error(exc)}
        del x
        rows.append(row)
        cells = [
            f"{v} {r.get('best_ms', float('nan')):.3f} ({r['backend']})"
            for v, r in row["ours"].items()
        ]
        peers = [f"{k} {r['best_ms']:.3f}" for k, r in row["peers"].items() if "best_ms" in r]
        print(f"{op:8s} {m}x{n} x{batch}: " + ", ".join(cells) + " | " + ", ".join(peers))
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
    (out / "small_n_ab.json").write_text(json.dumps({"meta": meta, "points": rows}, indent=1))
    (out / "small_n_ab.md").write_text(markdown(meta, rows))
    return 0


def markdown(meta, rows) -> str:
    lines = [
        f"# Small and mid-size matrices on {meta['device']}: routing variants and peers",
        "",
        (
            f"Date {meta['date']}; torch {meta['torch']}, cupy {meta['cupy']}, "
            f"jax {meta['jax']}. Best (median) ms of one call after warm-up; CUDA events "
            "(JAX: wall clock). speedup = best peer / ours (the variant's best)."
        ),
        f"Command: `{meta['command']}`",
        "",
        "| op | shape | batch | variant | backend | ours ms | torch | cupy | jax | best | speedup |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += variant_rows(rows)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
