"""DTensor sharding rules for the custom ops: each matrix is decomposed on its own, so a batch
dimension sharded across ranks is computed where it lies, with no communication.

Every op accepts its input replicated or sharded on one batch dimension (any dimension but the
last two) per mesh dimension; its outputs carry the same placement (every output has the same
leading batch dimensions). Matrix dimensions are never sharded: an input sharded there is
redistributed to one of the accepted placements by DTensor, as it does for any op.

The rules are registered once torch.distributed.tensor is imported (now, if it already is), so
the plain `import metal_linalg_torch` neither imports torch.distributed.tensor nor slows down.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import warnings

_DTENSOR = "torch.distributed.tensor"
_registered = False


def _strategies(n_outputs: int, ndim: int, replicated_outputs=()):
    """Acceptable (output placements, input placements) pairs: all replicated, or output and
    input sharded on the same batch dimension. Outputs listed in replicated_outputs (qr's empty
    Q of mode="r") are replicated in every pair. The input list ends with None for the op's
    non-tensor argument (UPLO, mode, full_matrices) where it has one."""
    from torch.distributed.tensor import Replicate, Shard

    def outputs(placement):
        return [Replicate() if i in replicated_outputs else placement for i in range(n_outputs)]

    pairs = [(outputs(Replicate()), [Replicate()])]
    pairs += [(outputs(Shard(d)), [Shard(d)]) for d in range(ndim - 2)]
    return pairs


def register() -> None:
    """Register the sharding rules of every op (idempotent)."""
    global _registered
    if _registered:
        return
    import torch
    from torch.distributed.tensor.experimental import register_sharding

    ops = torch.ops.metal_linalg

    @register_sharding(ops.qr.default)
    def _qr(A, mode):
        replicated = (0,) if mode == "r" else ()
        return [(o, [*i, None]) for o, i in _strategies(2, A.ndim, replicated)]

    @register_sharding(ops.eigh.default)
    def _eigh(A, UPLO):
        return [(o, [*i, None]) for o, i in _strategies(2, A.ndim)]

    @register_sharding(ops.eigvalsh.default)
    def _eigvalsh(A, UPLO):
        return [(o, [*i, None]) for o, i in _strategies(1, A.ndim)]

    @register_sharding(ops.svd.default)
    def _svd(A, full_matrices):
        return [(o, [*i, None]) for o, i in _strategies(3, A.ndim)]

    @register_sharding(ops.svdvals.default)
    def _svdvals(A):
        return _strategies(1, A.ndim)

    _registered = True


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs register() right after torch.distributed.tensor has been imported."""

    def find_spec(self, name, path=None, target=None):
        if name != _DTENSOR:
            return None
        sys.meta_path.remove(self)  # once; also keeps find_spec below from finding itself
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            try:
                register()
            except Exception as exc:  # noqa: BLE001 (the user's import must not fail here)
                warnings.warn(
                    f"metal_linalg_torch: DTensor sharding rules not registered: {exc}",
                    RuntimeWarning,
                    stacklevel=2,
                )

        loader.exec_module = exec_then_register
        return spec


def register_when_imported() -> None:
    """register() now if torch.distributed.tensor is loaded, else as soon as it is."""
    if _DTENSOR in sys.modules:
        register()
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
