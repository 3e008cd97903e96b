"""The code shared with the MLX package: shipped inside this package, importable without MLX,
and the same policy rules (a bad set_<op>_policy call changes nothing)."""

from __future__ import annotations

import filecmp
import subprocess
import textwrap
from pathlib import Path

import metal_linalg_torch as mlt
import pytest
import subproc
from metal_linalg_torch import _shared

OPS = ("qr", "eigh", "eigvalsh", "svd", "svdvals")
REPO_SHARED = Path(__file__).resolve().parents[3] / "python-shared" / "_shared"


def _run(code: str, **env) -> subprocess.CompletedProcess:
    notice = {"METAL_LINALG_NO_CALIBRATION_NOTICE": "1"}
    return subproc.run(
        ["-c", textwrap.dedent(code)], notice, env, timeout=300, cwd=str(Path(__file__).parent)
    )


def test_shared_code_ships_inside_the_installed_package():
    package_dir = Path(mlt.__file__).parent
    assert Path(_shared.__file__).parent == package_dir / "_shared"
    assert "site-packages" in _shared.__file__ or "dist-packages" in _shared.__file__
    if REPO_SHARED.is_dir():  # a checkout: the wheel holds this checkout's shared code
        names = sorted(p.name for p in REPO_SHARED.glob("*.py"))
        assert names and sorted(p.name for p in (package_dir / "_shared").glob("*.py")) == names
        _, mismatch, errors = filecmp.cmpfiles(REPO_SHARED, package_dir / "_shared", names, False)
        assert not mismatch and not errors, (mismatch, errors)


def test_package_and_cli_work_with_mlx_not_importable():
    code = subproc.BLOCK_IMPORT.format(top="mlx") + textwrap.dedent(
        """
        import torch
        import metal_linalg_torch as mlt
        from metal_linalg_torch import __main__, bench, calibrate, _frontend
        q, r = mlt.qr(torch.eye(3).expand(2, 3, 3))
        assert torch.allclose(q @ r, torch.eye(3).expand(2, 3, 3))
        rc = __main__.main(["info"])
        assert not [m for m in sys.modules if m.split(".")[0] in ("mlx", "metal_linalg")]
        raise SystemExit(rc)
        """
    )
    out = _run(code)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "routing policy per op" in out.stdout


@pytest.mark.parametrize("op", OPS)
def test_bad_policy_update_changes_nothing(op):
    get, set_, reset = (
        getattr(mlt, f"{k}") for k in (f"{op}_policy", f"set_{op}_policy", f"reset_{op}_policy")
    )
    source = getattr(mlt, f"{op}_policy_source")
    before, src = get(), source()
    try:
        # The first field is valid; the second is not: nothing may be set.
        with pytest.raises(TypeError, match="gpu_min_batch must be an int"):
            set_(cpu_kernel_max_n=before["cpu_kernel_max_n"] + 3, gpu_min_batch="2")
        assert get() == before and source() == src
        with pytest.raises(ValueError, match="must be in"):
            set_(cpu_kernel_max_n=before["cpu_kernel_max_n"] + 3, gpu_min_batch=-1)
        assert get() == before and source() == src
        with pytest.raises(ValueError, match="unknown field"):
            set_(cpu_kernel_max_n=1, nope=2)
        assert get() == before and source() == src
        with pytest.raises(ValueError, match="must be in"):
            set_(gpu_min_batch=2**63)
        assert get() == before
    finally:
        reset()


def test_unknown_op_is_a_value_error():
    from metal_linalg_torch import queries

    with pytest.raises(ValueError, match="unknown op 'lu'"):
        queries.policy("lu")


def test_calibration_notice_is_one_short_line():
    notice = _shared.queries.calibration_notice
    text = notice("metal_linalg_torch", ["eigh"], "AMD EPYC 7B13 64-Core")
    assert "\n" not in text and len(text) <= 170
    assert text.startswith("metal_linalg_torch: eigh uses") and "calibrate" in text
    text = notice("metal_linalg_torch", ["eigh", "solve"], "AMD EPYC 7B13 64-Core")
    assert text.startswith("metal_linalg_torch: eigh, solve use untuned defaults on 'AMD")
    text = notice("metal_linalg_torch", ["qr", "eigh"], "AMD EPYC 7B13 64-Core", every=True)
    assert text.startswith("metal_linalg_torch: every op uses untuned") and len(text) <= 170
