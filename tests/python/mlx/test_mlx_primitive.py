"""The decompositions as MLX primitives: laziness, mx.compile, mx.vmap, streams, the *_ex info
word, error texts, and the out-of-memory path (in a subprocess)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import metal_linalg as ml
import mlx.core as mx
import numpy as np
import pytest

CPU = mx.cpu


def sym_batch(shape, seed=0):
    b = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return mx.array((b + np.swapaxes(b, -1, -2)) / 2)


def test_calls_are_lazy_and_compose_with_mlx_ops():
    a = sym_batch((4, 5, 5))
    # Inside mx.compile and mx.vmap nothing may be evaluated: an eager op would raise there.
    f = mx.compile(lambda x: ml.eigvalsh(x) * 2 + 1)
    out = f(a)
    want = np.linalg.eigvalsh(np.array(a, dtype=np.float64)) * 2 + 1
    assert np.allclose(np.array(out), want, atol=1e-4)
    # One graph: MLX ops before and after ours, evaluated once.
    b = mx.array(np.random.default_rng(1).standard_normal((4, 6, 5)).astype(np.float32))
    q, r = ml.qr(b * 2.0)
    s = ml.svdvals(q @ r)  # = svdvals(2b)
    w, v = ml.eigh(mx.swapaxes(b, -1, -2) @ b)  # Gram matrix: w = s(b)^2
    mx.async_eval(s, w)
    mx.eval(s, w, v)
    sb = np.linalg.svd(np.array(b, dtype=np.float64), compute_uv=False)
    assert np.allclose(np.array(s), 2 * sb, rtol=1e-4, atol=1e-4)
    assert np.allclose(np.sort(np.array(w))[..., ::-1], sb**2, rtol=1e-4, atol=1e-3)


def test_compile_merges_identical_calls():
    a = sym_batch((3, 4, 4), 2)
    f = mx.compile(lambda x: ml.eigvalsh(x) + ml.eigvalsh(x))
    assert np.allclose(np.array(f(a)), 2 * np.array(ml.eigvalsh(a)), atol=1e-5)
    g = mx.compile(lambda x: ml.eigvalsh(x, UPLO="U") - ml.eigvalsh(x, UPLO="L"))
    assert np.allclose(np.array(g(a)), 0, atol=1e-5)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_vmap_over_any_axis(axis):
    base = np.random.default_rng(3).standard_normal((3, 5, 4, 2)).astype(np.float32)
    a = mx.array(base)
    # Mapped over `axis`, each slice is a matrix (or batch of matrices) of the remaining axes.
    got = mx.vmap(ml.svdvals, in_axes=axis)(a)
    moved = np.moveaxis(base.astype(np.float64), axis, 0)
    want = np.linalg.svd(moved, compute_uv=False)
    assert got.shape == want.shape
    assert np.allclose(np.array(got), want, atol=1e-4)


def test_vmap_multi_output_and_nested():
    a = sym_batch((2, 3, 4, 4), 4)
    w, v = mx.vmap(mx.vmap(ml.eigh))(a)
    w_ref, v_ref = ml.eigh(a)
    assert np.allclose(np.array(w), np.array(w_ref), atol=1e-6)
    assert np.allclose(np.abs(np.array(v)), np.abs(np.array(v_ref)), atol=1e-5)
    q, r = mx.vmap(ml.qr, in_axes=1)(
        mx.array(np.random.default_rng(5).standard_normal((6, 3, 4)).astype(np.float32))
    )
    assert q.shape == (3, 6, 4) and r.shape == (3, 4, 4)


def test_explicit_streams_and_default_device():
    a = sym_batch((2, 4, 4), 6)
    want = np.array(ml.eigvalsh(a))
    for s in (CPU, mx.Device(mx.cpu), mx.default_stream(mx.Device(mx.cpu)), mx.new_stream(mx.cpu)):
        assert np.allclose(np.array(ml.eigvalsh(a, stream=s)), want, atol=1e-6)
    with mx.stream(mx.new_stream(mx.cpu)):
        assert np.allclose(np.array(ml.eigvalsh(a)), want, atol=1e-6)
    with pytest.raises(TypeError, match="stream"):
        ml.eigvalsh(a, stream="cpu")


def test_placement_follows_the_stream():
    s = mx.new_stream(mx.cpu)
    assert ml._ops.ext.placement(1, 0, [8, 4, 4], s) == s
    if not mx.is_available(mx.gpu):
        assert ml.gpu_path() in ("none", "cuda")
        return
    g = mx.default_stream(mx.gpu)
    placed = ml._ops.ext.placement(1, 0, [16384, 8, 8], g)
    if ml.gpu_path() in ("cuda", "metal"):
        assert placed == g
    else:
        assert placed.device == mx.Device(mx.cpu)


def test_ex_variants_return_info():
    a = np.array(sym_batch((3, 4, 4), 7))
    a[1, 2, 1] = np.nan
    w, _, info = ml.eigh_ex(mx.array(a))
    assert info.dtype == mx.int32 and info.shape == (3,)
    info = np.array(info)
    assert info[0] & ml._ops.INFO_NONFINITE == 0 and info[2] & ml._ops.INFO_NONFINITE == 0
    assert info[1] & ml._ops.INFO_NONFINITE
    assert np.isnan(np.array(w)[1]).all() and np.isfinite(np.array(w)[[0, 2]]).all()
    assert (np.array(ml.eigvalsh_ex(mx.array(a))[1]) == info).all()
    b = np.random.default_rng(8).standard_normal((2, 5, 3)).astype(np.float32)
    b[0, 0, 0] = np.inf
    for out in (
        ml.svd_ex(mx.array(b)),
        ml.svdvals_ex(mx.array(b)),
        ml.qr_ex(mx.array(b)),
        ml.qr_ex(mx.array(b), mode="r"),
        ml.svd_ex(mx.array(b), False),
    ):
        info = np.array(out[-1])
        assert info.shape == (2,)
        assert info[0] & ml._ops.INFO_NONFINITE and not info[1] & ml._ops.INFO_NONFINITE
    assert len(ml.qr_ex(mx.array(b))) == 3 and len(ml.qr_ex(mx.array(b), mode="r")) == 2
    assert len(ml.svd_ex(mx.array(b))) == 4
    e = ml.eigh_ex(mx.zeros((0, 3, 3)))
    assert e[2].shape == (0,) and e[2].dtype == mx.int32


def test_small_calls_on_evaluated_input_match_the_graph_path():
    # An evaluated, row-contiguous input of a small call runs at once; an unevaluated one
    # (a * 1.0), a transposed view (symmetric, so the same values) and a call beyond the size
    # limit (a block of a larger batch) go through the graph node: the same kernel, so the
    # same bits, info words included.
    a = sym_batch((2, 6, 6), 11)
    big = mx.array(np.concatenate([np.array(a)] * 100))  # 200 x 6^3: beyond the limit
    mx.eval(a, big)
    calls = (
        lambda x: ml.qr_ex(x),
        lambda x: ml.qr_ex(x, mode="r"),
        lambda x: ml.eigh_ex(x, UPLO="U"),
        lambda x: ml.eigvalsh_ex(x),
        lambda x: ml.svd_ex(x),
        lambda x: ml.svdvals_ex(x),
    )
    for call in calls:
        now = [np.array(x) for x in call(a)]
        for other in (call(a * 1.0), call(mx.swapaxes(a, -1, -2))):
            for x, y in zip(now, other, strict=True):
                assert np.array_equal(x, np.array(y))
        for x, y in zip(now, call(big), strict=True):
            assert np.array_equal(x, np.array(y)[:2])
    # An evaluated array captured by a compiled function is a constant of its graph.
    f = mx.compile(lambda x: x + ml.eigvalsh(a))
    assert np.array_equal(np.array(f(mx.zeros((2, 6)))), np.array(ml.eigvalsh(a)))


def test_error_messages_have_one_prefix():
    with pytest.raises(ValueError) as err:
        ml.qr(mx.zeros((100000, 30000)))
    msg = str(err.value)
    assert msg.startswith("[metal_linalg.qr] ") and "metal_linalg::" not in msg
    assert msg.count("[metal_linalg") == 1


def test_core_errors_raise_at_the_call():
    # Sizes the core rejects are reported when the graph is built, not at evaluation.
    with pytest.raises(ValueError, match="more than 32-bit LAPACK addresses"):
        ml.eigvalsh(mx.zeros((50000, 50000)))


OOM_SCRIPT = textwrap.dedent(
    """
    import resource, sys
    import mlx.core as mx
    import numpy as np
    import metal_linalg as ml
    mx.set_default_device(mx.cpu)  # the core's host path; no GPU driver under the cap
    n = 6000
    a = mx.array(np.eye(n, dtype=np.float32))
    mx.eval(a)
    mx.eval(ml.eigvalsh(mx.eye(8)))  # thread pool and LAPACK loaded before the cap
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    cap = used + (64 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    try:
        mx.eval(ml.eigvalsh(a))
    except (MemoryError, RuntimeError) as e:
        print("raised", type(e).__name__, str(e))
        sys.exit(0)
    print("no error")
    """
)


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS and /proc are Linux's")
def test_out_of_memory_raises_instead_of_crashing():
    proc = subprocess.run(
        [sys.executable, "-c", OOM_SCRIPT], check=False, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.startswith("raised"), proc.stdout
    text = proc.stdout.lower()
    assert "memory" in text or "allocate" in text, proc.stdout
