"""The MLX package reads the core's op table: op names, output shapes, the call through ml_run."""

import metal_linalg as ml
import mlx.core as mx
import numpy as np
from metal_linalg import _ops
from metal_linalg._loader import ext
from metal_linalg._shared import queries as shared_queries


def test_op_names_come_from_the_core():
    names = ext.op_names()
    assert names == list(shared_queries.ALL_OPS)
    assert [n for i, n in enumerate(names) if ext.op_kernels(i)] == shared_queries.POLICY_OPS
    linsys = [n for i, n in enumerate(names) if ext.op_linear_system(i)]
    assert (
        linsys
        == shared_queries.LINSYS_OPS
        == ["cholesky", "solve", "inv", "solve_triangular", "lu_factor"]
    )
    assert shared_queries.OPS == [n for n in shared_queries.POLICY_OPS if n not in linsys]
    assert [_ops.OP_QR, _ops.OP_EIGH, _ops.OP_EIGVALSH, _ops.OP_SVD, _ops.OP_SVDVALS] == [
        names.index(op) for op in ("qr", "eigh", "eigvalsh", "svd", "svdvals")
    ]
    assert ext.output_symbols(_ops.OP_SVDVALS, 0) == ["k"]
    assert ext.output_symbols(_ops.OP_QR, 1) == ["", "kn"]
    assert ext.output_symbols(_ops.OP_QR, 2) == ["mm", "mn"]
    assert shared_queries.OUTPUTS["svd"] == (("m", "k"), ("k",), ("k", "n"))


def test_shapes_and_values_in_the_tables_order():
    a = mx.array(np.random.default_rng(3).standard_normal((3, 6, 4)).astype(np.float32))
    s = ml.svdvals(a, stream=mx.cpu)
    u, s2, vt = ml.svd(a, stream=mx.cpu)
    r = ml.qr(a, mode="r", stream=mx.cpu)
    q, r2 = ml.qr(a, mode="reduced", stream=mx.cpu)
    s_ex, info = ml.svdvals_ex(a, stream=mx.cpu)
    mx.eval(s, u, s2, vt, r, q, r2, s_ex, info)
    assert s.shape == (3, 4) and u.shape == (3, 6, 4) and vt.shape == (3, 4, 4)
    assert r.shape == (3, 4, 4) and q.shape == (3, 6, 4) and info.shape == (3,)
    assert info.dtype == mx.int32
    np.testing.assert_allclose(np.asarray(s), np.asarray(s2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.abs(np.asarray(r)), np.abs(np.asarray(r2)), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(s_ex), np.asarray(s))
