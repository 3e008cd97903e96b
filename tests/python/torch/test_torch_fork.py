"""fork() while other threads compute: neither side may hang. One thread loops eigh on a 200 x 200
matrix (LAPACK, on OpenBLAS's own threads when there are cores to spare), another on a batch of
small matrices (the portable kernels on the core's thread pool); the main thread forks, the child
calls the library and exits, and the parent's threads go on. Each run is a subprocess in its own
process group, killed whole at the timeout, so a hang fails the test instead of stalling CI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")

CODE = """
import os, sys, threading, time
import torch
import metal_linalg_torch as mlt

torch.manual_seed(0)
big = torch.randn(200, 200)
big = big + big.mT
small = torch.randn(64, 6, 6)
small = small + small.mT
routes = (mlt.eigh_backend(200, 1), mlt.eigh_backend(6, 64))
assert routes[0] == "cpu:lapack" and routes[1].startswith("cpu:kernel:"), routes
ref = (mlt.eigh(big).eigenvalues, mlt.eigh(small).eigenvalues)

stop = threading.Event()
counts = [0, 0]
errors = []

def loop(slot, a):
    try:
        while not stop.is_set():
            if not torch.equal(mlt.eigh(a).eigenvalues, ref[slot]):
                errors.append(f"thread {slot}: result changed")
            counts[slot] += 1
    except BaseException as exc:
        errors.append(f"thread {slot}: {exc!r}")

threads = [threading.Thread(target=loop, args=(i, a)) for i, a in enumerate((big, small))]
for t in threads:
    t.start()
while min(counts) < 2 and not errors:
    time.sleep(0.001)

for _ in range(ROUNDS):
    pid = os.fork()
    if pid == 0:
        # Same thread count as the parent: bitwise the parent's results. After
        # set_cpu_threads(2) LAPACK may split its work differently, so the 200 x 200
        # eigenvalues agree to rounding (a few ulps of the norm), not bitwise.
        why = ""
        try:
            for a, r in zip((big, small), ref):
                if not torch.equal(mlt.eigh(a).eigenvalues, r):
                    why += "differs before set_cpu_threads; "
            mlt.set_cpu_threads(2)
            if not torch.equal(mlt.eigh(small).eigenvalues, ref[1]):
                why += "small differs after set_cpu_threads(2); "
            err = (mlt.eigh(big).eigenvalues - ref[0]).abs().max().item()
            if not err <= 64 * torch.finfo(big.dtype).eps * ref[0].abs().max().item():
                why += f"big differs by {err:.3g} after set_cpu_threads(2); "
        except BaseException as exc:
            why += repr(exc)
        if why:
            print("child:", why, flush=True)
        os._exit(3 if why else 0)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        errors.append(f"child exited with {code}")
        break
    time.sleep(0.005)

# The parent's threads still make progress after the forks.
seen = list(counts)
deadline = time.monotonic() + 30
while not errors and any(c <= s for c, s in zip(counts, seen)) and time.monotonic() < deadline:
    time.sleep(0.01)
stop.set()
for t in threads:
    t.join()
assert not errors, errors
assert all(c > s for c, s in zip(counts, seen)), (seen, counts)
print("ok", counts, routes, mlt.get_cpu_threads())
"""


def _run_bounded(code: str, timeout: float, **env) -> tuple[int | None, str]:
    """(exit code or None on timeout, output); on timeout the whole process group is killed,
    forked children included."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("METAL_LINALG_")}
    full_env.update(env)
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=full_env,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out


@pytest.mark.parametrize("threads", ["2", "1"])
def test_fork_while_threads_compute(threads):
    # Two threads: the 200 x 200 eigh runs on OpenBLAS's threads; one: on the calling thread.
    code, out = _run_bounded(
        CODE.replace("ROUNDS", "6"),
        timeout=60,
        METAL_LINALG_CPU_THREADS=threads,
        METAL_LINALG_NO_CALIBRATION_NOTICE="1",
        OMP_NUM_THREADS="1",
    )
    assert code is not None, "hung (killed at the timeout):\n" + out
    assert code == 0, out
    assert out.startswith("ok"), out
