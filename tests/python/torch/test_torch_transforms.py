"""Derivatives and transformations beyond plain backward: gradients of the values alone at repeated
and zero eigen/singular values, torch.jit.trace, forward-mode AD, torch.func, vmap with backward,
the *_ex forms under vmap and torch.compile, and range checks of integer settings.

References are float64 torch.linalg; tangents and vectors are compared after fixing each vector's
sign (spectra are well separated there, so the sign is the only freedom).
"""

from __future__ import annotations

import metal_linalg_torch as mlt
import pytest
import torch
import torch.autograd.forward_ad as fwAD

F64 = torch.float64


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _orth(n, seed):
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=_gen(seed), dtype=F64))
    return q


def _sym_with(values, seed):
    q = _orth(len(values), seed)
    return q @ torch.diag(torch.tensor(values, dtype=F64)) @ q.mT


def _general_with(values, m, n, seed):
    k = len(values)
    u, v = _orth(m, seed)[:, :k], _orth(n, seed + 1)[:, :k]
    return u @ torch.diag(torch.tensor(values, dtype=F64)) @ v.mT


def _assert_close(got, ref, tol=2e-4):
    got, ref = got.to(F64), ref.to(F64)
    assert torch.isfinite(got).all(), f"non-finite result {got}"
    err = (got - ref).norm() / max(1.0, float(ref.norm()))
    assert err < tol, f"error {err:.2e}"


def _grad(fn, A):
    leaf = A.detach().clone().requires_grad_(True)
    fn(leaf).backward()
    return leaf.grad


# ---- gradients of the values alone at repeated / zero values ----

SYMMETRIC = {
    "identity": torch.eye(3, dtype=F64),
    "zero": torch.zeros(4, 4, dtype=F64),
    "block": _sym_with([1.0, 2.0, 2.0, 2.0, 5.0], seed=1),
    "batch": torch.stack([torch.eye(4, dtype=F64), 3 * torch.eye(4, dtype=F64)]),
}

EIGVALS = {
    "eigvalsh": mlt.eigvalsh,
    "eigh[0]": lambda A: mlt.eigh(A)[0],
    "eigh[0] U": lambda A: mlt.eigh(A, UPLO="U").eigenvalues,
    "eigvalsh_ex": lambda A: mlt.eigvalsh_ex(A).eigenvalues,
    "eigh_ex[0]": lambda A: mlt.eigh_ex(A).eigenvalues,
    "op eigh[0]": lambda A: torch.ops.metal_linalg.eigh(A.float(), "L")[0],
}


@pytest.mark.parametrize("fn", EIGVALS, ids=list(EIGVALS))
@pytest.mark.parametrize("case", SYMMETRIC, ids=list(SYMMETRIC))
def test_eigenvalue_gradient_at_repeated_values(fn, case):
    A = SYMMETRIC[case]
    for loss in (torch.sum, lambda w: (w * w).sum()):
        got = _grad(lambda X, loss=loss: loss(EIGVALS[fn](X)), A)
        ref = _grad(lambda X, loss=loss: loss(torch.linalg.eigvalsh(X)), A)
        _assert_close(got, ref)


GENERAL = {
    # (matrix, whether sum(S) has a unique gradient: not with a zero singular value)
    "2 identity": (2 * torch.eye(3, dtype=F64), True),
    "zero": (torch.zeros(3, 3, dtype=F64), False),
    "5x3 zero column": (
        torch.cat([_general_with([3.0, 1.0], 5, 2, 2), torch.zeros(5, 1)], 1),
        False,
    ),
    "3x5 zero row": (torch.cat([_general_with([3.0, 1.0], 2, 5, 3), torch.zeros(1, 5)], 0), False),
    "6x4 block": (_general_with([3.0, 3.0, 3.0, 1.0], 6, 4, 4), True),
    "4x6 rank 2": (_general_with([2.0, 1.0], 4, 6, 5), False),
}

SVALS = {
    "svdvals": mlt.svdvals,
    "svd.S": lambda A: mlt.svd(A).S,
    "svdvals_ex": lambda A: mlt.svdvals_ex(A).S,
    "svd_ex.S": lambda A: mlt.svd_ex(A).S,
    "op svd.S": lambda A: torch.ops.metal_linalg.svd(A.float(), False)[1],
}


@pytest.mark.parametrize("fn", SVALS, ids=list(SVALS))
@pytest.mark.parametrize("case", GENERAL, ids=list(GENERAL))
def test_singular_value_gradient_at_repeated_and_zero_values(fn, case):
    A, unique_sum = GENERAL[case]
    losses = [lambda s: (s * s).sum()] + ([torch.sum] if unique_sum else [])
    for loss in losses:
        got = _grad(lambda X, loss=loss: loss(SVALS[fn](X)), A)
        ref = _grad(lambda X, loss=loss: loss(torch.linalg.svdvals(X)), A)
        _assert_close(got, ref)


def test_vector_gradient_at_repeated_values_is_still_undefined():
    """Only a zero vector gradient is exact; a real one across a repeated value is not finite."""
    X = torch.eye(3, requires_grad=True)
    W = torch.randn(3, 3, generator=_gen(0))
    (mlt.eigh(X).eigenvectors * W).sum().backward()
    assert not torch.isfinite(X.grad).all()


# ---- torch.jit.trace ----


def _sep_sym(batch, n, seed):
    w = torch.arange(1.0, n + 1, dtype=F64) * 1.5
    out = [_orth(n, seed + i) @ torch.diag(w + i) @ _orth(n, seed + i).mT for i in range(batch)]
    return torch.stack(out)


def _sep_general(batch, m, n, seed):
    k = min(m, n)
    s = torch.arange(k, 0, -1, dtype=F64) * 1.5
    out = [_general_with((s + i).tolist(), m, n, seed + 2 * i) for i in range(batch)]
    return torch.stack(out)


TRACED = {
    "qr": (lambda A: tuple(mlt.qr(A)), False),
    "qr_r": (lambda A: mlt.qr(A, mode="r").R, False),
    "eigh": (lambda A: tuple(mlt.eigh(A)), True),
    "eigvalsh": (mlt.eigvalsh, True),
    "svd": (lambda A: tuple(mlt.svd(A)), False),
    "svdvals": (mlt.svdvals, False),
    "qr_ex": (lambda A: tuple(mlt.qr_ex(A)), False),
    "eigh_ex": (lambda A: tuple(mlt.eigh_ex(A)), True),
    "eigvalsh_ex": (lambda A: tuple(mlt.eigvalsh_ex(A)), True),
    "svd_ex": (lambda A: tuple(mlt.svd_ex(A)), False),
    "svdvals_ex": (lambda A: tuple(mlt.svdvals_ex(A)), False),
}


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _same(got, want):
    for g, w in zip(_tuple(got), _tuple(want), strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert torch.equal(g, w) or torch.allclose(g, w, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", TRACED, ids=list(TRACED))
def test_jit_trace_computes_on_new_inputs(name):
    fn, symmetric = TRACED[name]
    make = (lambda s: _sep_sym(3, 5, s)) if symmetric else (lambda s: _sep_general(3, 6, 4, s))
    A, B = make(10).float(), make(20).float()
    B[1, 0, 0] = float("nan")  # the info words of the *_ex forms must come from B too
    traced = torch.jit.trace(fn, A, check_trace=False)
    _same(traced(B), fn(B))


# ---- forward-mode AD ----


FORWARD = {
    "qr": lambda f, A: tuple(f(A)),
    "eigh": lambda f, A: tuple(f(A)),
    "eigvalsh": lambda f, A: (f(A),),
    "svd": lambda f, A: tuple(f(A, full_matrices=False)),
    "svdvals": lambda f, A: (f(A),),
}
FORWARD_CASES = [
    *[(op, shape) for op in ("qr", "svd", "svdvals") for shape in [(6, 4), (2, 4, 6), (5, 5)]],
    *[(op, shape) for op in ("eigh", "eigvalsh") for shape in [(5, 5), (3, 5, 5)]],
]


def _forward_case(name, shape, seed):
    batch = shape[0] if len(shape) == 3 else 1
    if name.startswith("eig"):
        A = _sep_sym(batch, shape[-1], seed).reshape(shape)
        T = torch.randn(shape, generator=_gen(seed + 1), dtype=F64)
        return A, (T + T.mT) / 2
    A = _sep_general(batch, shape[-2], shape[-1], seed).reshape(shape)
    return A, torch.randn(shape, generator=_gen(seed + 1), dtype=F64)


def _forward(f, name, A, T):
    with fwAD.dual_level():
        out = FORWARD[name](f, fwAD.make_dual(A, T))
        primals = [fwAD.unpack_dual(o).primal for o in out]
        tangents = [fwAD.unpack_dual(o).tangent for o in out]
    return primals, tangents


@pytest.mark.parametrize("name,shape", FORWARD_CASES)
def test_forward_ad_matches_torch_linalg(name, shape):
    A, T = _forward_case(name, shape, seed=30)
    primals, tangents = _forward(getattr(mlt, name), name, A.float(), T.float())
    ref_primals, ref_tangents = _forward(getattr(torch.linalg, name), name, A, T)
    assert all(t is not None for t in tangents), "tangent dropped"
    if name not in ("eigvalsh", "svdvals"):
        # Column signs of the first factor (V, U or Q) aligned with the reference's; the
        # matching rows of Vh / R flip with them.
        v = 1 if name == "eigh" else 0
        s = torch.sign((primals[v].to(F64) * ref_primals[v]).sum(-2, keepdim=True))
        flip = {"eigh": [None, s], "qr": [s, s.mT], "svd": [s, None, s.mT]}[name]
        primals = [p if f is None else p * f for p, f in zip(primals, flip, strict=True)]
        tangents = [t if f is None else t * f for t, f in zip(tangents, flip, strict=True)]
    for got, ref in zip(primals, ref_primals, strict=True):
        _assert_close(got, ref, tol=1e-4)
    for got, ref in zip(tangents, ref_tangents, strict=True):
        _assert_close(got, ref, tol=2e-3)


def test_forward_ad_qr_mode_r():
    A, T = _forward_case("qr", (6, 4), seed=40)
    with fwAD.dual_level():
        R = mlt.qr(fwAD.make_dual(A.float(), T.float()), mode="r").R
        dR = fwAD.unpack_dual(R).tangent
        Rr = torch.linalg.qr(fwAD.make_dual(A, T)).R  # torch.linalg has no derivative in mode 'r'
        dRr = fwAD.unpack_dual(Rr).tangent
    s = torch.sign(fwAD.unpack_dual(Rr).primal.diagonal()) * torch.sign(
        fwAD.unpack_dual(R).primal.diagonal().to(F64)
    )
    _assert_close(dR * s.unsqueeze(-1), dRr, tol=2e-3)


OPS = {
    "qr": lambda A: torch.ops.metal_linalg.qr(A, "reduced"),
    "eigh": lambda A: torch.ops.metal_linalg.eigh(A, "L"),
    "eigvalsh": lambda A: torch.ops.metal_linalg.eigvalsh(A, "L"),
    "svd": lambda A: torch.ops.metal_linalg.svd(A, False),
    "svdvals": lambda A: torch.ops.metal_linalg.svdvals(A),
}


@pytest.mark.parametrize("name", OPS, ids=list(OPS))
def test_forward_ad_through_custom_op_raises(name):
    A = _sep_sym(1, 4, 50)[0].float()
    with fwAD.dual_level(), pytest.raises(RuntimeError, match="forward-mode AD"):
        OPS[name](fwAD.make_dual(A, torch.ones_like(A)))


# ---- torch.func ----

LOSSES = {
    "qr": lambda qr, A: (
        (qr(A).R ** 2 * torch.arange(A.shape[-1], dtype=A.dtype)).sum() + (qr(A).Q ** 3).sum()
    ),
    "eigh": lambda eigh, A: (eigh(A)[0] ** 2).sum() + (eigh(A)[1] ** 4).sum(),
    "eigvalsh": lambda f, A: (f(A) * torch.arange(A.shape[-1], dtype=A.dtype)).sum(),
    "svd": lambda svd, A: (
        svd(A, full_matrices=False)[1].sum() + (svd(A, full_matrices=False)[0] ** 4).sum()
    ),
    "svdvals": lambda f, A: (f(A) ** 3).sum(),
}


def _func_case(name):
    return _sep_sym(1, 5, 60)[0] if name.startswith("eig") else _sep_general(1, 6, 4, 61)[0]


@pytest.mark.parametrize("name", LOSSES, ids=list(LOSSES))
def test_func_grad_matches_torch_linalg(name):
    A = _func_case(name)
    ours = getattr(mlt, name)
    got = torch.func.grad(lambda X: LOSSES[name](ours, X))(A.float())
    ref = torch.func.grad(lambda X: LOSSES[name](getattr(torch.linalg, name), X))(A)
    _assert_close(got, ref, tol=2e-3)


@pytest.mark.parametrize("name", ["eigvalsh", "svdvals"])
def test_func_jacrev_and_jacfwd_match_torch_linalg(name):
    A = _func_case(name)
    ref = torch.func.jacrev(getattr(torch.linalg, name))(A)
    for jac in (torch.func.jacrev, torch.func.jacfwd):
        _assert_close(jac(getattr(mlt, name))(A.float()), ref, tol=2e-3)


# ---- vmap with backward; the *_ex forms under vmap and compile ----

VMAPPED = {
    "eigvalsh": (mlt.eigvalsh, torch.linalg.eigvalsh, True),
    "svdvals": (mlt.svdvals, torch.linalg.svdvals, False),
    "qr_r": (
        lambda A: mlt.qr(A, mode="r").R ** 2,
        lambda A: torch.linalg.qr(A).R ** 2,
        False,
    ),
    "eigh[0]": (lambda A: mlt.eigh(A)[0], lambda A: torch.linalg.eigh(A)[0], True),
}


def _weighted_sum(out):
    return (out * torch.arange(1, out.shape[-1] + 1, dtype=out.dtype)).sum()


@pytest.mark.parametrize("name", VMAPPED, ids=list(VMAPPED))
def test_vmap_then_backward_matches_torch_linalg(name):
    ours, ref_fn, symmetric = VMAPPED[name]
    B = _sep_sym(3, 5, 70) if symmetric else _sep_general(3, 6, 4, 71)
    got = _grad(lambda X: _weighted_sum(torch.vmap(ours)(X.float())), B)
    ref = _grad(lambda X: _weighted_sum(torch.vmap(ref_fn)(X)), B)
    _assert_close(got, ref, tol=2e-3)


EX = {
    "qr_ex": (mlt.qr_ex, False),
    "eigh_ex": (mlt.eigh_ex, True),
    "eigvalsh_ex": (mlt.eigvalsh_ex, True),
    "svd_ex": (mlt.svd_ex, False),
    "svdvals_ex": (mlt.svdvals_ex, False),
}


def _ex_input(symmetric):
    B = (_sep_sym(3, 5, 80) if symmetric else _sep_general(3, 6, 4, 81)).float()
    B[2, 1, 1] = float("inf")
    return B


@pytest.mark.parametrize("name", EX, ids=list(EX))
def test_vmap_of_ex_forms(name):
    fn, symmetric = EX[name]
    B = _ex_input(symmetric)
    got = torch.vmap(fn)(B)
    want = fn(B)
    _same(tuple(got), tuple(want))
    assert want[-1][2] & 2 and not want[-1][0] & 2


@pytest.mark.parametrize("name", EX, ids=list(EX))
def test_compile_fullgraph_of_ex_forms(name):
    torch._dynamo.reset()
    fn, symmetric = EX[name]
    B = _ex_input(symmetric)
    got = torch.compile(fn, fullgraph=True, backend="aot_eager")(B)
    assert type(got) is type(fn(B))
    _same(tuple(got), tuple(fn(B)))


# ---- integer settings: no silent truncation in the C calls ----


@pytest.mark.parametrize(
    "call",
    [
        lambda: mlt.set_cpu_threads(2**32 + 1),
        lambda: mlt.set_cpu_threads(2**31),
        lambda: mlt.eigh_backend(2**70),
        lambda: mlt.svd_backend(4, 2**64 + 4),
        lambda: mlt.qr_backend(4, 4, batch=2**63),
    ],
    ids=[
        "threads 2**32+1",
        "threads 2**31",
        "eigh_backend 2**70",
        "svd_backend n",
        "qr_backend batch",
    ],
)
def test_integer_arguments_out_of_range_raise(call):
    threads = mlt.get_cpu_threads()
    with pytest.raises((ValueError, OverflowError, TypeError), match=r"2\*\*(31|63) - 1"):
        call()
    assert mlt.get_cpu_threads() == threads


def test_integer_arguments_at_the_limit():
    threads = mlt.get_cpu_threads()
    try:
        mlt.set_cpu_threads(3)
        assert mlt.get_cpu_threads() == 3
    finally:
        mlt.set_cpu_threads(threads)
    assert mlt.eigh_backend(8, batch=2**40).startswith(("cpu:", "cuda:"))


@pytest.mark.parametrize("name", ["eigvalsh", "svdvals"])
def test_second_derivatives_match_torch_linalg(name):
    A = _func_case(name)
    got = torch.func.hessian(lambda X: (getattr(mlt, name)(X) ** 3).sum())(A.float())
    ref = torch.func.hessian(lambda X: (getattr(torch.linalg, name)(X) ** 3).sum())(A)
    _assert_close(got, ref, tol=2e-3)


def _double_backward(fn, loss, A):
    """d/dA of ||d loss / dA||^2: the gradient's own gradient through torch.autograd."""
    X = A.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(loss(fn, X), X, create_graph=True)
    (gg,) = torch.autograd.grad((g**2).sum(), X)
    return gg


@pytest.mark.parametrize("name", LOSSES, ids=list(LOSSES))
def test_double_backward_matches_torch_linalg(name):
    A = _func_case(name)
    got = _double_backward(getattr(mlt, name), LOSSES[name], A.float())
    ref = _double_backward(getattr(torch.linalg, name), LOSSES[name], A)
    _assert_close(got, ref, tol=2e-3)
