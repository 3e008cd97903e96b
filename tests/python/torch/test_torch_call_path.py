"""The Python path of a small eager CPU call: few Python frames (the per-call cost of a 1x4x4
matrix is mostly Python), one call into the core, and the same results on every path (the
generated host call, other dtypes, views, *_ex, threads)."""

from __future__ import annotations

import os
import sys
import threading

import metal_linalg_torch as mlt
import pytest
import torch

PACKAGE_DIR = os.path.dirname(os.path.abspath(mlt.__file__))

CALLS = {
    "qr": lambda A: mlt.qr(A),
    "eigh": lambda A: mlt.eigh(A),
    "eigvalsh": lambda A: mlt.eigvalsh(A),
    "svd": lambda A: mlt.svd(A),
    "svdvals": lambda A: mlt.svdvals(A),
}


def _package_frames(fn) -> list:
    """The functions of this package one call of fn enters (Python frames only)."""
    fn()  # first call: the generated host call is built here
    names = []

    def profile(frame, event, arg):
        path = frame.f_code.co_filename
        ours = path.startswith("<metal_linalg_torch") or os.path.abspath(path).startswith(
            PACKAGE_DIR + os.sep
        )
        if event == "call" and ours:
            names.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return names


def _sym(n, batch=1, seed=0):
    g = torch.Generator().manual_seed(seed)
    b = torch.randn(batch, n, n, generator=g)
    return (b + b.mT) / 2


@pytest.mark.parametrize("op", list(CALLS))
def test_small_eager_cpu_call_enters_few_python_frames(op):
    # public function, input checks, eager(), run() and the generated host call: six frames at
    # most (twelve before the host call was generated per op)
    A = _sym(4)
    frames = _package_frames(lambda: CALLS[op](A))
    assert len(frames) <= 6, frames
    assert frames[-1] == "call", frames  # the generated host call, which calls the core once


@pytest.mark.parametrize("op", list(CALLS))
def test_every_host_path_gives_the_same_result(op):
    A = _sym(5, batch=3, seed=1)
    want = CALLS[op](A)
    want = want if isinstance(want, tuple) else (want,)
    variants = {
        "float64": A.double(),
        "transposed view": A.mT.contiguous().mT,  # symmetric: same values, other strides
        "negative view": torch._neg_view(-A),
    }
    for label, X in variants.items():
        got = CALLS[op](X)
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, want):
            assert g.dtype == torch.float32, label
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5, msg=label)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # the host path without the generated call
    try:
        got = CALLS[op](A)
    finally:
        torch.set_default_dtype(old)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want):
        assert g.dtype == torch.float32
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_ex_functions_and_qr_mode_r_on_the_generated_call():
    A = _sym(4, batch=2)
    A[1, 0, 0] = float("nan")
    L, _, info = mlt.eigh_ex(A)
    assert info.tolist()[0] & 3 == 0 and info.tolist()[1] & 2  # NaN in the second only
    assert torch.isfinite(L[0]).all() and torch.isnan(L[1]).all()
    Q, R = mlt.qr(A[:1], mode="r")
    assert Q.shape == (0,) and R.shape == (1, 4, 4)
    torch.testing.assert_close(R.abs(), mlt.qr(A[:1]).R.abs())


def test_threads_use_their_own_argument_arrays():
    A = [_sym(6, batch=2, seed=s) for s in range(4)]
    want = [mlt.eigvalsh(a) for a in A]
    errors = []

    def work(i):
        try:
            for _ in range(200):
                torch.testing.assert_close(mlt.eigvalsh(A[i]), want[i])
        except AssertionError as exc:  # pragma: no cover (a failure is reported below)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
