"""Settings that would fail silently: an unknown METAL_LINALG_* variable and a policy file that does
not exist warn once (MetalLinalgWarning, naming the closest valid setting); `info` says the file
is missing."""

from __future__ import annotations

import json
import textwrap

import subproc

_CODE = """
import json, warnings
import torch
with warnings.catch_warnings(record=True) as rec:
    warnings.simplefilter("always")
    import metal_linalg_torch as m
    m.eigvalsh(torch.eye(4))
    m.qr(torch.eye(3))
    m.reload_policy()
    m.svdvals(torch.eye(2))
print(json.dumps([str(w.message) for w in rec if w.category is m.MetalLinalgWarning]))
"""


def _run(args, **env):
    return subproc.run(args, env)


def _warnings(tmp_path, **env):
    out = _run(["-c", textwrap.dedent(_CODE)], **env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_unknown_setting_and_missing_policy_file_warn_once(tmp_path):
    missing = tmp_path / "nowhere" / "machine.policy"
    got = _warnings(
        tmp_path,
        METAL_LINALG_EIGH_CPU_KERNEL_MAXN="4",
        METAL_LINALG_POLICY_FILES="x",
        METAL_LINALG_QR_BACKEND="cpu",
        METAL_LINALG_NO_CALIBRATION_NOTICE="1",
        METAL_LINALG_POLICY_FILE=str(missing),
    )
    typo = [w for w in got if "METAL_LINALG_EIGH_CPU_KERNEL_MAXN is not" in w]
    assert len(typo) == 1 and "closest is METAL_LINALG_EIGH_CPU_KERNEL_MAX_N" in typo[0], got
    plural = [w for w in got if "METAL_LINALG_POLICY_FILES is not" in w]
    assert len(plural) == 1 and "closest is METAL_LINALG_POLICY_FILE)" in plural[0], got
    assert sum("does not exist" in w and str(missing) in w for w in got) == 1, got
    # Valid settings, the package's own included, are not reported.
    assert not any("QR_BACKEND" in w or "NO_CALIBRATION_NOTICE is not" in w for w in got), got


def test_valid_settings_and_existing_policy_file_are_quiet(tmp_path):
    path = tmp_path / "machine.policy"
    path.write_text("# measured\n")
    got = _warnings(
        tmp_path,
        METAL_LINALG_SVD_GPU_BLOCKED_MIN_N="0",
        METAL_LINALG_CPU_THREADS="1",
        METAL_LINALG_NO_CALIBRATION_NOTICE="1",
        METAL_LINALG_POLICY_FILE=str(path),
    )
    assert not any("is not a metal_linalg setting" in w or "does not exist" in w for w in got)


def test_info_says_the_policy_file_does_not_exist(tmp_path):
    missing = tmp_path / "none.policy"
    out, line = subproc.policy_file_line("metal_linalg_torch", missing)
    assert out.returncode == 0, out.stderr
    assert str(missing) in line and "does not exist" in line
    missing.write_text("# measured\n")
    out, line = subproc.policy_file_line("metal_linalg_torch", missing)
    assert str(missing) in line and "does not exist" not in line
