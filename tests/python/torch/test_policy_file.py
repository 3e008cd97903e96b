"""The per-machine policy file: `calibrate` checks an existing one before measuring (a FIFO, a
device, a huge or binary file, malformed lines: a clear error, nothing measured); the core applies
a file whole or not at all (at import and on reload_policy()), and '#' comments and blank lines
are fine. Each case runs in a subprocess, so no test here changes this process's policy."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest
import subproc

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


def _run(code: str, timeout: float = 120, **env) -> subprocess.CompletedProcess:
    return subproc.run(
        ["-c", textwrap.dedent(code)],
        env,
        {"METAL_LINALG_NO_CALIBRATION_NOTICE": "1"},
        timeout=timeout,
    )


# Runs `calibrate --ops qr --cpu-only` once per (path, label) in CASES with the measurement
# replaced by one that records the call; prints one JSON line per case.
CALIBRATE = """
import contextlib, io, json, os, sys, warnings
from metal_linalg_torch._frontend import frontend
from metal_linalg_torch._shared import calibrate as cal, cli

warnings.simplefilter("ignore")
RESULT = {
    "meta": {"device": "D", "date": "d", "torch": "t", "version": "v", "budget_s": None},
    "chosen": {"qr": {"cpu_kernel_max_n": 8}},
    "notes": {"qr": []},
    "points": {"qr": {}},
}
measured = []

def measure(*args, **kwargs):
    measured.append(True)
    return RESULT

cal.measure = measure
fe = frontend()
for path in CASES:
    os.environ["METAL_LINALG_POLICY_FILE"] = path
    fe.q.policy_file = lambda path=path: path
    measured.clear()
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        args = cli.parser("metal_linalg_torch").parse_args(["calibrate", "--ops", "qr", "--cpu-only"])
        code = cli.cmd_calibrate(fe, args)
    print(json.dumps([path, code, bool(measured), err.getvalue()]))
"""


def test_calibrate_checks_the_policy_file_before_measuring(tmp_path):
    fifo = tmp_path / "fifo.policy"
    os.mkfifo(fifo)
    sparse = tmp_path / "sparse.policy"
    with open(sparse, "wb") as f:
        f.truncate(2 << 30)  # 2 GiB, no blocks on disk
    zero = tmp_path / "zero.policy"
    zero.symlink_to("/dev/zero")
    junk = tmp_path / "junk.policy"
    junk.write_bytes(bytes(range(256)) * 8)
    malformed = tmp_path / "malformed.policy"
    malformed.write_text("# mine\nqr gpu_min_batch 3\nthis is not a policy line\n")
    good = tmp_path / "good.policy"
    good.write_text("# my notes\n\neigh gpu_min_batch 5  # keep\n")
    expected = {
        str(fifo): "is not a regular file",
        str(zero): "is not a regular file",
        str(sparse): "more than the 1048576 a policy file may have",
        str(junk): "is not text",
        str(malformed): "line 3: 'this is not a policy line'",
    }
    cases = [*expected, str(good)]
    out = _run(CALIBRATE.replace("CASES", repr(cases)), timeout=120)
    assert out.returncode == 0, out.stderr
    results = {p: rest for p, *rest in map(json.loads, out.stdout.splitlines())}
    assert set(results) == set(cases), out.stdout
    for path, words in expected.items():
        code, measured, err = results[path]
        assert (code, measured) == (2, False), (path, code, measured, err)
        assert words in err and "nothing was measured" in err, (path, err)
        assert "Traceback" not in err, err
    code, measured, err = results[str(good)]
    assert (code, measured) == (0, True), err
    text = good.read_text()
    assert "qr cpu_kernel_max_n 8" in text and "# my notes" in text
    assert "eigh gpu_min_batch 5  # keep" in text
    assert malformed.read_text().endswith("this is not a policy line\n")  # left as it was
    assert sparse.stat().st_size == 2 << 30 and fifo.is_fifo()


POLICY = """
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import metal_linalg_torch as m
    start = m.eigh_policy()["gpu_min_batch"], m.qr_policy()["gpu_min_batch"]
    with open(PATH, "w") as f:
        f.write(NEXT)
    try:
        m.reload_policy()
        error = None
    except ValueError as exc:
        error = str(exc)
    after = m.eigh_policy()["gpu_min_batch"], m.qr_policy()["gpu_min_batch"]
print(json.dumps([[str(w.message) for w in caught], start, error, after]))
"""


def _policy(tmp_path, first: str, then: str):
    path = tmp_path / "machine.policy"
    path.write_text(first)
    code = POLICY.replace("PATH", repr(str(path))).replace("NEXT", repr(then))
    out = _run(code, METAL_LINALG_POLICY_FILE=str(path))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_comments_and_blank_lines_are_fine(tmp_path):
    text = (
        "# written by hand\n\n   \n# tuned on device: another machine\n"
        "eigh gpu_min_batch 7   # trailing\r\n\t# indented\nqr gpu_min_batch 9\n"
    )
    warned, start, error, after = _policy(tmp_path, text, text.replace("7", "8"))
    assert start == [7, 9] and error is None and after == [8, 9], (warned, error)
    assert not any("policy file" in w for w in warned), warned


def test_reload_applies_all_or_nothing(tmp_path):
    first = "eigh gpu_min_batch 7\nqr gpu_min_batch 9\n"
    then = "eigh gpu_min_batch 70\nqr gpu_min_batch 90\neigh gpu_min_bach 4\n"
    warned, start, error, after = _policy(tmp_path, first, then)
    assert start == [7, 9], warned
    assert error and "line 3: 'eigh gpu_min_bach 4'" in error and "unchanged" in error, error
    assert after == [7, 9], "a failed reload applied some lines"


def test_a_malformed_file_is_not_applied_at_import(tmp_path):
    # Values no table sets, so the default (or this machine's table) is told from the file's.
    bad = "eigh gpu_min_batch 7001\nqr gpu_min_batch 9 10\n"
    warned, start, error, after = _policy(tmp_path, bad, "eigh gpu_min_batch 5001\n")
    assert start[0] != 7001, "a malformed file was partly applied"
    assert any("line 2: 'qr gpu_min_batch 9 10'" in w and "none of it applied" in w for w in warned)
    assert error is None and after == [5001, start[1]]


def test_another_devices_file_warns(tmp_path):
    text = "# device: Some Other Device 9000\neigh gpu_min_batch 7001\n"
    warned, start, error, after = _policy(tmp_path, text, text)
    assert start[0] != 7001 and after == start and error is None
    assert any("is for device 'Some Other Device 9000'" in w for w in warned), warned
