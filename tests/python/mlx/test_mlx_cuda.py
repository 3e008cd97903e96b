"""The primitives on MLX's GPU stream of a CUDA MLX (mlx[cuda13]): the core's CUDA kernels on
MLX's CUDA stream. Skipped without an MLX GPU or on an MLX flavour without a GPU path here.

The rest of tests/python/mlx runs on MLX's default device, which is the GPU on a CUDA MLX, so
running the whole folder there covers gradients, vmap, compile and the accuracy suites on the GPU
stream too (set METAL_LINALG_<OP>_BACKEND=gpu to send every shape a CUDA kernel covers to it).
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
