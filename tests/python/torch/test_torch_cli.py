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


LINSYS = ("cholesky", "solve", "inv", "lu_factor", "solve_triangular")


def _bench_here(*args) -> int:
    """`python -m metal_linalg_torch bench ARGS` in this process (no second torch import)."""
    from metal_linalg_torch import __main__

    return __main__.main(["bench", "--device", "cpu", *args])


def test_bench_linear_systems(tmp_path, capsys):
    """The linear systems in the bench: square points only, right-hand sides for solve and
    solve_triangular, torch.linalg everywhere and NumPy where it has the op."""
    rc = _bench_here(
        "--ops", *LINSYS, "--n", "8", "--shapes", "6x3", "--batch", "4", "--nrhs", "1", "3",
        "--quick", "--out", str(tmp_path), "--name", "ls",
    )  # fmt: skip
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "6x3 skipped" in out.err and "estimated time: about" in out.out
    data = json.loads((tmp_path / "ls.json").read_text())
    points = {(r["op"], r["m"], r["n"], r["batch"], r["nrhs"]) for r in data["results"]}
    assert points == {
        ("cholesky", 8, 8, 4, 0), ("inv", 8, 8, 4, 0), ("lu_factor", 8, 8, 4, 0),
        ("solve", 8, 8, 4, 1), ("solve", 8, 8, 4, 3),
        ("solve_triangular", 8, 8, 4, 1), ("solve_triangular", 8, 8, 4, 3),
    }  # fmt: skip
    for r in data["results"]:
        numpy_has = r["op"] in ("cholesky", "solve", "inv")
        assert set(r["times"]) == {"metal_linalg", "torch", *(["numpy"] if numpy_has else [])}
        assert all(t["best_ms"] > 0 and "error" not in t for t in r["times"].values()), r
        assert r["backend"].startswith("cpu:") and r["roofline_ms"] > 0
        assert r["speedup_vs_best_peer"] > 0
    md = (tmp_path / "ls.md").read_text()
    assert "| solve | 8x8 (3 rhs) | 4 |" in md and "| inv | 8x8 | 4 |" in md
    assert "numpy has no lu_factor, solve_triangular" in md
    assert (tmp_path / "ls.png").read_bytes()[:4] == b"\x89PNG"


def test_bench_linear_system_arguments_checked_before_measuring(tmp_path, capsys):
    import pytest

    for args, message in (
        (("--ops", "solve", "--shapes", "6x3"), "solve takes square matrices only"),
        (("--ops", "qr", "inv", "--shapes", "6x3", "5x2"), "inv takes square matrices only"),
        (("--ops", "qr", "--nrhs", "2"), "--nrhs applies to solve and solve_triangular only"),
    ):
        rc = _bench_here("--out", str(tmp_path), *args)
        out = capsys.readouterr()
        assert rc == 2 and message in out.err, out.err
        assert "estimated time" not in out.out
    with pytest.raises(SystemExit) as exit_:
        _bench_here("--ops", "solve", "--nrhs", "0")
    assert exit_.value.code == 2
    assert "argument --nrhs: must be >= 1, got 0" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_bench_linear_system_peers_agree_on_the_inputs():
    """Each linear system's input suits it (SPD, lower triangular, well conditioned), and ours and
    torch.linalg, as the bench calls them, give the same results on it."""
    import numpy as np
    import torch
    from metal_linalg_torch import _frontend
    from metal_linalg_torch._shared import bench

    for op in LINSYS:
        x = bench.make_input(bench.Point(op, 8, 8, 4, nrhs=2), seed=1)
        a = x[0] if isinstance(x, tuple) else x
        assert a.shape == (4, 8, 8) and np.linalg.cond(a.astype(np.float64)).max() < 50
        if op == "solve_triangular":
            assert not np.triu(a, 1).any() and x[1].shape == (4, 8, 2)
        if op == "cholesky":
            assert np.allclose(a, np.swapaxes(a, -1, -2)) and np.linalg.eigvalsh(a).min() > 0
        impls = _frontend.frontend().implementations("cpu", ["torch"])
        ours, peer = ((r if isinstance(r, tuple) else (r,)) for r in (
            i.run(op)(bench.prepared(i, x)) for i in impls
        ))  # fmt: skip
        assert len(ours) == len(peer) == (2 if op == "lu_factor" else 1)
        for o, p in zip(ours, peer):
            torch.testing.assert_close(o.float(), p.float(), rtol=1e-4, atol=1e-4)
