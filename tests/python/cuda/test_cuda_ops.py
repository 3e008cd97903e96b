"""CUDA backend through metal_linalg_torch on CUDA tensors, and the C API with device pointers.

Runs on a machine with an NVIDIA GPU and a library built with the CUDA backend; skips elsewhere (CI).
Accuracy uses LAPACK's test ratios (docs/design.md section 7) computed in float64 against float64 references.
"""

from __future__ import annotations

import ctypes
import math

import _cuda
import pytest
from _cuda import DEV, OPS, _lib, backend, mlt, torch
from accuracy import THRESH, TINY, ULP

SQUARE_N = [*range(1, 10), 15, 16, 17, 24, 31, 32, 33, 40, 47, 48, 63, 64, 65, 96, 128]
RECT = [
    (2, 1),
    (1, 2),
    (8, 1),
    (1, 8),
    (17, 5),
    (5, 17),
    (64, 32),
    (32, 64),
    (33, 31),
    (31, 33),
    (100, 7),
    (7, 100),
    (128, 64),
    (64, 128),
    (256, 128),
]


@pytest.fixture(autouse=True, params=["block", "lane", "small", "simd"])
def _gpu_policy(request):
    """Route every call with device pointers to the GPU kernels wherever one covers the shape,
    in one of four ways (every test runs with each): a block of threads per matrix; a thread
    per matrix running the same kernels (lane); the register kernels of max(m, n) <= 8 where
    they exist, else the block kernels (small); the simdgroup kernels where they exist, else
    the block kernels (simd)."""
    mode = request.param
    on = {m: (1 << 20) if mode == m else 0 for m in ("lane", "small", "simd")}
    _cuda.set_policies(
        gpu_min_batch=1,
        gpu_max_n=1 << 20,
        gpu_lane_max_n=on["lane"],
        gpu_lane_min_batch=1,
        gpu_small_max_n=on["small"],
        gpu_simd_max_n=on["simd"],
    )
    for op in OPS:
        name = backend(op, 8, 8, 64)
        assert name.startswith("cuda:") and name.endswith("/lane") == (mode == "lane"), name
        if mode != "small":
            assert "_small" not in name, name
    yield
    _cuda.reset_policies()


def assert_gpu_for_small(op: str, m: int, n: int, batch: int) -> None:
    """Every op has a GPU kernel for max(m, n) <= 64; larger shapes may fall back."""
    name = backend(op, m, n, batch)
    if max(m, n) <= 64:
        assert name.startswith("cuda:"), f"{op} {m}x{n} x{batch} routed to {name}"


# ---- matrix families (LAPACK latms-like), built in float64 on the CPU ----


def _orth(n: int, gen: torch.Generator) -> torch.Tensor:
    if n == 0:
        return torch.zeros(0, 0, dtype=torch.float64)
    q, r = torch.linalg.qr(torch.randn(n, n, dtype=torch.float64, generator=gen))
    return q * torch.sign(torch.diagonal(r)).where(torch.diagonal(r) != 0, torch.ones(()))


def _spectrum(kind: str, k: int, gen: torch.Generator) -> torch.Tensor:
    if k == 0:
        return torch.zeros(0, dtype=torch.float64)
    i = torch.arange(k, dtype=torch.float64)
    if kind == "clustered":
        d = torch.full((k,), ULP, dtype=torch.float64)
        d[0] = 1.0
    elif kind == "geometric":
        d = ULP ** (i / max(k - 1, 1))
    elif kind == "arithmetic":
        d = 1.0 - (1.0 - ULP) * i / max(k - 1, 1)
    elif kind == "randlog":
        d = torch.exp(torch.rand(k, dtype=torch.float64, generator=gen) * math.log(ULP))
    elif kind == "rankdef":
        d = torch.rand(k, dtype=torch.float64, generator=gen) + 0.5
        d[k // 2 :] = 0.0
    elif kind == "repeated":
        d = torch.tensor([1.0, -1.0, 2.0], dtype=torch.float64).repeat(k)[:k]
    else:
        raise ValueError(kind)
    return d


SYM_FAMILIES = [
    "random",
    "zero",
    "identity",
    "diagonal",
    "clustered",
    "geometric",
    "arithmetic",
    "randlog",
    "graded",
    "rankdef",
    "repeated",
    "tiny",
    "huge",
]
GEN_FAMILIES = [
    "random",
    "zero",
    "identity",
    "clustered",
    "geometric",
    "randlog",
    "graded",
    "rankdef",
    "tiny",
    "huge",
]


def sym_family(kind: str, n: int, batch: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    out = torch.empty(batch, n, n, dtype=torch.float64)
    for b in range(batch):
        if kind in ("random", "tiny", "huge", "graded"):
            g = torch.randn(n, n, dtype=torch.float64, generator=gen)
            a = (g + g.T) / 2
            if kind == "tiny":
                a *= 1e-30
            elif kind == "huge":
                a *= 1e37 / max(n, 1)
            elif kind == "graded":
                d = 10.0 ** (-6.0 * torch.arange(n, dtype=torch.float64) / max(n - 1, 1))
                a = d[:, None] * a * d[None, :]
        elif kind == "zero":
            a = torch.zeros(n, n, dtype=torch.float64)
        elif kind == "identity":
            a = torch.eye(n, dtype=torch.float64)
        elif kind == "diagonal":
            a = torch.diag(torch.randn(n, dtype=torch.float64, generator=gen))
        else:
            d = _spectrum(kind, n, gen)
            sign = torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0).to(torch.float64)
            if kind != "repeated":
                d = d * sign
            q = _orth(n, gen)
            a = (q * d) @ q.T
            a = (a + a.T) / 2
        out[b] = a
    return out.to(torch.float32)


def gen_family(kind: str, m: int, n: int, batch: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    k = min(m, n)
    out = torch.empty(batch, m, n, dtype=torch.float64)
    for b in range(batch):
        if kind in ("random", "tiny", "huge", "graded"):
            a = torch.randn(m, n, dtype=torch.float64, generator=gen)
            if kind == "tiny":
                a *= 1e-30
            elif kind == "huge":
                a *= 1e37 / max(m, n, 1)
            elif kind == "graded":
                a = a * (10.0 ** (-6.0 * torch.arange(n, dtype=torch.float64) / max(n - 1, 1)))
        elif kind == "zero":
            a = torch.zeros(m, n, dtype=torch.float64)
        elif kind == "identity":
            a = torch.eye(m, n, dtype=torch.float64)
        else:
            s = _spectrum(kind, k, gen).abs()
            a = (_orth(m, gen)[:, :k] * s) @ _orth(n, gen)[:, :k].T
        out[b] = a
    return out.to(torch.float32)


def family_input(op: str, m: int, n: int, batch: int, family: str = "random", seed: int = 0):
    """A batch of the family for op: symmetric n x n for the eigensolvers, else m x n."""
    if op.startswith("eig"):
        return sym_family(family, n, batch, seed=seed)
    return gen_family(family, m, n, batch, seed=seed)


def ata(n: int, batch: int) -> torch.Tensor:
    """A^T A of a random A (seeded with n): eigenvalues clustered near 0, condition ~ n^2."""
    g = torch.randn(batch, n, n, dtype=torch.float64, generator=torch.Generator().manual_seed(n))
    return (g.mT @ g).float()


# ---- LAPACK ratios in float64 ----


def _norm1(x: torch.Tensor) -> torch.Tensor:
    """Per-matrix 1-norm (max column sum), as LAPACK's slange('1')."""
    if x.shape[-1] == 0 or x.shape[-2] == 0:
        return torch.zeros(x.shape[:-2], dtype=x.dtype, device=x.device)
    return x.abs().sum(-2).amax(-1)


def _eye_defect(x: torch.Tensor) -> torch.Tensor:
    eye = torch.eye(x.shape[-1], dtype=x.dtype, device=x.device)
    return _norm1(eye - x)


def _finite(*xs: torch.Tensor) -> None:
    for x in xs:
        assert torch.isfinite(x).all(), "non-finite output for finite input"


def check_eigh(a: torch.Tensor, w: torch.Tensor, v: torch.Tensor | None, what: str) -> None:
    a64 = a.double()
    n = a.shape[-1]
    if n == 0:
        return
    _finite(w)
    anorm = _norm1(a64).clamp_min(TINY)
    w64 = w.double()
    assert (w64[..., 1:] >= w64[..., :-1]).all(), f"{what}: eigenvalues not ascending"
    wref = torch.linalg.eigvalsh(a64.cpu()).to(w.device)
    werr = ((w64 - wref).abs().amax(-1) / (anorm * n * ULP)).max().item()
    assert werr <= THRESH["eig"], f"{what}: eigenvalue error ratio {werr:.1f}"
    if v is None:
        return
    _finite(v)
    v64 = v.double()
    res = _norm1(a64 - (v64 * w64[..., None, :]) @ v64.mT) / (anorm * n * ULP)
    orth = _eye_defect(v64.mT @ v64) / (n * ULP)
    assert res.max().item() <= THRESH["eig"], f"{what}: residual ratio {res.max().item():.1f}"
    assert orth.max().item() <= THRESH["eig"], (
        f"{what}: orthogonality ratio {orth.max().item():.1f}"
    )


def check_svd(
    a: torch.Tensor,
    u: torch.Tensor | None,
    s: torch.Tensor,
    vh: torch.Tensor | None,
    what: str,
) -> None:
    a64 = a.double()
    m, n = a.shape[-2:]
    if min(m, n) == 0:
        return
    _finite(s)
    anorm = _norm1(a64).clamp_min(TINY)
    s64 = s.double()
    assert (s64 >= 0).all(), f"{what}: negative singular value"
    assert (s64[..., 1:] <= s64[..., :-1]).all(), f"{what}: singular values not descending"
    sref = torch.linalg.svdvals(a64.cpu()).to(s.device)
    serr = ((s64 - sref).abs().amax(-1) / (anorm * max(m, n) * ULP)).max().item()
    assert serr <= THRESH["svd"], f"{what}: singular value error ratio {serr:.1f}"
    if u is None:
        return
    _finite(u, vh)
    u64, vh64 = u.double(), vh.double()
    res = _norm1(a64 - (u64 * s64[..., None, :]) @ vh64) / (anorm * max(m, n) * ULP)
    ou = _eye_defect(u64.mT @ u64) / (m * ULP)
    ov = _eye_defect(vh64 @ vh64.mT) / (n * ULP)
    for name, r in (
        ("residual", res),
        ("U orthogonality", ou),
        ("V orthogonality", ov),
    ):
        assert r.max().item() <= THRESH["svd"], f"{what}: {name} ratio {r.max().item():.1f}"


def check_qr(a: torch.Tensor, q: torch.Tensor | None, r: torch.Tensor, what: str) -> None:
    a64 = a.double()
    m, n = a.shape[-2:]
    if min(m, n) == 0:
        return
    _finite(r)
    assert (torch.tril(r, -1) == 0).all(), f"{what}: R not upper triangular"
    anorm = _norm1(a64).clamp_min(TINY)
    anorm_inf = a64.abs().sum(-1).amax(-1).clamp_min(TINY)
    r64 = r.double()
    # R alone: a backward-stable R satisfies R^T R = A^T A + O(ulp ||A||^2), whatever the row signs.
    gram = _norm1(a64.mT @ a64 - r64.mT @ r64) / (m * anorm * anorm_inf * ULP)
    assert gram.max().item() <= THRESH["qr"], (
        f"{what}: R^T R vs A^T A ratio {gram.max().item():.1f}"
    )
    if q is None:
        return
    _finite(q)
    q64 = q.double()
    res = _norm1(a64 - q64 @ r.double()) / (m * anorm * ULP)
    orth = _eye_defect(q64.mT @ q64) / (m * ULP)
    assert res.max().item() <= THRESH["qr"], f"{what}: residual ratio {res.max().item():.1f}"
    assert orth.max().item() <= THRESH["qr"], f"{what}: orthogonality ratio {orth.max().item():.1f}"


def call_op(op: str, a: torch.Tensor) -> tuple[torch.Tensor, ...]:
    if op == "qr":
        return tuple(mlt.qr(a))
    if op == "eigh":
        return tuple(mlt.eigh(a))
    if op == "eigvalsh":
        return (mlt.eigvalsh(a),)
    if op == "svd":
        return tuple(mlt.svd(a))
    return (mlt.svdvals(a),)


def check_outputs(op: str, a: torch.Tensor, outs: tuple[torch.Tensor, ...], what: str) -> None:
    if op == "qr":
        check_qr(a, outs[0], outs[1], what)
    elif op == "eigh":
        check_eigh(a, outs[0], outs[1], what)
    elif op == "eigvalsh":
        check_eigh(a, outs[0], None, what)
    elif op == "svd":
        check_svd(a, outs[0], outs[1], outs[2], what)
    else:
        check_svd(a, None, outs[0], None, what)


HARD_FAMILIES = ["graded", "clustered", "rankdef", "tiny", "huge"]


def check_family(op: str, m: int, n: int, batch: int, what: str, *, family="random", seed=0):
    """op on a batch of the family (family_input) on the GPU, checked with LAPACK's ratios;
    returns that batch."""
    a = family_input(op, m, n, batch, family=family, seed=seed).to(DEV)
    check_outputs(op, a, call_op(op, a), what)
    return a


def check_call(op: str, a: torch.Tensor, what: str) -> None:
    """op on a through metal_linalg_torch: float32 outputs on a's device, with LAPACK's ratios."""
    outs = call_op(op, a)
    for o in outs:
        assert o.device == a.device and o.dtype == torch.float32
    check_outputs(op, a, outs, what)


def run_op(op: str, a: torch.Tensor) -> None:
    """Runs op on the CUDA tensor a through metal_linalg_torch and checks shapes, device and ratios."""
    *bs, m, n = a.shape
    k = min(m, n)
    shapes = {
        "qr": [(*bs, m, k), (*bs, k, n)],
        "eigh": [(*bs, n), (*bs, n, n)],
        "eigvalsh": [(*bs, n)],
        "svd": [(*bs, m, k), (*bs, k), (*bs, k, n)],
        "svdvals": [(*bs, k)],
    }[op]
    outs = call_op(op, a)
    assert [tuple(o.shape) for o in outs] == shapes, (
        f"{op}: output shapes {[o.shape for o in outs]}"
    )
    for o in outs:
        assert o.device == a.device and o.dtype == torch.float32
    check_outputs(op, a, outs, f"{op} {tuple(a.shape)}")
    if op == "qr":
        r_only = mlt.qr(a, mode="r")[1]
        assert r_only.device == a.device and tuple(r_only.shape) == (*bs, k, n)
        check_qr(a, None, r_only, f"qr mode=r {tuple(a.shape)}")


# ---- tests ----


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", SQUARE_N)
def test_square_sizes(op: str, n: int) -> None:
    batch = 37
    if op in ("eigh", "eigvalsh"):
        a = sym_family("random", n, batch, seed=n)
    else:
        a = gen_family("random", n, n, batch, seed=n)
    assert_gpu_for_small(op, n, n, batch)
    run_op(op, a.to(DEV))


@pytest.mark.parametrize("op", ["qr", "svd", "svdvals"])
@pytest.mark.parametrize("mn", RECT, ids=[f"{m}x{n}" for m, n in RECT])
def test_tall_wide(op: str, mn: tuple[int, int]) -> None:
    m, n = mn
    a = gen_family("random", m, n, 19, seed=m * 1000 + n)
    assert_gpu_for_small(op, m, n, 19)
    run_op(op, a.to(DEV))


@pytest.mark.parametrize("op", ["eigh", "eigvalsh"])
@pytest.mark.parametrize("family", SYM_FAMILIES)
@pytest.mark.parametrize("n", [5, 16, 32, 33, 64])
def test_eig_families(op: str, family: str, n: int) -> None:
    run_op(op, sym_family(family, n, 6, seed=n).to(DEV))


@pytest.mark.parametrize("op", ["qr", "svd", "svdvals"])
@pytest.mark.parametrize("family", GEN_FAMILIES)
@pytest.mark.parametrize(
    "mn",
    [(5, 5), (16, 16), (32, 32), (48, 48), (64, 64), (64, 32), (32, 64)],
    ids=lambda mn: f"{mn[0]}x{mn[1]}",
)
def test_gen_families(op: str, family: str, mn: tuple[int, int]) -> None:
    m, n = mn
    run_op(op, gen_family(family, m, n, 6, seed=m + n).to(DEV))


@pytest.mark.parametrize("batch", [1, 2, 31, 32, 33, 1000, 70000, 131072])
def test_batch_edges(batch: int) -> None:
    """Batches that do not fill the last block, one larger than 65535 blocks of one matrix, and
    131072 matrices of 8x8 (torch.linalg.eigh raised CUSOLVER_STATUS_INTERNAL_ERROR there, as
    recorded in benchmarks/peers/h200.md)."""
    n = 8 if batch > 1000 else 24
    a = torch.randn(batch, n, n, device=DEV)
    run_op("eigh", a + a.mT)
    run_op("svd", a)
    run_op("qr", a)


def test_uplo_and_views() -> None:
    a = sym_family("random", 20, 8, seed=3).to(DEV)
    # The unused triangle holds finite garbage: the result must not depend on it.
    upper = torch.triu(a) + torch.tril(torch.full_like(a, 1e3), -1)
    w, v = mlt.eigh(upper, UPLO="U")
    check_eigh(a, w, v, "eigh UPLO=U")
    base = gen_family("random", 40, 30, 8, seed=5).to(DEV)
    view = base.mT[::2]  # non-contiguous, transposed
    run_op("svd", view)
    run_op("qr", view)
    big = torch.randn(4, 3, 12, 12, device=DEV)
    run_op("eigh", big + big.mT)  # several batch dimensions


@pytest.mark.parametrize("op", OPS)
def test_nonfinite_isolated(op: str) -> None:
    """A NaN or Inf matrix gives NaN for that matrix alone; its neighbours are unaffected."""
    n = 16
    if op in ("eigh", "eigvalsh"):
        a = sym_family("random", n, 5, seed=11)
    else:
        a = gen_family("random", n, n, 5, seed=11)
    a[1, 4, 3] = float("nan")  # lower triangle: the one eigh reads by default
    a[3, 0, 0] = float("inf")
    a = a.to(DEV)
    outs = call_op(op, a)
    for out in outs:
        assert out.device == a.device
        for bad in (1, 3):
            assert torch.isnan(out[bad]).all(), f"{op}: matrix {bad} not all NaN"
    good = [0, 2, 4]
    check_outputs(op, a[good], tuple(o[good] for o in outs), f"{op}: finite neighbours")


@pytest.mark.parametrize("op", ["svd", "svdvals"])
@pytest.mark.parametrize("mn", [(12, 12), (16, 16), (16, 5), (5, 13), (9, 9), (24, 17)])
def test_simd_pairs_match_alone(op: str, mn: tuple[int, int]) -> None:
    """On the simdgroup route, 16-lane groups put two matrices in one warp that sweep in step
    until both have converged: each matrix's outputs must be bitwise those of the same matrix
    alone (batch 1: its warp partner past the batch), whatever its neighbour (one converging at
    once, one needing many sweeps, a NaN matrix); an odd batch leaves the last one alone."""
    m, n = mn
    if not backend(op, m, n, 7).endswith("_simd"):
        pytest.skip("not the simdgroup route in this mode")
    fams = ["identity", "random", "zero", "graded", "clustered", "huge", "rankdef"]
    a = torch.cat([gen_family(f, m, n, 1, seed=i) for i, f in enumerate(fams)])
    a[2, 0, 0] = float("nan")
    a = a.to(DEV)
    together = call_op(op, a)
    for b in range(a.shape[0]):
        alone = call_op(op, a[b : b + 1].clone())
        for t, o in zip(together, alone):
            assert torch.equal(t[b : b + 1].isnan(), o.isnan()), f"{op} {mn} matrix {b}: NaN"
            same = torch.where(o.isnan(), torch.zeros_like(o), o)
            got = torch.where(t[b : b + 1].isnan(), torch.zeros_like(o), t[b : b + 1])
            assert torch.equal(got, same), f"{op} {mn} matrix {b}: differs from alone"
    good = [b for b in range(a.shape[0]) if b != 2]
    check_outputs(op, a[good], tuple(o[good] for o in together), f"{op} {mn} pairs")


def _route_jacobi_group() -> None:
    """svd and svdvals to their alternative group line (one-sided Jacobi in a group) at every
    size that reaches a group kernel, never the blocked path (on top of the mode's policy)."""
    for op in ("svd", "svdvals"):
        i = OPS.index(op)
        for field, value in (
            ("gpu_alt_min_n", 0),
            ("gpu_alt_max_n", 1 << 20),
            ("gpu_alt_max_batch", 1 << 40),
            ("gpu_blocked_min_n", 1 << 30),
        ):
            assert _lib.lib.ml_policy_set(i, field.encode(), value) == 0, (op, field)


JACOBI_SHAPES = [(33, 33), (64, 64), (100, 100), (128, 128), (96, 40), (40, 96), (200, 70)]


@pytest.mark.parametrize("op", ["svd", "svdvals"])
@pytest.mark.parametrize("mn", JACOBI_SHAPES, ids=[f"{m}x{n}" for m, n in JACOBI_SHAPES])
def test_jacobi_group_shapes(op: str, mn: tuple[int, int]) -> None:
    """The group Jacobi line under an explicit window: named in the route, right on random
    matrices of square, tall and wide shapes beyond the simdgroup kernel's 32."""
    m, n = mn
    _route_jacobi_group()
    name = backend(op, m, n, 5)
    assert name.split("/")[0] == f"cuda:{op}_jacobi_group", name
    run_op(op, gen_family("random", m, n, 5, seed=m * 7 + n).to(DEV))


@pytest.mark.parametrize("op", ["svd", "svdvals"])
@pytest.mark.parametrize("family", GEN_FAMILIES)
@pytest.mark.parametrize("mn", [(48, 48), (100, 60)], ids=["48x48", "100x60"])
def test_jacobi_group_families(op: str, family: str, mn: tuple[int, int]) -> None:
    """The group Jacobi line on the hard families (graded, clustered, rank-deficient, scaled)."""
    m, n = mn
    _route_jacobi_group()
    assert backend(op, m, n, 4).split("/")[0] == f"cuda:{op}_jacobi_group"
    run_op(op, gen_family(family, m, n, 4, seed=m + n).to(DEV))


def test_jacobi_group_nonfinite_and_values() -> None:
    """A NaN matrix gives NaN for that matrix only; svdvals' values are bitwise svd's (the same
    rotations without V)."""
    _route_jacobi_group()
    a = gen_family("random", 64, 64, 4, seed=5)
    a[1, 3, 7] = float("nan")
    a = a.to(DEV)
    u, s, vt = call_op("svd", a)
    (s2,) = call_op("svdvals", a)
    assert torch.isnan(s[1]).all() and torch.isnan(u[1]).all() and torch.isnan(vt[1]).all()
    good = [0, 2, 3]
    assert torch.equal(s[good], s2[good])
    check_outputs("svd", a[good], (u[good], s[good], vt[good]), "jacobi group, NaN neighbour")


def check_graph_replay(call, static, seeds, make, check, warmups: int = 1) -> None:
    """call(static) captured in a CUDA graph after `warmups` calls outside capture (one-time
    kernel set-up), then for each seed: make(seed) copied into static, the graph replayed and
    check(fresh, outputs of the captured call, seed)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmups):
            call(static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = tuple(call(static))
    for seed in seeds:
        fresh = make(seed)
        static.copy_(fresh)
        graph.replay()
        torch.cuda.synchronize()
        check(fresh, outs, seed)


def test_eigh_cuda_graph() -> None:
    """mlt.eigh captured in a CUDA graph, replayed on new data copied into the static input."""
    n, batch = 32, 256
    static = torch.empty(batch, n, n, device=DEV)
    static.copy_(sym_family("random", n, batch, seed=1).to(DEV))
    check_graph_replay(
        mlt.eigh,
        static,
        (2, 3, 4),
        lambda seed: sym_family("random", n, batch, seed=seed).to(DEV),
        lambda fresh, outs, seed: check_eigh(fresh, *outs, f"graph replay seed {seed}"),
        warmups=2,  # outside capture: kernel attributes, workspace pool
    )


# ---- the C API with device pointers (the backend's contract, independent of the frontend) ----


def _exec(stream: torch.cuda.Stream, workspace: torch.Tensor | None) -> _lib.MlExec:
    ex = _cuda.cuda_exec()
    ex.stream = stream.cuda_stream
    ex.workspace = workspace.data_ptr() if workspace is not None and workspace.numel() else None
    ex.workspace_bytes = workspace.numel() if workspace is not None else 0
    return ex


def c_ml_eigh():
    """The C API's ml_eigh with its signature: the package calls ml_run and declares no per-op
    entry point, and undeclared, ctypes would pass the addresses and 64-bit sizes as C ints."""
    fn = _lib.lib.ml_eigh
    fn.restype = ctypes.c_int32
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int32]
    fn.argtypes += [ctypes.c_void_p] * 3
    return fn


def _c_eigh(
    a: torch.Tensor,
    w: torch.Tensor,
    v: torch.Tensor,
    info: torch.Tensor,
    stream: torch.cuda.Stream,
) -> torch.Tensor:
    """Enqueues ml_eigh; returns the workspace, which must outlive the work (and a captured graph)."""
    batch, n = a.shape[0], a.shape[-1]
    ex = _exec(stream, None)
    ws = torch.empty(_cuda.workspace_size(ex, "eigh", batch, n), dtype=torch.uint8, device=DEV)
    ex = _exec(stream, ws)
    _lib.check(
        c_ml_eigh()(
            ctypes.byref(ex),
            a.data_ptr(),
            batch,
            n,
            0,
            w.data_ptr(),
            v.data_ptr(),
            info.data_ptr(),
        ),
        "eigh",
    )
    return ws


def test_c_api_no_host_sync() -> None:
    """The device-pointer path only enqueues: the host returns while earlier stream work still runs."""
    n, batch = 32, 512
    a = sym_family("random", n, batch, seed=7).to(DEV)
    w = torch.empty(batch, n, device=DEV)
    v = torch.empty(batch, n, n, device=DEV)
    info = torch.full((batch,), -1, dtype=torch.int32, device=DEV)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        _c_eigh(a, w, v, info, stream)  # warm-up: one-time kernel set-up happens here
        stream.synchronize()
        torch.cuda._sleep(2_000_000_000)  # about a second of GPU time ahead of the call
        before = torch.cuda.Event()
        before.record(stream)
        w.fill_(float("nan"))
        _c_eigh(a, w, v, info, stream)
        still_busy = not before.query()
    stream.synchronize()
    assert still_busy, "ml_eigh with device pointers waited for the stream"
    check_eigh(a, w, v, "C API eigh on a side stream")
    assert ((info & 0x3) == 0).all(), "info reports failure on finite input"


def test_c_api_graph_capture_and_info() -> None:
    """ml_eigh on device pointers inside torch's CUDA-graph capture; info is written on the device."""
    n, batch = 24, 64
    a = sym_family("random", n, batch, seed=9)
    a[5, 2, 2] = float("nan")
    a = a.to(DEV)
    w = torch.empty(batch, n, device=DEV)
    v = torch.empty(batch, n, n, device=DEV)
    info = torch.full((batch,), -1, dtype=torch.int32, device=DEV)
    _c_eigh(a, w, v, info, torch.cuda.current_stream())  # warm-up outside capture
    torch.cuda.synchronize()
    w.fill_(0.0)
    info.fill_(-1)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ws = _c_eigh(a, w, v, info, torch.cuda.current_stream())
    graph.replay()
    torch.cuda.synchronize()
    del ws
    assert info.device == a.device
    assert int(info[5]) & 0x2, "info of the NaN matrix lacks ML_INFO_NONFINITE"
    good = torch.arange(batch, device=DEV) != 5
    assert ((info[good] & 0x3) == 0).all()
    assert torch.isnan(w[5]).all()
    check_eigh(a[good], w[good], v[good], "C API eigh replayed from a graph")


def test_host_buffers_on_gpu() -> None:
    """Host tensors routed to the GPU (copy in/out) give the same quality as device tensors."""
    _cuda.set_policies(host_gpu_min_work=1)
    a = gen_family("random", 48, 48, 64, seed=13)
    assert backend("svd", 48, 48, 64, memory=_lib.ML_MEMORY_HOST).startswith("cuda:")
    u, s, vh = mlt.svd(a)
    assert u.device.type == "cpu"
    check_svd(a, u, s, vh, "svd of host tensors on the GPU")
    sym = sym_family("random", 48, 64, seed=14)
    w, v = mlt.eigh(sym)
    check_eigh(sym, w, v, "eigh of host tensors on the GPU")
