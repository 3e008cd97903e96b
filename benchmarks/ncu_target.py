"""A small target for Nsight Compute: one op of the torch package on one CUDA shape, called twice
(the first call warms up), e.g. to profile one launch of a blocked step:

    ncu -k regex:trd_panel --launch-skip 41 --launch-count 1 --section WarpStateStats \\
        python3 benchmarks/ncu_target.py eigvalsh 2048 1
"""

from __future__ import annotations

import sys

import metal_linalg_torch as mlt
import torch


def main() -> None:
    op, n, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    a = torch.randn(batch, n, n, device="cuda")
    if op in ("eigh", "eigvalsh"):
        a = a + a.mT
    for _ in range(2):
        getattr(mlt, op)(a)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
