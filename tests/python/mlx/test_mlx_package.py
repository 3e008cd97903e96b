"""metal_linalg's queries, policies, calibration notice, MLX version check, the
no-torch rule and the command line."""

from __future__ import annotations

import json
import os

import metal_linalg as ml
import mlx.core as mx
import pytest
import subproc
from _mlx_helpers import POLICY_OPS
from metal_linalg import _loader

OPS = POLICY_OPS  # every op has a routing policy
FIELDS = {"cpu_kernel_max_n", "gpu_min_batch", "gpu_max_n", "host_gpu_min_work"}


def run_python(code: str, env_extra: dict | None = None, timeout: int = 120):
    return subproc.run(["-c", code], env_extra, timeout=timeout, cwd=os.path.dirname(__file__))


# ---- MLX version check ----


def test_version_mismatch_raises_import_error_naming_both():
    with pytest.raises(ImportError) as err:
        _loader.check_mlx_version("0.32.4", "0.33.1")
    assert "0.32.4" in str(err.value) and "0.33.1" in str(err.value)
    with pytest.raises(ImportError):
        _loader.check_mlx_version("0.32.4", "0.32.5")


def test_version_match_passes():
    _loader.check_mlx_version("0.32.4", "0.32.4")
    _loader.check_mlx_version("0.32.4", "0.32.4.dev20261001+abcdef")
    assert _loader._build_info.MLX_VERSION == mx.__version__
    assert _loader.ext.MLX_VERSION == mx.__version__


# ---- queries ----


def test_device_and_versions():
    assert isinstance(ml.device_name(), str) and ml.device_name()
    assert ml.version()
    assert ml.backends_available()["cpu"] is True
    assert ml.lapack_info()


@pytest.mark.parametrize("op", OPS)
def test_policy_get_set_reset(op):
    pol = getattr(ml, f"{op}_policy")()
    assert FIELDS <= set(pol) and all(isinstance(v, int) for v in pol.values())
    source = getattr(ml, f"{op}_policy_source")()
    assert source.startswith(("env:", "tuned:", "default:"))
    getattr(ml, f"set_{op}_policy")(cpu_kernel_max_n=0)
    try:
        assert getattr(ml, f"{op}_policy")()["cpu_kernel_max_n"] == 0
        assert getattr(ml, f"{op}_policy_source")() == "user"
        backend = getattr(ml, f"{op}_backend")
        square = op.startswith("eig") or op in ml._queries.LINSYS_OPS
        args = (4, 1) if square else (4, 4, 1)
        assert backend(*args, stream=mx.cpu) == "cpu:lapack"
        with pytest.raises(ValueError, match="unknown field"):
            getattr(ml, f"set_{op}_policy")(no_such_field=1)
        with pytest.raises(TypeError):
            getattr(ml, f"set_{op}_policy")(cpu_kernel_max_n="8")
    finally:
        getattr(ml, f"reset_{op}_policy")()
    assert getattr(ml, f"{op}_policy_source")() == source
    assert getattr(ml, f"{op}_policy")() == pol


def test_backend_queries():
    # Host data under an explicitly set policy: never sent to a GPU (host_gpu_min_work=0), the
    # CPU backend's own kernels up to n = 16 (register kernels below their own caps), else LAPACK;
    # asked for the CPU stream (the default stream is the GPU's where MLX has one).
    ops = ("qr", "eigh", "eigvalsh", "svd", "svdvals")
    try:
        for op in ops:
            getattr(ml, f"set_{op}_policy")(host_gpu_min_work=0, cpu_kernel_max_n=16)
        assert ml.qr_backend(64, 32, stream=mx.cpu) == "cpu:lapack"
        assert ml.qr_backend(16, 16, 64, stream=mx.cpu) == "cpu:kernel:qr_householder"
        assert ml.qr_backend(8, 8, 64, stream=mx.cpu) == "cpu:kernel:qr_householder_small"
        assert ml.svd_backend(8, 8, 1024, stream=mx.cpu) == "cpu:kernel:svd_bidiag_qr"
        assert ml.svd_backend(5, 5, 1024, stream=mx.cpu) == "cpu:kernel:svd_jacobi_small"
        assert ml.svdvals_backend(3, 5, stream=mx.cpu) == "cpu:kernel:svd_bidiag_qr"
        assert ml.eigh_backend(16, 64, stream=mx.cpu) == "cpu:kernel:eigh_tridiag_ql"
        assert ml.eigvalsh_backend(300, stream=mx.cpu) == "cpu:lapack"
    finally:
        for op in ops:
            getattr(ml, f"reset_{op}_policy")()
    with pytest.raises(ValueError):
        ml.eigh_backend(0)
    with pytest.raises(ValueError):
        ml.qr_backend(4, 4, batch=0)


def test_calibration_status():
    status = ml.calibration_status()
    assert set(status) == set(OPS)
    assert set(status.values()) <= {"tuned", "untuned"}


def test_cpu_threads():
    before = ml.get_cpu_threads()
    try:
        ml.set_cpu_threads(1)
        assert ml.get_cpu_threads() == 1
        assert ml.eigvalsh([[2.0, 1.0], [1.0, 2.0]]).tolist() == pytest.approx([1.0, 3.0])
    finally:
        ml.set_cpu_threads(before)
    with pytest.raises(ValueError):
        ml.set_cpu_threads(-1)


# ---- import-time behaviour (fresh interpreters) ----


def test_calibration_warning_names_the_untuned_ops_once_and_is_silenced():
    code = (
        "import warnings, json\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as rec:\n"
        "    import metal_linalg as ml\n"
        "hits = [str(w.message) for w in rec if w.category is ml.CalibrationWarning]\n"
        "print(json.dumps({'hits': hits, 'status': ml.calibration_status()}))\n"
    )
    env = {"METAL_LINALG_POLICY_FILE": os.path.join(os.path.dirname(__file__), "no-such.policy")}
    out = run_python(code, env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(data["status"]) == set(OPS)
    untuned = [op for op, s in data["status"].items() if s != "tuned"]
    if not untuned:
        assert data["hits"] == []
    else:
        [text] = data["hits"]  # one warning, however many ops
        which = (
            "every op uses"
            if len(untuned) == len(OPS)
            else f"{', '.join(untuned)} use"
            if len(untuned) > 1
            else f"{untuned[0]} uses"
        )
        assert text.startswith(f"metal_linalg: {which} untuned defaults on "), text
    out = run_python(code, {**env, "METAL_LINALG_NO_CALIBRATION_NOTICE": "1"})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["hits"] == []


def test_environment_overrides_policy():
    code = (
        "import metal_linalg as ml, mlx.core as mx\n"
        "print(ml.eigh_policy_source(), ml.eigh_policy()['cpu_kernel_max_n'],"
        " ml.eigh_backend(4, stream=mx.cpu))\n"
    )
    out = run_python(
        code, {"METAL_LINALG_EIGH_CPU_KERNEL_MAX_N": "0", "METAL_LINALG_NO_CALIBRATION_NOTICE": "1"}
    )
    assert out.returncode == 0, out.stderr
    source, value, backend = out.stdout.split()
    assert source.startswith("env:") and value == "0" and backend == "cpu:lapack"


def test_blocked_max_batch_round_trips(tmp_path):
    """gpu_blocked_max_batch: unbounded by default (or the machine's measured table's value),
    set / reset per op, from the environment and from a policy file."""
    path = tmp_path / "machine.policy"
    path.write_text("svd gpu_blocked_max_batch 32\n")
    code = (
        "import json, metal_linalg as ml\n"
        "r = [ml.device_name(), ml.svdvals_policy()['gpu_blocked_max_batch'],\n"
        "     ml.svd_policy()['gpu_blocked_max_batch'], ml.svd_policy_source(),\n"
        "     ml.eigh_policy()['gpu_blocked_max_batch'], ml.eigh_policy_source()]\n"
        "ml.set_svdvals_policy(gpu_blocked_max_batch=5)\n"
        "r += [ml.svdvals_policy()['gpu_blocked_max_batch'], ml.svdvals_policy_source()]\n"
        "ml.reset_svdvals_policy()\n"
        "r += [ml.svdvals_policy()['gpu_blocked_max_batch'], ml.svdvals_policy_source()]\n"
        "print(json.dumps(r))\n"
    )
    out = run_python(
        code,
        {
            "METAL_LINALG_POLICY_FILE": str(path),
            "METAL_LINALG_EIGH_GPU_BLOCKED_MAX_BATCH": "16",
            "METAL_LINALG_NO_CALIBRATION_NOTICE": "1",
        },
    )
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    unbounded = 2**63 - 1
    # svdvals is not in the file: the built-in value, or where the machine has a measured table
    # (the H200: 8) that table's, which the reset returns to.
    if r[9].startswith("tuned:"):
        assert 1 <= r[1] < unbounded
    else:
        assert r[1] == unbounded and r[9] == "default:untuned-device"
    assert r[2] == 32 and r[3].startswith("tuned:")
    assert r[4:6] == [16, "env:METAL_LINALG_EIGH_GPU_BLOCKED_MAX_BATCH"]
    assert r[6:9] == [5, "user", r[1]]


def test_no_torch_import():
    code = (
        "import sys\n"
        "import metal_linalg as ml\n"
        "import mlx.core as mx\n"
        "mx.eval(ml.svd(mx.ones((3, 4, 4))))\n"
        "from metal_linalg import __main__, _bench, _calibrate\n"
        "bad = [m for m in sys.modules if m == 'torch' or m.startswith('torch.')]\n"
        "print('torch modules:', bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    out = run_python(code, {"METAL_LINALG_NO_CALIBRATION_NOTICE": "1"})
    assert out.returncode == 0, out.stdout + out.stderr


# ---- command line ----


def test_cli_info():
    out = run_python(
        "from metal_linalg.__main__ import main; raise SystemExit(main(['info']))",
        {"METAL_LINALG_NO_CALIBRATION_NOTICE": "1"},
    )
    assert out.returncode == 0, out.stderr
    assert ml.device_name() in out.stdout and "eigvalsh" in out.stdout


# bench and calibrate from the command line: test_mlx_cli.py
