"""Symmetric eigendecomposition: eigh and eigvalsh ops, their fakes, the derivatives (backward
and jvp, torch.linalg's formulas), public functions."""

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
    d.check_no_tangent(A, "eigh")
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


def eigh_vjp(L, V, gL, gV):
    """gA = V (diag(gL) + skew(V^T gV)/2 / E) V^T with E_ij = L_j - L_i: a symmetric gradient.
    A zero or absent gV contributes exactly zero, also at repeated eigenvalues."""
    inner = torch.zeros_like(V)
    if gV is not None:
        X = V.mT @ gV
        E = L.unsqueeze(-2) - L.unsqueeze(-1)
        # Off-diagonal only; the diagonal of skew(X) is zero, so any nonzero divisor works there.
        E = E + torch.eye(E.shape[-1], dtype=E.dtype, device=E.device)
        inner = d.safe_div(X - X.mT, 2 * E)
    if gL is not None:
        inner = inner + torch.diag_embed(gL)
    return V @ inner @ V.mT


def eigh_jvp(L, V, dA, vectors: bool = True):
    """dL = diag(V^T dA V), dV = V (offdiag(V^T dA V) / E), E_ij = L_j - L_i (dA as given)."""
    dP = V.mT @ dA @ V
    dL = dP.diagonal(dim1=-2, dim2=-1)
    if not vectors:
        return dL, None
    E = L.unsqueeze(-2) - L.unsqueeze(-1)
    E = E + torch.eye(E.shape[-1], dtype=E.dtype, device=E.device)
    return dL, V @ d.safe_div(dP - torch.diag_embed(dL), E)


def _eigh_backward(ctx, gL, gV):
    L, V = ctx.saved_tensors
    return eigh_vjp(L, V, gL, gV).to(ctx.dtype), None


eigh_op.register_autograd(_eigh_backward, setup_context=_eigh_setup_context)
d.register_vmap(eigh_op, 2)


@torch.library.custom_op(
    "metal_linalg::eigvalsh", mutates_args=(), schema="(Tensor A, str UPLO) -> Tensor"
)
def eigvalsh_op(A: torch.Tensor, UPLO: str):
    d.check_input(A, "eigvalsh", square=True)
    d.check_uplo(UPLO, "eigvalsh")
    d.check_no_tangent(A, "eigvalsh")
    (L,) = d.run("eigvalsh", A, d.UPLOS[UPLO])
    return L


@eigvalsh_op.register_fake
def _(A, UPLO):
    d.check_input(A, "eigvalsh", square=True)
    d.check_uplo(UPLO, "eigvalsh")
    (L,) = d.fake("eigvalsh", A, d.UPLOS[UPLO])
    return L


d.register_values_only(eigvalsh_op, "eigvalsh", "eigenvectors")


class _Eigh(torch.autograd.Function):
    """The public functions' differentiable path outside eager/compile/tracing: backward, jvp
    (forward-mode AD) and torch.func transforms over the custom op."""

    generate_vmap_rule = True

    @staticmethod
    def forward(A, UPLO):
        return torch.ops.metal_linalg.eigh(A, UPLO)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(*output)
        ctx.save_for_forward(*output)

    @staticmethod
    def backward(ctx, gL, gV):
        L, V = ctx.saved_tensors
        return eigh_vjp(L, V, gL, gV), None

    @staticmethod
    def jvp(ctx, dA, _):
        L, V = ctx.saved_tensors
        return eigh_jvp(L, V, dA)


class _Eigvalsh(torch.autograd.Function):
    """eigvalsh without the vectors; its derivatives compute them from the saved input."""

    generate_vmap_rule = True

    @staticmethod
    def forward(A, UPLO):
        return torch.ops.metal_linalg.eigvalsh(A, UPLO)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.UPLO = inputs[1]
        ctx.save_for_backward(inputs[0])
        ctx.save_for_forward(inputs[0])

    @staticmethod
    def backward(ctx, gL):
        (A,) = ctx.saved_tensors
        _, V = _Eigh.apply(A, ctx.UPLO)
        return eigh_vjp(None, V, gL, None), None

    @staticmethod
    def jvp(ctx, dA, _):
        (A,) = ctx.saved_tensors
        L, V = torch.ops.metal_linalg.eigh(A, ctx.UPLO)
        return eigh_jvp(L, V, dA, vectors=False)[0]


def eigh(A: torch.Tensor, UPLO: str = "L") -> torch.return_types.linalg_eigh:
    """Eigenvalues (ascending) and eigenvectors (columns) of symmetric [..., N, N], like torch.linalg.eigh."""
    d.check_input(A, "eigh", square=True)
    d.check_uplo(UPLO, "eigh")
    if d.eager(A):  # run() converts the dtype
        return torch.return_types.linalg_eigh(d.run("eigh", A, d.UPLOS[UPLO]))
    A = d.to_float32(A)
    if d.capturing():
        L, V = torch.ops.metal_linalg.eigh(A, UPLO)
    else:
        L, V = _Eigh.apply(A, UPLO)
    return torch.return_types.linalg_eigh((L, V))


def eigvalsh(A: torch.Tensor, UPLO: str = "L") -> torch.Tensor:
    """Eigenvalues (ascending) of symmetric [..., N, N], like torch.linalg.eigvalsh."""
    d.check_input(A, "eigvalsh", square=True)
    d.check_uplo(UPLO, "eigvalsh")
    if d.eager(A):  # run() converts the dtype
        return d.run("eigvalsh", A, d.UPLOS[UPLO])[0]
    A = d.to_float32(A)
    if d.capturing():
        if d.grad_wanted(A):
            return torch.ops.metal_linalg.eigh(A, UPLO)[0]
        return torch.ops.metal_linalg.eigvalsh(A, UPLO)
    # With a backward ahead, one decomposition with vectors; otherwise they are computed only
    # if a derivative asks.
    if d.grad_wanted(A):
        return _Eigh.apply(A, UPLO)[0]
    return _Eigvalsh.apply(A, UPLO)


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
