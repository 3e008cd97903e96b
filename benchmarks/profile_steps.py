"""Where the time of a blocked call goes: each call given runs once to warm up, then once under
torch.profiler; prints, per kernel (step) name, the launches, the total and the mean GPU time,
and the call's wall time and launch count. The linear systems (lu_factor, solve with one
right-hand side, inv, cholesky) take square shapes. With VARIANTS="name:ENV=V,ENV=V;name2:..."
every call runs under each variant's METAL_LINALG_* variables in turn (those read per call).

    python3 benchmarks/profile_steps.py qr:256x256x1 qr:4096x4096x1 eigh:1024x1024x8
    VARIANTS="launches:METAL_LINALG_LS_LU_LEAF=0;leaf:METAL_LINALG_LS_LU_LEAF=1" \
        python3 benchmarks/profile_steps.py lu_factor:4096x4096x1
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict

import metal_linalg_torch as mlt
import torch
from torch.profiler import ProfilerActivity, profile

LINSYS = ("lu_factor", "solve", "inv", "cholesky")


def run(spec: str, tag: str = "") -> None:
    op, shape = spec.split(":")
    m, n, batch = (int(x) for x in shape.split("x"))
    a = torch.randn(batch, m, n, device="cuda")
    if op in ("eigh", "eigvalsh"):
        a = a + a.mT
    if op in LINSYS:
        a = (
            a @ a.mT / n + torch.eye(n, device="cuda")
            if op == "cholesky"
            else a + n**0.5 * torch.eye(n, device="cuda")
        )
    fn = getattr(mlt, op)
    if op == "solve":
        b = torch.randn(batch, n, 1, device="cuda")
        fn = lambda x: mlt.solve(x, b)
    backend = getattr(mlt, f"{op}_backend")(
        *((n,) if op in ("eigh", "eigvalsh") + LINSYS else (m, n)), batch=batch, device="cuda"
    )
    fn(a)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn(a)
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) * 1e3
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(a)
        torch.cuda.synchronize()
    per: dict[str, list[float]] = defaultdict(list)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            per[ev.name].append(ev.device_time)
    total = sum(sum(v) for v in per.values())
    launches = sum(len(v) for v in per.values())
    print(
        f"== {tag}{spec} {backend}: wall {wall:.3f} ms, kernels {total / 1e3:.3f} ms, "
        f"launches {launches}"
    )
    for name, ts in sorted(per.items(), key=lambda kv: -sum(kv[1]))[:12]:
        short = name.split("(")[0][:48]
        print(
            f"   {short:48s} n={len(ts):5d} total={sum(ts) / 1e3:8.3f} ms mean={sum(ts) / len(ts):8.1f} us"
        )


def _env(variant: str) -> dict[str, str]:
    return dict(x.split("=", 1) for x in variant.partition(":")[2].split(",") if x)


if __name__ == "__main__":
    variants = [v for v in os.environ.get("VARIANTS", "").split(";") if v] or [":"]
    names = {k for v in variants for k in _env(v)}
    for v in variants:
        for k in names:
            os.environ.pop(k, None)
        os.environ.update(_env(v))
        tag = v.partition(":")[0]
        for s in sys.argv[1:]:
            run(s, f"[{tag}] " if tag else "")
