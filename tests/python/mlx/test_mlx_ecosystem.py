"""The MLX package agrees with the torch package and with MLX: UPLO in either case, check_errors
on the *_ex functions, one clear error for the GPU stream on an MLX without a GPU, the backend
queries answering for the stream a call would run on, the core's warnings as
MetalLinalgWarning, cpu_only / set_cpu_only / gpu_core_count, and the mx.distributed example of
docs/mlx.md."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import metal_linalg as ml
import mlx.core as mx
import numpy as np
import pytest
import subproc
from metal_linalg import _queries

HAS_GPU = mx.is_available(mx.gpu)
DOCS = Path(__file__).resolve().parents[3] / "docs" / "mlx.md"
OPS = ("qr", "eigh", "eigvalsh", "svd", "svdvals")


@pytest.fixture(autouse=True)
def _clean():
    ml.set_cpu_only(False)
    yield
    ml.set_cpu_only(False)
    for op in OPS:
        getattr(ml, f"reset_{op}_policy")()


def _sym(batch, n, seed=0):
    a = np.random.default_rng(seed).standard_normal((batch, n, n)).astype(np.float32)
    return a + np.swapaxes(a, -1, -2)


# ---- argument spelling and _ex keywords ----


def test_uplo_either_case():
    a = np.tril(_sym(3, 5))  # only the lower triangle holds the matrix
    upper = np.swapaxes(a, -1, -2)
    for lo, up in (("L", "U"), ("l", "u")):
        w_lo = np.array(ml.eigvalsh(a, UPLO=lo))
        w_up = np.array(ml.eigvalsh(upper, UPLO=up))
        np.testing.assert_array_equal(w_lo, w_up)
    np.testing.assert_array_equal(np.array(ml.eigh(a, "l")[0]), np.array(ml.eigh(a, "L")[0]))
    with pytest.raises(ValueError, match="'L', 'U', 'l' or 'u'"):
        ml.eigh(a, UPLO="x")


def test_check_errors_on_every_ex_function():
    a = _sym(3, 4)
    a[1, 2, 1] = np.nan  # in the lower triangle, which eigh reads
    calls = {
        "qr_ex": lambda **k: ml.qr_ex(a, **k),
        "eigh_ex": lambda **k: ml.eigh_ex(a, **k),
        "eigvalsh_ex": lambda **k: ml.eigvalsh_ex(a, **k),
        "svd_ex": lambda **k: ml.svd_ex(a, **k),
        "svdvals_ex": lambda **k: ml.svdvals_ex(a, **k),
    }
    for name, call in calls.items():
        info = np.array(call()[-1]) & 0xFFFF  # check_errors=False: the info word only
        assert info[1] & ml._ops.INFO_NONFINITE and info[0] == 0 and info[2] == 0, name
        with pytest.raises(ml.LinAlgError, match=rf"\[metal_linalg.{name}\].*batch index 1"):
            call(check_errors=True)
    good = _sym(2, 4)
    _, _, info = ml.eigh_ex(good, check_errors=True)
    assert (np.array(info) & 0xFFFF).tolist() == [0, 0]
    assert issubclass(ml.LinAlgError, RuntimeError)


# ---- streams ----


@pytest.mark.skipif(HAS_GPU, reason="MLX without a GPU only")
def test_gpu_stream_without_gpu_is_one_clear_error():
    for stream in (mx.gpu, mx.Device(mx.gpu)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # and no warning before it
            with pytest.raises(ValueError, match=r"\[metal_linalg.eigh\].*no GPU backend"):
                ml.eigh(_sym(1, 4), stream=stream)
            with pytest.raises(ValueError, match=r"\[metal_linalg.qr_backend\].*no GPU"):
                ml.qr_backend(8, 8, stream=stream)
            with pytest.raises(ValueError, match="no GPU"):
                ml.eigh_backend(8, 4, device="gpu")


def test_stream_argument_is_checked():
    with pytest.raises(TypeError, match="stream must be None, an mx.Stream or an mx.Device"):
        ml.eigh(_sym(1, 4), stream=3)
    with pytest.raises(TypeError, match="stream must be None"):
        ml.svd_backend(8, 8, stream=3)
    with pytest.raises(TypeError, match="not both"):
        ml.svd_backend(8, 8, stream=mx.cpu, device="cpu")


def test_backend_names_the_route_of_the_cpu_stream():
    # Host data stays on the CPU (a measured table may send it to the GPU: the H200's does from
    # batch * n * n >= 1024 for eigh, and the CPU stream's calls go where the host route says).
    ml.set_eigh_policy(cpu_kernel_max_n=16, host_gpu_min_work=0)
    ml.set_qr_policy(cpu_kernel_max_n=0, host_gpu_min_work=0)
    streams = (mx.cpu, mx.Device(mx.cpu), mx.default_stream(mx.cpu), mx.new_stream(mx.cpu))
    if mx.default_device() == mx.cpu:  # None: MLX's default device (the GPU where there is one)
        streams = (None, *streams)
    for s in streams:
        assert ml.eigh_backend(16, 64, stream=s) == "cpu:kernel:eigh_tridiag_ql", s
        assert ml.eigh_backend(17, 64, stream=s) == "cpu:lapack", s
        assert ml.qr_backend(8, 8, 1024, stream=s) == "cpu:lapack", s
    assert ml.eigh_backend(16, 64, device="cpu") == "cpu:kernel:eigh_tridiag_ql"


def test_backend_on_a_gpu_stream_follows_the_graph_placement(monkeypatch):
    """The GPU-stream branch, with the stream and the compiled placement stubbed (no GPU here):
    a shape placed on the GPU names the GPU route, one placed on the CPU stream the host route."""
    gpu = type("S", (), {"device": mx.Device(mx.gpu)})()
    cpu = mx.default_stream(mx.cpu)
    seen = []
    monkeypatch.setattr(_queries, "resolve_stream", lambda s, name, warn=True: gpu)

    class Ext:
        backend = staticmethod(_queries.ext.backend)

        @staticmethod
        def placement(op, flags, shape, s):
            seen.append((op, tuple(shape)))
            return s if shape[0] >= 1024 else cpu

        @staticmethod
        def gpu_backend(op, m, n, batch):
            return "cuda:fake_kernel"

    monkeypatch.setattr(_queries, "ext", Ext)
    assert ml.eigh_backend(8, 4096, stream=mx.gpu) == "cuda:fake_kernel"
    assert ml.eigh_backend(8, 1, stream=mx.gpu) == Ext.backend(1, 8, 8, 1)
    assert ml.svd_backend(6, 3, 2048, stream=mx.gpu) == "cuda:fake_kernel"
    assert seen == [(1, (4096, 8, 8)), (1, (1, 8, 8)), (3, (2048, 6, 3))]


@pytest.mark.skipif(not (HAS_GPU and ml.gpu_path() == "cuda"), reason="needs mlx[cuda13] and a GPU")
def test_backend_on_the_cuda_gpu_stream_names_the_cuda_kernel():
    # Shapes the host-memory query answered "cpu:lapack" for while the call ran on the GPU.
    for op, dims in ((0, (32, 32, 16384)), (3, (700, 700, 2)), (0, (1024, 1024, 1))):
        query = getattr(ml, f"{OPS[op]}_backend")
        gpu = _queries.ext.gpu_backend(op, *dims)
        want = gpu if gpu.startswith("cuda:") else _queries.ext.backend(op, *dims)
        assert query(*dims, stream=mx.gpu) == want
        assert query(*dims) == want  # None: the default device, the GPU here
        assert query(*dims, stream=mx.cpu) == _queries.ext.backend(op, *dims)
    assert ml.qr_backend(32, 32, 16384, stream=mx.gpu).startswith("cuda:")
    assert ml.gpu_core_count() > 0


# ---- warnings ----


def _python(code: str, **env_extra):
    notice = {"METAL_LINALG_NO_CALIBRATION_NOTICE": "1"}
    return subproc.run(["-W", "always", "-c", code], notice, env_extra)


def test_core_warnings_are_python_warnings():
    r = _python(
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    import metal_linalg as ml\n"
        "print([(x.category.__name__, str(x.message)) for x in w])\n",
        METAL_LINALG_EIGH_GPU_MIN_BATCH="abc",
    )
    assert r.returncode == 0, r.stderr
    assert "('MetalLinalgWarning', \"[metal_linalg] METAL_LINALG_EIGH_GPU_MIN_BATCH='abc'" in (
        r.stdout
    ), r.stdout
    assert "METAL_LINALG_EIGH_GPU_MIN_BATCH" not in r.stderr  # not printed by the core


def test_settings_warning_points_at_the_callers_line():
    before = ml.get_cpu_threads()
    try:
        with pytest.warns(ml.MetalLinalgWarning, match="set_cpu_threads") as record:
            ml.set_cpu_threads(10**6)
        assert record[0].filename == __file__
    finally:
        ml.set_cpu_threads(before)


# ---- cpu_only, gpu_core_count ----


def test_cpu_only_setting_and_context_manager():
    assert ml.cpu_only() is False
    with ml.set_cpu_only(True):
        assert ml.cpu_only() is True
        with ml.set_cpu_only(False):
            assert ml.cpu_only() is False
        assert ml.cpu_only() is True
    assert ml.cpu_only() is False
    ml.set_cpu_only(True)
    assert ml.cpu_only()
    ml.set_cpu_only(False)
    with pytest.raises(TypeError, match="set_cpu_only"):
        ml.set_cpu_only("on")


def test_cpu_only_exact_backend_under_an_explicit_policy():
    ml.set_eigh_policy(cpu_kernel_max_n=16, host_gpu_min_work=1)
    a = _sym(64, 16)
    with ml.set_cpu_only(True):
        assert ml.eigh_backend(16, 64) == "cpu:kernel:eigh_tridiag_ql"
        assert ml.eigh_backend(17, 64, stream=mx.cpu) == "cpu:lapack"
        w = np.array(ml.eigvalsh(a))
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a.astype(np.float64)), atol=1e-4 * 16)


def test_gpu_core_count():
    count = ml.gpu_core_count()
    assert isinstance(count, int) and count >= 0
    if not ml.backends_available()["cuda"] and not ml.backends_available()["metal"]:
        assert count == 0


# ---- mx.distributed: the documented example ----


def test_docs_distributed_example_runs():
    text = DOCS.read_text()
    match = re.search(
        r"<!-- tested by test_mlx_ecosystem.py -->\s*```python\n(.*?)```", text, re.DOTALL
    )
    assert match, "docs/mlx.md lost its tested mx.distributed example"
    scope: dict = {}
    exec(compile(match.group(1), str(DOCS), "exec"), scope)  # noqa: S102 (the docs' own code)
    batch, w_all = np.array(scope["batch"]), np.array(scope["w_all"])
    assert w_all.shape == batch.shape[:2]
    ref = np.linalg.eigvalsh(batch.astype(np.float64))
    np.testing.assert_allclose(w_all, ref, atol=1e-4 * np.abs(ref).max())
