"""The command line: info, a tiny bench writing JSON/Markdown/PNG, and calibrate writing a policy file."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import subproc


def _cli(*args, env_extra=None, timeout=300):
    return subproc.run(["-m", "metal_linalg_torch", *args], env_extra, timeout=timeout)


def test_info_and_bench(tmp_path):
    out = _cli("info")
    assert out.returncode == 0, out.stderr
    for word in ("device", "LAPACK", "eigvalsh", "svdvals", "calibration", "cpu:"):
        assert word in out.stdout
    out = _cli(
        "bench",
        "--ops",
        "eigh",
        "svdvals",
        "--n",
        "8",
        "--shapes",
        "12x5",
        "--batch",
        "1",
        "16",
        "--out",
        str(tmp_path),
        "--name",
        "t",
        "--quick",
    )
    assert out.returncode == 0, out.stderr
    assert "estimated time: about" in out.stdout
    data = json.loads((tmp_path / "t.json").read_text())
    points = {(r["op"], r["m"], r["n"], r["batch"]) for r in data["results"]}
    assert points == {
        ("eigh", 8, 8, 1),
        ("eigh", 8, 8, 16),
        ("svdvals", 8, 8, 1),
        ("svdvals", 8, 8, 16),
        ("svdvals", 12, 5, 1),
        ("svdvals", 12, 5, 16),
    }
    for r in data["results"]:
        assert set(r["times"]) == {"metal_linalg", "torch", "numpy"}
        assert all(t["best_ms"] > 0 and t["median_ms"] >= t["best_ms"] for t in r["times"].values())
        assert r["speedup_vs_best_peer"] > 0 and r["backend"].startswith("cpu:")
    assert "| eigh | 8x8 | 16 |" in (tmp_path / "t.md").read_text()
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    assert data["meta"]["device"] == "cpu" and data["meta"]["torch"]


def test_calibrate_writes_policy_file(tmp_path):
    path = tmp_path / "machine.policy"
    env = {"METAL_LINALG_POLICY_FILE": str(path), "METAL_LINALG_NO_CALIBRATION_NOTICE": "1"}
    out = _cli("calibrate", "--ops", "qr", "--cpu-only", env_extra=env)
    assert out.returncode == 0, out.stderr
    printed = out.stdout
    lines = [ln.split() for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    assert [ln[:2] for ln in lines] == [["qr", "cpu_kernel_max_n"]] and int(lines[0][2]) >= 0
    code = (
        "import metal_linalg_torch as m, json; "
        "print(json.dumps([m.calibration_status()['qr'], m.qr_policy_source()]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )
    status, source = json.loads(out.stdout.strip().splitlines()[-1])
    assert status == "tuned" and source.startswith("tuned:")
    # calibrate printed the real source of each op, the one a fresh import sees.
    assert "<device>" not in printed and f"source {source}" in printed


def test_no_subcommand_runs_the_demo(tmp_path):
    """No subcommand: info, then a quick bench (bench options may follow)."""
    out = _cli(
        "--ops", "eigvalsh", "--n", "8", "--batch", "4", "--out", str(tmp_path), "--name", "demo"
    )
    assert out.returncode == 0, out.stderr
    assert "routing policy per op" in out.stdout and "backend per call" in out.stdout
    data = json.loads((tmp_path / "demo.json").read_text())
    assert [(r["op"], r["n"], r["batch"]) for r in data["results"]] == [("eigvalsh", 8, 4)]


def test_info_shows_every_policy_field_whole():
    import metal_linalg_torch as mlt
    from metal_linalg_torch._frontend import frontend
    from metal_linalg_torch._shared import cli
    from rich.console import Console

    for width in (80, 160):
        con = Console(width=width, record=True, color_system=None)
        assert cli.cmd_info(frontend(), None, out=con) == 0
        text = con.export_text()
        for field in mlt.eigh_policy():
            assert field in text, (width, field)
        for op in ("qr", "eigh", "eigvalsh", "svd", "svdvals"):
            assert op in text
        assert "…" not in text


def test_bench_checks_arguments_and_out_before_measuring(tmp_path):
    for args, message in (
        (("--batch", "0"), "argument --batch: must be >= 1, got 0"),
        (("--n", "-3"), "argument --n: must be >= 1, got -3"),
        # a folder in the name would make the writes fail after measuring
        (("--name", "sub/run"), "argument --name: must be a file name without a folder"),
        (("--name", ""), "argument --name: must be a file name without a folder"),
    ):
        out = _cli("bench", "--device", "cpu", *args)
        assert out.returncode == 2 and message in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = _cli("bench", "--device", "cpu", "--n", "4", "--batch", "1", "--out", str(blocker))
    assert out.returncode == 2 and "cannot write there" in out.stderr, out.stderr
    assert "nothing was measured" in out.stderr and "estimated time" not in out.stdout


def test_calibrate_checks_its_budget_before_measuring(tmp_path):
    # a budget of 0, below 0 or NaN would measure nothing (or without end) and still write
    env = {"METAL_LINALG_POLICY_FILE": str(tmp_path / "machine.policy")}
    for value in ("0", "-3", "nan", "soon"):
        out = _cli("calibrate", "--ops", "eigvalsh", "--budget-s", value, env_extra=env)
        assert out.returncode == 2 and "argument --budget-s" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and "calibrating" not in out.stdout
    assert not (tmp_path / "machine.policy").exists()


def test_info_names_cpu_only_and_gpu_cores():
    out = _cli("info", env_extra={"METAL_LINALG_NO_CALIBRATION_NOTICE": "1"})
    assert out.returncode == 0, out.stderr
    assert "CPU only:" in out.stdout and "GPU cores:" in out.stdout
    assert "on the default device" in out.stdout
