"""Concurrent calls from Python threads give the same results as serial calls."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import metal_linalg_torch as mlt
import pytest
import torch

THREADS, CALLS = 8, 200


def test_threads_identical_results():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(4, 12, 8, generator=g)
    s = torch.randn(4, 9, 9, generator=g)
    s = (s + s.mT) / 2
    calls = [
        lambda: mlt.qr(a),
        lambda: mlt.eigh(s),
        lambda: (mlt.eigvalsh(s),),
        lambda: mlt.svd(a),
        lambda: (mlt.svdvals(a),),
    ]
    expected = [tuple(t.clone() for t in c()) for c in calls]
    failures = []
    barrier = threading.Barrier(THREADS)

    def worker(tid):
        barrier.wait()
        for i in range(CALLS):
            k = (tid + i) % len(calls)
            got = calls[k]()
            if not all(torch.equal(x, y) for x, y in zip(got, expected[k])):
                failures.append((tid, i, k))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, f"{len(failures)} calls differed, first: {failures[:3]}"


def test_threads_with_cpu_thread_cap_changes():
    """Changing the CPU thread cap while others compute is safe and keeps results."""
    a = torch.randn(64, 16, 16, generator=torch.Generator().manual_seed(1))
    ref = mlt.svdvals(a)
    before = mlt.get_cpu_threads()
    errors = []

    def compute():
        for _ in range(50):
            if not torch.equal(mlt.svdvals(a), ref):
                errors.append("mismatch")

    def toggle():
        for i in range(50):
            mlt.set_cpu_threads(1 + i % 2)

    threads = [threading.Thread(target=compute) for _ in range(3)] + [
        threading.Thread(target=toggle)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    mlt.set_cpu_threads(before)
    assert not errors


LONE_LARGE_SCRIPT = """
import os, torch, metal_linalg_torch as mlt
tasks = lambda: len(os.listdir("/proc/self/task"))
a = torch.randn(400, 400)
a = a + a.T
b = torch.randn(64, 24, 24)
b = b + b.mT
mlt.eigvalsh(b)  # the thread pool started and LAPACK loaded
assert mlt.eigvalsh_backend(400, 1) == "cpu:lapack", mlt.eigvalsh_backend(400, 1)
before = tasks()
w = mlt.eigvalsh(a)
after = tasks()
ref = torch.linalg.eigvalsh(a.double())
err = float((w.double() - ref).abs().max() / ref.abs().max())
print(before, after, err)
"""


@pytest.mark.skipif(
    sys.platform != "linux" or "openblas" not in mlt.lapack_info().lower(),
    reason="counts threads in /proc; OpenBLAS's thread setting",
)
def test_lone_large_matrix_keeps_openblas_thread_setting():
    """A lone large matrix runs on OpenBLAS's threads, never more than OpenBLAS had at load:
    with OPENBLAS_NUM_THREADS=1 the call starts no thread (OpenBLAS raises SIGINT where it
    cannot start one, e.g. under a capped address space) and the values are right."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", METAL_LINALG_CPU_THREADS="2")
    env["METAL_LINALG_NO_CALIBRATION_NOTICE"] = "1"
    env.pop("OMP_NUM_THREADS", None)
    for k in [k for k in env if k.startswith("METAL_LINALG_") and k.endswith("_BACKEND")]:
        env.pop(k)
    proc = subprocess.run(
        [sys.executable, "-c", LONE_LARGE_SCRIPT],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    before, after, err = proc.stdout.split()
    assert int(after) == int(before), (before, after)
    assert float(err) < 1e-5, err
