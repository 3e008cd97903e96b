"""One call of an op under the CUDA profiler's capture range, for Nsight Compute:

    ncu --profile-from-start off --clock-control none --section SpeedOfLight ... \\
        python3 benchmarks/profile_call.py eigh 32 32 16384

Warms up (the first call prepares the kernel), then runs the call once between
cudaProfilerStart and cudaProfilerStop, so only its kernel is profiled. Prints the backend the
call is routed to.
"""

import sys

import metal_linalg_torch as mlt
import torch


def main() -> int:
    op, m, n, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    a = torch.randn(batch, m, n, device="cuda")
    if op in ("eigh", "eigvalsh"):
        a = a @ a.mT
    fn = getattr(mlt, op)
    print(
        op,
        m,
        n,
        batch,
        getattr(mlt, f"{op}_backend")(
            *((n,) if op in ("eigh", "eigvalsh") else (m, n)), batch=batch, device="cuda"
        ),
    )
    fn(a)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    fn(a)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
