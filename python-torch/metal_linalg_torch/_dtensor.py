"""DTensor sharding rules for every custom op: each matrix is decomposed (or solved) on its own,
so a batch dimension sharded across ranks is computed where it lies, with no communication.

Every op accepts its input replicated or sharded on one batch dimension (any dimension but the
last two) per mesh dimension; its outputs carry the same placement (every output has the same
leading batch dimensions). The ops with a right-hand side (solve, solve_triangular) shard the
batch dimension of their broadcast batch shape: each input on its own copy of that dimension,
and replicated where it has none or has it of size 1 (broadcast). Matrix dimensions are never
sharded: an input sharded there is redistributed to one of the accepted placements by DTensor,
as it does for any op.

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


def _rhs_strategies(n_outputs: int, A, B):
    """As _strategies for an op of A [..., n, n] and B [..., n, k] (or [..., k, n]) whose batch
    shapes broadcast: the outputs sharded on dimension d of the broadcast batch shape, each
    input on its own copy of d, replicated where it lacks d or has it of size 1."""
    from torch.distributed.tensor import Replicate, Shard

    a_batch, b_batch = tuple(A.shape[:-2]), tuple(B.shape[:-2])
    nb = max(len(a_batch), len(b_batch))
    pairs = [([Replicate()] * n_outputs, [Replicate(), Replicate()])]
    for d in range(nb):
        inputs = []
        for batch in (a_batch, b_batch):
            k = d - (nb - len(batch))
            inputs.append(Shard(k) if k >= 0 and batch[k] != 1 else Replicate())
        if any(isinstance(p, Shard) for p in inputs):
            pairs.append(([Shard(d)] * n_outputs, inputs))
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

    @register_sharding(ops.info.default)  # the info words of the decompositions' *_ex forms
    def _info(A, op, flags):
        return [(o, [*i, None, None]) for o, i in _strategies(1, A.ndim)]

    @register_sharding(ops.cholesky.default)
    def _cholesky(A, upper):
        return [(o, [*i, None]) for o, i in _strategies(2, A.ndim)]

    @register_sharding(ops.inv.default)
    def _inv(A):
        return _strategies(2, A.ndim)

    @register_sharding(ops.lu_factor.default)
    def _lu_factor(A):
        return _strategies(3, A.ndim)

    @register_sharding(ops.det.default)
    def _det(A):
        return _strategies(1, A.ndim)

    @register_sharding(ops.solve.default)
    def _solve(A, B, left):
        return [(o, [*i, None]) for o, i in _rhs_strategies(2, A, B)]

    @register_sharding(ops.solve_triangular.default)
    def _solve_triangular(A, B, upper, left, unitriangular):
        return [(o, [*i, None, None, None]) for o, i in _rhs_strategies(1, A, B)]

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
