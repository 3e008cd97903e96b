"""The MLX package's command line with the torch package as a GPU reference peer.

    python benchmarks/mlx_torch_peer.py bench --device gpu [the options of python -m metal_linalg]

Registers metal_linalg_torch on CUDA tensors of the same data (wall clock around the call and a
synchronisation, as for the MLX calls) as a peer of the MLX benchmark, then runs the MLX
package's command line. The MLX package itself never imports torch.
"""

import sys

PEER = "metal_linalg_torch"


def torch_peer():
    """(Impl of metal_linalg_torch on CUDA tensors, None) when torch with CUDA and the torch
    package are importable, else (None, reason)."""
    from metal_linalg._shared.bench import Impl

    try:
        import torch

        if not torch.cuda.is_available():
            return None, "torch has no CUDA device"
        import metal_linalg_torch as mlt
        from metal_linalg_torch._frontend import linalg_fn
    except Exception as exc:  # noqa: BLE001 (any import or driver failure: peer absent)
        return None, f"{type(exc).__name__}: {exc}"[:200]

    def run(op):
        return linalg_fn(mlt, op)

    return Impl(
        PEER, lambda a: torch.from_numpy(a).cuda(), run, torch.cuda.synchronize, None, True
    ), None


torch_peer.note = "the torch package (reference) on CUDA tensors of the same data"


def register() -> None:
    from metal_linalg import _frontend

    _frontend.register_gpu_peer(PEER, torch_peer)


def main(argv=None) -> int:
    register()
    from metal_linalg import __main__

    return __main__.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
