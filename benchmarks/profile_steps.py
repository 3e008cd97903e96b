"""Where the time of a blocked call goes: each call given runs once to warm up, then once under
torch.profiler; prints, per kernel (step) name, the launches, the total and the mean GPU time,
and the call's wall time.

    python3 benchmarks/profile_steps.py qr:256x256x1 qr:4096x4096x1 eigh:1024x1024x8
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict

import metal_linalg_torch as mlt
import torch
from torch.profiler import ProfilerActivity, profile


def run(spec: str) -> None:
    op, shape = spec.split(":")
    m, n, batch = (int(x) for x in shape.split("x"))
    a = torch.randn(batch, m, n, device="cuda")
    if op in ("eigh", "eigvalsh"):
        a = a + a.mT
    fn = getattr(mlt, op)
    backend = getattr(mlt, f"{op}_backend")(
        *((n,) if op in ("eigh", "eigvalsh") else (m, n)), batch=batch, device="cuda"
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
    print(f"== {spec} {backend}: wall {wall:.3f} ms, kernels {total / 1e3:.3f} ms")
    for name, ts in sorted(per.items(), key=lambda kv: -sum(kv[1]))[:12]:
        short = name.split("(")[0][:48]
        print(
            f"   {short:48s} n={len(ts):5d} total={sum(ts) / 1e3:8.3f} ms mean={sum(ts) / len(ts):8.1f} us"
        )


if __name__ == "__main__":
    for s in sys.argv[1:]:
        run(s)
