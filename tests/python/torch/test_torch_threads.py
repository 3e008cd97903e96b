"""Concurrent calls from Python threads give the same results as serial calls."""

from __future__ import annotations

import threading

import metal_linalg_torch as mlt
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
