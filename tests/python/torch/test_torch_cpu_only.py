"""cpu_only() / set_cpu_only(on) (a context manager too) and gpu_core_count(): the setting, its
restoration, the exact backend names under an explicitly set policy, and on a CUDA machine the
route of CUDA tensors (the host route while on, the CUDA kernels after)."""

from __future__ import annotations

import metal_linalg_torch as ml
import pytest
import torch


@pytest.fixture(autouse=True)
def _clean():
    ml.set_cpu_only(False)
    yield
    ml.set_cpu_only(False)
    for op in ("qr", "eigh", "eigvalsh", "svd", "svdvals"):
        getattr(ml, f"reset_{op}_policy")()


def test_set_and_query():
    assert ml.cpu_only() is False
    ml.set_cpu_only(True)
    assert ml.cpu_only() is True
    ml.set_cpu_only(False)
    assert ml.cpu_only() is False


def test_context_manager_restores_the_previous_setting():
    with ml.set_cpu_only(True):
        assert ml.cpu_only()
        with ml.set_cpu_only(False):
            assert not ml.cpu_only()
        assert ml.cpu_only()
    assert not ml.cpu_only()
    with pytest.raises(RuntimeError, match="inside"), ml.set_cpu_only(True):
        raise RuntimeError("inside")
    assert not ml.cpu_only()


def test_bad_argument():
    for bad in ("yes", 2, None, 1.0):
        with pytest.raises(TypeError, match="set_cpu_only"):
            ml.set_cpu_only(bad)
    assert not ml.cpu_only()


def test_exact_backend_under_an_explicit_policy():
    # cpu_kernel_max_n picks the CPU kernel or LAPACK; cpu_only keeps that choice on the host.
    ml.set_eigh_policy(cpu_kernel_max_n=16, host_gpu_min_work=1)
    ml.set_qr_policy(cpu_kernel_max_n=0, host_gpu_min_work=1)
    with ml.set_cpu_only(True):
        assert ml.eigh_backend(16, 64, device="cpu") == "cpu:kernel:eigh_tridiag_ql"
        assert ml.eigh_backend(17, 64, device="cpu") == "cpu:lapack"
        assert ml.qr_backend(8, 8, 1024, device="cpu") == "cpu:lapack"
        # device memory too: the host route, whatever the CUDA kernels cover
        assert ml.eigh_backend(16, 64, device="cuda") == "cpu:kernel:eigh_tridiag_ql"
        assert ml.qr_backend(8, 8, 1024, device="cuda") == "cpu:lapack"
        a = torch.randn(64, 16, 16)
        a = a + a.mT
        w = ml.eigh(a)[0]
    ref = torch.linalg.eigh(a.double())[0]
    assert torch.allclose(w.double(), ref, atol=1e-4 * ref.abs().max())
    assert ml.eigh_backend(16, 64, device="cpu") == "cpu:kernel:eigh_tridiag_ql"


def test_gpu_core_count():
    count = ml.gpu_core_count()
    assert isinstance(count, int)
    if ml.backends_available()["cuda"]:
        assert count == torch.cuda.get_device_properties(0).multi_processor_count
    else:
        assert count == 0


@pytest.mark.skipif(not ml.backends_available()["cuda"], reason="needs the CUDA backend and a GPU")
def test_cuda_tensors_take_the_host_route_while_on():
    # The register kernels cover 8x8 on every CUDA device; a batch of 1024 sits in every window.
    ml.set_eigh_policy(gpu_min_batch=1, cpu_kernel_max_n=16)
    assert ml.eigh_backend(8, 1024, device="cuda").startswith("cuda:")
    a = torch.randn(1024, 8, 8, device="cuda")
    a = a + a.mT
    with ml.set_cpu_only(True):
        assert ml.eigh_backend(8, 1024, device="cuda") == "cpu:kernel:eigh_tridiag_ql"
        w_host = ml.eigh(a)[0]
    assert w_host.is_cuda
    assert ml.eigh_backend(8, 1024, device="cuda").startswith("cuda:")
    w_gpu = ml.eigh(a)[0]
    assert torch.allclose(w_host, w_gpu, atol=1e-4 * w_gpu.abs().max())
