"""The torch side of the shared calibration, benchmark and command line (`_shared`): how to
build inputs, run an op, wait for it, time it, and which peers to compare with.
Imported by the command line and the benchmark only, never by `import metal_linalg_torch`."""

from __future__ import annotations

import functools

import numpy as np
import torch

import metal_linalg_torch as mlt

from . import queries
from ._shared import bench
from ._shared.bench import Impl

OPS = queries.OPS


def linalg_fn(la, op):
    """op of `la`, this package or torch.linalg (the same names and signatures), as the
    benchmark calls it: the thin svd; solve and solve_triangular (lower) take the pair (A, B)."""
    if op == "svd":
        return lambda a: la.svd(a, full_matrices=False)
    if op == "solve":
        return lambda ab: la.solve(*ab)
    if op == "solve_triangular":
        return lambda ab: la.solve_triangular(*ab, upper=False)
    return getattr(la, op)


def _ours(op):
    return linalg_fn(mlt, op)


def _torch_fn(op):
    return linalg_fn(torch.linalg, op)


def cuda_events_ms(call, x) -> float:
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    call(x)
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop)


class TorchFrontend:
    package = "metal_linalg_torch"
    framework = "torch"
    framework_version = torch.__version__
    version = mlt.__version__
    q = queries
    devices = ("cpu", "cuda")
    gpu_name = "cuda"

    def __init__(self):
        # Peers that could not be loaded, with the reason (reported in the JSON metadata).
        self.unavailable = {}

    @property
    def gpu(self):
        """Device for calibrating with data in GPU memory."""
        return (
            "cuda" if torch.cuda.is_available() and queries.backends_available()["cuda"] else None
        )

    # ---- command line ----

    def default_device(self) -> str:
        return "cuda" if torch.cuda.is_available() else "cpu"

    def device_problem(self, device: str) -> str | None:
        if device == "cuda" and not torch.cuda.is_available():
            return "torch sees no CUDA device"
        return None

    def info_lines(self) -> list:
        lines = []
        if torch.cuda.is_available():
            lines.append(
                f"torch CUDA: {torch.cuda.get_device_name()} ({torch.cuda.device_count()} device(s))"
            )
        return lines

    def peer_names(self, device: str) -> tuple:
        return ("torch", "cupy", "jax") if device == "cuda" else ("torch", "numpy")

    # ---- calibration ----

    def op(self, op, device):
        return _ours(op)

    def sync(self, device) -> None:
        if device == "cuda" or (device == "cpu" and torch.cuda.is_available()):
            torch.cuda.synchronize()

    def random_input(self, op, n, batch, device, seed):
        """The benchmark's input families (bench.make_input), drawn by torch: A, or (A, B) with
        one right-hand side for solve and solve_triangular."""
        # Large batches are much faster generated on the GPU, also for host data.
        where = "cuda" if torch.cuda.is_available() else "cpu"
        g = torch.Generator(device=where).manual_seed(seed)
        a = torch.randn(batch, n, n, generator=g, device=where)
        eye = torch.eye(n, device=where)
        if op in ("eigh", "eigvalsh"):
            a = (a + a.mT) / 2
        elif op == "cholesky":
            a = a @ a.mT / n + eye
        elif op == "solve_triangular":
            a = a.tril() + n**0.5 * eye
        elif op in bench.linsys_ops():
            a = a + 2 * n**0.5 * eye
        a = a.to(device).contiguous()
        if bench.takes_rhs(op):
            b = torch.randn(batch, n, 1, generator=g, device=where)
            return a, b.to(device).contiguous()
        return a

    def event_timer(self, device):
        if device != "cuda":
            return None
        return lambda call, x: cuda_events_ms(call, x) / 1e3

    def warm_gpu(self) -> None:
        """Bring the GPU clocks up before timing."""
        if not torch.cuda.is_available():
            return
        x = torch.randn(4096, 4096, device="cuda")
        for _ in range(40):
            x = x @ x
            x /= x.norm()
        torch.cuda.synchronize()

    def calibration_meta(self) -> dict:
        if torch.cuda.is_available():
            return {"torch_cuda_device": torch.cuda.get_device_name()}
        return {}

    # ---- benchmark ----

    def implementations(self, device: str, peers=None) -> list:
        """metal_linalg first, then every importable peer for this device (optionally filtered)."""
        if device == "cuda":
            sync = torch.cuda.synchronize

            def to_cuda(a):
                return torch.from_numpy(a).cuda()

            impls = [
                Impl("metal_linalg", to_cuda, _ours, sync, cuda_events_ms),
                Impl("torch", to_cuda, _torch_fn, sync, cuda_events_ms),
            ]
            try:
                import cupy

                impls.append(
                    Impl(
                        "cupy",
                        cupy.asarray,
                        lambda op: bench.numpy_fns(cupy, op),
                        lambda: cupy.cuda.Device().synchronize(),
                    )
                )
            except Exception as exc:  # noqa: BLE001 (any import/driver failure: peer absent)
                self.unavailable["cupy"] = f"{type(exc).__name__}: {exc}"
            try:
                import jax
                import jax.numpy as jnp

                if any(d.platform == "gpu" for d in jax.devices()):

                    def jax_run(op):
                        fn = bench.numpy_fns(jnp, op)
                        if fn is None:
                            return None
                        fn = jax.jit(fn)
                        return lambda a: jax.block_until_ready(fn(a))

                    impls.append(Impl("jax", jnp.asarray, jax_run))
            except Exception as exc:  # noqa: BLE001
                self.unavailable["jax"] = f"{type(exc).__name__}: {exc}"
        else:
            impls = [
                Impl("metal_linalg", torch.from_numpy, _ours),
                Impl("torch", torch.from_numpy, _torch_fn),
                bench.numpy_impl(),
            ]
        if peers is not None:
            impls = [i for i in impls if i.name == "metal_linalg" or i.name in peers]
        return impls

    def backend_label(self, op, m, n, batch, device) -> str:
        q = getattr(queries, f"{op}_backend")
        dims = (n,) if bench.square_only(op) else (m, n)
        return q(*dims, batch, device=device)

    def machine_peaks(self, device: str) -> dict:
        """Measured copy bandwidth (bytes/s) and float32 GEMM rate (flop/s): the roofline."""
        if device == "cpu":
            return bench.numpy_peaks()
        n_copy = 1 << 24
        src = torch.empty(n_copy, device=device)
        dst = torch.empty_like(src)
        a = torch.randn(2048, 2048, device=device)

        dst.copy_(src)
        copy_s = bench.best_seconds(lambda: dst.copy_(src), 5, torch.cuda.synchronize)
        a @ a
        gemm_s = bench.best_seconds(lambda: a @ a, 3, torch.cuda.synchronize)
        return {
            "copy_bytes_per_s": 2 * 4 * n_copy / copy_s,
            "fp32_flops_per_s": 2 * 2048**3 / gemm_s,
        }

    def metadata(self, device: str) -> dict:
        meta = {"unavailable_peers": dict(self.unavailable), "numpy_input": str(np.float32)}
        if device == "cuda":
            meta["device_name"] = torch.cuda.get_device_name()
        return meta


@functools.cache
def frontend() -> TorchFrontend:
    return TorchFrontend()
