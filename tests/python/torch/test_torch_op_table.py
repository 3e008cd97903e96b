"""The torch package reads the core's op table: op names, output shapes and flag checks."""

import ctypes

import metal_linalg_torch as mlt
import pytest
import torch
from metal_linalg_torch import _dispatch, _lib
from metal_linalg_torch._shared import queries as shared_queries

# ml_output_shape with its own prototype (the package itself does not call it).
_OUTPUT_SHAPE = ctypes.CFUNCTYPE(
    ctypes.c_int32,
    ctypes.c_int32,
    ctypes.c_int64,
    ctypes.c_int64,
    ctypes.c_int32,
    ctypes.c_int32,
    ctypes.POINTER(ctypes.c_int32),
    ctypes.c_void_p,
)(("ml_output_shape", _lib.lib))
FLAGS = {"qr": (0, 1, 2), "eigh": (0, 1), "eigvalsh": (0, 1), "svd": (0, 1), "svdvals": (0,)}


def test_op_names_come_from_the_core():
    core = [_lib.text(_lib.lib.ml_op_name(i)) for i in range(_lib.lib.ml_op_count())]
    assert list(_lib.ALL_OPS) == core == list(shared_queries.ALL_OPS)
    # OPS: the decompositions with GPU kernels (the linear systems, linsys.py, have kernels
    # too but LAPACK's info words: ml_op_linear_system; calibration does not cover them)
    kernels = [
        name
        for i, name in enumerate(core)
        if _lib.lib.ml_op_kernels(i) and not _lib.lib.ml_op_linear_system(i)
    ]
    assert all(_lib.lib.ml_op_kernels(i) for i in range(len(core)))
    assert list(_lib.OPS) == kernels == list(shared_queries.OPS)
    assert shared_queries.OP_ID == {name: i for i, name in enumerate(core)}
    assert set(FLAGS) == set(kernels)  # a new op needs its flags listed here


@pytest.mark.parametrize(("m", "n"), [(5, 3), (3, 5), (4, 4)])
@pytest.mark.parametrize("op", sorted(FLAGS))
def test_output_shapes_match_ml_output_shape(op, m, n):
    if op.startswith("eig") and m != n:
        pytest.skip("square only")
    for flags in FLAGS[op]:
        if op == "svd" and flags == 1 and m != n:
            continue
        shapes = _dispatch.output_shapes(op, (7,), m, n, min(m, n), flags)
        for i, shape in enumerate(shapes):
            ndim = ctypes.c_int32(-1)
            dims = (ctypes.c_int64 * 2)()
            st = _OUTPUT_SHAPE(_lib.OP_ID[op], m, n, flags, i, ctypes.byref(ndim), dims)
            assert st == 0
            expect = (0,) if ndim.value == 0 else (7, *dims[: ndim.value])
            assert tuple(shape) == expect, (op, flags, i)


def test_results_in_the_tables_order():
    a = torch.randn(3, 6, 4)
    s = mlt.svdvals(a)
    u, s2, vh = mlt.svd(a)
    assert s.shape == (3, 4) and u.shape == (3, 6, 4) and vh.shape == (3, 4, 4)
    torch.testing.assert_close(s, s2, rtol=1e-5, atol=1e-5)
    q, r = mlt.qr(a, mode="r")
    assert q.shape == (0,) and r.shape == (3, 4, 4)


def test_info_op_flags_checked_by_the_core():
    a = torch.randn(2, 4, 4)
    assert torch.ops.metal_linalg.info(a, "qr", 2).shape == (2,)
    with pytest.raises(ValueError, match="invalid flags 3 for qr"):
        torch.ops.metal_linalg.info(a, "qr", 3)
    with pytest.raises(ValueError, match="invalid flags 1 for svdvals"):
        torch.ops.metal_linalg.info(a, "svdvals", 1)
    with pytest.raises(ValueError, match="invalid flags"):
        torch.ops.metal_linalg.info(a, "eigh", 2**40)
