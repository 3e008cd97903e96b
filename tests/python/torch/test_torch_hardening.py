"""Inputs and settings that used to give silent wrong answers or fail without a word: lazy
negative/conjugate views, tall-skinny sizes, lowercase UPLO, non-convergence (*_ex info words),
broken settings (warnings where they take effect), per-thread scratch, error messages."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import subprocess
import textwrap

import metal_linalg_torch as mlt
import numpy as np
import pytest
import subproc
import torch
from _matrices import THRESH, qr_ratios, svd_ratios
from metal_linalg_torch import _lib


def _run(code: str, timeout: float = 120, **env) -> subprocess.CompletedProcess:
    return subproc.run(["-c", textwrap.dedent(code)], env, timeout=timeout)


# ---- lazy negative / conjugate bits ----


def test_negative_view_is_read_as_its_values():
    base = torch.tensor([[3.0, 1.0], [1.0, 2.0]])
    neg = torch._neg_view(base)
    assert neg.is_neg() and neg.is_contiguous()
    expected = torch.linalg.eigvalsh(-base.double()).float()  # [-3.62, -1.38]
    torch.testing.assert_close(mlt.eigvalsh(neg), expected)
    torch.testing.assert_close(mlt.eigh(neg).eigenvalues, expected)
    torch.testing.assert_close(torch.ops.metal_linalg.eigvalsh(neg, "L"), expected)
    q, r = mlt.qr(neg)
    torch.testing.assert_close(q @ r, -base, atol=1e-6, rtol=0)
    u, s, vh = mlt.svd(neg)
    torch.testing.assert_close(u @ torch.diag(s) @ vh, -base, atol=1e-6, rtol=0)
    # Other dtypes and non-contiguous negative views.
    torch.testing.assert_close(mlt.eigvalsh(torch._neg_view(base.double())), expected)
    wide = torch.randn(4, 6, dtype=torch.float64)
    nt = torch._neg_view(wide).mT
    torch.testing.assert_close(mlt.svdvals(nt), torch.linalg.svdvals(wide).float())
    q, r = mlt.qr(nt)
    torch.testing.assert_close(q @ r, -wide.mT.float(), atol=1e-5, rtol=0)


def test_conjugate_imaginary_part_is_read_as_its_values():
    z = torch.tensor([[1 + 2j, 0.5 - 1j], [3 - 1j, 2 + 4j]], dtype=torch.complex64)
    im = z.conj().imag  # a real view with the negative bit: -Im(z)
    assert im.is_neg()
    q, r = mlt.qr(im)
    torch.testing.assert_close(q @ r, -z.imag, atol=1e-5, rtol=0)
    sym = torch.tensor([[1 + 2j]]).conj().imag
    torch.testing.assert_close(mlt.eigvalsh(sym), torch.tensor([-2.0]))


# ---- tall-skinny sizes ----


@pytest.mark.parametrize("m,n", [(100_000, 3), (60_000, 1), (3, 100_000)])
def test_tall_skinny(m, n):
    a = torch.randn(m, n, generator=torch.Generator().manual_seed(m + n))
    q, r = mlt.qr(a)
    assert max(qr_ratios(a, q, r)) < THRESH["qr"]
    u, s, vh = mlt.svd(a)
    assert max(svd_ratios(a, u, s, vh)) < THRESH["svd"]
    ref = torch.linalg.svdvals(a.double()).float()
    torch.testing.assert_close(mlt.svdvals(a), ref, rtol=1e-5, atol=0)
    torch.testing.assert_close(s, ref, rtol=1e-5, atol=0)


def test_too_large_names_the_reason():
    # A complete Q of 100000 x 100000 is what 32-bit LAPACK cannot address; reduced is fine.
    rc = _lib.lib.ml_workspace_size(
        None,
        _lib.OP_ID["qr"],
        1,
        100_000,
        3,
        _lib.ML_QR_COMPLETE,
        _lib.ctypes.byref(_lib.ctypes.c_int64()),
    )
    assert rc == _lib.ML_INVALID_ARGUMENT
    assert b"32-bit LAPACK" in _lib.lib.ml_last_error()
    rc = _lib.lib.ml_workspace_size(
        None, _lib.OP_ID["eigh"], 1, 32767, 32767, 0, _lib.ctypes.byref(_lib.ctypes.c_int64())
    )
    assert rc == _lib.ML_INVALID_ARGUMENT and b"workspace" in _lib.lib.ml_last_error()


# ---- UPLO ----


def test_lowercase_uplo():
    a = torch.randn(2, 5, 5, generator=torch.Generator().manual_seed(5))
    for lower, upper in (("L", "l"), ("U", "u")):
        assert torch.equal(mlt.eigvalsh(a, upper), mlt.eigvalsh(a, lower))
        w, v = mlt.eigh(a, upper)
        w0, v0 = mlt.eigh(a, lower)
        assert torch.equal(w, w0) and torch.equal(v, v0)
        torch.testing.assert_close(w, torch.linalg.eigvalsh(a.double(), upper).float())
    assert torch.equal(torch.ops.metal_linalg.eigh(a, "u")[0], mlt.eigh(a, "U")[0])
    with pytest.raises(ValueError, match="UPLO"):
        mlt.eigh(a, "X")


# ---- non-convergence and the *_ex info words ----


@contextlib.contextmanager
def iteration_cap(cap: int):
    """Every kernel stops after `cap` sweeps or iterations; after: no cap, and the eigh, eigvalsh,
    svd and svdvals policies reset."""
    assert _lib.lib.ml_set_iteration_cap(cap) == _lib.ML_OK
    try:
        yield
    finally:
        _lib.lib.ml_set_iteration_cap(0)
        for op in ("eigh", "eigvalsh", "svd", "svdvals"):
            getattr(mlt, f"reset_{op}_policy")()


@pytest.fixture
def iteration_cap_one():
    """The portable kernels stop after one sweep; eigh/svd use them up to 24 x 24."""
    mlt.set_eigh_policy(cpu_kernel_max_n=24)
    mlt.set_eigvalsh_policy(cpu_kernel_max_n=16)
    mlt.set_svd_policy(cpu_kernel_max_n=24)
    mlt.set_svdvals_policy(cpu_kernel_max_n=16)
    with iteration_cap(1):
        yield


def _batch():
    g = torch.Generator().manual_seed(12)
    b = torch.randn(3, 12, 12, generator=g, dtype=torch.float64)
    b = (b + b.mT) / 2
    b[1] = torch.diag(torch.arange(1.0, 13.0, dtype=torch.float64))  # converges at once
    return b.float()


def test_not_converged_is_nan_and_flagged(iteration_cap_one):
    a = _batch()
    NC = _lib.ML_INFO_NOT_CONVERGED
    for fn, outs in (
        (mlt.eigh_ex, 2),
        (mlt.eigvalsh_ex, 1),
        (mlt.svd_ex, 3),
        (mlt.svdvals_ex, 1),
    ):
        res = fn(a)
        info = res.info
        assert info.dtype == torch.int32 and info.shape == (3,)
        assert (info[[0, 2]] & NC).all() and not (info[1] & NC), (fn.__name__, info)
        for t in res[:outs]:
            assert torch.isnan(t[[0, 2]]).all() and torch.isfinite(t[1]).all(), fn.__name__
        with pytest.raises(torch.linalg.LinAlgError, match="batch index 0.*did not converge"):
            fn(a, check_errors=True)
    w = mlt.eigvalsh_ex(a).eigenvalues[1]
    torch.testing.assert_close(w, torch.arange(1.0, 13.0))
    # The plain functions give the same NaN marking.
    assert torch.isnan(mlt.eigvalsh(a)[0]).all()


def test_ex_info_words_without_cap():
    a = _batch()
    a[2, 3, 4] = float("nan")
    a[2, 4, 3] = float("nan")
    for fn in (mlt.eigh_ex, mlt.eigvalsh_ex, mlt.svd_ex, mlt.svdvals_ex, mlt.qr_ex):
        res = fn(a)
        flags = res.info & 0xFFFF
        assert flags[0] == 0 and flags[1] == 0, (fn.__name__, res.info)
        assert flags[2] & _lib.ML_INFO_NONFINITE, (fn.__name__, res.info)
        with pytest.raises(torch.linalg.LinAlgError, match="batch index 2.*NaN"):
            fn(a, check_errors=True)
    w, _v, info = mlt.eigh_ex(a[:2], "U")
    assert torch.equal(w, mlt.eigh(a[:2], "U").eigenvalues) and info.shape == (2,)
    # Rank deficiency is reported, not an error.
    _q, _r, info = mlt.qr_ex(torch.zeros(4, 3), check_errors=True)
    assert info.shape == () and info & _lib.ML_INFO_RANK_DEFICIENT
    # Empty batches and autograd.
    assert mlt.svd_ex(torch.zeros(0, 3, 3)).info.shape == (0,)
    x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    s, info = mlt.svdvals_ex(x)
    s.sum().backward()
    assert x.grad is not None and int(info) & 0xFFFF == 0


# ---- settings that used to fail silently ----


def test_bad_settings_warn_when_they_take_effect(tmp_path):
    fifo = tmp_path / "policy.fifo"
    os.mkfifo(fifo)
    out = _run(
        """
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch, metal_linalg_torch as m
            at_import = [str(w.message) for w in caught if w.category is m.MetalLinalgWarning]
            m.qr(torch.randn(3, 40, 40))
            after_call = [str(w.message) for w in caught if w.category is m.MetalLinalgWarning]
        print(json.dumps([at_import, after_call[len(at_import):], m.get_cpu_threads(),
                          m.qr_policy()["gpu_max_n"], m.qr_backend(8, 8, 1),
                          m.backends_available()["cuda"]]))
        """,
        timeout=60,
        METAL_LINALG_QR_BACKEND="gpu",
        METAL_LINALG_QR_GPU_MAX_N="12x",
        METAL_LINALG_CPU_THREADS="3abc",
        METAL_LINALG_POLICY_FILE=str(fifo),
        METAL_LINALG_NO_CALIBRATION_NOTICE="1",
    )
    assert out.returncode == 0, out.stderr
    at_import, after_call, threads, gpu_max_n, backend, cuda = json.loads(out.stdout)
    text = "\n".join(at_import)
    # BACKEND=gpu is honoured where a GPU is usable, and warned about where none is.
    gpu_warning = "METAL_LINALG_QR_BACKEND=gpu but no GPU backend is usable"
    assert (gpu_warning in text) != cuda, text
    assert "METAL_LINALG_QR_GPU_MAX_N='12x' is not a non-negative integer" in text
    assert "is not a regular file" in text
    assert gpu_max_n == 16384  # the default: the garbage value is ignored, not read as 12
    assert backend.startswith("cuda:" if cuda else "cpu:")
    # The package reads the thread count at import, so its warning comes then, once.
    assert "METAL_LINALG_CPU_THREADS='3abc'" in text
    assert not any("METAL_LINALG_CPU_THREADS" in w for w in after_call), after_call
    assert threads == os.cpu_count()


def test_policy_file_checks(tmp_path):
    lines = tmp_path / "many.policy"
    lines.write_text("".join(f"svdvals gpu_min_batch {i + 1}\n" for i in range(300)))
    big = tmp_path / "big.policy"
    big.write_bytes(b"#" * (2 << 20))
    code = """
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import metal_linalg_torch as m
            m.reload_policy()
        print(json.dumps([[str(w.message) for w in caught if w.category is m.MetalLinalgWarning],
                          m.svdvals_policy()["gpu_min_batch"]]))
        """
    for path, expect_warning, value in (
        (lines, None, 300),
        (big, "more than the 1048576 a policy file may have", 1),
        ("/dev/zero", "is not a regular file", 1),
    ):
        out = _run(
            code,
            timeout=60,
            METAL_LINALG_POLICY_FILE=str(path),
            METAL_LINALG_NO_CALIBRATION_NOTICE="1",
        )
        assert out.returncode == 0, (path, out.stderr)
        warned, got = json.loads(out.stdout)
        if expect_warning:
            assert any(expect_warning in w for w in warned), (path, warned)
        else:
            assert warned == [], warned
        assert got == value, path


def test_thread_request_is_capped():
    out = _run(
        """
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch, metal_linalg_torch as m
            m.svdvals(torch.randn(64, 20, 20))
        print(json.dumps([[str(w.message) for w in caught], m.get_cpu_threads()]))
        """,
        METAL_LINALG_CPU_THREADS="100000",
        METAL_LINALG_NO_CALIBRATION_NOTICE="1",
    )
    assert out.returncode == 0, out.stderr
    warned, threads = json.loads(out.stdout)
    assert threads == 4 * os.cpu_count()
    assert any("METAL_LINALG_CPU_THREADS=100000" in w for w in warned), warned


# ---- bounded per-thread scratch ----


def test_scratch_released_after_large_matrices():
    out = _run(
        """
        import ctypes, gc, json, torch, metal_linalg_torch as m
        libc = ctypes.CDLL(None)
        def rss():  # live memory: freed heap pages returned first
            gc.collect()
            libc.malloc_trim(0)
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * 4096
        m.set_cpu_threads(1)
        a = torch.randn(1100, 1100)
        a = a + a.mT
        b = torch.randn(700, 700)
        m.eigh(b + b.mT)  # LAPACK and its own buffers warmed up
        gc.collect()
        before = rss()
        w, v = m.eigh(a)
        del w, v
        gc.collect()
        print(json.dumps(rss() - before))
        """,
        METAL_LINALG_NO_CALIBRATION_NOTICE="1",
    )
    assert out.returncode == 0, out.stderr
    grown = json.loads(out.stdout)
    # eigh of n x n uses ~3 n^2 floats of scratch (14.5 MB at 1100, 5.9 MB at 700): kept, the
    # 1100 call would add 8.6 MB; released, nothing.
    assert grown < 3 << 20, grown


# ---- error messages ----


def test_error_message_has_one_prefix():
    with pytest.raises(ValueError) as e:
        _lib.check(_lib.lib.ml_set_cpu_threads(-2), "set_cpu_threads")
    assert str(e.value).count("[metal_linalg") == 1, str(e.value)
    assert str(e.value).startswith("[metal_linalg::set_cpu_threads] n must be >= 0")


def test_numpy_reference_for_neg_view_eigh():
    base = np.array([[3.0, 1.0], [1.0, 2.0]], dtype=np.float32)
    w = mlt.eigvalsh(torch._neg_view(torch.from_numpy(base)))
    np.testing.assert_allclose(w.numpy(), np.linalg.eigvalsh(-base), rtol=1e-6)


# ---- LAPACK providers ----


def test_ilp64_lapack_is_refused():
    """NumPy's own OpenBLAS has 64-bit integers (symbols scipy_*_64_): refused at set_lapack with
    a clear error, the provider in use kept. In a subprocess: an accepted one would crash."""
    libs = sorted(glob.glob(os.path.join(os.path.dirname(np.__file__) + ".libs", "*openblas64*")))
    if not libs:
        pytest.skip("this NumPy has no bundled ILP64 OpenBLAS (tests/c covers a fake one)")
    code = f"""
        import json, torch
        import metal_linalg_torch as m
        from metal_linalg_torch import _lib
        before = m.lapack_info()
        status = _lib.lib.ml_set_lapack({libs[0]!r}.encode(), b"scipy_", b"_64_")
        error = _lib.lib.ml_last_error().decode()
        a = torch.randn(200, 200)
        w = m.eigvalsh(a + a.mT)
        ok = torch.allclose(w, torch.linalg.eigvalsh((a + a.mT).double()).float(), atol=1e-3)
        print(json.dumps([status, error, m.lapack_info() == before, ok]))
        """
    out = _run(code, timeout=120, METAL_LINALG_NO_CALIBRATION_NOTICE="1")
    assert out.returncode == 0, out.stderr
    status, error, kept, ok = json.loads(out.stdout.strip().splitlines()[-1])
    assert status == _lib.ML_INVALID_ARGUMENT and "ILP64" in error, error
    assert kept and ok
