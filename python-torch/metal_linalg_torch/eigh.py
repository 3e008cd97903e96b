"""Symmetric eigendecomposition: eigh and eigvalsh ops, their fakes, eigh's backward, public functions."""

from __future__ import annotations

from typing import NamedTuple

import torch

from . import _dispatch as d


@torch.library.custom_op(
    "metal_linalg::eigh", mutates_args=(), schema="(Tensor A, str UPLO) -> (Tensor, Tensor)"
)
def eigh_op(A: torch.Tensor, UPLO: str):
    d.check_input(A, "eigh", square=True)
    d.check_uplo(UPLO, "eigh")
    L, V = d.run("eigh", A, d.UPLOS[UPLO])
    return L, V


@eigh_op.register_fake
def _(A, UPLO):
    d.check_input(A, "eigh", square=True)
    d.check_uplo(UPLO, "eigh")
    L, V = d.fake("eigh", A, d.UPLOS[UPLO])
    return L, V


def _eigh_setup_context(ctx, inputs, output):
    ctx.dtype = inputs[0].dtype
    ctx.save_for_backward(*output)


def _eigh_backward(ctx, gL, gV):
    """gA = V (diag(gL) + skew(V^T gV)/2 / E) V^T with E_ij = L_j - L_i: a symmetric gradient."""
    L, V = ctx.saved_tensors
    inner = torch.zeros_like(V)
    if gV is not None:
        X = V.mT @ gV
        E = L.unsqueeze(-2) - L.unsqueeze(-1)
        # Off-diagonal only; the diagonal of skew(X) is zero, so any nonzero divisor works there.
        E = E + torch.eye(E.shape[-1], dtype=E.dtype, device=E.device)
        inner = (X - X.mT) / (2 * E)
    if gL is not None:
        inner = inner + torch.diag_embed(gL)
    return (V @ inner @ V.mT).to(ctx.dtype), None


eigh_op.register_autograd(_eigh_backward, setup_context=_eigh_setup_context)
d.register_vmap(eigh_op, 2)


@torch.library.custom_op(
    "metal_linalg::eigvalsh", mutates_args=(), schema="(Tensor A, str UPLO) -> Tensor"
)
def eigvalsh_op(A: torch.Tensor, UPLO: str):
    d.check_input(A, "eigvalsh", square=True)
    d.check_uplo(UPLO, "eigvalsh")
    (L,) = d.run("eigvalsh", A, d.UPLOS[UPLO])
    return L


@eigvalsh_op.register_fake
def _(A, UPLO):
    d.check_input(A, "eigvalsh", square=True)
    d.check_uplo(UPLO, "eigvalsh")
    (L,) = d.fake("eigvalsh", A, d.UPLOS[UPLO])
    return L


def _eigvalsh_backward(ctx, gL):
    raise RuntimeError(
        "[metal_linalg.eigvalsh] the op computes no eigenvectors, so it has no derivative; "
        "metal_linalg_torch.eigvalsh computes them when the input requires grad"
    )


eigvalsh_op.register_autograd(_eigvalsh_backward, setup_context=lambda ctx, inputs, output: None)
d.register_vmap(eigvalsh_op, 1)


def eigh(A: torch.Tensor, UPLO: str = "L") -> torch.return_types.linalg_eigh:
    """Eigenvalues (ascending) and eigenvectors (columns) of symmetric [..., N, N], like torch.linalg.eigh."""
    d.check_input(A, "eigh", square=True)
    d.check_uplo(UPLO, "eigh")
    A = d.to_float32(A)
    if d.eager(A):
        L, V = d.run("eigh", A, d.UPLOS[UPLO])
    else:
        L, V = torch.ops.metal_linalg.eigh(A, UPLO)
    return torch.return_types.linalg_eigh((L, V))


def eigvalsh(A: torch.Tensor, UPLO: str = "L") -> torch.Tensor:
    """Eigenvalues (ascending) of symmetric [..., N, N], like torch.linalg.eigvalsh."""
    d.check_input(A, "eigvalsh", square=True)
    d.check_uplo(UPLO, "eigvalsh")
    A = d.to_float32(A)
    if A.requires_grad and torch.is_grad_enabled():
        return torch.ops.metal_linalg.eigh(A, UPLO)[0]
    if d.eager(A):
        return d.run("eigvalsh", A, d.UPLOS[UPLO])[0]
    return torch.ops.metal_linalg.eigvalsh(A, UPLO)


class EighEx(NamedTuple):
    eigenvalues: torch.Tensor
    eigenvectors: torch.Tensor
    info: torch.Tensor


class EigvalshEx(NamedTuple):
    eigenvalues: torch.Tensor
    info: torch.Tensor


def eigh_ex(A: torch.Tensor, UPLO: str = "L", *, check_errors: bool = False) -> EighEx:
    """eigh plus the per-matrix info word (int32, batch shape), like torch.linalg.cholesky_ex:
    ML_INFO_NOT_CONVERGED (1) and ML_INFO_NONFINITE (2) mark matrices whose outputs are NaN.
    check_errors=True raises torch.linalg.LinAlgError for such a matrix."""
    d.check_input(A, "eigh", square=True)
    d.check_uplo(UPLO, "eigh")
    A = d.to_float32(A)
    L, V, info = d.run_ex("eigh", A, d.UPLOS[UPLO], lambda: eigh(A, UPLO), check_errors, "eigh_ex")
    return EighEx(L, V, info)


def eigvalsh_ex(A: torch.Tensor, UPLO: str = "L", *, check_errors: bool = False) -> EigvalshEx:
    """eigvalsh plus the per-matrix info word (see eigh_ex)."""
    d.check_input(A, "eigvalsh", square=True)
    d.check_uplo(UPLO, "eigvalsh")
    A = d.to_float32(A)
    L, info = d.run_ex(
        "eigvalsh", A, d.UPLOS[UPLO], lambda: (eigvalsh(A, UPLO),), check_errors, "eigvalsh_ex"
    )
    return EigvalshEx(L, info)
