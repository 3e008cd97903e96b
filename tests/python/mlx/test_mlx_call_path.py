"""The Python path of a small call on the default stream: few Python frames (the per-call cost
of a 1x4x4 matrix is mostly Python) and no stream resolution when the default device is the
CPU (nothing to check there); an explicit stream is still resolved, without the GPU checks for
the CPU."""

from __future__ import annotations

import os
import sys

import metal_linalg as ml
import mlx.core as mx
import numpy as np
import pytest
from metal_linalg import _ops

PACKAGE_DIR = os.path.dirname(os.path.abspath(ml.__file__))

CALLS = {
    "qr": lambda a, **kw: ml.qr(a, **kw),
    "eigh": lambda a, **kw: ml.eigh(a, **kw),
    "eigvalsh": lambda a, **kw: ml.eigvalsh(a, **kw),
    "svd": lambda a, **kw: ml.svd(a, **kw),
    "svdvals": lambda a, **kw: ml.svd(a, compute_uv=False, **kw),
}
# public function, its helper, _stream, the array and shape checks (and _uplo, _square for the
# eigen-ops); before the default stream's shortcut also resolve_stream and its warning check
MAX_FRAMES = {"qr": 5, "eigh": 7, "eigvalsh": 7, "svd": 5, "svdvals": 5}


def _package_frames(fn) -> list:
    fn()
    names = []

    def profile(frame, event, arg):
        if event == "call" and os.path.abspath(frame.f_code.co_filename).startswith(
            PACKAGE_DIR + os.sep
        ):
            names.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return names


def _sym(n):
    a = np.random.default_rng(0).standard_normal((1, n, n)).astype(np.float32)
    return mx.array((a + a.swapaxes(-1, -2)) / 2)


@pytest.mark.skipif(mx.default_device() != mx.cpu, reason="the default device is the CPU here")
@pytest.mark.parametrize("op", list(CALLS))
def test_default_stream_call_enters_few_python_frames(op, monkeypatch):
    a = _sym(4)
    frames = _package_frames(lambda: CALLS[op](a))
    assert "resolve_stream" not in frames and len(frames) <= MAX_FRAMES[op], frames
    # the CPU stream given explicitly: resolved, with no GPU checks or warning to make
    frames = _package_frames(lambda: CALLS[op](a, stream=mx.cpu))
    assert "resolve_stream" in frames and "_note_cpu_placement" not in frames, frames
    # an explicit stream still goes through resolve_stream (its checks and warning)
    seen = []
    resolve = _ops.resolve_stream
    monkeypatch.setattr(_ops, "resolve_stream", lambda *a, **k: seen.append(1) or resolve(*a, **k))
    out = CALLS[op](a, stream=mx.cpu)
    mx.eval(out)
    assert seen
    want = CALLS[op](a)
    for g, w in zip(
        out if isinstance(out, tuple) else (out,), want if isinstance(want, tuple) else (want,)
    ):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-5, atol=1e-5)
