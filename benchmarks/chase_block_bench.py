"""eigvalsh on CUDA with the bulge chase of each matrix in one block (sb_block, core/kernels/
sb2st_block.h, METAL_LINALG_EIGH_CHASE_BLOCK lanes) against the one-launch chase over the device
(sb_sweeps), the default routing and torch.linalg.eigvalsh, in one run. Each configuration runs
in its own process (the CUDA backend reads METAL_LINALG_EIGH_* once).

    python3 benchmarks/chase_block_bench.py --out DIR [--points 1024x1,512x64] [--configs ...]
        [--budget-s 90] [--device cuda]

Times: wall clock with torch.cuda.synchronize, best of 3 calls after a warm-up call; a point
whose warm-up call takes more than 1 s is skipped for that configuration (the warm-up's time
recorded). Each point also records the largest eigenvalue error against eigvalsh in float64
(computed once per point, shared by the processes) as max|w - w64| / (n ulp ||A||_1). Prints a
Markdown table and writes DIR/chase_block.json and DIR/chase_block.md. Without torch's CUDA
(or --device cpu, to exercise the script: the library's configurations then record what they
raise) it says so and skips.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

POINTS = [(1024, 1), (2048, 1), (4096, 1), (1024, 8), (512, 64)]
TWO = {"METAL_LINALG_EIGH_TWO_STAGE_MIN_N": "1", "METAL_LINALG_EIGH_CHASE_TASKS": "0"}
# name: environment of the process (on top of the parent's, with METAL_LINALG_EIGH_* removed).
CONFIGS = {  # the chase in one block first: what the budget cuts short comes last
    "block1024-b8": {**TWO, "METAL_LINALG_EIGH_BAND": "8", "METAL_LINALG_EIGH_CHASE_BLOCK": "1024"},
    "block512-b8": {**TWO, "METAL_LINALG_EIGH_BAND": "8", "METAL_LINALG_EIGH_CHASE_BLOCK": "512"},
    "block1024-b16": {
        **TWO,
        "METAL_LINALG_EIGH_BAND": "16",
        "METAL_LINALG_EIGH_CHASE_BLOCK": "1024",
    },
    "block512-b16": {**TWO, "METAL_LINALG_EIGH_BAND": "16", "METAL_LINALG_EIGH_CHASE_BLOCK": "512"},
    "sweeps-b8": {**TWO, "METAL_LINALG_EIGH_BAND": "8"},
    "sweeps-b16": {**TWO, "METAL_LINALG_EIGH_BAND": "16"},
    "default": {},  # the backend's routing (one stage but at n 512..2048 from batch 64)
    "torch": {},
}
FIRST_CALL_LIMIT_S = 1.0


def _parse_points(s: str | None) -> list[tuple[int, int]]:
    if not s:
        return POINTS
    return [tuple(int(v) for v in p.split("x")) for p in s.split(",")]  # type: ignore[misc]


def _matrix(n: int, batch: int, device: str):
    import torch

    g = torch.Generator().manual_seed(n + batch)
    a = torch.randn(batch, n, n, generator=g)
    return ((a + a.mT) / 2).to(device)


def _reference(a, n: int, batch: int, cache: str):
    """eigvalsh of a in float64, computed once per point across the processes."""
    import torch

    path = os.path.join(cache, f"ref_{n}x{batch}.pt")
    if os.path.exists(path):
        return torch.load(path).to(a.device)
    w64 = torch.linalg.eigvalsh(a.double())
    torch.save(w64.cpu(), path + ".tmp")
    os.replace(path + ".tmp", path)
    return w64


def _sync(device: str):
    import torch

    return torch.cuda.synchronize if device == "cuda" else (lambda: None)


def worker(config: str, points: list[tuple[int, int]], device: str, cache: str) -> None:
    import torch

    sync = _sync(device)
    for n, batch in points:
        rec: dict = {"config": config, "n": n, "batch": batch}
        a = _matrix(n, batch, device)
        try:
            if config == "torch":
                fn = lambda a=a: torch.linalg.eigvalsh(a)
            else:
                import metal_linalg_torch as mlt

                rec["backend"] = mlt.eigvalsh_backend(n, batch, device=device)
                fn = lambda a=a: mlt.eigvalsh(a)
            s = time.perf_counter()
            w = fn()
            sync()
            rec["first_ms"] = (time.perf_counter() - s) * 1e3
            if rec["first_ms"] > FIRST_CALL_LIMIT_S * 1e3:
                rec["skipped"] = f"first call {rec['first_ms']:.0f} ms > {FIRST_CALL_LIMIT_S} s"
            else:
                ts = []
                for _ in range(3):
                    s = time.perf_counter()
                    fn()
                    sync()
                    ts.append((time.perf_counter() - s) * 1e3)
                rec["best_ms"] = min(ts)
            w64 = _reference(a, n, batch, cache)
            an = a.double().abs().sum(-2).amax(-1)
            ulp = torch.finfo(torch.float32).eps
            ratio = (w.double() - w64).abs().amax(-1) / (n * ulp * an)
            rec["err_ratio"] = float(ratio.max())
        except Exception as e:  # noqa: BLE001 - recorded, the other points go on
            rec["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        print(json.dumps(rec), flush=True)
        del a
        if device == "cuda":
            torch.cuda.empty_cache()


def table(recs: list[dict], configs: list[str]) -> str:
    rows: dict = {}
    for r in recs:
        rows.setdefault((r["n"], r["batch"]), {})[r["config"]] = r
    out = [
        "# eigvalsh, the chase of each matrix in one block vs over the device (ms, best of 3)",
        "",
        "| n x batch | " + " | ".join(configs) + " | worst error ratio (ours) |",
        "|---" * (len(configs) + 2) + "|",
    ]

    def cell(r: dict | None) -> str:
        if r is None:
            return "-"
        if "best_ms" in r:
            return f"{r['best_ms']:.2f}"
        if "skipped" in r:
            return f"skip ({r['first_ms']:.0f})"
        return "error" if "error" in r else "-"

    for (n, b), byc in sorted(rows.items()):
        errs = [r["err_ratio"] for c, r in byc.items() if c != "torch" and "err_ratio" in r]
        err = f"{max(errs):.3g}" if errs else "-"
        out.append(f"| {n} x{b} | " + " | ".join(cell(byc.get(c)) for c in configs) + f" | {err} |")
    notes = sorted(
        {f"{r['config']} {r['n']}x{r['batch']}: {r['error']}" for r in recs if "error" in r}
    )
    if notes:
        out += ["", "Errors:", ""] + [f"- {x}" for x in notes]
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="chase_block_out")
    ap.add_argument(
        "--points",
        help="e.g. 1024x1,512x64 (default: " + ",".join(f"{n}x{b}" for n, b in POINTS) + ")",
    )
    ap.add_argument("--configs", help="comma-separated names of CONFIGS (default: all)")
    ap.add_argument("--budget-s", type=float, default=90)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--worker")
    ap.add_argument("--cache")
    args = ap.parse_args()
    points = _parse_points(args.points)
    if args.worker:
        worker(args.worker, points, args.device, args.cache)
        return
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "chase_block.json")
    if args.device == "cuda":
        try:
            import torch

            ok = torch.cuda.is_available()
        except ImportError:
            ok = False
        if not ok:
            msg = (
                "chase_block_bench: skipped, torch with CUDA is not available"
                " (--device cpu runs the script's own checks)"
            )
            print(msg, flush=True)
            with open(path, "w") as f:
                json.dump({"skipped": msg, "records": []}, f, indent=1)
            return
    configs = args.configs.split(",") if args.configs else list(CONFIGS)
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        sys.exit(f"unknown configs {unknown}; known: {list(CONFIGS)}")
    cache = os.path.join(args.out, "ref_cache")
    os.makedirs(cache, exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("METAL_LINALG_EIGH_")}
    t0 = time.perf_counter()
    recs: list[dict] = []
    for config in configs:
        left = args.budget_s - (time.perf_counter() - t0)
        if left < 3:
            print(f"== {config}: skipped (budget of {args.budget_s:.0f} s spent)", flush=True)
            continue
        print(f"== {config}", flush=True)
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--worker",
            config,
            "--device",
            args.device,
            "--cache",
            cache,
            "--points",
            ",".join(f"{n}x{b}" for n, b in points),
        ]
        try:
            p = subprocess.run(
                cmd,
                env={**base, **CONFIGS[config]},
                capture_output=True,
                check=False,
                text=True,
                timeout=left,
            )
            lines, err, rc = p.stdout, p.stderr, p.returncode
        except subprocess.TimeoutExpired as e:
            lines = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err, rc = "timeout (budget)", -1
        for line in lines.splitlines():
            if line.startswith("{"):
                recs.append(json.loads(line))
                print("  " + line, flush=True)
        if rc != 0:
            print(f"  {config}: exit {rc}: {err.strip()[-600:]}", flush=True)
    shutil.rmtree(cache, ignore_errors=True)
    md = table(recs, configs)
    with open(path, "w") as f:
        json.dump(
            {
                "device": args.device,
                "points": points,
                "configs": {c: CONFIGS[c] for c in configs},
                "seconds": time.perf_counter() - t0,
                "records": recs,
            },
            f,
            indent=1,
        )
    with open(os.path.join(args.out, "chase_block.md"), "w") as f:
        f.write(md)
    print(md, flush=True)
    print(f"total {time.perf_counter() - t0:.1f} s; {path}", flush=True)


if __name__ == "__main__":
    main()
