"""QR: the torch.library op, its fake, its derivatives (backward and jvp, torch.linalg's
formulas), and the public function."""

from __future__ import annotations

from typing import NamedTuple

import torch

from . import _dispatch as d


@torch.library.custom_op(
    "metal_linalg::qr", mutates_args=(), schema="(Tensor A, str mode) -> (Tensor, Tensor)"
)
def qr_op(A: torch.Tensor, mode: str):
    d.check_input(A, "qr")
    _check_mode(mode)
    d.check_no_tangent(A, "qr")
    return _run(A, mode)


@qr_op.register_fake
def _(A, mode):
    d.check_input(A, "qr")
    _check_mode(mode)
    Q, R = d.fake("qr", A, d.QR_MODES[mode])
    return Q, R


def _check_mode(mode: str) -> None:
    """mode is 'reduced', 'r' or 'complete' (the core computes 'complete' for any shape)."""
    if mode not in d.QR_MODES:
        d.check_qr_mode(mode, 1, 1)  # raises torch's ValueError


def _run(A: torch.Tensor, mode: str, with_info: bool = False) -> list:
    """The core's QR."""
    out = d.run("qr", A, d.QR_MODES[mode], with_info)
    if mode == "complete" and A.shape[-1] == 0:
        out[0] = _identity_like(out[0])
    return out


def _identity_like(Q: torch.Tensor) -> torch.Tensor:
    """The complete Q of M x 0 matrices (no reflector): the identity (the core is not called
    for empty matrices, and run() leaves their outputs uninitialised)."""
    eye = torch.eye(Q.shape[-1], dtype=Q.dtype, device=Q.device)
    return eye.expand(Q.shape).clone()


def _complete_tall(mode: str, m: int, n: int) -> bool:
    return mode == "complete" and m > n


def _check_differentiable(mode: str, m: int, n: int) -> None:
    """torch's rule: a complete Q of a tall matrix has m - n columns that are not unique (any
    orthonormal basis of the complement of A's range), so it has no derivative."""
    if _complete_tall(mode, m, n):
        raise RuntimeError(
            "[metal_linalg.qr] the QR decomposition is not differentiable when "
            f"mode='complete' and nrows > ncols (got {m}x{n}: Q's last {m - n} columns are "
            "not unique); use mode='reduced'"
        )


def _qr_backward_tall(Q, R, gQ, gR):
    """m >= n: gA = (gQ + Q copyltu(M)) R^-T with M = R gR^T - gQ^T Q."""
    M = R @ gR.mT - gQ.mT @ Q
    lower = M.tril(-1)
    B = gQ + Q @ (lower + lower.mT + torch.diag_embed(M.diagonal(dim1=-2, dim2=-1)))
    return torch.linalg.solve_triangular(R.mT, B, upper=False, left=False)


def _qr_backward(Q, R, gQ, gR):
    m, n = Q.shape[-2], R.shape[-1]
    if gQ is None:
        gQ = torch.zeros_like(Q)
    if gR is None:
        gR = torch.zeros_like(R)
    if m >= n:
        return _qr_backward_tall(Q, R, gQ, gR)
    # Wide: A = Q [U | V] with X = A[:, :m] = Q U square and Y = A[:, m:] = Q V.
    U, V = R[..., :m], R[..., m:]
    gU, gV = gR[..., :m], gR[..., m:]
    Y = Q @ V
    gX = _qr_backward_tall(Q, U, gQ + Y @ gV.mT, gU)
    return torch.cat([gX, Q @ gV], dim=-1)


def _qr_jvp_tall(Q, R, dA):
    """m >= n: with X = triu(sym(Q^T dA R^-1)), diagonal halved (= dR R^-1):
    dQ = dA R^-1 - Q X, dR = X R."""
    dAR = torch.linalg.solve_triangular(R, dA, upper=True, left=False)
    QtdAR = Q.mT @ dAR
    Y = (QtdAR + QtdAR.mT).triu()
    X = Y - torch.diag_embed(Y.diagonal(dim1=-2, dim2=-1)) / 2
    return dAR - Q @ X, X @ R


def qr_jvp(Q, R, dA):
    """Tangents (dQ, dR) of the reduced QR."""
    m, n = Q.shape[-2], R.shape[-1]
    if m >= n:
        return _qr_jvp_tall(Q, R, dA)
    # Wide: A = Q [U | V] with X = A[:, :m] = Q U square and Y = A[:, m:] = Q V.
    dQ, dU = _qr_jvp_tall(Q, R[..., :m], dA[..., :m])
    dV = Q.mT @ (dA[..., m:] - dQ @ R[..., m:])
    return dQ, torch.cat([dU, dV], dim=-1)


def _setup_context(ctx, inputs, output):
    A, mode = inputs
    Q, R = output
    ctx.mode = mode
    ctx.dtype = A.dtype
    ctx.shape = A.shape[-2], A.shape[-1]
    ctx.save_for_backward(Q, R)


def _backward(ctx, gQ, gR):
    _check_differentiable(ctx.mode, *ctx.shape)
    if ctx.mode == "r":
        raise RuntimeError(
            "[metal_linalg.qr] the derivative of QR needs Q, which mode='r' does not compute; "
            "use metal_linalg_torch.qr(A, mode='r'), which computes Q when A requires grad"
        )
    Q, R = ctx.saved_tensors
    return _qr_backward(Q, R, gQ, gR).to(ctx.dtype), None


qr_op.register_autograd(_backward, setup_context=_setup_context)
d.register_vmap(qr_op, 2)


class _Qr(torch.autograd.Function):
    """The public function's differentiable path outside eager/compile/tracing: backward, jvp
    (forward-mode AD) and torch.func transforms over the custom op. Mode 'r' computes Q again
    from the saved input when a derivative asks."""

    generate_vmap_rule = True

    @staticmethod
    def forward(A, mode):
        return torch.ops.metal_linalg.qr(A, mode)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.set_materialize_grads(False)
        ctx.mode = inputs[1]
        ctx.shape = inputs[0].shape[-2], inputs[0].shape[-1]
        saved = (inputs[0],) if ctx.mode == "r" else output
        ctx.save_for_backward(*saved)
        ctx.save_for_forward(*saved)

    @staticmethod
    def _factors(ctx):
        if ctx.mode == "r":
            (A,) = ctx.saved_tensors
            return torch.ops.metal_linalg.qr(A, "reduced")
        return ctx.saved_tensors

    @staticmethod
    def backward(ctx, gQ, gR):
        _check_differentiable(ctx.mode, *ctx.shape)
        Q, R = _Qr._factors(ctx)
        if ctx.mode == "r":
            gQ = None  # mode 'r' returns an empty Q
        return _qr_backward(Q, R, gQ, gR), None

    @staticmethod
    def jvp(ctx, dA, _):
        _check_differentiable(ctx.mode, *ctx.shape)
        Q, R = _Qr._factors(ctx)
        dQ, dR = qr_jvp(Q, R, dA)
        if ctx.mode == "r":
            dQ = dA.new_zeros(0)
        return dQ, dR


def qr(A: torch.Tensor, mode: str = "reduced") -> torch.return_types.linalg_qr:
    """QR of [..., M, N] matrices, like torch.linalg.qr (float32).

    mode='complete': Q [..., M, M], R [..., M, N] (R's rows below N are zero); for M <= N the
    same as 'reduced'. As in torch, a tall (M > N) complete QR has no derivative: its backward
    (and jvp) raise RuntimeError. mode='r' returns an empty Q, as torch does; unlike torch it
    is differentiable (Q is computed when A requires grad).
    """
    d.check_input(A, "qr")
    if mode not in d.QR_MODES:
        d.check_qr_mode(mode, 1, 1)  # raises torch's ValueError
    m, n = A.shape[-2], A.shape[-1]
    if mode == "complete" and m <= n:
        mode = "reduced"  # the same factors
    if d.eager(A):  # run() converts the dtype
        out = d.run("qr", A, d.QR_MODES[mode])
        if n == 0 and mode == "complete":
            out[0] = _identity_like(out[0])
        return torch.return_types.linalg_qr(out)
    A = d.to_float32(A)
    op = torch.ops.metal_linalg.qr if d.capturing() else _Qr.apply
    if mode == "r" and d.grad_wanted(A):
        # The backward needs Q: compute it, hand back the empty Q torch returns for mode='r'.
        _, R = op(A, "reduced")
        return torch.return_types.linalg_qr((A.new_empty(0), R))
    Q, R = op(A, mode)
    return torch.return_types.linalg_qr((Q, R))


class QrEx(NamedTuple):
    Q: torch.Tensor
    R: torch.Tensor
    info: torch.Tensor


def qr_ex(A: torch.Tensor, mode: str = "reduced", *, check_errors: bool = False) -> QrEx:
    """qr plus the per-matrix info word (int32, batch shape), like torch.linalg.cholesky_ex:
    ML_INFO_NONFINITE (2) marks a matrix with NaN/Inf (NaN outputs), ML_INFO_RANK_DEFICIENT (4)
    one with a zero on R's diagonal. check_errors=True raises torch.linalg.LinAlgError for a
    non-finite matrix."""
    d.check_input(A, "qr")
    _check_mode(mode)
    A = d.to_float32(A)
    m, n = A.shape[-2], A.shape[-1]
    run_mode = "reduced" if mode == "complete" and m <= n else mode
    if d.eager(A):
        Q, R, info = _run(A, run_mode, with_info=True)
        if check_errors:
            d.check_info(info, "qr_ex")
    else:
        Q, R, info = d.run_ex(
            "qr", A, d.QR_MODES[run_mode], lambda: qr(A, mode), check_errors, "qr_ex"
        )
    return QrEx(Q, R, info)
