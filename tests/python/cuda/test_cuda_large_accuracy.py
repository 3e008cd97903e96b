"""LAPACK ratios of the blocked algorithms at the large grid's sizes on hard families: eigh and qr of
one 4096 x 4096 matrix, svd of one 2048 x 2048, as the CUDA backend routes them by default.

Slow (each case builds its matrix and float64 reference on the CPU: ~5 s), so it runs in the GPU
machine's verification call (benchmarks/h200_verify.sh, LARGE_ACC_S) and not with the other CUDA
suites; it skips where no CUDA device and backend exist, as they do.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
mlt = pytest.importorskip("metal_linalg_torch")
from metal_linalg_torch import _lib

if not _lib.lib.ml_backend_available(b"cuda"):
    pytest.skip("metal_linalg built without the CUDA backend", allow_module_level=True)

from test_cuda_ops import OPS, call_op, check_outputs, gen_family, sym_family

DEV = torch.device("cuda")
CASES = (
    [("eigh", 4096, f) for f in ("ata", "clustered", "graded", "tiny", "huge")]
    + [("qr", 4096, f) for f in ("clustered", "graded", "rankdef", "tiny", "huge")]
    + [("svd", 2048, f) for f in ("clustered", "graded", "rankdef")]
)


def _matrix(op: str, n: int, family: str) -> torch.Tensor:
    if family == "ata":  # A^T A of a random A: eigenvalues clustered near 0, condition ~ n^2
        g = torch.randn(1, n, n, dtype=torch.float64, generator=torch.Generator().manual_seed(n))
        return (g.mT @ g).float()
    if op == "eigh":
        return sym_family(family, n, 1, seed=n)
    return gen_family(family, n, n, 1, seed=n)


@pytest.mark.parametrize(("op", "n", "family"), CASES, ids=[f"{o}-{f}-{n}" for o, n, f in CASES])
def test_large_hard_family(op: str, n: int, family: str) -> None:
    route = _lib.text(_lib.lib.ml_backend(OPS.index(op), _lib.ML_MEMORY_CUDA, n, n, 1))
    assert route == f"cuda:blocked_{op}", route
    a = _matrix(op, n, family).to(DEV)
    check_outputs(op, a, call_op(op, a), f"{op} {family} {n}x{n} blocked")
