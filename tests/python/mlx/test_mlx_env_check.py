"""Settings that would fail silently: an unknown METAL_LINALG_* variable and a policy file that does
not exist warn once (MetalLinalgWarning, as in the torch package, naming the closest valid
setting); `info` says the file is missing."""

from __future__ import annotations

import json
import textwrap

import subproc

_CODE = """
import json, warnings
import mlx.core as mx
with warnings.catch_warnings(record=True) as rec:
    warnings.simplefilter("always")
    import metal_linalg as ml
    mx.eval(ml.eigvalsh(mx.eye(4), stream=mx.cpu))
    mx.eval(ml.qr(mx.eye(3), stream=mx.cpu))
    ml.reload_policy()
    mx.eval(ml.svdvals(mx.eye(2), stream=mx.cpu))
print(json.dumps([str(w.message) for w in rec if w.category is ml.MetalLinalgWarning]))
"""


def _run(args, **env):
    return subproc.run(args, env)


def test_unknown_setting_and_missing_policy_file_warn_once(tmp_path):
    missing = tmp_path / "nowhere" / "machine.policy"
    out = _run(
        ["-c", textwrap.dedent(_CODE)],
        METAL_LINALG_SVDVALS_GPU_MIN_BATH="4",
        METAL_LINALG_EIGH_BACKEND="cpu",
        METAL_LINALG_NO_CALIBRATION_NOTICE="1",
        METAL_LINALG_POLICY_FILE=str(missing),
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    typo = [w for w in got if "METAL_LINALG_SVDVALS_GPU_MIN_BATH is not" in w]
    assert len(typo) == 1 and "closest is METAL_LINALG_SVDVALS_GPU_MIN_BATCH" in typo[0], got
    assert sum("does not exist" in w and str(missing) in w for w in got) == 1, got
    assert not any("EIGH_BACKEND" in w or "NO_CALIBRATION_NOTICE is not" in w for w in got), got
    # Python warnings, not stderr.
    assert "is not a metal_linalg setting" not in out.stderr


def test_info_says_the_policy_file_does_not_exist(tmp_path):
    missing = tmp_path / "none.policy"
    out, line = subproc.policy_file_line("metal_linalg", missing)
    assert out.returncode == 0, out.stderr
    assert str(missing) in line and "does not exist" in line
