"""torch.library.opcheck on every op and torch.compile(fullgraph=True) on every public function."""

from __future__ import annotations

import metal_linalg_torch as mlt
import pytest
import torch

OPCHECK_CASES = [
    ("qr", (torch.randn(3, 6, 4), "reduced")),
    ("qr", (torch.randn(2, 4, 6, requires_grad=True), "reduced")),
    ("qr", (torch.randn(5, 5, requires_grad=True), "complete")),
    ("qr", (torch.randn(2, 6, 4), "r")),
    ("eigh", (torch.randn(3, 5, 5, requires_grad=True), "L")),
    ("eigh", (torch.randn(5, 5), "U")),
    ("eigvalsh", (torch.randn(3, 5, 5), "L")),
    ("svd", (torch.randn(3, 7, 4, requires_grad=True), False)),
    ("svd", (torch.randn(2, 4, 7, requires_grad=True), False)),
    ("svd", (torch.randn(4, 4), True)),
    ("svdvals", (torch.randn(3, 6, 4),)),
    ("svd", (torch.randn(0, 3, 3), False)),
]


def _symmetrise(args):
    a = args[0]
    a = ((a + a.mT) / 2).detach().requires_grad_(a.requires_grad)
    return (a,) + args[1:]


@pytest.mark.parametrize("name,args", OPCHECK_CASES, ids=[c[0] for c in OPCHECK_CASES])
def test_opcheck(name, args):
    if name in ("eigh", "eigvalsh"):
        args = _symmetrise(args)
    torch.library.opcheck(getattr(torch.ops.metal_linalg, name).default, args)


def _sym(shape):
    b = torch.randn(*shape)
    return (b + b.mT) / 2


def _cases():
    a, s = torch.randn(4, 8, 5), _sym((4, 6, 6))
    return [
        ("qr", lambda x: tuple(mlt.qr(x)), a),
        ("qr_r", lambda x: mlt.qr(x, mode="r").R, a),
        ("eigh", lambda x: tuple(mlt.eigh(x)), s),
        ("eigvalsh", lambda x: mlt.eigvalsh(x, UPLO="U"), s),
        ("svd", lambda x: tuple(mlt.svd(x)), a),
        ("svdvals", lambda x: mlt.svdvals(x), a),
    ]


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


@pytest.mark.parametrize("case", range(6), ids=[c[0] for c in _cases()])
def test_compile_fullgraph_matches_eager(case):
    torch._dynamo.reset()
    _, fn, x = _cases()[case]
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    for got, ref in zip(_as_tuple(compiled(x)), _as_tuple(fn(x))):
        assert torch.equal(got, ref)


def test_compile_fullgraph_inductor_forward_and_backward():
    """One real inductor compile: an op inside a graph with other math, forward and backward."""
    torch._dynamo.reset()

    def f(x):
        return (mlt.svdvals(x * 2) ** 2).sum()

    x = torch.randn(3, 6, 4, requires_grad=True)
    out = torch.compile(f, fullgraph=True)(x)
    out.backward()
    g_compiled = x.grad.clone()
    x.grad = None
    ref = f(x)
    ref.backward()
    assert torch.allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert torch.allclose(g_compiled, x.grad, rtol=1e-4, atol=1e-4)


def test_compile_backward_aot_eager_every_op():
    """Backward graphs of every differentiable public function trace under fullgraph."""
    torch._dynamo.reset()

    def f(x):
        q, r = mlt.qr(x)
        u, s, vh = mlt.svd(x)
        sym = x.mT @ x
        w, v = mlt.eigh(sym)
        return (
            (q * r.sum()).sum()
            + (u**2).sum()
            + s.sum()
            + (vh**2).sum()
            + w.sum()
            + (v**2).sum()
            + mlt.eigvalsh(sym).sum()
            + mlt.svdvals(x).sum()
        )

    x = torch.randn(2, 6, 4, dtype=torch.float64, requires_grad=True)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    out = compiled(x)
    (g,) = torch.autograd.grad(out, x)
    ref_out = f(x)
    (ref,) = torch.autograd.grad(ref_out, x)
    assert torch.allclose(out, ref_out) and torch.allclose(g, ref)


def test_compile_dynamic_shapes():
    """Symbolic sizes through the fake implementations (k = min(m, n) stays symbolic)."""
    torch._dynamo.reset()
    compiled = torch.compile(
        lambda x: tuple(mlt.svd(x)) + tuple(mlt.qr(x)),
        fullgraph=True,
        dynamic=True,
        backend="aot_eager",
    )
    for shape in [(3, 7, 5), (2, 5, 9), (4, 6, 6)]:
        x = torch.randn(shape)
        got = compiled(x)
        ref = tuple(mlt.svd(x)) + tuple(mlt.qr(x))
        assert all(torch.equal(g, r) for g, r in zip(got, ref, strict=True))
