"""Device, backend and policy queries, environment overrides and the calibration notice."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import metal_linalg_torch as mlt
import pytest
import subproc

DECOMPOSITIONS = ("qr", "eigh", "eigvalsh", "svd", "svdvals")
LINSYS = ("cholesky", "solve", "inv", "solve_triangular", "lu_factor")
OPS = DECOMPOSITIONS + LINSYS  # every op has a routing policy


def _run(code: str, **env) -> subprocess.CompletedProcess:
    return subproc.run(["-W", "always", "-c", textwrap.dedent(code)], env)


def test_device_and_versions():
    assert isinstance(mlt.device_name(), str) and mlt.device_name()
    assert mlt.version()
    assert mlt.backends_available()["cpu"] is True
    assert mlt.lapack_info()


def test_backend_queries_name_a_backend():
    names = [
        mlt.qr_backend(64, 32),
        mlt.qr_backend(8, 8, 1024),
        mlt.eigh_backend(16),
        mlt.eigh_backend(16, 64),
        mlt.eigvalsh_backend(300),
        mlt.svd_backend(10, 20, 3),
        mlt.svdvals_backend(1024, 512),
    ]
    for name in names:
        assert name.startswith(("cpu:", "cuda:")), name
    assert mlt.eigh_backend(16, device="cpu").startswith("cpu:")


def test_backend_queries_reject_bad_sizes():
    with pytest.raises(ValueError, match="n must be >= 1"):
        mlt.eigh_backend(0)
    with pytest.raises(ValueError, match="batch"):
        mlt.svd_backend(4, 4, batch=-1)
    with pytest.raises(ValueError, match="device"):
        mlt.qr_backend(4, 4, device="tpu")


@pytest.mark.parametrize("op", OPS)
def test_policy_get_set_reset(op):
    get, set_, reset, source = (
        getattr(mlt, f"{op}_policy"),
        getattr(mlt, f"set_{op}_policy"),
        getattr(mlt, f"reset_{op}_policy"),
        getattr(mlt, f"{op}_policy_source"),
    )
    before, src = get(), source()
    assert {"cpu_kernel_max_n", "gpu_min_batch", "gpu_max_n", "host_gpu_min_work"} <= set(before)
    assert all(isinstance(v, int) for v in before.values())
    try:
        set_(gpu_min_batch=before["gpu_min_batch"] + 7)
        assert get()["gpu_min_batch"] == before["gpu_min_batch"] + 7
        assert source() == "user"
    finally:
        reset()
    assert get() == before and source() == src


def test_policy_unknown_field_names_valid_ones():
    with pytest.raises(ValueError, match="gpu_min_batch") as exc:
        mlt.set_eigh_policy(gpu_minbatch=1)
    assert "gpu_minbatch" in str(exc.value)
    with pytest.raises(TypeError):
        mlt.set_qr_policy(gpu_min_batch="8")


def test_cpu_kernel_policy_changes_backend_query():
    try:
        mlt.set_eigh_policy(cpu_kernel_max_n=0)
        assert mlt.eigh_backend(8, 64, device="cpu") == "cpu:lapack"
    finally:
        mlt.reset_eigh_policy()


def test_calibration_status_and_policy_file():
    status = mlt.calibration_status()
    assert set(status) == set(OPS)
    assert set(status.values()) <= {"tuned", "untuned"}
    assert mlt.policy_file()


def test_cpu_threads_roundtrip():
    before = mlt.get_cpu_threads()
    try:
        mlt.set_cpu_threads(1)
        assert mlt.get_cpu_threads() == 1
    finally:
        mlt.set_cpu_threads(0)
    assert mlt.get_cpu_threads() >= 1
    with pytest.raises(ValueError):
        mlt.set_cpu_threads(-2)
    mlt.set_cpu_threads(0 if before == os.cpu_count() else before)


def test_env_overrides_and_user_precedence():
    """One subprocess: a forced backend, a field override, the thread cap, and user > env."""
    out = _run(
        """
        import json, metal_linalg_torch as m
        before = [m.eigh_backend(8, 4096, device="cpu"), m.eigh_policy_source(), m.qr_policy_source(),
                  m.svd_policy()["gpu_min_batch"], m.svd_policy_source(), m.get_cpu_threads()]
        m.set_svd_policy(gpu_min_batch=3)
        after = [m.svd_policy()["gpu_min_batch"], m.svd_policy_source()]
        m.reset_svd_policy()
        print(json.dumps(before + after + [m.svd_policy_source()]))
        """,
        METAL_LINALG_EIGH_BACKEND="cpu",
        METAL_LINALG_SVD_GPU_MIN_BATCH="12345",
        METAL_LINALG_CPU_THREADS="1",
        METAL_LINALG_NO_CALIBRATION_NOTICE="1",
    )
    assert out.returncode == 0, out.stderr
    backend, eigh_src, qr_src, svd_min, svd_src, threads, user_min, user_src, reset_src = (
        json.loads(out.stdout.strip().splitlines()[-1])
    )
    assert backend.startswith("cpu:")
    assert eigh_src.startswith("env:") and "METAL_LINALG_EIGH_BACKEND" in eigh_src
    assert not qr_src.startswith("env:")
    assert svd_min == 12345 and svd_src.startswith("env:")
    assert threads == 1
    assert (user_min, user_src) == (3, "user")
    assert reset_src == svd_src


def test_blocked_max_batch_round_trips(tmp_path):
    """gpu_blocked_max_batch: unbounded by default, set / reset per op, from the environment
    (METAL_LINALG_<OP>_GPU_BLOCKED_MAX_BATCH) and from a policy file; user > env > file."""
    path = tmp_path / "machine.policy"
    path.write_text("# measured\nsvd gpu_blocked_max_batch 32\nsvd gpu_blocked_min_n 96\n")
    out = _run(
        """
        import json, metal_linalg_torch as m
        r = {"device": m.device_name(), "default": m.svdvals_policy()["gpu_blocked_max_batch"],
             "file": [m.svd_policy()["gpu_blocked_max_batch"], m.svd_policy()["gpu_blocked_min_n"],
                      m.svd_policy_source()],
             "env": [m.eigh_policy()["gpu_blocked_max_batch"], m.eigh_policy_source()]}
        m.set_eigh_policy(gpu_blocked_max_batch=4)
        m.set_qr_policy(gpu_blocked_max_batch=0)
        r["user"] = [m.eigh_policy()["gpu_blocked_max_batch"], m.eigh_policy_source(),
                     m.qr_policy()["gpu_blocked_max_batch"]]
        m.reset_eigh_policy()
        m.reset_qr_policy()
        r["reset"] = [m.eigh_policy()["gpu_blocked_max_batch"], m.eigh_policy_source(),
                      m.qr_policy()["gpu_blocked_max_batch"]]
        try:
            m.set_qr_policy(gpu_blocked_max_batch=-1)
        except ValueError as e:
            r["negative"] = str(e)
        print(json.dumps(r))
        """,
        METAL_LINALG_POLICY_FILE=str(path),
        METAL_LINALG_EIGH_GPU_BLOCKED_MAX_BATCH="16",
        METAL_LINALG_NO_CALIBRATION_NOTICE="1",
    )
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    unbounded = 2**63 - 1
    assert r["default"] == unbounded
    assert r["file"][:2] == [32, 96] and r["file"][2].startswith("tuned:")
    assert r["env"] == [16, "env:METAL_LINALG_EIGH_GPU_BLOCKED_MAX_BATCH"]
    assert r["user"] == [4, "user", 0]
    assert r["reset"][:2] == [16, "env:METAL_LINALG_EIGH_GPU_BLOCKED_MAX_BATCH"]
    # The tuned table of core/tuned/NVIDIA_H200.policy sets qr's to 64 on that device.
    assert r["reset"][2] == (64 if r["device"] == "NVIDIA H200" else unbounded)
    assert "gpu_blocked_max_batch" in r["negative"]


_COUNT_WARNINGS = """
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import metal_linalg_torch as m
found = [str(w.message) for w in caught if issubclass(w.category, m.CalibrationWarning)]
print(json.dumps({"warnings": found, "status": m.calibration_status(),
                  "qr": [m.qr_policy()["cpu_kernel_max_n"], m.qr_policy_source()]}))
"""


def test_calibration_warning_names_the_untuned_ops_once(tmp_path):
    out = _run(_COUNT_WARNINGS, METAL_LINALG_POLICY_FILE=str(tmp_path / "none.policy"))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(data["status"]) == set(OPS)
    untuned = [op for op, s in data["status"].items() if s != "tuned"]
    if not untuned:
        assert data["warnings"] == []
    else:
        [text] = data["warnings"]  # one line, however many ops
        assert "\n" not in text and "python -m metal_linalg_torch calibrate" in text
        if len(untuned) == len(OPS):
            assert "every op uses untuned defaults" in text
        else:
            assert f"{', '.join(untuned)} use" in text or f"{untuned[0]} uses" in text
    assert issubclass(mlt.CalibrationWarning, UserWarning)


def test_calibration_warning_names_only_the_untuned_ops(tmp_path):
    # A policy file measuring some ops: the notice names the others.
    path = tmp_path / "machine.policy"
    path.write_text("# measured\nqr cpu_kernel_max_n 4\ncholesky cpu_kernel_max_n 16\n")
    out = _run(_COUNT_WARNINGS, METAL_LINALG_POLICY_FILE=str(path))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert data["status"]["qr"] == "tuned" == data["status"]["cholesky"]
    untuned = [op for op in OPS if data["status"][op] != "tuned"]
    assert "qr" not in untuned and "cholesky" not in untuned and "solve" in untuned
    [text] = data["warnings"]
    assert f"metal_linalg_torch: {', '.join(untuned)} use untuned defaults on " in text


def test_calibration_warning_silenced(tmp_path):
    out = _run(
        _COUNT_WARNINGS,
        METAL_LINALG_POLICY_FILE=str(tmp_path / "none.policy"),
        METAL_LINALG_NO_CALIBRATION_NOTICE="1",
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["warnings"] == []


def test_policy_file_makes_ops_tuned(tmp_path):
    path = tmp_path / "machine.policy"
    path.write_text("# measured\n" + "".join(f"{op} cpu_kernel_max_n 4\n" for op in OPS))
    out = _run(_COUNT_WARNINGS, METAL_LINALG_POLICY_FILE=str(path))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert data["warnings"] == [] and set(data["status"].values()) == {"tuned"}
    assert data["qr"] == [4, data["qr"][1]] and data["qr"][1].startswith("tuned:")


def test_core_errors_raise_with_the_function_and_message():
    from metal_linalg_torch import _lib

    status = _lib.lib.ml_eigh(None, None, 1, 4, 0, None, None, None)
    assert status == _lib.ML_INVALID_ARGUMENT
    with pytest.raises(ValueError, match=r"^\[metal_linalg::eigh\] \S+"):
        _lib.check(status, "eigh")
    status = _lib.lib.ml_svd(None, None, 1, -3, 4, 0, None, None, None, None)
    with pytest.raises(ValueError, match=r"^\[metal_linalg::svd\] \S+"):
        _lib.check(status, "svd")
    _lib.check(_lib.ML_OK, "svd")  # OK is silent
