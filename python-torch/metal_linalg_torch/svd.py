"""SVD: svd and svdvals ops, their fakes, the derivatives (backward and jvp, torch.linalg's
formulas), public functions."""

from __future__ import annotations

from typing import NamedTuple

import torch

from . import _dispatch as d


@torch.library.custom_op(
    "metal_linalg::svd",
    mutates_args=(),
    schema="(Tensor A, bool full_matrices) -> (Tensor, Tensor, Tensor)",
)
def svd_op(A: torch.Tensor, full_matrices: bool):
    d.check_input(A, "svd")
    d.check_full_matrices(full_matrices, A.shape[-2], A.shape[-1])
    d.check_no_tangent(A, "svd")
    U, S, Vh = d.run("svd", A, int(full_matrices))
    return U, S, Vh


@svd_op.register_fake
def _(A, full_matrices):
    d.check_input(A, "svd")
    d.check_full_matrices(full_matrices, A.shape[-2], A.shape[-1])
    U, S, Vh = d.fake("svd", A, int(full_matrices))
    return U, S, Vh


def _svd_setup_context(ctx, inputs, output):
    ctx.dtype = inputs[0].dtype
    ctx.save_for_backward(*output)


def svd_vjp(U, S, Vh, gU, gS, gVh):
    """Thin SVD, A = U S V^T (k = min(m, n)):

    gA = U [(skew(U^T gU) / E) S + S (skew(V^T gV) / E) + diag(gS)] V^T
         + (I - U U^T) gU S^-1 V^T + U S^-1 gV^T (I - V V^T),   E_ij = s_j^2 - s_i^2.
    The projector terms vanish for square matrices. Zero or absent gU, gVh contribute exactly
    zero, also at repeated or zero singular values.
    """
    m, n, k = U.shape[-2], Vh.shape[-1], S.shape[-1]
    inner = torch.zeros(U.shape[:-2] + (k, k), dtype=U.dtype, device=U.device)
    if gS is not None:
        inner = inner + torch.diag_embed(gS)
    if gU is None and gVh is None:
        return U @ inner @ Vh
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1)
    E = E + torch.eye(k, dtype=E.dtype, device=E.device)
    if gU is not None:
        X = U.mT @ gU
        inner = inner + d.safe_div(X - X.mT, E) * S.unsqueeze(-2)
    if gVh is not None:
        Y = Vh @ gVh.mT  # V^T gV
        inner = inner + S.unsqueeze(-1) * d.safe_div(Y - Y.mT, E)
    gA = U @ inner @ Vh
    if gU is not None and m > k:
        gUp = gU - U @ (U.mT @ gU)
        gA = gA + d.safe_div(gUp, S.unsqueeze(-2).expand_as(gUp)) @ Vh
    if gVh is not None and n > k:
        gVhp = gVh - (gVh @ Vh.mT) @ Vh
        gA = gA + U @ d.safe_div(gVhp, S.unsqueeze(-1).expand_as(gVhp))
    return gA


def _svd_jvp_tall(U, S, Vh, dA):
    """m >= n: dS = diag(dP), dU = U (sym(dP' S) / E) + (I - U U^T) dA V S^-1,
    dV = V (sym(S dP') / E), with dP = U^T dA V, dP' its off-diagonal part, E_ij = s_j^2 - s_i^2."""
    V = Vh.mT
    dP = U.mT @ dA @ V
    dS = dP.diagonal(dim1=-2, dim2=-1)
    off = dP - torch.diag_embed(dS)
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1)
    E = E + torch.eye(S.shape[-1], dtype=E.dtype, device=E.device)
    X = off * S.unsqueeze(-2)
    Y = S.unsqueeze(-1) * off
    dU = U @ d.safe_div(X + X.mT, E)
    dV = V @ d.safe_div(Y + Y.mT, E)
    if U.shape[-2] > V.shape[-1]:
        dAVs = (dA @ V) / S.unsqueeze(-2)
        dU = dU + dAVs - U @ (U.mT @ dAVs)
    return dU, dS, dV.mT


def svd_jvp(U, S, Vh, dA):
    """Tangents (dU, dS, dVh) of the thin SVD (torch.linalg's linalg_svd_jvp for real input)."""
    if U.shape[-2] >= Vh.shape[-1]:
        return _svd_jvp_tall(U, S, Vh, dA)
    # A^T = V S U^T: the tall case with U and V swapped.
    dV, dS, dUt = _svd_jvp_tall(Vh.mT, S, U.mT, dA.mT)
    return dUt.mT, dS, dV.mT


def _svd_backward(ctx, gU, gS, gVh):
    U, S, Vh = ctx.saved_tensors
    return svd_vjp(U, S, Vh, gU, gS, gVh).to(ctx.dtype), None


svd_op.register_autograd(_svd_backward, setup_context=_svd_setup_context)
d.register_vmap(svd_op, 3)


@torch.library.custom_op("metal_linalg::svdvals", mutates_args=(), schema="(Tensor A) -> Tensor")
def svdvals_op(A: torch.Tensor):
    d.check_input(A, "svdvals")
    d.check_no_tangent(A, "svdvals")
    (S,) = d.run("svdvals", A, 0)
    return S


@svdvals_op.register_fake
def _(A):
    d.check_input(A, "svdvals")
    (S,) = d.fake("svdvals", A, 0)
    return S


d.register_values_only(svdvals_op, "svdvals", "singular vectors")


class _Svd(torch.autograd.Function):
    """The public functions' differentiable path outside eager/compile/tracing: backward, jvp
    (forward-mode AD) and torch.func transforms over the custom op (thin SVD)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(A):
        return torch.ops.metal_linalg.svd(A, False)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(*output)
        ctx.save_for_forward(*output)

    @staticmethod
    def backward(ctx, gU, gS, gVh):
        return svd_vjp(*ctx.saved_tensors, gU, gS, gVh)

    @staticmethod
    def jvp(ctx, dA):
        return svd_jvp(*ctx.saved_tensors, dA)


class _Svdvals(torch.autograd.Function):
    """svdvals without the vectors; its derivatives compute them from the saved input."""

    generate_vmap_rule = True

    @staticmethod
    def forward(A):
        return torch.ops.metal_linalg.svdvals(A)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.save_for_forward(inputs[0])

    @staticmethod
    def backward(ctx, gS):
        (A,) = ctx.saved_tensors
        U, _, Vh = _Svd.apply(A)
        return (U * gS.unsqueeze(-2)) @ Vh

    @staticmethod
    def jvp(ctx, dA):
        (A,) = ctx.saved_tensors
        U, _, Vh = torch.ops.metal_linalg.svd(A, False)
        return ((U.mT @ dA) * Vh).sum(-1)  # diag(U^T dA V)


def svd(A: torch.Tensor, full_matrices: bool = False) -> torch.return_types.linalg_svd:
    """Thin SVD of [..., M, N], like torch.linalg.svd: U, S (descending), Vh.

    full_matrices=True is supported for square matrices only (NotImplementedError otherwise).
    """
    d.check_input(A, "svd")
    d.check_full_matrices(full_matrices, A.shape[-2], A.shape[-1])
    if d.eager(A):  # run() converts the dtype
        return torch.return_types.linalg_svd(d.run("svd", A, 0))
    A = d.to_float32(A)
    if d.capturing():
        U, S, Vh = torch.ops.metal_linalg.svd(A, False)
    else:
        U, S, Vh = _Svd.apply(A)
    return torch.return_types.linalg_svd((U, S, Vh))


def svdvals(A: torch.Tensor) -> torch.Tensor:
    """Singular values (descending) of [..., M, N], like torch.linalg.svdvals."""
    d.check_input(A, "svdvals")
    if d.eager(A):  # run() converts the dtype
        return d.run("svdvals", A, 0)[0]
    A = d.to_float32(A)
    if d.capturing():
        if d.grad_wanted(A):
            return torch.ops.metal_linalg.svd(A, False)[1]
        return torch.ops.metal_linalg.svdvals(A)
    # With a backward ahead, one decomposition with vectors; otherwise they are computed only
    # if a derivative asks.
    if d.grad_wanted(A):
        return _Svd.apply(A)[1]
    return _Svdvals.apply(A)


class SvdEx(NamedTuple):
    U: torch.Tensor
    S: torch.Tensor
    Vh: torch.Tensor
    info: torch.Tensor


class SvdvalsEx(NamedTuple):
    S: torch.Tensor
    info: torch.Tensor


def svd_ex(A: torch.Tensor, full_matrices: bool = False, *, check_errors: bool = False) -> SvdEx:
    """svd plus the per-matrix info word (int32, batch shape), like torch.linalg.cholesky_ex:
    ML_INFO_NOT_CONVERGED (1) and ML_INFO_NONFINITE (2) mark matrices whose outputs are NaN.
    check_errors=True raises torch.linalg.LinAlgError for such a matrix."""
    d.check_input(A, "svd")
    d.check_full_matrices(full_matrices, A.shape[-2], A.shape[-1])
    A = d.to_float32(A)
    U, S, Vh, info = d.run_ex("svd", A, 0, lambda: svd(A, full_matrices), check_errors, "svd_ex")
    return SvdEx(U, S, Vh, info)


def svdvals_ex(A: torch.Tensor, *, check_errors: bool = False) -> SvdvalsEx:
    """svdvals plus the per-matrix info word (see svd_ex)."""
    d.check_input(A, "svdvals")
    A = d.to_float32(A)
    S, info = d.run_ex("svdvals", A, 0, lambda: (svdvals(A),), check_errors, "svdvals_ex")
    return SvdvalsEx(S, info)
