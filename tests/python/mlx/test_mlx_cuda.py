"""The primitives on MLX's GPU stream of a CUDA MLX (mlx[cuda13]): the core's CUDA kernels on
MLX's CUDA stream. Skipped without an MLX GPU or on an MLX flavour without a GPU path here.

The rest of tests/python/mlx runs on MLX's default device, which is the GPU on a CUDA MLX, so
running the whole folder there covers gradients, vmap, compile and the accuracy suites on the GPU
stream too (set METAL_LINALG_<OP>_BACKEND=gpu to send every shape a CUDA kernel covers to it).
The linear systems' suite (test_mlx_linsys.py) pins the CPU stream, so their GPU stream is tested
here: every op at n 8 to 300 (the SIMD and group lines, the blocked path) by LAPACK's ratios, a
failing matrix isolated, and gradients equal to the CPU stream's.
"""

from __future__ import annotations

import metal_linalg as ml
import mlx.core as mx
import numpy as np
import pytest
from _mlx_helpers import FAMILIES, THRESH, eigh_ratios, general, qr_ratios, svd_ratios, symmetric

pytestmark = pytest.mark.skipif(
    not (mx.is_available(mx.gpu) and ml.gpu_path() == "cuda"),
    reason="needs MLX's CUDA flavour with a GPU",
)

GPU = mx.gpu
CPU = mx.cpu


@pytest.fixture
def force_gpu():
    """Every shape a CUDA kernel covers goes to it (whatever the batch)."""
    ops = ("qr", "eigh", "eigvalsh", "svd", "svdvals")
    for op in ops:
        getattr(ml, f"set_{op}_policy")(gpu_min_batch=1)
    yield
    for op in ops:
        getattr(ml, f"reset_{op}_policy")()


def rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def sym(x):
    return (x + np.swapaxes(x, -1, -2)) / 2


def test_gpu_stream_runs_cuda_kernels():
    g = mx.default_stream(mx.gpu)
    assert ml._ops.ext.placement(1, 0, [16384, 8, 8], g) == g
    assert ml._ops.ext.gpu_backend(1, 8, 8, 16384).startswith("cuda:")


@pytest.mark.parametrize("n", [4, 8, 16, 33, 64])
def test_eigh_gpu_matches_cpu_stream(n, force_gpu):
    a = mx.array(sym(rand((64, n, n), n)))
    w, v = ml.eigh(a, stream=GPU)
    w_c = ml.eigvalsh(a, stream=CPU)
    assert np.allclose(np.array(w), np.array(w_c), atol=2e-5 * n)
    an, wn, vn = np.array(a, np.float64), np.array(w, np.float64), np.array(v, np.float64)
    for b in range(0, 64, 7):
        r = eigh_ratios(an[b], wn[b], vn[b])
        assert r["residual"] < THRESH["eig"] and r["orthogonality"] < THRESH["eig"], r


@pytest.mark.parametrize("family", FAMILIES)
def test_accuracy_families_on_gpu(family, force_gpu):
    rng = np.random.default_rng(FAMILIES.index(family))
    for n in (3, 8, 17, 32):
        a = np.stack([symmetric(family, n, rng) for _ in range(4)]).astype(np.float32)
        w, v = (np.array(x) for x in ml.eigh(mx.array(a), stream=GPU))
        for b in range(4):
            r = eigh_ratios(a[b], w[b], v[b])
            assert r["residual"] < THRESH["eig"] and r["orthogonality"] < THRESH["eig"], (
                family,
                n,
                r,
            )
        g = np.stack([general(family, n + 2, n, rng) for _ in range(4)]).astype(np.float32)
        u, s, vt = (np.array(x) for x in ml.svd(mx.array(g), stream=GPU))
        q, r_ = (np.array(x) for x in ml.qr(mx.array(g), stream=GPU))
        for b in range(4):
            assert all(x < THRESH["svd"] for x in svd_ratios(g[b], u[b], s[b], vt[b]).values())
            assert all(x < THRESH["qr"] for x in qr_ratios(g[b], q[b], r_[b]).values())


def test_nan_isolation_on_gpu(force_gpu):
    a = sym(rand((6, 8, 8), 1))
    a[2, 3, 1] = np.nan
    a[4, 0, 0] = np.inf
    w, v, info = ml.eigh_ex(mx.array(a), stream=GPU)
    w, v, info = np.array(w), np.array(v), np.array(info)
    bad = [2, 4]
    good = [0, 1, 3, 5]
    assert np.isnan(w[bad]).all() and np.isnan(v[bad]).all()
    assert np.isfinite(w[good]).all() and np.isfinite(v[good]).all()
    assert (info[bad] & ml._ops.INFO_NONFINITE).all() and not (
        info[good] & ml._ops.INFO_NONFINITE
    ).any()
    s = np.array(ml.svdvals(mx.array(a), stream=GPU))
    assert np.isnan(s[bad]).all() and np.isfinite(s[good]).all()


@pytest.mark.parametrize("n", [2, 4, 8])
def test_batch_of_131072_small_matrices(n):
    a = mx.array(sym(rand((131072, n, n), n)))
    w = ml.eigvalsh(a, stream=GPU)
    w_ref = ml.eigvalsh(a, stream=CPU)
    assert np.allclose(np.array(w), np.array(w_ref), atol=2e-5 * n)
    b = mx.array(rand((131072, n + 1, n), n + 1))
    s = ml.svdvals(b, stream=GPU)
    s_ref = np.linalg.svd(np.array(b, np.float64), compute_uv=False)
    assert np.allclose(np.array(s), s_ref, atol=2e-5 * n)


def test_graph_mixing_our_ops_and_mlx_ops_on_gpu():
    with mx.stream(GPU):
        x = mx.random.normal((4096, 8, 6), key=mx.random.key(0))
        gram = mx.swapaxes(x, -1, -2) @ x + 0.1 * mx.eye(6)
        w, v = ml.eigh(gram)
        recon = (v * w[..., None, :]) @ mx.swapaxes(v, -1, -2)
        err = mx.abs(recon - gram).max()
        s = ml.svdvals(x)
        # gram = x^T x + 0.1 I: its eigenvalues are the squared singular values of x plus 0.1.
        gap = mx.abs(mx.sort(s * s, axis=-1) + 0.1 - w).max()
        mx.eval(err, gap)
    assert err.item() < 1e-3 and gap.item() < 1e-3


def test_gradients_on_gpu_stream():
    a = sym(rand((8, 6, 6), 3))

    def loss(x):
        xs = (x + mx.swapaxes(x, -1, -2)) / 2
        return (ml.eigvalsh(xs, stream=GPU) ** 2).sum()

    g = mx.grad(loss)(mx.array(a))
    assert np.allclose(np.array(g), 2 * a, atol=1e-4)
    g = mx.vmap(mx.grad(lambda x: ml.svdvals(x, stream=GPU).sum()))(mx.array(rand((16, 5, 5), 4)))
    u, _, vt = np.linalg.svd(rand((16, 5, 5), 4).astype(np.float64))
    assert np.allclose(np.array(g), u @ vt, atol=1e-4)


def test_compile_on_gpu():
    f = mx.compile(lambda x: ml.eigvalsh(x, stream=GPU) * 2)
    a = mx.array(sym(rand((1024, 8, 8), 5)))
    assert np.allclose(np.array(f(a)), 2 * np.array(ml.eigvalsh(a, stream=CPU)), atol=2e-4)


# ---- the linear systems on the GPU stream ----

LINSYS_N = (8, 32, 64, 100, 300)  # SIMD / group lines, and the blocked path past the window
LINSYS_LIMIT = THRESH["linsys"]
ULP32 = 2.0**-23


def _spd(batch: int, n: int, seed: int) -> np.ndarray:
    """SPD matrices with condition up to about 1e4 (eigenvalues geometric in [1e-4, 1]), as
    float32 values in float64."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((batch, n, n)))
    w = 10.0 ** -np.linspace(0, 4, n)
    a = (q * w[None, None, :]) @ np.swapaxes(q, -1, -2)
    return ((a + np.swapaxes(a, -1, -2)) / 2).astype(np.float32).astype(np.float64)


def _general(batch: int, n: int, seed: int) -> np.ndarray:
    """Gaussian matrices plus graded ones (columns scaled over 2^-8 .. 2^8) in one batch."""
    a = np.random.default_rng(seed).standard_normal((batch, n, n))
    a[batch // 2 :] *= 2.0 ** np.linspace(-8, 8, n)
    return a.astype(np.float32).astype(np.float64)


def _norms(x: np.ndarray) -> np.ndarray:
    return np.abs(x).sum(axis=-2).max(axis=-1)


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _linsys_on(op: str, n: int, stream) -> None:
    """One op on `stream` for a batch of 8 n x n matrices: LAPACK's ratio per matrix."""
    batch = 8
    if op == "cholesky":
        a = _spd(batch, n, n)
        L = _f64(ml.cholesky(mx.array(a), stream=stream))
        assert np.allclose(L, np.tril(L))
        r = _norms(a - L @ np.swapaxes(L, -1, -2)) / (n * _norms(a) * ULP32)
    elif op == "lu_factor":
        a = _general(batch, n, n + 1)
        LU, piv = ml.lu_factor(mx.array(a), stream=stream)
        LU, piv = _f64(LU), np.asarray(piv)
        assert piv.dtype == np.int32 and piv.min() >= 1 and piv.max() <= n
        r = np.empty(batch)
        for i in range(batch):
            pa = a[i].copy()
            for k, p in enumerate(piv[i]):
                pa[[k, p - 1]] = pa[[p - 1, k]]
            low = np.tril(LU[i], -1) + np.eye(n)
            r[i] = _norms(pa - low @ np.triu(LU[i])) / (n * _norms(a[i]) * ULP32)
    elif op in ("solve", "solve_triangular"):
        a = _general(batch, n, n + 2)
        if op == "solve_triangular":
            a = np.triu(a) + np.sqrt(n) * np.eye(n)
        b = np.random.default_rng(n).standard_normal((batch, n, 3)).astype(np.float32)
        if op == "solve":
            x = _f64(ml.solve(mx.array(a), mx.array(b), stream=stream))
        else:
            x = _f64(ml.solve_triangular(mx.array(a), mx.array(b), upper=True, stream=stream))
        r = _norms(a @ x - b) / (_norms(a) * _norms(x) * n * ULP32)
    elif op in ("inv", "tri_inv", "cholesky_inv"):
        if op == "inv":
            a = _general(batch, n, n + 3)
            x = _f64(ml.inv(mx.array(a), stream=stream))
        elif op == "tri_inv":
            a = np.tril(_general(batch, n, n + 4)) + np.sqrt(n) * np.eye(n)
            x = _f64(ml.tri_inv(mx.array(a), stream=stream))
        else:
            a = _spd(batch, n, n + 5)
            L = np.linalg.cholesky(a).astype(np.float32).astype(np.float64)
            a = L @ np.swapaxes(L, -1, -2)
            x = _f64(ml.cholesky_inv(mx.array(L), stream=stream))
        r = _norms(a @ x - np.eye(n)) / (_norms(a) * _norms(x) * n * ULP32)
    else:
        raise AssertionError(op)
    assert np.isfinite(r).all() and float(r.max()) < LINSYS_LIMIT, (op, n, r)


@pytest.mark.parametrize("n", LINSYS_N)
@pytest.mark.parametrize(
    "op", ["cholesky", "lu_factor", "solve", "solve_triangular", "inv", "tri_inv", "cholesky_inv"]
)
def test_linsys_on_gpu_stream(op, n):
    """Each linear system on the GPU stream runs the core's CUDA lines (the route names them)
    and meets LAPACK's ratios."""
    route = {"tri_inv": "solve_triangular", "cholesky_inv": "solve_triangular"}.get(op, op)
    assert getattr(ml, f"{route}_backend")(n, 8, stream=GPU).startswith("cuda:")
    _linsys_on(op, n, GPU)


@pytest.mark.parametrize("n", [32, 300])
def test_linsys_failing_matrix_isolated_on_gpu_stream(n):
    """An indefinite and a NaN matrix in a batch on the GPU stream: info and NaN for those
    alone, the others as factored without them; the plain form raises naming the first."""
    a = _spd(6, n, 7)
    bad = a.copy()
    bad[2, 0, 0] = -1.0  # indefinite: the first minor fails
    bad[4, 1, 1] = np.nan
    L, info = ml.cholesky_ex(mx.array(bad), stream=GPU)
    L, info = np.asarray(L), np.asarray(info)
    assert info[2] == 1 and info[4] != 0 and (info[[0, 1, 3, 5]] == 0).all()
    assert np.isnan(L[2]).all() and np.isnan(L[4]).all()
    good = np.asarray(ml.cholesky(mx.array(a[[0, 1, 3, 5]]), stream=GPU))
    assert np.allclose(L[[0, 1, 3, 5]], good, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"batch index 2\) is not positive-definite"):
        mx.eval(ml.cholesky(mx.array(bad), stream=GPU))
    g = _general(4, n, 8)
    g[1] = 0.0  # exactly singular
    x, info = ml.solve_ex(mx.array(g), mx.array(np.ones((4, n), np.float32)), stream=GPU)
    x, info = np.asarray(x), np.asarray(info)
    assert info[1] > 0 and (info[[0, 2, 3]] == 0).all() and np.isnan(x[1]).all()
    assert np.isfinite(x[[0, 2, 3]]).all()


def test_linsys_gradients_on_gpu_stream_match_the_cpu_stream():
    """Gradients of solve (both sides), inv, cholesky and solve_triangular taken on the GPU
    stream equal the CPU stream's (those are checked against float64 torch autograd in
    test_mlx_linsys.py)."""
    n = 24
    a = mx.array(_general(4, n, 11).astype(np.float32) + 4 * np.eye(n, dtype=np.float32))
    s = mx.array(_spd(4, n, 12).astype(np.float32) + np.eye(n, dtype=np.float32))
    b = mx.array(np.random.default_rng(13).standard_normal((4, n, 2)).astype(np.float32))
    w = mx.array(np.random.default_rng(14).standard_normal((4, n, n)).astype(np.float32))

    def losses(stream):
        return {
            "solve": mx.grad(lambda x, y: ml.solve(x, y, stream=stream).sum(), (0, 1))(a, b),
            "solve_right": mx.grad(
                lambda x: ml.solve(x, mx.swapaxes(b, -1, -2), left=False, stream=stream).sum()
            )(a),
            "inv": mx.grad(lambda x: (ml.inv(x, stream=stream) * w).sum())(a),
            "cholesky": mx.grad(lambda x: (ml.cholesky(x, stream=stream) * w).sum())(s),
            "solve_triangular": mx.grad(
                lambda x: ml.solve_triangular(mx.triu(x), b, upper=True, stream=stream).sum()
            )(a),
        }

    on_gpu, on_cpu = losses(GPU), losses(CPU)
    for name, g in on_gpu.items():
        pairs = zip(g, on_cpu[name]) if isinstance(g, tuple | list) else [(g, on_cpu[name])]
        for x, y in pairs:
            x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
            scale = max(float(np.abs(y).max()), 1.0)
            assert np.abs(x - y).max() <= 1e-3 * scale, name


def test_two_step_node_in_order_inside_a_lazy_graph():
    """cholesky_inv (two triangular solves through a scratch matrix, one node) between MLX ops
    on the GPU stream, in one evaluation, repeated so that later calls' launches are captured
    into MLX's graph: its steps run in order and MLX's reader of its output waits for both."""
    n, batch = 64, 8
    a = _spd(batch, n, 31)
    L = np.linalg.cholesky(a).astype(np.float32)
    a = L.astype(np.float64) @ np.swapaxes(L.astype(np.float64), -1, -2)
    eye = np.eye(n)
    for k in range(4):
        Lm = mx.multiply(mx.array(L), 1.0, stream=GPU)  # made by MLX on the GPU, not on the host
        x = ml.cholesky_inv(Lm, stream=GPU)
        y = mx.matmul(mx.array(a.astype(np.float32)), x, stream=GPU)  # reads the output there
        x, y = _f64(x), _f64(y)
        r = _norms(y - eye) / (_norms(a) * _norms(x) * n * ULP32)
        assert np.isfinite(r).all() and float(r.max()) < LINSYS_LIMIT, (k, r)
        r_np = _norms(a @ x - eye) / (_norms(a) * _norms(x) * n * ULP32)
        assert float(r_np.max()) < LINSYS_LIMIT, (k, r_np)


@pytest.mark.parametrize("op", ["solve", "solve_triangular"])
def test_linsys_backend_query_by_right_hand_sides(op):
    """The GPU stream's query of an op with a right-hand side answers for the nrhs given: the
    lane launch for one column of B only (its lane fields are timed with one)."""
    getattr(ml, f"set_{op}_policy")(
        gpu_min_batch=1,
        gpu_simd_max_n=0,
        gpu_lane_max_n=16,
        gpu_lane_min_batch=64,
        gpu_blocked_min_n=1 << 30,
    )
    try:
        backend = getattr(ml, f"{op}_backend")
        assert backend(8, 4096, stream=GPU) == f"cuda:{op}_group/lane"
        assert backend(8, 4096, nrhs=1, stream=GPU) == f"cuda:{op}_group/lane"
        assert backend(8, 4096, nrhs=16, stream=GPU) == f"cuda:{op}_group"
        assert backend(8, 4096, nrhs=16, stream=CPU).startswith("cpu:")
    finally:
        getattr(ml, f"reset_{op}_policy")()
