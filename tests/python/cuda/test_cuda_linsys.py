"""The linear systems' GPU kernels (core/kernels/linsys_*.h) on CUDA tensors, and their blocked
path beyond the kernels' window (core/src/blocked_linsys.cpp, n 256 to 1024 here): the core
routes device memory to them (by name, under an explicit policy), the torch package runs them on
the current stream without host copies, and the results meet LAPACK's ratios (docs/design.md
section 7) with a failing matrix isolated in its batch. Skips without a CUDA device (CI): the
kernels' logic is tested on the CPU runner (tests/kernels/test_linsys_kernels.cpp,
test_blocked_linsys.cpp); a CPU
tensor never reaches these kernels (host memory stays with LAPACK)."""

from __future__ import annotations

import _cuda  # noqa: F401 (the module-level skips)
import pytest
from _cuda import DEV, _lib, mlt, torch
from accuracy import THRESH, ULP

LIMIT = THRESH["linsys"]  # docs/design.md section 7
UNBOUNDED = (1 << 63) - 1

KERNELS = {
    "cholesky": "cuda:cholesky_group",
    "solve": "cuda:solve_group",
    "inv": "cuda:inv_group",
    "solve_triangular": "cuda:solve_triangular_group",
    "lu_factor": "cuda:lu_factor_group",
}


def route(op: str, n: int, batch: int) -> str:
    return _lib.text(_lib.lib.ml_backend(_lib.OP_ID[op], _lib.ML_MEMORY_CUDA, n, n, batch))


@pytest.fixture(autouse=True)
def gpu_policy():
    """Every shape to the GPU kernels, whatever the batch (an explicit policy: no tuned table
    or environment decides these tests' routes)."""
    for op in KERNELS:
        for field, value in (
            ("gpu_min_batch", 1),
            ("gpu_max_n", 1 << 20),
            ("gpu_lane_max_n", 0),
            # the SIMD lines (off by default where not yet timed on a GPU) and cholesky's
            # register-column lines (its gpu_alt window) on, so that these tests cover them
            ("gpu_simd_max_n", 1 << 20),
            ("gpu_simd_min_n", 0),
            ("gpu_alt_min_n", 33 if op == "cholesky" else 0),
            ("gpu_alt_max_n", 128 if op == "cholesky" else 0),
            ("gpu_alt_max_batch", UNBOUNDED),
            # the blocked path beyond the kernels' window only (a measured table may start it
            # inside, as the H200's does at small batches)
            ("gpu_blocked_min_n", 1 << 30),
            ("gpu_blocked_max_batch", UNBOUNDED),
        ):
            assert _lib.lib.ml_policy_set(_lib.OP_ID[op], field.encode(), value) == 0
    yield
    for op in KERNELS:
        _lib.lib.ml_policy_reset(_lib.OP_ID[op])


# The lines ahead of KERNELS' up to n = 128 under gpu_policy's settings.
SMALL = {
    "cholesky": lambda n: (
        "cuda:cholesky_simd" if n <= 32 else "cuda:cholesky_cols" + ("" if n <= 64 else "128")
    ),
    "solve_triangular": lambda n: "cuda:solve_triangular_simd" + ("" if n <= 64 else "128"),
}

LU_SIMD = ("lu_factor", "solve", "inv")


def _simd_line(op: str, n: int) -> str:
    """The LU SIMD line of n (n <= 64), by its register size."""
    return f"cuda:{op}_simd{16 if n <= 16 else 32 if n <= 32 else 64}"


@pytest.mark.parametrize("op", sorted(KERNELS))
@pytest.mark.parametrize("n", [8, 32, 64, 100, 128, 129])
def test_routes_to_the_kernel(op: str, n: int) -> None:
    want = KERNELS[op]
    if op in SMALL and n <= 128:
        want = SMALL[op](n)
    elif op in LU_SIMD and n <= 64:
        want = _simd_line(op, n)
    assert route(op, n, 1024) == want


def test_simd_windows() -> None:
    """The SIMD lines follow the policy's gpu_simd_max_n like the decompositions' SIMD lines."""
    for op in ("cholesky", "solve_triangular"):
        assert _lib.lib.ml_policy_set(_lib.OP_ID[op], b"gpu_simd_max_n", 0) == 0
    assert route("cholesky", 32, 16384) == "cuda:cholesky_group"  # below the alt window
    assert route("solve_triangular", 64, 4096) == "cuda:solve_triangular_group"


def _default_line(op: str, n: int, batch: int, pol: dict) -> str:
    """The line the core's rules (core/src/routing.cpp) give a CUDA tensor of n x n x batch
    under the resolved policy pol (n <= 128, within the kernels' shared window): the blocked
    path from gpu_blocked_min_n up to gpu_blocked_max_batch, then the SIMD line inside
    gpu_simd_min_n..gpu_simd_max_n, then cholesky's register-column line in its gpu_alt window,
    then the group line (a lane launch of it where gpu_lane_* say)."""
    if n >= pol["gpu_blocked_min_n"] and batch <= pol["gpu_blocked_max_batch"]:
        return f"cuda:blocked_{op}"
    simd_ok = pol["gpu_simd_min_n"] <= n <= pol["gpu_simd_max_n"]
    if simd_ok and op in LU_SIMD and n <= 64:
        return _simd_line(op, n)
    if simd_ok and (op == "solve_triangular" or (op == "cholesky" and n <= 32)):
        return SMALL[op](n)  # (cholesky_simd covers n <= 32 only)
    alt = pol["gpu_alt_min_n"] <= n <= pol["gpu_alt_max_n"] and batch <= pol["gpu_alt_max_batch"]
    if op == "cholesky" and alt:
        return "cuda:cholesky_cols" + ("" if n <= 64 else "128")
    lane = n <= pol["gpu_lane_max_n"] and batch >= pol["gpu_lane_min_batch"]
    return KERNELS[op] + ("/lane" if lane else "")


def test_default_routes() -> None:
    """Without settings the routes follow the machine's policy: on an NVIDIA H200 its measured
    table (core/tuned/NVIDIA_H200.policy: the SIMD lines where they won there), elsewhere the
    built-in one (the lines not timed on that GPU off: the group kernels, and cholesky_simd up
    to 32)."""
    for op in KERNELS:
        _lib.lib.ml_policy_reset(_lib.OP_ID[op])
    tuned = _lib.text(_lib.lib.ml_policy_source(_lib.OP_ID["inv"])).startswith("tuned:")
    if tuned and "H200" in torch.cuda.get_device_name(DEV):
        # The measured table's choices, named.
        assert route("inv", 64, 1024) == "cuda:inv_simd64"
        assert route("solve", 16, 1024) == "cuda:solve_simd16"
        assert route("solve", 8, 1024) == "cuda:solve_group"
        assert route("solve_triangular", 12, 1024) == "cuda:solve_triangular_group"
        assert route("cholesky", 64, 1) == "cuda:blocked_cholesky"
        assert route("cholesky", 48, 1024) == "cuda:cholesky_group"
    elif not tuned:
        assert route("cholesky", 32, 1024) == "cuda:cholesky_simd"
        assert route("cholesky", 48, 1024) == "cuda:cholesky_group"
        assert route("solve_triangular", 16, 1024) == "cuda:solve_triangular_group"
        for op in LU_SIMD:
            assert route(op, 16, 1024) == KERNELS[op]
    # Every shape of the grid by the policy's fields, whichever table applies.
    for op in KERNELS:
        pol = getattr(mlt, f"{op}_policy")()
        for n in (8, 12, 16, 24, 32, 48, 64, 96, 128):
            for batch in (1, 64, 1024, 16384):
                assert route(op, n, batch) == _default_line(op, n, batch, pol), (op, n, batch)


@pytest.mark.parametrize("op", ["solve", "solve_triangular"])
def test_lane_launch_by_right_hand_sides(op: str) -> None:
    """An op with a right-hand side takes the lane launch for one column of B only (its lane
    fields are timed with one); the package's query answers for the nrhs it is given."""
    oid = _lib.OP_ID[op]
    for field, value in (("gpu_simd_max_n", 0), ("gpu_lane_max_n", 16), ("gpu_lane_min_batch", 64)):
        assert _lib.lib.ml_policy_set(oid, field.encode(), value) == 0
    backend = getattr(mlt, f"{op}_backend")
    assert backend(8, 4096, device="cuda") == KERNELS[op] + "/lane" == route(op, 8, 4096)
    assert backend(8, 4096, nrhs=1, device="cuda") == KERNELS[op] + "/lane"
    for nrhs in (2, 16):
        assert backend(8, 4096, nrhs=nrhs, device="cuda") == KERNELS[op]
    assert backend(17, 4096, nrhs=1, device="cuda") == KERNELS[op]  # past gpu_lane_max_n


@pytest.mark.parametrize("op", LU_SIMD)
def test_lu_simd_window(op: str) -> None:
    """The LU SIMD lines follow gpu_simd_max_n / gpu_simd_min_n (outside: the group line)."""
    for n, line in ((1, 16), (16, 16), (17, 32), (32, 32), (33, 64), (64, 64)):
        assert route(op, n, 4096) == f"cuda:{op}_simd{line}"
    assert route(op, 65, 4096) == KERNELS[op]
    assert _lib.lib.ml_policy_set(_lib.OP_ID[op], b"gpu_simd_max_n", 32) == 0
    assert route(op, 32, 4096) == f"cuda:{op}_simd32"
    assert route(op, 33, 4096) == KERNELS[op]
    assert _lib.lib.ml_policy_set(_lib.OP_ID[op], b"gpu_simd_min_n", 17) == 0
    assert route(op, 16, 4096) == KERNELS[op]
    assert route(op, 17, 4096) == f"cuda:{op}_simd32"


def _ties(n: int, gen: torch.Generator) -> torch.Tensor:
    """P L U with U small integers (diagonal +-1..4), L unit lower in {-1, 0, 1}, P a random
    row order, L(i, k) left 0 wherever row i would sit above row k at step k (the interchanges
    followed as LAPACK makes them): every pivot column ties, isamax's first tied position is
    row k's, the multipliers are +-1 and the arithmetic exact, so the pivots and factors are
    LAPACK's whatever the order of the operations (tests/kernels/linsys_families.h, ties)."""

    def ri(lo: int, hi: int) -> int:
        return int(torch.randint(lo, hi + 1, (1,), generator=gen))

    lo = torch.zeros(n, n, dtype=torch.float64)
    up = torch.zeros(n, n, dtype=torch.float64)
    row = torch.randperm(n, generator=gen).tolist()  # row[p]: the row of L U at position p
    at = [0] * n
    for p, r in enumerate(row):
        at[r] = p
    init = list(at)
    for k in range(n):
        lo[k, k] = 1
        up[k, k] = ri(1, 4) * (1 if ri(0, 1) else -1)
        for j in range(k + 1, n):
            up[k, j] = ri(-4, 4)
        for i in range(k + 1, n):
            lo[i, k] = 0 if at[i] < at[k] else ri(-1, 1)
        q, pk = row[k], at[k]
        row[k], row[pk] = row[pk], row[k]
        at[q], at[k] = pk, k
    a = torch.empty(n, n, dtype=torch.float64)
    a[init] = lo @ up
    return a.float()


@pytest.mark.parametrize("n", [1, 2, 5, 8, 9, 16, 17, 31, 32, 33, 48, 63, 64])
@pytest.mark.parametrize("batch", [1, 3, 37])
def test_lu_simd_lines(n: int, batch: int) -> None:
    """lu_factor, solve (1, 7 and 20 right-hand sides, A X = B and X A = B) and inv on the SIMD
    lines: odd batches (sub-warp groups past the batch), LAPACK's pivots exactly on tied
    columns, a singular, a NaN and an Inf matrix (and a NaN in B) isolated in their batch."""
    gen = torch.Generator().manual_seed(1000 * n + batch)
    a = torch.randn(batch, n, n, generator=gen)
    if batch > 1:
        a[1] = _ties(n, gen)
    if batch > 2:
        a[2] = _ties(n, gen)
        a[2, :, n // 2] = 0  # singular: a zero column, info n // 2 + 1
    bad = {}
    if batch > 30:
        a[30, n // 3, n // 2] = float("nan")
        a[31, n - 1, 0] = float("-inf")
        bad = {30, 31}
    assert route("lu_factor", n, batch) == _simd_line("lu_factor", n)
    ref_lu, ref_piv, _ = torch.linalg.lu_factor_ex(a.nan_to_num())
    lu, piv, info = mlt.lu_factor_ex(a.to(DEV))
    lu, piv, info = lu.cpu(), piv.cpu(), info.cpu()
    sing = 2 if batch > 2 else -1
    for i in range(batch):
        if i in bad:
            assert info[i] == 0x40000000 and bool(lu[i].isnan().all())
            assert piv[i].tolist() == list(range(1, n + 1))
            continue
        assert info[i] == (n // 2 + 1 if i == sing else 0), i
        if i == 1:
            assert piv[i].tolist() == ref_piv[i].tolist()  # exact ties: isamax's choice
            assert bool((lu[i] == ref_lu[i]).all())  # exact arithmetic
        if i == 2:  # exact up to the zero column
            assert piv[i, : n // 2].tolist() == ref_piv[i, : n // 2].tolist()
        p, l, u = torch.lu_unpack(lu[i : i + 1].double(), piv[i : i + 1])
        ad = a[i : i + 1].double()
        if float(_norm1(ad)) > 0:  # (n = 1: the singular matrix is 0)
            assert _ratio(p @ l @ u - ad, n * _norm1(ad) * ULP) < LIMIT
    ok = [i for i in range(batch) if i not in bad and i != sing]
    for nrhs in (1, 7, 20):
        b = torch.randn(batch, n, nrhs, generator=gen)
        if batch > 30:
            b[33, 0, nrhs - 1] = float("nan")
        x, xinfo = mlt.solve_ex(a.to(DEV), b.to(DEV))
        x, xinfo = x.cpu(), xinfo.cpu()
        for i in range(batch):
            want = 0x40000000 if i in bad or i == 33 else n // 2 + 1 if i == sing else 0
            assert xinfo[i] == want, (i, nrhs)
            assert bool(x[i].isnan().all()) == (want != 0), (i, nrhs)
        good = [i for i in ok if i != 33]
        ad, xd, bd = a[good].double(), x[good].double(), b[good].double()
        assert _ratio(ad @ xd - bd, _norm1(ad) * _norm1(xd) * n * ULP) < LIMIT
        # X A = B (solve_right_simd*): B^T as the right-hand sides' rows.
        bt = b.mT.contiguous()
        x, xinfo = mlt.solve_ex(a.to(DEV), bt.to(DEV), left=False)
        x, xinfo = x.cpu(), xinfo.cpu()
        for i in range(batch):
            want = 0x40000000 if i in bad or i == 33 else n // 2 + 1 if i == sing else 0
            assert xinfo[i] == want and bool(x[i].isnan().all()) == (want != 0), (i, nrhs)
        xd, bd = x[good].double(), bt[good].double()
        assert _ratio(xd @ ad - bd, _norm1(ad) * _norm1(xd) * n * ULP) < LIMIT
    x, xinfo = mlt.inv_ex(a.to(DEV))
    x, xinfo = x.cpu(), xinfo.cpu()
    for i in range(batch):
        want = 0x40000000 if i in bad else n // 2 + 1 if i == sing else 0
        assert xinfo[i] == want and bool(x[i].isnan().all()) == (want != 0), i
    ad, xd = a[ok].double(), x[ok].double()
    eye = torch.eye(n, dtype=torch.float64)
    assert _ratio(ad @ xd - eye, n * _norm1(ad) * _norm1(xd) * ULP) < LIMIT


def test_cholesky_simd_window() -> None:
    """The SIMD line follows the policy's gpu_simd_max_n like the decompositions' SIMD lines."""
    op = _lib.OP_ID["cholesky"]
    assert _lib.lib.ml_policy_set(op, b"gpu_simd_max_n", 0) == 0
    assert route("cholesky", 32, 16384) == "cuda:cholesky_group"


def _norm1(x: torch.Tensor) -> torch.Tensor:
    return x.abs().sum(-2).amax(-1)


def _spd(batch: int, n: int) -> torch.Tensor:
    g = torch.randn(batch, n, n, device=DEV, dtype=torch.float64)
    return (g @ g.mT + n * torch.eye(n, device=DEV, dtype=torch.float64)).float()


@pytest.mark.parametrize("n", [8, 17, 32, 33, 64, 65, 97, 128])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(n: int, upper: bool) -> None:
    a = _spd(64, n)
    a[3] = -a[3]  # indefinite: info 1
    a[5, 0, 0] = float("nan")
    out, info = mlt.cholesky_ex(a, upper=upper)
    assert out.is_cuda and info.is_cuda
    info = info.cpu()
    assert (
        info[3] == 1 and info[5] != 0 and bool(out[3].isnan().all()) and bool(out[5].isnan().all())
    )
    ok = [i for i in range(64) if i not in (3, 5)]
    assert (info[ok] == 0).all()
    l = out[ok].double()
    lt = l.mT @ l if upper else l @ l.mT
    ad = a[ok].double()
    ratio = _norm1(ad - lt) / (n * _norm1(ad) * ULP)
    assert float(ratio.max()) < LIMIT


@pytest.mark.parametrize("n", [8, 33, 64, 128])
@pytest.mark.parametrize(("nrhs", "left"), [(1, True), (16, True), (16, False)])
def test_solve(n: int, nrhs: int, left: bool) -> None:
    a = torch.randn(256, n, n, device=DEV)
    b = torch.randn(256, n, nrhs, device=DEV) if left else torch.randn(256, nrhs, n, device=DEV)
    a[7] = 0  # singular: info 1, NaN
    x, info = mlt.solve_ex(a, b, left=left)
    info = info.cpu()
    assert info[7] == 1 and bool(x[7].isnan().all())
    ok = [i for i in range(256) if i != 7]
    ad, xd, bd = a[ok].double(), x[ok].double(), b[ok].double()
    r = ad @ xd - bd if left else xd @ ad - bd
    ratio = _norm1(r) / (_norm1(ad) * _norm1(xd) * n * ULP)
    assert float(ratio.max()) < LIMIT


@pytest.mark.parametrize("n", [8, 45, 64, 128])
def test_inv_and_lu_factor(n: int) -> None:
    a = torch.randn(128, n, n, device=DEV)
    x, info = mlt.inv_ex(a)
    assert bool((info == 0).all())
    ad, xd = a.double(), x.double()
    eye = torch.eye(n, device=DEV, dtype=torch.float64)
    ratio = _norm1(ad @ xd - eye) / (n * _norm1(ad) * _norm1(xd) * ULP)
    assert float(ratio.max()) < LIMIT
    lu, piv, info = mlt.lu_factor_ex(a)
    _, ref_piv = torch.linalg.lu_factor(a.cpu())
    assert piv.dtype == torch.int32 and bool((info == 0).all())
    assert float((piv.cpu() == ref_piv).float().mean()) > 0.99  # ties may round differently
    p, l, u = torch.lu_unpack(lu.double(), piv)
    ratio = _norm1(p @ l @ u - ad) / (n * _norm1(ad) * ULP)
    assert float(ratio.max()) < LIMIT


@pytest.mark.parametrize("n", [8, 16, 33, 64, 100, 128])
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize(("nrhs", "unit"), [(4, False), (17, False), (16, True)])
def test_solve_triangular(n: int, upper: bool, left: bool, nrhs: int, unit: bool) -> None:
    a = torch.randn(64, n, n, device=DEV) / n**0.5
    a = a + 2 * torch.eye(n, device=DEV)
    t = a.triu() if upper else a.tril()
    b = torch.randn(64, n, nrhs, device=DEV) if left else torch.randn(64, nrhs, n, device=DEV)
    t[5, n // 2, n // 2] = 0  # a zero on the diagonal: NaN unless unit
    b[6, 0, 0] = float("nan")  # non-finite B: NaN
    x = mlt.solve_triangular(t, b, upper=upper, left=left, unitriangular=unit)
    assert bool(x[6].isnan().all()) and bool(x[5].isnan().all()) != unit
    ok = [i for i in range(64) if i != 6 and (unit or i != 5)]
    assert not bool(x[ok].isnan().any())
    td = t[ok].double()
    if unit:
        td = td - torch.diag_embed(td.diagonal(dim1=-2, dim2=-1)) + torch.eye(n, device=DEV)
    xd, bd = x[ok].double(), b[ok].double()
    r = td @ xd - bd if left else xd @ td - bd
    ratio = _norm1(r) / (_norm1(td) * _norm1(xd) * n * ULP)
    assert float(ratio.max()) < LIMIT


# ---- the blocked path beyond the one-group kernels' window (core/src/blocked_linsys.cpp) ----

BLOCKED_N = [256, 300, 513, 1024]


@pytest.mark.parametrize("op", sorted(KERNELS))
@pytest.mark.parametrize("n", BLOCKED_N)
def test_large_n_routes_to_the_blocked_path(op: str, n: int) -> None:
    for batch in (1, 4):
        assert route(op, n, batch) == f"cuda:blocked_{op}"
    # The package's own query names it too.
    assert getattr(mlt, f"{op}_backend")(n, 1, device="cuda") == f"cuda:blocked_{op}"


def test_blocked_min_n_policy() -> None:
    """gpu_blocked_min_n moves the blocked path below the window; 0 turns it off (the shape
    then has no GPU plan without global launches: a CUDA tensor goes through host memory)."""
    op = _lib.OP_ID["cholesky"]
    assert _lib.lib.ml_policy_set(op, b"gpu_global_max_n", 0) == 0
    assert _lib.lib.ml_policy_set(op, b"gpu_blocked_min_n", 64) == 0
    assert route("cholesky", 100, 1) == "cuda:blocked_cholesky"
    assert _lib.lib.ml_policy_set(op, b"gpu_blocked_min_n", 0) == 0
    assert not route("cholesky", 300, 1).startswith("cuda:")


def _ratio(r: torch.Tensor, d: torch.Tensor) -> float:
    return float((_norm1(r) / d).max())


@pytest.mark.parametrize("n", BLOCKED_N)
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("upper", [False, True])
def test_blocked_cholesky(n: int, batch: int, upper: bool) -> None:
    torch.manual_seed(n)
    a = _spd(batch, n)
    if batch == 3:
        a[1] = -a[1]  # indefinite: info 1
        a[2, n - 1, 0] = float("nan")  # in the triangle read (lower) or not (upper)
    out, info = mlt.cholesky_ex(a, upper=upper)
    ref = torch.linalg.cholesky_ex(a.double().cpu(), upper=upper).info
    info = info.cpu()
    ok = [0]
    if batch == 3:
        assert info[1] == ref[1] == 1 and bool(out[1].isnan().all())
        if upper:  # the NaN lies in the triangle not read
            ok.append(2)
        else:
            assert info[2] == 0x40000000 and bool(out[2].isnan().all())
    assert bool((info[ok] == 0).all())
    l, ad = out[ok].double(), a[ok].double()
    if upper:
        assert bool((l.tril(-1) == 0).all())
    else:
        assert bool((l.triu(1) == 0).all())
    lt = l.mT @ l if upper else l @ l.mT
    if upper:
        ad = ad.triu() + ad.triu(1).mT
    else:
        ad = ad.tril() + ad.tril(-1).mT
    assert _ratio(ad - lt, n * _norm1(ad) * ULP) < LIMIT


@pytest.mark.parametrize("n", BLOCKED_N)
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize(("nrhs", "left"), [(1, True), (40, True), (40, False)])
def test_blocked_solve(n: int, batch: int, nrhs: int, left: bool) -> None:
    torch.manual_seed(n)
    a = torch.randn(batch, n, n, device=DEV)
    b = torch.randn(batch, n, nrhs, device=DEV) if left else torch.randn(batch, nrhs, n, device=DEV)
    ok = list(range(batch))
    if batch == 3:
        a[1, :, n // 3] = 0  # singular: a zero column, info n // 3 + 1, NaN
        b[2, 0, 0] = float("inf")  # non-finite B
        ok = [0]
    x, info = mlt.solve_ex(a, b, left=left)
    info = info.cpu()
    if batch == 3:
        assert info[1] == n // 3 + 1 and bool(x[1].isnan().all())
        assert info[2] == 0x40000000 and bool(x[2].isnan().all())
    assert bool((info[ok] == 0).all())
    ad, xd, bd = a[ok].double(), x[ok].double(), b[ok].double()
    r = ad @ xd - bd if left else xd @ ad - bd
    assert _ratio(r, _norm1(ad) * _norm1(xd) * n * ULP) < LIMIT


@pytest.mark.parametrize("n", BLOCKED_N)
@pytest.mark.parametrize("batch", [1, 3])
def test_blocked_inv_lu_factor_det(n: int, batch: int) -> None:
    torch.manual_seed(n)
    a = torch.randn(batch, n, n, device=DEV)
    x, info = mlt.inv_ex(a)
    assert bool((info == 0).all())
    ad, xd = a.double(), x.double()
    eye = torch.eye(n, device=DEV, dtype=torch.float64)
    assert _ratio(ad @ xd - eye, n * _norm1(ad) * _norm1(xd) * ULP) < LIMIT
    lu, piv, info = mlt.lu_factor_ex(a)
    _, ref_piv = torch.linalg.lu_factor(a.cpu())
    assert piv.dtype == torch.int32 and bool((info == 0).all())
    # The first pivot is the column's largest entry (no rounding before it); later ones may
    # differ from LAPACK's after a near tie (and then differ on), so they are only in range.
    piv = piv.cpu()
    assert bool((piv[:, 0] == ref_piv[:, 0]).all())
    rows = torch.arange(1, n + 1, dtype=torch.int32)
    assert bool(((piv >= rows) & (piv <= n)).all())
    p, l, u = torch.lu_unpack(lu.double(), piv.to(DEV))
    assert _ratio(p @ l @ u - ad, n * _norm1(ad) * ULP) < LIMIT
    # slogdet from the blocked LU: within ten times LAPACK's own float32 error (+ 1e-4).
    sign, logabs = mlt.slogdet(a)
    rsign, rlogabs = torch.linalg.slogdet(ad)
    _, lapack32 = torch.linalg.slogdet(a.cpu())
    tol = 10 * float((lapack32.double() - rlogabs.cpu()).abs().max()) + 1e-4
    assert bool((sign.double() == rsign).all())
    assert float((logabs.double() - rlogabs).abs().max()) < tol


@pytest.mark.parametrize("n", [300, 513])
def test_blocked_lu_factor_keeps_a_singular_factorization(n: int) -> None:
    torch.manual_seed(n)
    a = torch.randn(2, n, n, device=DEV)
    a[1, :, 7] = 0  # a zero column: U[7, 7] = 0 exactly, info 8, the factors kept
    lu, piv, info = mlt.lu_factor_ex(a)
    assert info.cpu().tolist() == [0, 8]
    p, l, u = torch.lu_unpack(lu.double(), piv)
    ad = a.double()
    assert _ratio(p @ l @ u - ad, n * _norm1(ad) * ULP) < LIMIT


@pytest.mark.parametrize("n", BLOCKED_N)
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [False, True])
def test_blocked_solve_triangular(n: int, upper: bool, left: bool) -> None:
    torch.manual_seed(n)
    a = torch.randn(3, n, n, device=DEV) / n**0.5
    a = a + 2 * torch.eye(n, device=DEV)
    t = a.triu() if upper else a.tril()
    t[2, n // 2, n // 2] = 0  # a zero on the diagonal: info n // 2 + 1, NaN
    b = torch.randn(3, n, 33, device=DEV) if left else torch.randn(3, 33, n, device=DEV)
    x = mlt.solve_triangular(t, b, upper=upper, left=left)
    assert bool(x[2].isnan().all()) and not bool(x[:2].isnan().any())
    td, xd, bd = t[:2].double(), x[:2].double(), b[:2].double()
    r = td @ xd - bd if left else xd @ td - bd
    assert _ratio(r, _norm1(td) * _norm1(xd) * n * ULP) < LIMIT


@pytest.mark.parametrize(
    "env",
    [
        {"METAL_LINALG_LS_LU_LEAF": "1"},
        {"METAL_LINALG_LS_LU_LEAF": "1", "METAL_LINALG_LS_LU_LOOKAHEAD": "1"},
        {
            "METAL_LINALG_LS_LU_LEAF": "1",
            "METAL_LINALG_LS_LU_LOOKAHEAD": "1",
            "METAL_LINALG_LS_LU_NB": "128",
        },
        {"METAL_LINALG_LS_LU_LEAF": "0", "METAL_LINALG_LS_LU_LOOKAHEAD": "1"},
        # the fused register panels (the default; whatever ls_lu_ib_min_m) and the three
        # launches they replace
        {"METAL_LINALG_LS_LU_FUSE": "1"},
        {"METAL_LINALG_LS_LU_FUSE": "0"},
        {"METAL_LINALG_LS_LU_FUSE": "1", "METAL_LINALG_LS_LU_LOOKAHEAD": "1"},
        # the diagonal blocks' triangular solves a vector a lane
        {"METAL_LINALG_LS_TRSM_LANE": "1"},
        {"METAL_LINALG_LS_TRSM_LANE": "1", "METAL_LINALG_LS_LU_FUSE": "1"},
    ],
)
@pytest.mark.parametrize("n", [513, 1024, 2048])
def test_blocked_lu_leaves_and_lookahead(n: int, env: dict, monkeypatch) -> None:
    """LU's panels as leaves in one launch, the fused register panels, the triangular solves a
    vector a lane and the lookahead on the side stream (read per call from the environment): a
    fine matrix, a singular one (factors kept, info), a NaN one (NaN
    factors, pivots 1..n) in one batch; the factors' ratio, the first pivot as LAPACK's, and a
    solve through the same LU."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    torch.manual_seed(n)
    a = torch.randn(3, n, n, device=DEV)
    a[1, :, n // 2] = 0  # info n // 2 + 1
    a[2, 3, 5] = float("nan")
    lu, piv, info = mlt.lu_factor_ex(a)
    assert info.cpu().tolist()[:2] == [0, n // 2 + 1] and info[2] == 0x40000000
    assert bool(lu[2].isnan().all()) and not bool(lu[:2].isnan().any())
    piv = piv.cpu()
    assert piv[2].tolist() == list(range(1, n + 1))
    _, ref_piv = torch.linalg.lu_factor(a[:1].cpu())
    assert int(piv[0, 0]) == int(ref_piv[0, 0])
    rows = torch.arange(1, n + 1, dtype=torch.int32)
    assert bool(((piv[:2] >= rows) & (piv[:2] <= n)).all())
    p, l, u = torch.lu_unpack(lu[:2].double(), piv[:2].to(DEV))
    ad = a[:2].double()
    assert _ratio(p @ l @ u - ad, n * _norm1(ad) * ULP) < LIMIT
    b = torch.randn(1, n, 3, device=DEV)
    x = mlt.solve(a[:1], b)
    r = a[:1].double() @ x.double() - b.double()
    assert _ratio(r, _norm1(a[:1].double()) * _norm1(x.double()) * n * ULP) < LIMIT
