"""Launch geometry of the CUDA kernels: every op at several n with forced threads per group and
one-warp groups per block.

Each configuration runs in its own process (the environment variables are read once per process),
against the default ("auto"). Prints a table and writes tune_groups.json to --out.

    python benchmarks/tune_cuda_groups.py --out bench-out
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

SIZES = {
    "qr": [(8, 16384), (16, 16384), (32, 16384), (64, 4096), (128, 1024)],
    "eigh": [(8, 16384), (16, 16384), (32, 16384), (64, 4096), (128, 1024)],
    "eigvalsh": [(8, 16384), (16, 16384), (32, 16384), (64, 4096)],
    "svd": [(8, 16384), (16, 16384), (32, 16384), (64, 4096), (128, 1024)],
    "svdvals": [(8, 16384), (16, 16384), (32, 16384), (64, 4096)],
}
# Label -> environment: threads per group (t*) and one-warp groups per block (g*).
CONFIGS = {
    "auto": {},
    "t64": {"METAL_LINALG_CUDA_GROUP_SIZE": "64"},
    "t128": {"METAL_LINALG_CUDA_GROUP_SIZE": "128"},
    "t256": {"METAL_LINALG_CUDA_GROUP_SIZE": "256"},
    "g1": {"METAL_LINALG_CUDA_GROUPS_PER_BLOCK": "1"},
    "g2": {"METAL_LINALG_CUDA_GROUPS_PER_BLOCK": "2"},
    "g4": {"METAL_LINALG_CUDA_GROUPS_PER_BLOCK": "4"},
    "g8": {"METAL_LINALG_CUDA_GROUPS_PER_BLOCK": "8"},
}


def child() -> None:
    import metal_linalg_torch as mlt
    import torch
    from metal_linalg_torch import _lib

    for op in range(5):
        _lib.lib.ml_policy_set(op, b"gpu_min_batch", 1)
        _lib.lib.ml_policy_set(op, b"gpu_max_n", 1 << 20)
    x = torch.randn(4096, 4096, device="cuda")
    for _ in range(40):  # bring the clocks up before timing
        x = x @ x
        x /= x.norm()
    torch.cuda.synchronize()
    fns = {
        "qr": mlt.qr,
        "eigh": mlt.eigh,
        "eigvalsh": mlt.eigvalsh,
        "svd": mlt.svd,
        "svdvals": mlt.svdvals,
    }
    out = {}
    for op, pts in SIZES.items():
        for n, batch in pts:
            name = _lib.text(_lib.lib.ml_backend(_lib.OP_ID[op], 1, n, n, batch))
            if not name.startswith("cuda:"):
                out[f"{op}:{n}"] = None
                continue
            a = torch.randn(batch, n, n, device="cuda")
            if op in ("eigh", "eigvalsh"):
                a = a + a.mT
            try:
                fns[op](a)
                torch.cuda.synchronize()
                times = []
                for _ in range(5):
                    s, e = (
                        torch.cuda.Event(enable_timing=True),
                        torch.cuda.Event(enable_timing=True),
                    )
                    s.record()
                    fns[op](a)
                    e.record()
                    e.synchronize()
                    times.append(s.elapsed_time(e))
                out[f"{op}:{n}"] = min(times)
            except RuntimeError as exc:
                out[f"{op}:{n}"] = f"error: {exc}"[:120]
    print("RESULT " + json.dumps(out), flush=True)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="bench-out")
    p.add_argument("--child", action="store_true")
    args = p.parse_args()
    if args.child:
        child()
        return 0
    table = {}
    for g, extra in CONFIGS.items():
        env = dict(os.environ)
        env.pop("METAL_LINALG_CUDA_GROUP_SIZE", None)
        env.pop("METAL_LINALG_CUDA_GROUPS_PER_BLOCK", None)
        env.update(extra)
        r = subprocess.run(
            [sys.executable, __file__, "--child"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
        table[g] = json.loads(line[-1][7:]) if line else {"error": r.stderr[-400:]}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "tune_groups.json").write_text(json.dumps(table, indent=1))
    keys = [f"{op}:{n}" for op, pts in SIZES.items() for n, _ in pts]
    print("point".ljust(14) + "".join(g.rjust(10) for g in CONFIGS) + "   (ms, best of 5)")
    for k in keys:
        row = []
        for g in CONFIGS:
            v = table[g].get(k)
            row.append(
                f"{v:10.3f}" if isinstance(v, float) else ("-" if v is None else "err").rjust(10)
            )
        print(k.ljust(14) + "".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
