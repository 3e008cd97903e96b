"""The MLX package's command line, its shared code and its policy rules: the same commands, flags
and files as the torch package, no torch import, bars of the plot drawn from 1x."""

from __future__ import annotations

import filecmp
import json
import math
import sys
import textwrap
from pathlib import Path

import metal_linalg as ml
import numpy as np
import pytest
import subproc
from _mlx_helpers import POLICY_OPS
from metal_linalg import _shared
from metal_linalg._shared import bench, calibrate, cli

OPS = POLICY_OPS  # every op has a routing policy
REPO_SHARED = Path(__file__).resolve().parents[3] / "python-shared" / "_shared"


def run_python(code: str, env_extra: dict | None = None, args=("-c",), timeout=300):
    cmd = [*args, textwrap.dedent(code)] if code else [*args]
    notice = {"METAL_LINALG_NO_CALIBRATION_NOTICE": "1"}
    return subproc.run(cmd, notice, env_extra, timeout=timeout, cwd=str(Path(__file__).parent))


def cli_run(*args, env_extra=None):
    return run_python("", env_extra, args=("-m", "metal_linalg", *args))


# ---- shared code: shipped, identical, no torch ----


def test_shared_code_ships_inside_the_installed_package():
    package_dir = Path(ml.__file__).parent
    assert Path(_shared.__file__).parent == package_dir / "_shared"
    if REPO_SHARED.is_dir():
        names = sorted(p.name for p in REPO_SHARED.glob("*.py"))
        assert names and sorted(p.name for p in (package_dir / "_shared").glob("*.py")) == names
        _, mismatch, errors = filecmp.cmpfiles(REPO_SHARED, package_dir / "_shared", names, False)
        assert not mismatch and not errors, (mismatch, errors)


def test_package_cli_and_bench_work_with_torch_not_importable(tmp_path):
    code = subproc.BLOCK_IMPORT.format(top="torch") + textwrap.dedent(
        f"""
        import mlx.core as mx
        import metal_linalg as ml
        from metal_linalg import __main__, _bench, _calibrate, _frontend
        w = ml.eigvalsh(mx.array([[2.0, 1.0], [1.0, 2.0]]))
        assert [round(v, 5) for v in w.tolist()] == [1.0, 3.0]
        assert not _frontend.GPU_PEERS  # the package registers no peer of another framework
        rc = __main__.main(["info"])
        rc |= __main__.main(["bench", "--device", "cpu", "--ops", "qr", "--n", "4", "--batch", "2",
                             "--quick", "--out", {str(tmp_path)!r}, "--name", "b"])
        bad = [m for m in sys.modules if m.split(".")[0] in ("torch", "metal_linalg_torch")]
        assert not bad, bad
        raise SystemExit(rc)
        """
    )
    out = run_python(code)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "b.json").exists()


@pytest.mark.parametrize("op", OPS)
def test_bad_policy_update_changes_nothing(op):
    get, set_ = getattr(ml, f"{op}_policy"), getattr(ml, f"set_{op}_policy")
    source = getattr(ml, f"{op}_policy_source")
    before, src = get(), source()
    try:
        with pytest.raises(TypeError, match="gpu_min_batch must be an int"):
            set_(cpu_kernel_max_n=before["cpu_kernel_max_n"] + 3, gpu_min_batch=1.5)
        assert get() == before and source() == src
        with pytest.raises(ValueError, match="must be in"):
            set_(cpu_kernel_max_n=before["cpu_kernel_max_n"] + 3, gpu_max_n=-4)
        assert get() == before and source() == src
    finally:
        getattr(ml, f"reset_{op}_policy")()


def test_backend_query_names_the_device_it_answers_for():
    import mlx.core as mx

    assert ml.eigh_backend(8, 4, device="cpu").startswith("cpu:")
    with pytest.raises(ValueError, match="device must be 'cpu' or 'gpu'"):
        ml.eigh_backend(8, 4, device="tpu")
    if not mx.is_available(mx.gpu):
        with pytest.raises(ValueError, match="no GPU backend"):
            ml.eigh_backend(8, 4, device="gpu")


# ---- bench: plot, estimate, the CLI ----


def test_speedup_bars_start_at_1x(tmp_path):
    rec = [
        bench.Record(
            "qr", 8, 8, b, "cpu:x", {"metal_linalg": {"best_ms": 1.0}, "numpy": {"best_ms": t}}
        )
        for b, t in ((1, 0.997), (2, 1.3), (4, 0.5))
    ]
    spans = bench.plot(rec, str(tmp_path / "p.png"), "t")
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    expected = [(0.997, 1.0), (1.0, 1.3), (0.5, 1.0)]
    assert [tuple(round(v, 6) for v in s) for s in spans["qr"]] == expected


def test_time_estimate_follows_the_timing_rules():
    points = bench.grid(["eigh"], [(8, 8)], [1, 64], 10**9)

    def per_call(name, p):
        return (0.001 if name == "ours" else 0.002) * p.batch

    # ours: 1 ms -> warm-up + 20 runs; 64 ms -> warm-up + max(3, int(1 / 0.064)) = 15 runs.
    # peer: 2 ms -> warm-up + 20 runs; 128 ms -> warm-up + max(3, int(1 / 0.128)) = 7 runs.
    est = bench.estimate_seconds(points, per_call, ["ours", "peer"], 3, 1.0, 10.0)
    assert math.isclose(est, 0.001 * 21 + 0.064 * 16 + 0.002 * 21 + 0.128 * 8)
    # A call slower than slow_s is timed once.
    slow = bench.estimate_seconds(points[:1], lambda n, p: 20.0, ["a", "b"], 3, 1.0, 10.0)
    assert math.isclose(slow, 40.0)


def test_probe_rates_extrapolate_linearly_in_batch():
    calls = []

    def run(op):
        def call(x):
            calls.append(x.shape)

        return call

    impl = bench.Impl("fake", lambda a: a, run)
    rates = bench.probe_rates([impl], ["qr"])
    fixed, rate = rates[("fake", "qr")]
    assert fixed >= 0 and rate > 0
    assert {(1, 8, 8), (64, 32, 32)} <= set(calls)
    per_call = bench.per_call_from_rates(rates)
    small, big = bench.Point("qr", 32, 32, 64), bench.Point("qr", 32, 32, 6400)
    assert per_call("fake", big) > per_call("fake", small) >= fixed
    assert per_call("unprobed", big) == 0.0  # an implementation not probed adds nothing


def test_cli_bench_files_and_flags(tmp_path):
    out = cli_run(
        "bench", "--device", "cpu", "--ops", "eigh", "svd", "--n", "4", "--shapes", "6x3",
        "--batch", "1", "8", "--quick", "--out", str(tmp_path), "--name", "t",
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "estimated time: about" in out.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json", "t.md", "t.png"]
    data = json.loads((tmp_path / "t.json").read_text())
    points = {(r["op"], r["m"], r["n"], r["batch"]) for r in data["results"]}
    assert points == {
        ("eigh", 4, 4, 1), ("eigh", 4, 4, 8), ("svd", 4, 4, 1), ("svd", 4, 4, 8),
        ("svd", 6, 3, 1), ("svd", 6, 3, 8),
    }  # fmt: skip
    for r in data["results"]:
        assert set(r["times"]) == {"metal_linalg", "mx.linalg", "numpy"}
        assert r["times"]["metal_linalg"]["best_ms"] > 0 and r["speedup_vs_best_peer"] > 0
    assert data["meta"]["device"] == "cpu" and data["meta"]["mlx"]
    assert (tmp_path / "t.md").read_text().count("\n| svd |") == 4


def test_cli_default_bench_offers_quick_mode(tmp_path):
    # The default grid, capped so that only its 8x8 batch-1 point remains.
    out = cli_run(
        "bench", "--device", "cpu", "--ops", "eigvalsh", "--max-work", "64", "--out", str(tmp_path)
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 point on cpu" in out.stdout and "estimated time: about" in out.stdout
    assert "`--quick` runs" in out.stdout


def test_cli_rejects_unknown_peer_and_missing_gpu():
    import mlx.core as mx

    out = cli_run("bench", "--device", "cpu", "--peers", "cupy")
    assert out.returncode == 2 and "unknown peer" in out.stderr and "Traceback" not in out.stderr
    if not mx.is_available(mx.gpu):
        out = cli_run("bench", "--device", "gpu", "--quick")
        assert out.returncode == 2 and "has no GPU" in out.stderr


def test_cli_calibrate_dry_run_writes_nothing(tmp_path):
    policy = tmp_path / "machine.policy"
    out = cli_run(
        "calibrate", "--ops", "eigvalsh", "--dry-run",
        env_extra={"METAL_LINALG_POLICY_FILE": str(policy)},
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "eigvalsh cpu_kernel_max_n" in out.stdout and "not written" in out.stdout
    assert not policy.exists()


def test_cli_calibrate_writes_policy_and_prints_real_source(tmp_path):
    policy = tmp_path / "machine.policy"
    policy.write_text("# kept\nqr gpu_min_batch 7\neigvalsh cpu_kernel_max_n 999\n")
    env = {"METAL_LINALG_POLICY_FILE": str(policy)}
    out = cli_run("calibrate", "--ops", "eigvalsh", env_extra=env)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = [ln for ln in policy.read_text().splitlines() if ln and not ln.startswith("#")]
    measured = [ln for ln in lines if ln.startswith("eigvalsh cpu_kernel_max_n ")]
    assert "qr gpu_min_batch 7" in lines and len(measured) == 1
    assert "# kept" in policy.read_text()
    value = int(measured[0].split()[2])
    assert 0 <= value < 999
    check = run_python(
        "import metal_linalg as ml\n"
        "print(ml.calibration_status()['eigvalsh'], ml.eigvalsh_policy()['cpu_kernel_max_n'],"
        " ml.qr_policy()['gpu_min_batch'], ml.eigvalsh_policy_source(), sep='|')\n",
        env,
    )
    status, got, qr_batch, source = check.stdout.strip().split("|")
    assert (status, got, qr_batch) == ("tuned", str(value), "7")
    assert "<device>" not in out.stdout and f"source {source}" in out.stdout


def test_cli_calibrate_checks_the_destination_first(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    env = {"METAL_LINALG_POLICY_FILE": str(blocker / "cache" / "m.policy")}
    out = cli_run("calibrate", env_extra=env)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and "nothing was measured" in out.stderr
    assert "calibrating" not in out.stdout
    out = cli_run("calibrate", "--ops", "qr", "--json-out", str(blocker / "x.json"))
    assert out.returncode == 2 and "--json-out" in out.stderr


def test_cli_same_commands_and_flags_as_the_torch_package():
    ours = cli.parser("metal_linalg")
    theirs = cli.parser("metal_linalg_torch")

    def flags(p):
        sub = next(a for a in p._actions if a.dest == "cmd")
        return {
            name: sorted(o for a in sp._actions for o in a.option_strings)
            for name, sp in sub.choices.items()
        }

    assert flags(ours) == flags(theirs)
    assert set(flags(ours)) == {"info", "bench", "calibrate", "demo"}


def test_no_subcommand_runs_the_demo(tmp_path):
    out = cli_run(
        "--device",
        "cpu",
        "--ops",
        "svdvals",
        "--n",
        "5",
        "--batch",
        "3",
        "--out",
        str(tmp_path),
        "--name",
        "d",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "routing policy per op" in out.stdout
    data = json.loads((tmp_path / "d.json").read_text())
    assert [(r["op"], r["n"], r["batch"]) for r in data["results"]] == [("svdvals", 5, 3)]


def test_calibration_notice_is_short_and_one_line():
    code = (
        "import warnings, json\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as rec:\n"
        "    import metal_linalg as ml\n"
        "print(json.dumps([str(w.message) for w in rec if w.category is ml.CalibrationWarning]))\n"
    )
    out = run_python(
        code,
        {"METAL_LINALG_NO_CALIBRATION_NOTICE": "", "METAL_LINALG_POLICY_FILE": "/nonexistent/p"},
    )
    hits = json.loads(out.stdout.strip().splitlines()[-1])
    if not hits:  # a machine with a measured table for every op (the H200) has no notice
        assert set(ml.calibration_status().values()) == {"tuned"}, ml.calibration_status()
        pytest.skip("every op has a measured table on this machine: no notice to show")
    for h in hits:
        assert "\n" not in h and len(h) <= 200 and "python -m metal_linalg calibrate" in h


def test_calibrate_module_reports_host_phase_only_without_gpu():
    phases = calibrate.plan_phases(["qr"], cpu=True, host_gpu=False, device_gpu=False, lanes=False)
    assert phases == [("qr", "cpu_kernel")]
    phases = calibrate.plan_phases(["qr"], cpu=False, host_gpu=True, device_gpu=True, lanes=True)
    assert phases == [("qr", "lane"), ("qr", "gpu_min_batch"), ("qr", "host")]


def test_gpu_bench_implementations():
    """--device gpu: ours with stream=mx.gpu, mx.linalg (CPU stream) and NumPy as peers; the
    torch package only when benchmarks/mlx_torch_peer.py registers it, as a reference exactly
    when torch with CUDA is importable."""
    import importlib.util

    from metal_linalg import _frontend

    fe = _frontend.MlxFrontend()
    assert [i.name for i in fe.implementations("gpu")] == ["metal_linalg", "mx.linalg", "numpy"]
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "mlx_torch_peer.py"
    spec = importlib.util.spec_from_file_location("mlx_torch_peer", path)
    peer_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer_mod)
    saved = dict(_frontend.GPU_PEERS)
    try:
        peer_mod.register()
        fe = _frontend.MlxFrontend()
        impls = fe.implementations("gpu")
        names = [i.name for i in impls]
        assert names[:3] == ["metal_linalg", "mx.linalg", "numpy"]
        peer, why = peer_mod.torch_peer()
        if peer is None:
            assert names == ["metal_linalg", "mx.linalg", "numpy"]
            assert fe.metadata("gpu")["unavailable_peers"] == {"metal_linalg_torch": why}
        else:
            assert names[3] == "metal_linalg_torch" and impls[3].reference
        assert [i.name for i in fe.implementations("gpu", peers=["numpy"])] == [
            "metal_linalg",
            "numpy",
        ]
        assert "metal_linalg_torch" not in [i.name for i in fe.implementations("cpu")]
    finally:
        _frontend.GPU_PEERS.clear()
        _frontend.GPU_PEERS.update(saved)


def test_nominal_flops():
    assert bench.nominal_flops("eigh", 10, 10) == 9000
    assert bench.nominal_flops("qr", 64, 32) == bench.nominal_flops("qr", 32, 64)
    assert math.isclose(bench.nominal_flops("qr", 30, 30), 4 * 30**3 - 4 * 30**3 / 3)
    # thin svd: Golub-Reinsch (14mn^2 + 8n^3) for square, R-SVD (6mn^2 + 20n^3) when m >> n
    assert bench.nominal_flops("svd", 10, 10) == 22 * 1000
    assert bench.nominal_flops("svd", 1000, 10) == 6 * 1000 * 100 + 20 * 1000


def test_linear_systems_grid_flops_and_absent_peer_ops():
    # solve 8x8 with 16 right-hand sides x64: B over the work cap; 6x3: square-only ops skip it
    points = bench.grid(["inv", "solve", "qr"], [(8, 8), (6, 3)], [1, 64], 64 * 8 * 8, (1, 16))
    assert [(p.op, p.m, p.n, p.batch, p.nrhs) for p in points] == [
        ("inv", 8, 8, 1, 0), ("inv", 8, 8, 64, 0),
        ("solve", 8, 8, 1, 1), ("solve", 8, 8, 64, 1), ("solve", 8, 8, 1, 16),
        ("qr", 8, 8, 1, 0), ("qr", 8, 8, 64, 0), ("qr", 6, 3, 1, 0), ("qr", 6, 3, 64, 0),
    ]  # fmt: skip
    assert bench.point_text(points[4]) == "solve 8x8 (16 rhs) x1"
    assert bench.nominal_flops("cholesky", 30, 30) == 9000
    assert bench.nominal_flops("lu_factor", 30, 30) == 18000
    assert bench.nominal_flops("inv", 10, 10) == 2000
    assert bench.nominal_flops("solve", 30, 30, 2) == 18000 + 3600
    assert bench.nominal_flops("solve_triangular", 10, 10, 3) == 300
    assert bench.numpy_fns(np, "lu_factor") is None and bench.numpy_fns(np, "inv") is not None
    # An implementation without an op: no probe entry, no time in the estimate.
    impls = [bench.numpy_impl(), bench.Impl("fake", lambda a: a, lambda op: lambda x: None)]
    per_call = bench.per_call_from_rates(bench.probe_rates(impls, ["solve_triangular"]))
    p = bench.Point("solve_triangular", 8, 8, 4)
    assert per_call("numpy", p) is None and per_call("fake", p) >= 0
    assert bench.estimate_seconds([p], lambda n, p: None, ["numpy"], 3, 1.0, 10.0) == 0


def test_cli_bench_linear_systems(tmp_path):
    ops = ("cholesky", "solve", "inv", "lu_factor", "solve_triangular")
    out = cli_run(
        "bench", "--device", "cpu", "--ops", *ops, "--n", "6", "--batch", "3", "--nrhs", "2",
        "--quick", "--out", str(tmp_path), "--name", "ls",
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads((tmp_path / "ls.json").read_text())
    assert [(r["op"], r["n"], r["batch"], r["nrhs"]) for r in data["results"]] == [
        ("cholesky", 6, 3, 0), ("solve", 6, 3, 2), ("inv", 6, 3, 0), ("lu_factor", 6, 3, 0),
        ("solve_triangular", 6, 3, 2),
    ]  # fmt: skip
    for r in data["results"]:
        numpy_has = r["op"] in ("cholesky", "solve", "inv")
        assert set(r["times"]) == {"metal_linalg", "mx.linalg", *(["numpy"] if numpy_has else [])}
        assert all(t["best_ms"] > 0 and "error" not in t for t in r["times"].values()), r
        assert r["backend"] == "cpu:kernel:linsys_lanes" and r["speedup_vs_best_peer"] > 0
    md = (tmp_path / "ls.md").read_text()
    assert "| solve_triangular | 6x6 (2 rhs) | 3 |" in md and "Linear systems: A = " in md
    # The plot's panels in the bench's report order (the op table's).
    layout = bench.plot_layout(bench.load_records(str(tmp_path / "ls.json")))
    assert layout["ops"] == [op for op in bench.bench_ops() if op in ops]


# ---- bench: arguments, --out, partial results, spread, plots ----


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--batch", "0"), "argument --batch: must be >= 1, got 0"),
        (("--n", "-3"), "argument --n: must be >= 1, got -3"),
        (("--n", "eight"), "argument --n: expected an integer"),
        (("--shapes", "3y4"), "argument --shapes: shape '3y4'"),
        (("--max-work", "0"), "argument --max-work: must be >= 1"),
        (("--slow", "-1"), "argument --slow: must be a positive number"),
        (("--nrhs", "0"), "argument --nrhs: must be >= 1, got 0"),
        (("--ops", "solve", "--shapes", "6x3"), "solve takes square matrices only"),
        (("--ops", "eigh", "lu_factor", "--shapes", "6x3"), "eigh, lu_factor take square"),
        (("--ops", "qr", "svd", "--nrhs", "2"), "--nrhs applies to solve and solve_triangular"),
    ],
)
def test_cli_bench_rejects_bad_arguments_before_measuring(args, message):
    out = cli_run("bench", "--device", "cpu", *args)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and "estimated time" not in out.stdout


def test_cli_bench_checks_out_before_measuring(tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    for bad in (str(not_a_folder), "/proc/no-such-folder"):
        out = cli_run("bench", "--device", "cpu", "--n", "4", "--batch", "1", "--out", bad)
        assert out.returncode == 2, out.stdout + out.stderr
        assert f"--out {bad}: cannot write there" in out.stderr
        assert "nothing was measured" in out.stderr and "estimated time" not in out.stdout
        assert "Traceback" not in out.stderr


class _FakeFrontend:
    """The bench adapter over implementations given by the test (no real library calls)."""

    package, framework, framework_version, gpu_name = "fake", "fake", "0", "gpu"

    def __init__(self, impls):
        self._impls = impls
        self.q = ml._queries._q

    def implementations(self, device, peers=None):
        return self._impls

    def machine_peaks(self, device):
        return {"copy_bytes_per_s": 1e10, "fp32_flops_per_s": 1e11}

    def backend_label(self, op, m, n, batch, device):
        return "cpu:fake"


def test_spread_over_2x_is_flagged_in_the_reports(tmp_path):
    import time

    delays = iter([0.0] + [0.001, 0.008] * 50)  # warm-up, then runs 8x apart

    def noisy(op):
        return lambda x: time.sleep(next(delays))

    steady = bench.Impl("numpy", lambda a: a, lambda op: lambda x: None)
    fe = _FakeFrontend([bench.Impl("metal_linalg", lambda a: a, noisy), steady])
    points = bench.grid(["qr"], [(4, 4)], [1], 10**9)
    rec = bench.run_grid(fe, points, "cpu", min_runs=2, budget_s=0.001, progress=False)
    assert rec[0].times["metal_linalg"]["spread"] > 2 and "metal_linalg" in rec[0].noisy
    assert rec[0].as_dict()["noisy"] == rec[0].noisy
    md = bench.markdown_table(rec)
    assert "runs spread > 2x" in md and "!" in md.splitlines()[2]
    assert bench.noisy_lines(rec)[0].startswith("qr 4x4 x1: metal_linalg ")
    quiet = bench.Record("qr", 4, 4, 1, "cpu:x", {"metal_linalg": {"best_ms": 1.0, "spread": 1.5}})
    assert quiet.noisy == [] and bench.noisy_lines([quiet]) == []


def test_partial_results_are_written_after_every_point(tmp_path):
    seen = []

    def run(op):
        def call(x):
            if len(seen) >= 2 and x.shape[0] == 8:
                raise KeyboardInterrupt  # the run stops during the second point
            seen.append(x.shape)

        return call

    fe = _FakeFrontend([bench.Impl("metal_linalg", lambda a: a, run)])
    path = str(tmp_path / "r.json")
    meta = {"device_name": "fake", "date": "now"}
    points = bench.grid(["qr"], [(4, 4)], [1, 8], 10**9)
    with pytest.raises(KeyboardInterrupt):
        bench.run_grid(
            fe,
            points,
            "cpu",
            min_runs=1,
            budget_s=0.0,
            progress=False,
            on_record=lambda r: bench.write_json(path, meta, r, planned=len(points)),
        )
    data = json.loads(Path(path).read_text())
    assert data["meta"]["complete"] is False and data["meta"]["points_planned"] == 2
    assert [(r["op"], r["batch"]) for r in data["results"]] == [("qr", 1)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no side file left


def test_plot_names_peers_and_shares_one_y_range(tmp_path):
    def rec(op, b, ours, **peers):
        times = {"metal_linalg": {"best_ms": ours}, **{k: {"best_ms": v} for k, v in peers.items()}}
        return bench.Record(op, 8, 8, b, "cpu:x", times)

    records = [
        rec("qr", 1, 1.0, numpy=3.0, torch=2.0),
        rec("qr", 64, 1.0, numpy=0.5, torch=0.9),
        rec("eigh", 1, 1.0, numpy=40.0, torch=50.0),
    ]
    lay = bench.plot_layout(records)
    assert lay["peers"] == ["numpy", "torch"]
    assert lay["best"] == ["torch", "numpy"]  # qr x1: torch; qr x64 and eigh: numpy
    lo, hi = lay["ylim"]
    assert lo <= 0.5 / 1.3 and hi >= 40.0  # both panels: the range of all bars
    assert len(set(lay["colour"].values())) == 2
    bench.plot(records, str(tmp_path / "p.png"), "t")
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_plural():
    assert bench.plural(1, "point") == "1 point" and bench.plural(2, "point") == "2 points"
    assert bench.plural(0, "point") == "0 points"


def test_summary_counts_one_point_in_the_singular():
    one = bench.Record("qr", 4, 4, 1, "cpu:x", {"metal_linalg": {"best_ms": 1.0}})
    one.times["numpy"] = {"best_ms": 2.0}
    text = bench.summary([one])
    assert "over 1 point;" in text and "points" not in text, text


def test_progress_is_plain_lines_without_a_terminal(capsys, monkeypatch):
    fe = _FakeFrontend([bench.Impl("metal_linalg", lambda a: a, lambda op: lambda x: None)])
    points = bench.grid(["qr"], [(4, 4)], [1, 8], 10**9)
    for rich_missing in (False, True):
        if rich_missing:
            monkeypatch.setitem(sys.modules, "rich.progress", None)
        bench.run_grid(fe, points, "cpu", min_runs=1, budget_s=0.0, weights=[1.0, 3.0])
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 2, lines
        assert (
            lines[0].startswith("1/2 points (qr 4x4 x1): elapsed ")
            and "remaining about" in lines[0]
        )
        assert lines[1].startswith("2/2 points (qr 4x4 x8)") and lines[1].endswith(
            "remaining about 0 s"
        )


def test_bar_labels_tell_a_near_1x_loss_and_mark_noisy_points(tmp_path):
    assert [bench.bar_label(v) for v in (0.997, 1.02, 1.0, 2.41, 173.2)] == [
        "0.997",
        "1.02",
        "1",
        "2.4",
        "173",
    ]
    assert bench.bar_label(3.0, noisy=True) == "3!"
    noisy = bench.Record(
        "qr",
        8,
        8,
        1,
        "cpu:x",
        {"metal_linalg": {"best_ms": 1.0, "spread": 3.0}, "numpy": {"best_ms": 2.0}},
    )
    bench.plot([noisy], str(tmp_path / "p.png"), "t")
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_microsecond_calls_are_timed_in_groups():
    import time

    calls = []

    def make(seconds):
        return lambda op: lambda x: calls.append(time.sleep(seconds) if seconds else 0)

    # a call of about a microsecond: each run times a group of calls (at least MIN_RUN_S)
    fast = bench.Impl("fast", lambda a: a, make(0.0))
    groups = []
    for _ in range(3):  # the group is sized from one call, which a busy machine may stall
        calls.clear()
        ms = bench.time_runs(fast.run("qr"), None, fast, 3, 0.001, 10.0)
        groups.append((len(calls) - 2) / len(ms))  # less the warm-up and the sizing call
        assert len(ms) >= 3 and groups[-1] == int(groups[-1]), (len(calls), len(ms))
        if groups[-1] > 10:
            break
    assert groups[-1] > 10, groups
    assert min(ms) < 0.05  # milliseconds per call, not per group
    # a call longer than MIN_RUN_S: one call per run, no sizing call
    calls.clear()
    slow = bench.Impl("slow", lambda a: a, make(2 * bench.MIN_RUN_S))
    ms = bench.time_runs(slow.run("qr"), None, slow, 3, 0.001, 10.0)
    assert len(calls) == 1 + len(ms) and min(ms) >= 2 * bench.MIN_RUN_S * 1e3
    # clocked by the implementation (CUDA events): one call per run
    calls.clear()
    timed = bench.Impl("timed", lambda a: a, make(0.0), timer=lambda call, x: call(x) or 0.001)
    ms = bench.time_runs(timed.run("qr"), None, timed, 3, 0.001, 10.0)
    assert len(calls) == 1 + len(ms) and ms == [0.001] * len(ms)
    # the estimate counts a run of a short call as MIN_RUN_S
    points = bench.grid(["qr"], [(4, 4)], [1], 10**9)
    est = bench.estimate_seconds(points, lambda n, p: 1e-6, ["a"], 3, 1.0, 10.0)
    assert math.isclose(est, 1e-6 + bench.MIN_RUN_S * bench.RUNS_MAX)
