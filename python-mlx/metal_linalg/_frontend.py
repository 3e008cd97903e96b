"""The MLX side of the shared calibration, benchmark and command line (`_shared`): how to build
inputs, run an op on a stream, wait for it, and which peers to compare with. Imported by the
command line and the benchmark only. torch is imported only by the optional benchmark peer
(`metal_linalg_torch` on CUDA, for the same data), never by this package's import."""

from __future__ import annotations

import functools

import mlx.core as mx
import numpy as np

import metal_linalg as ml

from . import _queries as queries
from ._shared import bench
from ._shared.bench import Impl

OPS = queries.OPS


def _stream(device):
    return mx.gpu if device == "gpu" else mx.cpu


def _evaluated(fn, stream):
    """fn on `stream`, passed explicitly, of an op's input (A, or the pair (A, B) of solve and
    solve_triangular); returns once the results exist."""

    def call(x):
        mx.eval(fn(*(x if isinstance(x, tuple) else (x,)), stream=stream))

    return call


def _ours(op, device):
    """Our op on MLX's stream of `device` (solve_triangular: lower, its default)."""
    return _evaluated(getattr(ml, op), _stream(device))


def _mx_linalg(op):
    """mx.linalg on the CPU stream (MLX has no GPU decompositions or linear systems); its svd
    forms full U, Vt; its names and defaults are ours."""
    la = mx.linalg
    if op == "svdvals":
        return _evaluated(lambda a, stream: la.svd(a, compute_uv=False, stream=stream), mx.cpu)
    return _evaluated(getattr(la, op), mx.cpu)


def _to_mx(a):
    x = mx.array(a)
    mx.eval(x)
    return x


# Reference peers registered from outside the package for the GPU benchmark: name ->
# factory() returning (Impl, None) or (None, why unavailable). The package itself imports no
# other framework (benchmarks/mlx_torch_peer.py registers the torch package's CUDA path).
GPU_PEERS = {}


def register_gpu_peer(name: str, factory) -> None:
    GPU_PEERS[name] = factory


class MlxFrontend:
    package = "metal_linalg"
    framework = "mlx"
    framework_version = mx.__version__
    version = ml.__version__
    q = queries
    devices = ("cpu", "gpu")
    gpu_name = "gpu"
    # Calibration with data in GPU memory is measured through the torch package; here host data
    # only (cpu_kernel_max_n, and host_gpu_min_work when the core has a GPU backend).
    gpu = None

    def __init__(self):
        self.unavailable = {}

    # ---- command line ----

    def default_device(self) -> str:
        return "gpu" if mx.is_available(mx.gpu) else "cpu"

    def device_problem(self, device: str) -> str | None:
        if device == "gpu" and not mx.is_available(mx.gpu):
            return f"this MLX ({mx.__version__}) has no GPU"
        return None

    def info_lines(self) -> list:
        return [f"MLX default device: {mx.default_device()}, GPU: {mx.is_available(mx.gpu)}"]

    def peer_names(self, device: str) -> tuple:
        return ("mx.linalg", "numpy", *GPU_PEERS) if device == "gpu" else ("mx.linalg", "numpy")

    # ---- calibration ----

    def op(self, op, device):
        return _ours(op, device)

    def sync(self, device) -> None:
        mx.synchronize()

    def random_input(self, op, n, batch, device, seed):
        return _to_mx(bench.make_input(bench.Point(op, n, n, batch), seed))

    def event_timer(self, device):
        return None

    def warm_gpu(self) -> None:
        pass

    def calibration_meta(self) -> dict:
        return {}

    # ---- benchmark ----

    def implementations(self, device: str, peers=None) -> list:
        impls = [
            Impl("metal_linalg", _to_mx, lambda op: _ours(op, device)),
            Impl("mx.linalg", _to_mx, _mx_linalg),
            bench.numpy_impl(),
        ]
        for name, factory in GPU_PEERS.items() if device == "gpu" else ():
            if peers is None or name in peers:
                impl, why = factory()
                if impl is None:
                    self.unavailable[name] = why
                else:
                    impls.append(impl)
        if peers is not None:
            impls = [i for i in impls if i.name == "metal_linalg" or i.name in peers]
        return impls

    def backend_label(self, op, m, n, batch, device) -> str:
        q = getattr(queries, f"{op}_backend")
        dims = (n,) if bench.square_only(op) else (m, n)
        try:
            return q(*dims, batch, stream=mx.cpu if device == "cpu" else mx.gpu)
        except ValueError:
            return f"mlx:{device}-stream"

    def machine_peaks(self, device: str) -> dict:
        if device == "cpu":
            return bench.numpy_peaks()
        s = mx.gpu
        src = mx.ones((1 << 24,), stream=s)
        a = mx.random.normal((2048, 2048), stream=s)
        mx.eval(src, a)

        def best(fn, reps):
            fn()  # warm-up
            return bench.best_seconds(fn, reps)

        copy_s = best(lambda: mx.eval(mx.add(src, 0.0, stream=s)), 5)
        gemm_s = best(lambda: mx.eval(mx.matmul(a, a, stream=s)), 3)
        return {
            "copy_bytes_per_s": 2 * 4 * (1 << 24) / copy_s,
            "fp32_flops_per_s": 2 * 2048**3 / gemm_s,
        }

    def metadata(self, device: str) -> dict:
        stream_note = (
            "mx.linalg runs on MLX's CPU stream (its only option); its svd forms full U, Vt; its "
            "lu_factor's pivots are 0-based (ours: LAPACK's 1-based)."
        )
        notes = [stream_note]
        if device == "gpu":
            notes.append("metal_linalg runs with stream=mx.gpu.")
            notes += [
                f"{name}: {getattr(f, 'note', 'a registered peer')}"
                for name, f in GPU_PEERS.items()
            ]
        return {
            "unavailable_peers": dict(self.unavailable),
            "mlx_default_device": str(mx.default_device()),
            "numpy_input": str(np.float32),
            "notes": notes,
        }


@functools.cache
def frontend() -> MlxFrontend:
    return MlxFrontend()
