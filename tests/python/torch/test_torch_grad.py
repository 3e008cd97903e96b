"""Gradients against torch.linalg in float64 with sign-invariant losses.

The ops compute in float32, so the comparison is relative (a float64 gradcheck would measure
float32 rounding, not the formulas); losses are chosen so that the sign ambiguity of
eigenvectors, singular vectors and Householder QR does not change them.
"""

from __future__ import annotations

import metal_linalg_torch as mlt
import pytest
import torch

RTOL = 2e-3


def _weights(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _grad(fn, leaf):
    leaf = leaf.detach().clone().requires_grad_(True)
    fn(leaf).backward()
    return leaf.grad


def _close(got, ref):
    assert got.dtype == ref.dtype
    err = (got - ref).norm() / ref.norm().clamp_min(1e-30)
    assert err < RTOL, f"relative gradient error {err:.2e}"


def _qr_loss(qr, W1, W2, mode="reduced"):
    def loss(A):
        Q, R = qr(A, mode=mode) if mode != "reduced" else qr(A)
        k = min(A.shape[-2], A.shape[-1])
        sign = torch.sign(R.diagonal(dim1=-2, dim2=-1)[..., :k]).detach()
        out = ((sign.unsqueeze(-1) * R) * W2).sum()
        if Q.numel():
            out = out + ((Q * sign.unsqueeze(-2)) * W1).sum()
        return out

    return loss


@pytest.mark.parametrize("shape", [(5, 5), (2, 7, 4), (2, 4, 7), (3, 1, 3), (6, 1)])
def test_qr_grad(shape):
    A = _weights(*shape, seed=1)
    m, n = shape[-2:]
    k = min(m, n)
    W1 = _weights(*shape[:-2], m, k, seed=2)
    W2 = _weights(*shape[:-2], k, n, seed=3)
    ref = _grad(_qr_loss(torch.linalg.qr, W1, W2), A)
    _close(_grad(_qr_loss(mlt.qr, W1, W2), A), ref)


def test_qr_mode_r_grad_computes_q_internally():
    A = _weights(3, 6, 4, seed=4)
    W2 = _weights(3, 4, 4, seed=5)
    zero = torch.zeros(3, 6, 4, dtype=torch.float64)
    ref = _grad(_qr_loss(torch.linalg.qr, zero, W2), A)
    _close(_grad(_qr_loss(mlt.qr, zero, W2, mode="r"), A), ref)


def _sym(B):
    return (B + B.mT) / 2


@pytest.mark.parametrize("shape", [(1, 1), (6, 6), (3, 5, 5)])
def test_eigh_grad(shape):
    B = _weights(*shape, seed=6)
    c = _weights(*shape[:-1], seed=7)
    W = _weights(*shape, seed=8)

    def loss(eigh):
        return lambda X: (eigh(_sym(X))[0] * c).sum() + (eigh(_sym(X))[1] ** 2 * W).sum()

    _close(_grad(loss(mlt.eigh), B), _grad(loss(torch.linalg.eigh), B))


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigvalsh_grad_uses_vectors(uplo):
    B = _weights(4, 6, 6, seed=9)
    c = _weights(4, 6, seed=10)
    got = _grad(lambda X: (mlt.eigvalsh(_sym(X), UPLO=uplo) * c).sum(), B)
    ref = _grad(lambda X: (torch.linalg.eigvalsh(_sym(X), UPLO=uplo) * c).sum(), B)
    _close(got, ref)


@pytest.mark.parametrize("shape", [(5, 5), (2, 7, 4), (2, 4, 7), (9, 1), (1, 9)])
def test_svd_grad(shape):
    A = _weights(*shape, seed=11)
    m, n = shape[-2:]
    k = min(m, n)
    c = _weights(*shape[:-2], k, seed=12)
    W1 = _weights(*shape[:-2], m, k, seed=13)
    W2 = _weights(*shape[:-2], k, n, seed=14)

    def loss(svd):
        def f(X):
            U, S, Vh = svd(X, full_matrices=False)
            return (S * c).sum() + (U**2 * W1).sum() + (Vh**2 * W2).sum()

        return f

    _close(_grad(loss(mlt.svd), A), _grad(loss(torch.linalg.svd), A))


@pytest.mark.parametrize("shape", [(5, 5), (3, 8, 5), (3, 5, 8)])
def test_svdvals_grad_uses_vectors(shape):
    A = _weights(*shape, seed=15)
    c = _weights(*shape[:-2], min(shape[-2:]), seed=16)
    got = _grad(lambda X: (mlt.svdvals(X) * c).sum(), A)
    _close(got, _grad(lambda X: (torch.linalg.svdvals(X) * c).sum(), A))


def test_single_output_grads():
    """Only some outputs used: the others arrive as undefined/zero gradients."""
    A = _weights(2, 6, 4, seed=17)
    _close(
        _grad(lambda X: mlt.svd(X).U.pow(2).mul(A).sum(), A),
        _grad(lambda X: torch.linalg.svd(X, full_matrices=False).U.pow(2).mul(A).sum(), A),
    )
    _close(
        _grad(lambda X: mlt.svd(X).S.sum(), A), _grad(lambda X: torch.linalg.svdvals(X).sum(), A)
    )
    B = _weights(2, 5, 5, seed=18)
    _close(
        _grad(lambda X: mlt.eigh(_sym(X)).eigenvectors.pow(2).mul(B).sum(), B),
        _grad(lambda X: torch.linalg.eigh(_sym(X)).eigenvectors.pow(2).mul(B).sum(), B),
    )


def test_float32_input_gets_float32_grad():
    A = torch.randn(3, 5, 5, requires_grad=True)
    mlt.svdvals(A).sum().backward()
    assert A.grad.dtype == torch.float32 and A.grad.shape == A.shape


def test_vector_free_ops_have_no_derivative():
    A = torch.randn(4, 4, dtype=torch.float32, requires_grad=True)
    with pytest.raises(RuntimeError, match="no derivative"):
        torch.ops.metal_linalg.eigvalsh(A, "L").sum().backward()
    with pytest.raises(RuntimeError, match="no derivative"):
        torch.ops.metal_linalg.svdvals(A).sum().backward()
    with pytest.raises(RuntimeError, match="mode='r'"):
        torch.ops.metal_linalg.qr(A, "r")[1].sum().backward()


def _double_backward(loss, A):
    X = A.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(loss(X), X, create_graph=True)
    (gg,) = torch.autograd.grad((g**2).sum(), X)
    return gg


_RAW = torch.ops.metal_linalg


@pytest.mark.parametrize(
    "ours, ref",
    [
        (
            lambda X: (_RAW.eigh(X, "L")[1].sum(-1) ** 2).sum() + _RAW.eigh(X, "L")[0].pow(3).sum(),
            lambda X: (
                (torch.linalg.eigh(X)[1].sum(-1) ** 2).sum() + torch.linalg.eigh(X)[0].pow(3).sum()
            ),
        ),
        (
            lambda X: _RAW.svd(X, False)[1].pow(3).sum(),
            lambda X: torch.linalg.svdvals(X).pow(3).sum(),
        ),
        (
            lambda X: _RAW.qr(X, "reduced")[1].pow(3).sum(),
            lambda X: torch.linalg.qr(X)[1].pow(3).sum(),
        ),
        (
            lambda X: _RAW.inv(X + 6 * torch.eye(5, dtype=X.dtype))[0].pow(3).sum(),
            lambda X: torch.linalg.inv(X + 6 * torch.eye(5, dtype=X.dtype)).pow(3).sum(),
        ),
    ],
    ids=["eigh", "svd", "qr", "inv"],
)
def test_raw_custom_ops_have_double_backward(ours, ref):
    # the custom ops called directly: their backward is made of torch ops over the saved
    # outputs, so the gradient of the gradient is torch.linalg's (in float64)
    A = _sym(torch.randn(3, 5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(3)))
    _close(_double_backward(ours, A.float()).double(), _double_backward(ref, A))


def test_no_grad_mode_uses_values_only_ops():
    A = torch.randn(4, 4, requires_grad=True)
    with torch.no_grad():
        s = mlt.svdvals(A)
        w = mlt.eigvalsh(A)
    assert not s.requires_grad and not w.requires_grad
