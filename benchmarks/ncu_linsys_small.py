"""A target for Nsight Compute (benchmarks/h200_linsys_small.sh): cholesky at 32 x32 x16384 and,
with the argument `all`, cholesky at 64 and 128 x1024 and solve_triangular at 64 x4096 with 16
right-hand sides; each called twice (the first warms up) on SPD or well-conditioned triangular
input, so every factorization runs to its end."""

from __future__ import annotations

import sys

import metal_linalg_torch as mlt
import torch


def main() -> None:
    torch.manual_seed(0)
    shapes = [("cholesky", 32, 16384, 0)]
    if sys.argv[1:] == ["all"]:
        shapes += [("cholesky", 64, 1024, 0), ("cholesky", 128, 1024, 0)]
        shapes += [("solve_triangular", 64, 4096, 16)]
    eye = torch.eye
    for op, n, batch, nrhs in shapes:
        if op == "cholesky":
            g = torch.randn(batch, n, n, device="cuda")
            a = g @ g.mT / n + eye(n, device="cuda")
            for _ in range(2):
                mlt.cholesky_ex(a)
        else:
            a = torch.randn(batch, n, n, device="cuda").tril() + n**0.5 * eye(n, device="cuda")
            b = torch.randn(batch, n, nrhs, device="cuda")
            for _ in range(2):
                mlt.solve_triangular(a, b, upper=False)
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
