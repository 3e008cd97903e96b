"""The core's linear systems have no MLX functions yet: the package says so and claims none of
them (no calibration notice, no calibration, no CLI choice)."""

import metal_linalg as ml
import pytest
from metal_linalg._loader import ext
from metal_linalg._shared import queries as shared_queries


def test_linear_systems_are_not_claimed():
    cpu_only = [n for i, n in enumerate(ext.op_names()) if not ext.op_kernels(i)]
    assert "cholesky" in cpu_only and "solve" in cpu_only
    for name in cpu_only:
        assert name not in shared_queries.OPS
        assert name not in ml.__all__
        assert name not in ml.calibration_status()
        assert not hasattr(ml, name)
        with pytest.raises(NotImplementedError, match="no MLX functions yet"):
            getattr(ml, name)
        with pytest.raises(NotImplementedError, match="no MLX functions yet"):
            getattr(ml, name + "_ex")
    with pytest.raises(AttributeError, match="no attribute 'no_such_function'"):
        ml.no_such_function  # noqa: B018
