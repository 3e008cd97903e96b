"""LAPACK ratios of the blocked algorithms at the large grid's sizes on hard families: eigh and qr of
one 4096 x 4096 matrix, svd of one 2048 x 2048, as the CUDA backend routes them by default.

Slow (each case builds its matrix and float64 reference on the CPU: ~5 s), so it runs in the GPU
machine's verification call (benchmarks/h200_verify.sh, LARGE_ACC_S) and not with the other CUDA
suites; it skips where no CUDA device and backend exist, as they do.
"""

from __future__ import annotations

import pytest
from _cuda import DEV, backend
from test_cuda_ops import ata, call_op, check_outputs, gen_family, sym_family

CASES = (
    [("eigh", 4096, f) for f in ("ata", "clustered", "graded", "tiny", "huge")]
    + [("qr", 4096, f) for f in ("clustered", "graded", "rankdef", "tiny", "huge")]
    + [("svd", 2048, f) for f in ("clustered", "graded", "rankdef")]
)


def _matrix(op: str, n: int, family: str):
    if family == "ata":  # eigenvalues clustered near 0, condition ~ n^2
        return ata(n, 1)
    if op == "eigh":
        return sym_family(family, n, 1, seed=n)
    return gen_family(family, n, n, 1, seed=n)


@pytest.mark.parametrize(("op", "n", "family"), CASES, ids=[f"{o}-{f}-{n}" for o, n, f in CASES])
def test_large_hard_family(op: str, n: int, family: str) -> None:
    route = backend(op, n, n, 1)
    assert route == f"cuda:blocked_{op}", route
    a = _matrix(op, n, family).to(DEV)
    check_outputs(op, a, call_op(op, a), f"{op} {family} {n}x{n} blocked")
