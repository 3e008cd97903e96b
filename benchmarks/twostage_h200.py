"""eigvalsh / eigh of large matrices on CUDA: the blocked one-stage tridiagonalisation against the
two-stage one (dense -> band -> tridiagonal, core/src/blocked_eigh2.cpp) and torch.linalg, in one
run. Each configuration runs in its own process (the CUDA backend reads METAL_LINALG_EIGH_* once).

    python3 benchmarks/twostage_h200.py --out DIR [--budget-s 110]
    python3 benchmarks/twostage_h200.py --report DIR/nvidia-h200-twostage.json

Times: CUDA events around one call after a warm-up call, best and median of up to 5 calls (fewer
past ~1.5 s per point). Each two-stage point also records the largest eigenvalue error against
torch.linalg.eigvalsh in float64 as a ratio max|w - w64| / (n ulp ||A||_1).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

POINTS = [(1024, 1), (2048, 1), (4096, 1), (1024, 8)]
# name: environment of the process (one-stage, then two-stage variants: band, tasks per launch).
CONFIGS = {
    "one-stage": {"METAL_LINALG_EIGH_TWO_STAGE_MIN_N": "0"},
    "two-stage b32 K2": {
        "METAL_LINALG_EIGH_TWO_STAGE_MIN_N": "1",
        "METAL_LINALG_EIGH_BAND": "32",
        "METAL_LINALG_EIGH_CHASE_TASKS": "2",
    },
    "two-stage b32 K1": {
        "METAL_LINALG_EIGH_TWO_STAGE_MIN_N": "1",
        "METAL_LINALG_EIGH_BAND": "32",
        "METAL_LINALG_EIGH_CHASE_TASKS": "1",
    },
    "two-stage b16 K2": {
        "METAL_LINALG_EIGH_TWO_STAGE_MIN_N": "1",
        "METAL_LINALG_EIGH_BAND": "16",
        "METAL_LINALG_EIGH_CHASE_TASKS": "2",
    },
    "two-stage b64 K2": {
        "METAL_LINALG_EIGH_TWO_STAGE_MIN_N": "1",
        "METAL_LINALG_EIGH_BAND": "64",
        "METAL_LINALG_EIGH_CHASE_TASKS": "2",
    },
}


def _time(fn, limit_s: float = 1.5) -> tuple[float, float]:
    import torch

    fn()
    torch.cuda.synchronize()
    ts: list[float] = []
    t0 = time.perf_counter()
    while len(ts) < 5 and (len(ts) < 2 or time.perf_counter() - t0 < limit_s):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[0], ts[len(ts) // 2]


def _matrix(n: int, batch: int):
    import torch

    g = torch.Generator().manual_seed(n + batch)
    a = torch.randn(batch, n, n, generator=g)
    return ((a + a.mT) / 2).cuda()


def worker(config: str) -> None:
    import metal_linalg_torch as mlt
    import torch

    two = config != "one-stage"
    for n, batch in POINTS:
        a = _matrix(n, batch)
        rec = {"config": config, "op": "eigvalsh", "n": n, "batch": batch}
        rec["backend"] = mlt.eigvalsh_backend(n, batch)
        rec["best_ms"], rec["median_ms"] = _time(lambda a=a: mlt.eigvalsh(a))
        if two:
            w = mlt.eigvalsh(a).double()
            w64 = torch.linalg.eigvalsh(a.double())
            an = a.double().abs().sum(-2).amax(-1)
            ulp = torch.finfo(torch.float32).eps
            rec["err_ratio"] = float(((w - w64).abs().amax(-1) / (n * ulp * an)).max())
        print(json.dumps(rec), flush=True)
        if not two:
            for name, fn in (
                ("torch eigvalsh", lambda a=a: torch.linalg.eigvalsh(a)),
                ("torch eigh", lambda a=a: torch.linalg.eigh(a)),
                ("one-stage eigh", lambda a=a: mlt.eigh(a)),
            ):
                r = {"config": name, "op": name.split()[-1], "n": n, "batch": batch}
                r["best_ms"], r["median_ms"] = _time(fn)
                print(json.dumps(r), flush=True)
        torch.cuda.empty_cache()


def report(path: str) -> str:
    with open(path) as f:
        recs = json.load(f)["records"]
    rows = {}
    for r in recs:
        rows.setdefault((r["op"], r["n"], r["batch"]), {})[r["config"]] = r
    cols = ["one-stage"] + [c for c in CONFIGS if c != "one-stage"] + ["torch eigvalsh"]
    out = ["# eigvalsh by one and two stages on the H200 (ms, best of up to 5 calls)", ""]
    out.append("| n x batch | " + " | ".join(cols) + " | worst two-stage error ratio |")
    out.append("|---" * (len(cols) + 2) + "|")
    for (op, n, b), byc in sorted(rows.items()):
        if op != "eigvalsh":
            continue
        cells = [f"{byc[c]['best_ms']:.1f}" if c in byc else "-" for c in cols]
        errs = [byc[c]["err_ratio"] for c in byc if "err_ratio" in byc[c]]
        err = f"{max(errs):.3g}" if errs else "-"
        out.append(f"| {n} x{b} | " + " | ".join(cells) + f" | {err} |")
    out += ["", "eigh (one stage; the two-stage path serves eigvalsh only):", ""]
    out.append("| n x batch | one-stage eigh | torch eigh |")
    out.append("|---|---|---|")
    for (op, n, b), byc in sorted(rows.items()):
        if op != "eigh":
            continue
        ours = byc.get("one-stage eigh", {}).get("best_ms")
        peer = byc.get("torch eigh", {}).get("best_ms")
        out.append(
            f"| {n} x{b} | {ours:.1f} | {peer:.1f} |"
            if ours and peer
            else f"| {n} x{b} | {ours} | {peer} |"
        )
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--budget-s", type=float, default=110)
    ap.add_argument("--worker")
    ap.add_argument("--report")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
        return
    if args.report:
        md = report(args.report)
        with open(args.report[: -len(".json")] + ".md", "w") as f:
            f.write(md)
        print(md)
        return
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "nvidia-h200-twostage.json")
    t0 = time.perf_counter()
    recs: list[dict] = []
    for config, env in CONFIGS.items():
        left = args.budget_s - (time.perf_counter() - t0)
        if left < 10:
            print(f"== {config}: skipped (budget)", flush=True)
            continue
        print(f"== {config}", flush=True)
        try:
            p = subprocess.run(
                [sys.executable, __file__, "--worker", config],
                env={**os.environ, **env},
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
            print(err[-2000:], flush=True)
        with open(path, "w") as f:
            json.dump({"device": "NVIDIA H200", "records": recs}, f, indent=1)
    md = report(path)
    with open(path[: -len(".json")] + ".md", "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
