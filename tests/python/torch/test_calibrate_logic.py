"""The pure parts of calibrate: threshold selection from timings and the policy-table writer."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from metal_linalg_torch import calibrate as cal
from metal_linalg_torch._shared import calibrate as shared_cal

FIELDS = {
    "cpu_kernel_max_n",
    "gpu_min_batch",
    "gpu_max_n",
    "host_gpu_min_work",
    "gpu_lane_max_n",
    "gpu_lane_min_batch",
    "gpu_small_max_n",
    "gpu_simd_max_n",
    "gpu_global_max_n",
    "gpu_global_min_batch",
    "gpu_blocked_min_n",
    "gpu_simd_min_n",
    "cpu_small_max_n",
    "gpu_blocked_max_batch",
    "gpu_alt_min_n",
    "gpu_alt_max_n",
    "gpu_alt_max_batch",
}


def parse_table(text: str, device: str) -> dict:
    """core/tuned/README (policy.cpp apply_table): a comment holding "device:" names the device
    (another device: the table is skipped); other lines are "<op> <field> <non-negative int>"."""
    values, device_seen, bad = {}, False, []
    for i, line in enumerate(text.splitlines()):
        if "#" in line:
            comment = line[line.index("#") + 1 :]
            if "device:" in comment:
                assert comment.split("device:", 1)[1].strip(" \t\r") == device
                assert i == 0, "the device line comes first"
                device_seen = True
            line = line[: line.index("#")]
        words = line.split()
        if not words:
            continue
        if (
            len(words) != 3
            or words[0] not in cal.POLICY_OPS
            or words[1] not in FIELDS
            or not words[2].isdigit()
        ):
            bad.append(line)
            continue
        values.setdefault(words[0], {})[words[1]] = int(words[2])
    assert device_seen and not bad, (device_seen, bad)
    return values


# --- host_gpu_min_work ----------------------------------------------------------------------


def test_host_crossover_in_the_middle():
    pts = [(64, 1e-5, 1e-4), (1024, 1e-4, 2e-4), (65536, 1e-3, 5e-4), (1 << 20, 1e-2, 1e-3)]
    assert cal.choose_host_gpu_min_work(pts) == 65536


def test_host_gpu_never_wins():
    pts = [(64, 1e-5, 1e-4), (1024, 1e-4, 2e-4), (1 << 20, 1e-2, 2e-2)]
    assert cal.choose_host_gpu_min_work(pts) == 0


def test_host_gpu_loses_only_at_the_largest_work():
    pts = [(64, 1e-3, 1e-4), (1024, 1e-3, 2e-4), (1 << 20, 1e-2, 2e-2)]
    assert cal.choose_host_gpu_min_work(pts) == 0


def test_host_gpu_always_wins():
    pts = [(1 << 20, 1e-2, 1e-3), (64, 1e-3, 1e-4), (4096, 1e-3, 1e-4)]
    assert cal.choose_host_gpu_min_work(pts) == 64


def test_host_noisy_non_monotone():
    # Wins at 4096, loses at 16384 (noise), wins from 65536 on: the threshold sits above the loss.
    pts = [
        (64, 1e-5, 1e-4),
        (4096, 2e-4, 1e-4),
        (16384, 3e-4, 3.1e-4),
        (65536, 1e-3, 5e-4),
        (1 << 20, 1e-2, 1e-3),
    ]
    assert cal.choose_host_gpu_min_work(pts) == 65536


def test_host_equal_work_from_several_shapes():
    # 8x8 x1024 and 32x32 x64 have the same work: one losing point at that work blocks it.
    pts = [(65536, 1e-3, 5e-4), (65536, 1e-4, 2e-4), (262144, 1e-3, 5e-4)]
    assert cal.choose_host_gpu_min_work(pts) == 262144


def test_host_unmeasured_points_are_ignored():
    pts = [(64, 1e-5, None), (4096, None, 1e-4), (65536, 1e-3, 5e-4)]
    assert cal.choose_host_gpu_min_work(pts) == 65536
    assert cal.choose_host_gpu_min_work([(64, 1e-5, None)]) is None
    assert cal.choose_host_gpu_min_work([]) is None


def test_host_tie_is_a_loss():
    assert cal.choose_host_gpu_min_work([(64, 1e-3, 1e-3)]) == 0


# --- gpu_lane_max_n / gpu_lane_min_batch ----------------------------------------------------

SIZES = (2, 3, 4, 6, 8, 12, 16, 24, 32)
BATCHES = (256, 1024, 4096, 16384, 65536)


def lane_grid(wins) -> dict:
    """{(n, batch): (t_lane, t_block)} with the lane variant winning where wins(n, batch)."""
    return {
        (n, b): ((0.5e-3, 1e-3) if wins(n, b) else (2e-3, 1e-3)) for n in SIZES for b in BATCHES
    }


def test_lane_crossover_in_the_middle():
    # Lane wins for n <= 8 from batch 4096 on (n <= 4 from 1024 on).
    t = lane_grid(lambda n, b: n <= 8 and (b >= 4096 or (n <= 4 and b >= 1024)))
    assert cal.choose_lane(t, SIZES, BATCHES) == (8, 4096)


def test_lane_never_wins():
    assert cal.choose_lane(lane_grid(lambda n, b: False), SIZES, BATCHES) == (0, None)


def test_lane_always_wins():
    assert cal.choose_lane(lane_grid(lambda n, b: True), SIZES, BATCHES) == (32, 256)


def test_lane_noisy_non_monotone():
    # Wins at n = 2, 3, loses at 4 (largest batch), wins again at 6..12: max_n stops at 3.
    # For n <= 3 a loss at 4096 (noise) among wins at 256 and 1024 pushes min_batch to 16384.
    def wins(n, b):
        if n == 4 and b == 65536:
            return False
        if n == 3 and b == 4096:
            return False
        return n <= 12

    assert cal.choose_lane(lane_grid(wins), SIZES, BATCHES) == (3, 16384)


def test_lane_unavailable_counts_as_a_loss():
    t = lane_grid(lambda n, b: True)
    for b in BATCHES:
        t[(16, b)] = (None, 1e-3)  # no lane variant / the lane call failed
    assert cal.choose_lane(t, SIZES, BATCHES) == (12, 256)


def test_lane_unmeasured_points():
    t = lane_grid(lambda n, b: True)
    del t[(8, 65536)]  # budget ran out: sizes from 8 on are not claimed
    t[(2, 256)] = None  # not measured: no claim for batch 256
    assert cal.choose_lane(t, SIZES, BATCHES) == (6, 1024)
    assert cal.choose_lane({}, SIZES, BATCHES) == (None, None)


def test_lane_uses_the_default_grid():
    t = {(n, b): (1e-4, 1e-3) for n in cal.LANE_SIZES for b in cal.LANE_BATCHES}
    assert cal.choose_lane(t) == (max(cal.LANE_SIZES), min(cal.LANE_BATCHES))


# --- gpu_simd_min_n / gpu_simd_max_n ----------------------------------------------------------

SIMD_SIZES = (9, 12, 16, 24, 32, 48, 64)
SIMD_BATCHES = (1, 64, 1024, 16384)


def simd_grid(wins) -> dict:
    """{(n, batch): (t_simd, t_other)} with the simdgroup kernel winning where wins(n, batch)."""
    return {
        (n, b): ((0.5e-3, 1e-3) if wins(n, b) else (2e-3, 1e-3))
        for n in SIMD_SIZES
        for b in SIMD_BATCHES
    }


def test_simd_crossover():
    # Wins everywhere up to 32, loses at batch 1 of n = 48.
    t = simd_grid(lambda n, b: n <= 32 or b > 1)
    assert cal.choose_simd(t, SIMD_SIZES, SIMD_BATCHES) == (0, 32)


def test_simd_within_noise_is_no_loss_but_needs_a_win():
    t = simd_grid(lambda n, b: True)
    for b in SIMD_BATCHES:
        t[(24, b)] = (1.03e-3, 1e-3)  # 3% slower everywhere at 24: within noise, yet no win
    # Two windows saving the same time (9..16 and 32..64): the smaller n.
    assert cal.choose_simd(t, SIMD_SIZES, SIMD_BATCHES) == (0, 16)
    t[(24, 1)] = (0.9e-3, 1e-3)  # one win among ties: claimed
    assert cal.choose_simd(t, SIMD_SIZES, SIMD_BATCHES) == (0, 64)
    t[(32, 64)] = (1.3e-3, 1e-3)  # 30% slower: a loss, whatever the other batches save
    assert cal.choose_simd(t, SIMD_SIZES, SIMD_BATCHES) == (0, 24)


def test_simd_small_loss_carried_where_the_batches_gain():
    # 10% slower for one matrix, twice as fast at the large batches: the size saves time over
    # the grid and is claimed (the window has no batch bound).
    t = simd_grid(lambda n, b: True)
    for n in (48, 64):
        t[(n, 1)] = (1.1e-3, 1e-3)
    assert cal.choose_simd(t, SIMD_SIZES, SIMD_BATCHES) == (0, 64)
    # A loss of 19% where the one batch that gains does not pay for it: not claimed.
    t[(64, 1)] = (1.19e-3, 1e-3)
    t[(64, 64)] = t[(64, 16384)] = (1e-3, 1e-3)
    t[(64, 1024)] = (0.9e-3, 1e-3)
    assert cal.choose_simd(t, SIMD_SIZES, SIMD_BATCHES) == (0, 48)
    # Faster overall, but only within noise at every batch: no win.
    for b in SIMD_BATCHES:
        t[(48, b)] = (0.97e-3, 1e-3)
    assert cal.choose_simd(t, SIMD_SIZES, SIMD_BATCHES) == (0, 32)


def test_simd_loses_at_the_smallest_n():
    assert cal.choose_simd(simd_grid(lambda n, b: b != 64), SIMD_SIZES, SIMD_BATCHES) == (0, 0)


def test_simd_window_above_the_smallest_n():
    # Loses at 9 (one batch), wins from 12 to 32, no kernel past 32: the window 12..32.
    t = simd_grid(lambda n, b: n != 9 or b != 16384)
    for n in (48, 64):
        for b in SIMD_BATCHES:
            t[(n, b)] = (None, None)
    assert cal.choose_simd(t, SIMD_SIZES, SIMD_BATCHES) == (12, 32)
    # A loss inside: of 12..16 and 32 the window saving more time.
    t[(24, 1)] = (2e-3, 1e-3)
    assert cal.choose_simd(t, SIMD_SIZES, SIMD_BATCHES) == (12, 16)
    for b in SIMD_BATCHES:
        t[(32, b)] = (0.1e-3, 3e-3)  # saves more alone than 12..16 together
    assert cal.choose_simd(t, SIMD_SIZES, SIMD_BATCHES) == (32, 32)
    # Losing everywhere but 64: the window is 64 alone.
    t = simd_grid(lambda n, b: n == 64)
    assert cal.choose_simd(t, SIMD_SIZES, SIMD_BATCHES) == (64, 64)


def test_simd_window_ends_where_no_kernel_covers():
    # No simdgroup kernel past 32 (the sweep records (None, None) there): the claim stops at 32.
    t = simd_grid(lambda n, b: True)
    for n in (48, 64):
        for b in SIMD_BATCHES:
            t[(n, b)] = (None, None)
    assert cal.choose_simd(t, SIMD_SIZES, SIMD_BATCHES) == (0, 32)
    # Nothing measured at 24 (every batch): no window reaches across it.
    for b in SIMD_BATCHES:
        del t[(24, b)]
    assert cal.choose_simd(t, SIMD_SIZES, SIMD_BATCHES) == (0, 16)


def test_simd_failed_kernel_is_a_loss_and_unmeasured_batches_are_left_out():
    t = simd_grid(lambda n, b: True)
    t[(24, 1024)] = (None, 1e-3)  # the simdgroup call failed
    del t[(16, 16384)]  # not measured (work cap): the other batches of 16 decide
    for n in (48, 64):
        del t[(n, 1)]
    # 9..16 (11 points) against 32..64 (10 points): the first saves more.
    assert cal.choose_simd(t, SIMD_SIZES, SIMD_BATCHES) == (0, 16)
    assert cal.choose_simd({}, SIMD_SIZES, SIMD_BATCHES) is None


def test_simd_phase_planned_only_with_the_field():
    with_simd = cal.plan_phases(
        ["qr"], cpu=False, host_gpu=False, device_gpu=True, lanes=True, simd=True
    )
    assert with_simd == [("qr", "lane"), ("qr", "simd"), ("qr", "gpu_min_batch")]
    assert ("qr", "simd") not in cal.plan_phases(
        ["qr"], cpu=False, host_gpu=False, device_gpu=True, lanes=True
    )


# --- gpu_global_max_n / gpu_global_min_batch ------------------------------------------------

GLOBAL_SIZES = shared_cal.GLOBAL_SIZES
GLOBAL_BATCHES = shared_cal.GLOBAL_BATCHES


def global_grid(wins, skip=lambda n, b: False):
    """{(n, b): (t_global, t_host)}: the host route's time grows as b n^3; the global launch
    twice as fast where wins(n, b), else half as fast; points where skip(n, b) left out (not
    measured)."""
    return {
        (n, b): ((0.5 if wins(n, b) else 2.0) * b * n**3 * 1e-9, b * n**3 * 1e-9)
        for n in GLOBAL_SIZES
        for b in GLOBAL_BATCHES
        if not skip(n, b)
    }


def test_global_batch_one_loses_batches_win():
    # The expected H200 shape: a lone matrix loses to LAPACK, batches of 8 and 64 win everywhere.
    t = global_grid(lambda n, b: b >= 8)
    assert shared_cal.choose_global(t) == (1024, 8)


def test_global_wins_everywhere():
    assert shared_cal.choose_global(global_grid(lambda n, b: True)) == (1024, 1)


def test_global_never_wins():
    assert shared_cal.choose_global(global_grid(lambda n, b: False)) == (0, None)


def test_global_nothing_measured():
    assert shared_cal.choose_global({}) == (None, None)
    # Measured only beyond the smallest n: nothing is claimed.
    t = global_grid(lambda n, b: True, skip=lambda n, b: n == 256)
    assert shared_cal.choose_global(t) == (None, None)


def test_global_small_n_at_batch_one_against_large_n_at_large_batches():
    # Batch 1 wins up to 384 only; batch >= 8 wins everywhere: the rectangle from batch 8 saves
    # more time (every size at 8 and 64) than the one from batch 1 (n <= 384 at every batch).
    t = global_grid(lambda n, b: b >= 8 or n <= 384)
    assert shared_cal.choose_global(t) == (1024, 8)
    # Batch 64 alone wins past 384: its rectangle (every n at batch 64) saves the most.
    t = global_grid(lambda n, b: b == 64 or n <= 384)
    assert shared_cal.choose_global(t) == (1024, 64)
    # Equal savings (2 s from batch 1 up to 256, 2 s from batch 8 up to 384): the larger max_n.
    t = {(256, 1): (1.0, 2.0), (256, 8): (1.0, 2.0), (384, 1): (3.0, 2.0), (384, 8): (1.0, 2.0)}
    assert shared_cal.choose_global(t, (256, 384), (1, 8)) == (384, 8)
    # A win at batch 1, however small, adds to the savings: the rectangle from batch 1.
    t = {(256, 1): (1.0, 1.0 + 1e-9), (256, 8): (0.0, 2.0)}
    assert shared_cal.choose_global(t, (256,), (1, 8)) == (256, 1)


def test_global_work_cap_and_failures():
    # Unmeasured points (the work cap: batch 64 above n = 512) do not end a rectangle; a failed
    # global call (t_global None) is a loss.
    skip = lambda n, b: b == 64 and n > 512
    t = global_grid(lambda n, b: b >= 8, skip=skip)
    assert shared_cal.choose_global(t) == (1024, 8)
    t[(768, 8)] = (None, 1.0)
    assert shared_cal.choose_global(t) == (512, 8)
    # A size with no measured point at or above the batch ends the claim there.
    t = global_grid(lambda n, b: b == 64, skip=skip)
    assert shared_cal.choose_global(t) == (512, 64)


def test_global_tie_is_a_loss():
    t = global_grid(lambda n, b: True)
    t[(256, 1)] = (1.0, 1.0)
    assert shared_cal.choose_global(t) == (1024, 8)


def test_global_phase_planned_only_with_the_fields():
    phases = cal._shared.plan_phases(
        ["eigh"], cpu=False, host_gpu=False, device_gpu=True, lanes=True, global_launch=True
    )
    assert phases == [("eigh", "lane"), ("eigh", "global"), ("eigh", "gpu_min_batch")]
    assert ("eigh", "global") not in cal._shared.plan_phases(
        ["eigh"], cpu=False, host_gpu=True, device_gpu=False, lanes=False, global_launch=False
    )


# --- gpu_blocked_min_n / gpu_blocked_max_batch -----------------------------------------------

BLOCKED_SIZES = shared_cal.BLOCKED_SIZES
BLOCKED_BATCHES = shared_cal.BLOCKED_BATCHES


def blocked_grid(wins) -> dict:
    """{(n, b): (t_blocked, t_table)}: the table's kernels flat in the batch (a block per
    matrix), the blocked path twice as fast where wins(n, b), else twice as slow."""
    out = {}
    for n in BLOCKED_SIZES:
        for b in BLOCKED_BATCHES:
            t_table = 1e-3 * (n / 64) ** 2
            out[(n, b)] = ((0.5 if wins(n, b) else 2.0) * t_table, t_table)
    return out


def test_blocked_wins_everywhere():
    # The largest measured rectangle: every size from 64, up to the largest measured batch
    # (larger batches were not timed, so they are not claimed).
    assert cal.choose_blocked(blocked_grid(lambda n, b: True)) == (64, 64)


def test_blocked_wins_only_at_batch_one():
    assert cal.choose_blocked(blocked_grid(lambda n, b: b == 1)) == (64, 1)
    # ... and only from 128 on.
    assert cal.choose_blocked(blocked_grid(lambda n, b: b == 1 and n >= 128)) == (128, 1)


def test_blocked_never_wins():
    # Beyond the window only (the default 2^30); the batch bound does not matter.
    assert cal.choose_blocked(blocked_grid(lambda n, b: False)) == (1 << 30, None)


def test_blocked_batch_and_size_trade():
    # Batch 1 and 8 win from 64, batch 64 only from 128 (the H200's shape of the data): the
    # rectangle from 64 up to batch 8 against the one from 128 up to batch 64.
    t = blocked_grid(lambda n, b: b <= 8 or n >= 128)
    # (64, 8): 8 points; (128, 64): 6 points, but the larger n save more (time grows as n^2).
    saved_64_8 = sum(t[(n, b)][1] - t[(n, b)][0] for n in BLOCKED_SIZES for b in (1, 8))
    saved_128_64 = sum(t[(n, b)][1] - t[(n, b)][0] for n in (128, 192) for b in BLOCKED_BATCHES)
    assert saved_128_64 > saved_64_8
    assert cal.choose_blocked(t) == (128, 64)
    # A single loss at a large size bounds every rectangle reaching it.
    t[(192, 64)] = (3e-2, 1e-2)
    assert cal.choose_blocked(t) == (64, 8)


def test_blocked_noisy_ties():
    tol = shared_cal.BLOCKED_TOLERANCE
    # Everywhere 3% slower (within the tolerance): no loss, but nothing saved either.
    t = {k: (1.03 * tt, tt) for k, (_, tt) in blocked_grid(lambda n, b: True).items()}
    assert 1.03 < tol
    assert cal.choose_blocked(t) == (1 << 30, None)
    # One point 10% faster: the smallest rectangle around it saves the most (the ties around
    # it would cost their 3%).
    tt = t[(192, 1)][1]
    t[(192, 1)] = (0.9 * tt, tt)
    assert cal.choose_blocked(t) == (192, 1)
    # A tie inside a winning rectangle does not break it: batch 64 2% slower at 96, faster
    # from 128; 8% slower at 64 (a loss).
    t = blocked_grid(lambda n, b: n >= 96)
    for n, factor in ((64, 1.08), (96, 1.02)):
        tt = t[(n, 64)][1]
        t[(n, 64)] = (factor * tt, tt)
    assert cal.choose_blocked(t) == (96, 64)
    # Equal savings: the larger min_n (a tie at 64 x1 adds nothing to the rectangle from 64).
    t = {(64, 1): (1.0, 1.0), (96, 1): (1.0, 2.0)}
    assert cal.choose_blocked(t, (64, 96), (1,)) == (96, 1)
    # ... then the smaller max_batch.
    t = {(64, 1): (1.0, 2.0), (64, 8): (1.0, 1.0)}
    assert cal.choose_blocked(t, (64,), (1, 8)) == (64, 1)


def test_blocked_h200_measurements():
    # benchmarks/results/nvidia-h200-mid-n/small_n_ab.md, ms: {(n, batch): (blocked, table)};
    # the grid of that run (sizes 64, 100, 128, 192; batches 1, 64) gives the table's values.
    eigh = {
        (64, 1): (0.886, 0.886),
        (64, 64): (1.147, 0.905),
        (100, 1): (1.269, 1.748),
        (100, 64): (1.811, 1.779),
        (128, 1): (1.735, 2.595),
        (128, 64): (2.374, 2.626),
        (192, 1): (2.789, 5.516),
        (192, 64): (4.944, 5.649),
    }
    svd = {
        (64, 1): (1.500, 1.846),
        (64, 64): (2.434, 1.952),
        (100, 1): (1.911, 3.982),
        (100, 64): (4.089, 4.210),
        (128, 1): (2.337, 6.400),
        (128, 64): (4.964, 6.678),
        (192, 1): (3.403, 15.079),
        (192, 64): (8.275, 15.665),
    }
    qr = {
        (64, 1): (0.248, 0.294),
        (64, 64): (0.351, 0.293),
        (128, 1): (0.487, 0.775),
        (128, 64): (0.901, 0.822),
    }
    grid = ((64, 100, 128, 192), (1, 64))
    assert cal.choose_blocked(eigh, *grid) == (100, 64)
    assert cal.choose_blocked(svd, *grid) == (100, 64)
    assert cal.choose_blocked(qr, (64, 128), (1, 64)) == (64, 1)


def test_blocked_failures_and_unmeasured_points():
    t = blocked_grid(lambda n, b: True)
    t[(96, 8)] = (None, 1e-3)  # the blocked call failed: a loss
    assert cal.choose_blocked(t) == (128, 64)
    t = blocked_grid(lambda n, b: True)
    for b in BLOCKED_BATCHES:
        t[(192, b)] = (None, None)  # beyond the window: nothing to compare
    del t[(64, 64)]  # not measured (time budget)
    t[(96, 64)] = None
    assert cal.choose_blocked(t) == (64, 64)
    assert cal.choose_blocked({}) is None
    assert cal.choose_blocked({(64, 1): (None, None)}) is None


def test_blocked_phase_planned_only_for_device_data_with_the_fields():
    phases = cal.plan_phases(
        ["svd"], cpu=True, host_gpu=True, device_gpu=True, lanes=False, blocked=True
    )
    assert phases == [
        ("svd", "cpu_kernel"),
        ("svd", "blocked"),
        ("svd", "gpu_min_batch"),
        ("svd", "host"),
    ]
    # A CPU device (no data in GPU memory): no blocked phase, whatever the core has.
    cpu = cal.plan_phases(
        ["svd"], cpu=True, host_gpu=False, device_gpu=False, lanes=False, blocked=True
    )
    assert cpu == [("svd", "cpu_kernel")]
    assert ("svd", "blocked") not in cal.plan_phases(
        ["svd"], cpu=False, host_gpu=False, device_gpu=True, lanes=True
    )
    assert shared_cal.PHASE_WEIGHTS["blocked"] > 0


_FAKE_POLICY = {
    "gpu_max_n": 16384,
    "gpu_min_batch": 1,
    "gpu_blocked_min_n": 1 << 30,
    "gpu_blocked_max_batch": shared_cal.UNBOUNDED,
}


class _FakeQueries:
    """The policy queries of a fake frontend: fields from `defaults`, set and reset as the
    package's; the backend queries given by keyword (qr_backend=fn, ...)."""

    def __init__(self, defaults, **backends):
        self.defaults = defaults
        self.fields = dict(defaults)
        for name, fn in backends.items():
            setattr(self, name, fn)

    def policy(self, op):
        return dict(self.fields)

    def set_policy(self, op, **fields):
        self.fields.update(fields)

    def reset_policy(self, op):
        self.fields = dict(self.defaults)


class _FakeBlockedFrontend:
    """A GPU frontend without a GPU for blocked_timings: the table's kernel covers n <= 150,
    the blocked path runs where the policy sends it (n >= gpu_blocked_min_n at batch <=
    gpu_blocked_max_batch, or beyond 150); timings from a model of both."""

    WINDOW = 150

    def __init__(self):
        self.gpu = "cuda"
        self.calls = []
        self.q = _FakeQueries(
            _FAKE_POLICY, qr_backend=lambda m, n, b, device=None: self.route(max(m, n), b)
        )

    def route(self, n, batch):
        f = self.q.fields
        if n > self.WINDOW or (n >= f["gpu_blocked_min_n"] and batch <= f["gpu_blocked_max_batch"]):
            return "cuda:blocked_qr"
        return "cuda:qr_householder"

    def op(self, op, device):
        return lambda x: self.calls.append((x, self.route(*x)))

    def random_input(self, op, n, batch, device, seed):
        return (n, batch)

    def sync(self, device):
        pass

    def event_timer(self, device):
        def timer(call, x):
            n, batch = x
            call(x)
            if self.route(n, batch).endswith("blocked_qr"):
                return 1e-4 * n / 64 * (1 + batch / 8)  # grows with the batch
            return 2e-4 * n / 64  # flat in the batch

        return timer


def test_blocked_timings_sweep():
    fe = _FakeBlockedFrontend()
    record = []
    t = shared_cal.blocked_timings(fe, "qr", log=lambda s: None, record=record)
    # 192 is beyond the fake's window: recorded as nothing to compare, not timed.
    assert all(t[(192, b)] == (None, None) for b in BLOCKED_BATCHES)
    assert not any(x[0] == 192 for x, _ in fe.calls)
    # Inside the window both routes ran and were timed as the model says.
    assert {r for x, r in fe.calls} == {"cuda:blocked_qr", "cuda:qr_householder"}
    assert t[(64, 1)] == pytest.approx((1e-4 * 9 / 8, 2e-4))
    assert t[(128, 64)] == pytest.approx((2e-4 * 9, 4e-4))
    # blocked (1 + b/8) vs table 2: wins at batch 1 only (8: 2 vs 2, a tie), at every size.
    assert shared_cal.choose_blocked(t) == (64, 1)
    assert fe.q.fields == fe.q.defaults  # the policy is reset afterwards
    assert [r["n"] for r in record if r.get("blocked_s")] == [64, 64, 64, 96, 96, 96, 128, 128, 128]


# --- the table writer -----------------------------------------------------------------------


def test_table_format_round_trip():
    values = {
        "svd": {"gpu_lane_max_n": 8, "host_gpu_min_work": 0, "gpu_lane_min_batch": 4096},
        "qr": {"host_gpu_min_work": 1 << 20, "gpu_min_batch": 1},
    }
    text = cal.format_table(
        "NVIDIA H200",
        values,
        date="2026-12-01T00:00:00Z",
        command="python3 benchmarks/tune_policy_gpu.py --out /tmp/x --budget-s 240",
        notes=["svd: host: 3 of 34 points skipped (time budget)", "measured on device: H200"],
    )
    lines = text.splitlines()
    assert lines[0] == "# device: NVIDIA H200"
    assert all(ln.startswith("#") for ln in lines if ln.split()[0] not in cal.OPS)
    assert parse_table(text, "NVIDIA H200") == values
    # A fixed order: ops as in OPS, fields as in FIELD_ORDER.
    entries = [ln for ln in lines if not ln.startswith("#")]
    assert entries == [
        "qr gpu_min_batch 1",
        f"qr host_gpu_min_work {1 << 20}",
        "svd host_gpu_min_work 0",
        "svd gpu_lane_max_n 8",
        "svd gpu_lane_min_batch 4096",
    ]


def test_fields_are_the_cores_and_committed_tables_parse():
    import glob

    import metal_linalg_torch as mlt

    # FIELDS (what parse_table accepts) is every field the core has, for every op.
    for op in cal.POLICY_OPS:
        assert set(getattr(mlt, f"{op}_policy")()) == FIELDS
    assert set(cal.FIELD_ORDER) <= FIELDS
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    tables = sorted(glob.glob(os.path.join(root, "core", "tuned", "*.policy")))
    assert tables
    for path in tables:
        with open(path) as f:
            text = f.read()
        device = text.splitlines()[0].split("device:", 1)[1].strip()
        assert os.path.basename(path) == cal.table_file_name(device)
        values = parse_table(text, device)
        if device == "NVIDIA H200":  # benchmarks/results/nvidia-h200-policy*.md (calibrated)
            blocked = {
                op: (v.get("gpu_blocked_min_n"), v.get("gpu_blocked_max_batch"))
                for op, v in values.items()
            }
            assert blocked == {
                "qr": (96, 64),
                "eigh": (192, 64),
                "eigvalsh": (192, 8),
                "svd": (96, 64),
                "svdvals": (128, 8),
                "cholesky": (64, 64),
                "solve": (128, 64),
                "inv": (64, 64),
                "solve_triangular": (192, 8),
                "lu_factor": (128, 64),
            }
            alt = {
                op: (v.get("gpu_alt_min_n"), v.get("gpu_alt_max_n"), v.get("gpu_alt_max_batch"))
                for op, v in values.items()
            }
            assert alt == {
                "qr": (None, None, None),
                "eigh": (33, 128, 64),
                "eigvalsh": (0, 0, 64),
                "svd": (33, 128, 64),
                "svdvals": (0, 0, 64),
                "cholesky": (48, 128, 64),
                **{op: (None,) * 3 for op in ("solve", "inv", "solve_triangular", "lu_factor")},
            }


def test_table_rejects_bad_values():
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError):
            cal.format_table("dev", {"qr": {"gpu_min_batch": bad}}, date="d", command="c")
    with pytest.raises(ValueError):
        cal.format_table("two\nlines", {}, date="d", command="c")


def test_table_file_name():
    assert cal.table_file_name("NVIDIA H200") == "NVIDIA_H200.policy"
    assert cal.table_file_name("AMD EPYC 7B13 64-Core (x)") == "AMD_EPYC_7B13_64-Core__x_.policy"


def test_write_table_from_a_result(tmp_path):
    result = {
        "meta": {"device": "NVIDIA H200", "date": "d", "torch": "t", "version": "v"},
        "chosen": {"eigh": {"host_gpu_min_work": 4096}, "qr": {}},
        "notes": {"eigh": ["lane: not measured (time budget)"], "qr": []},
    }
    result["meta"]["budget_s"] = 240.0
    path = cal.write_table(str(tmp_path / "t.policy"), result, "cmd")
    with open(path) as f:
        text = f.read()
    assert parse_table(text, "NVIDIA H200") == {"eigh": {"host_gpu_min_work": 4096}}
    assert "# eigh: lane: not measured (time budget)" in text


def test_budget_phases():
    now = [0.0]
    b = cal.Budget(100.0, clock=lambda: now[0])
    b.start_phase(1.0, 4.0)  # a quarter of 100 s
    assert not b.expired()
    now[0] = 26.0
    assert b.expired()
    b.start_phase(1.0, 1.0)  # the last phase gets all that is left (74 s)
    now[0] = 99.0
    assert not b.expired()
    now[0] = 101.0
    assert b.expired()
    unlimited = cal.Budget(None, clock=lambda: now[0])
    unlimited.start_phase(1.0, 5.0)
    assert not unlimited.expired()


def test_measure_keeps_going_when_a_phase_fails(monkeypatch):
    def boom(fe, op, **kwargs):
        raise RuntimeError("simulated failure")

    monkeypatch.setattr(shared_cal, "cpu_kernel_max_n", boom)
    result = cal.measure(("qr", "svd"), cpu=True, cuda=False, log=lambda s: None)
    assert result["chosen"] == {"qr": {}, "svd": {}}
    assert result["notes"]["qr"] == ["cpu_kernel: failed (RuntimeError: simulated failure)"]
    text = cal.format_table(
        result["meta"]["device"],
        result["chosen"],
        date="d",
        command="c",
        notes=cal.table_notes(result),
    )
    assert parse_table(text, result["meta"]["device"]) == {}


# --- the command line (CPU part only: CI has no GPU) ----------------------------------------


def test_cli_table_and_json(tmp_path):
    import metal_linalg_torch as mlt

    env = {k: v for k, v in os.environ.items() if not k.startswith("METAL_LINALG_")}
    env.update(
        METAL_LINALG_POLICY_FILE=str(tmp_path / "machine.policy"),
        METAL_LINALG_NO_CALIBRATION_NOTICE="1",
    )
    table, raw = tmp_path / "t.policy", tmp_path / "t.json"
    args = ["--ops", "eigvalsh", "--cpu-only", "--table-out", str(table), "--json-out", str(raw)]
    out = subprocess.run(
        [sys.executable, "-m", "metal_linalg_torch", "calibrate", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    values = parse_table(table.read_text(), mlt.device_name())
    assert list(values) == ["eigvalsh"] and list(values["eigvalsh"]) == ["cpu_kernel_max_n"]
    data = json.loads(raw.read_text())
    assert data["chosen"] == values and data["meta"]["device"] == mlt.device_name()
    points = data["points"]["eigvalsh"]["cpu_kernel"]
    assert points and all(p["kernel_s"] > 0 and p["lapack_s"] > 0 for p in points)
    machine = (tmp_path / "machine.policy").read_text().split("\n")
    assert [ln.split()[:2] for ln in machine if ln and not ln.startswith("#")] == [
        ["eigvalsh", "cpu_kernel_max_n"]
    ]


# --- cpu_kernel_max_n, the policy file merge and the destination check ----------------------


def test_cpu_kernel_max_n_stops_at_the_first_loss():
    assert shared_cal.choose_cpu_kernel_max_n([(2, 1, 2), (4, 1, 2), (8, 3, 2), (16, 1, 2)]) == 4
    assert shared_cal.choose_cpu_kernel_max_n([(2, 2, 1)]) == 0
    assert shared_cal.choose_cpu_kernel_max_n([(2, 1, 1)]) == 0  # a tie is not a win
    assert shared_cal.choose_cpu_kernel_max_n([]) == 0


def test_policy_file_merge_keeps_other_lines():
    old = (
        "# metal-linalg policy measured by `python -m x calibrate` on D, then\n"
        "# my note\n"
        "qr gpu_min_batch 7\n"
        "eigh cpu_kernel_max_n 99  # old\n"
        "eigh gpu_max_n 64\n"
    )
    text = cal.merge_policy_file(
        old, {"eigh": {"cpu_kernel_max_n": 8}, "qr": {}}, "# metal-linalg policy measured by now"
    )
    lines = text.splitlines()
    assert lines[0] == "# metal-linalg policy measured by now"
    assert lines[1] == "eigh cpu_kernel_max_n 8"
    assert lines[2:] == ["# my note", "qr gpu_min_batch 7", "eigh gpu_max_n 64"]
    # Merging twice gives the same file: no header piles up.
    again = cal.merge_policy_file(
        text, {"eigh": {"cpu_kernel_max_n": 8}}, "# metal-linalg policy measured by now"
    )
    assert again == text


def test_destination_check(tmp_path):
    shared_cal.check_destination(str(tmp_path / "new" / "dir" / "machine.policy"))
    assert (tmp_path / "new" / "dir").is_dir()
    assert list((tmp_path / "new" / "dir").iterdir()) == []  # the probe file is removed
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(shared_cal.DestinationError, match="cannot write"):
        shared_cal.check_destination(str(blocker / "sub" / "machine.policy"))
    with pytest.raises(shared_cal.DestinationError, match="directory"):
        shared_cal.check_destination(str(tmp_path))


def test_cli_unwritable_policy_file_fails_before_measuring(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    env = {k: v for k, v in os.environ.items() if not k.startswith("METAL_LINALG_")}
    env.update(
        METAL_LINALG_POLICY_FILE=str(blocker / "cache" / "machine.policy"),
        METAL_LINALG_NO_CALIBRATION_NOTICE="1",
    )
    out = subprocess.run(
        [sys.executable, "-m", "metal_linalg_torch", "calibrate", "--cpu-only"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert "cannot write" in out.stderr and "nothing was measured" in out.stderr
    assert "METAL_LINALG_POLICY_FILE" in out.stderr
    assert "measured:" not in out.stdout and "calibrating" not in out.stdout


def test_cli_write_failure_after_measuring_keeps_the_measurements(tmp_path, monkeypatch, capsys):
    from metal_linalg_torch._frontend import frontend
    from metal_linalg_torch._shared import cli

    result = {
        "meta": {"device": "D", "date": "d", "torch": "t", "version": "v", "budget_s": None},
        "chosen": {"qr": {"cpu_kernel_max_n": 8}},
        "notes": {"qr": []},
        "points": {"qr": {"cpu_kernel": [{"n": 8, "kernel_s": 1e-4, "lapack_s": 2e-4}]}},
    }
    monkeypatch.setattr(shared_cal, "measure", lambda *a, **k: result)

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shared_cal, "write_policy", fail)
    monkeypatch.chdir(tmp_path)
    args = cli.parser("metal_linalg_torch").parse_args(["calibrate", "--ops", "qr", "--cpu-only"])
    assert cli.cmd_calibrate(frontend(), args) == 1
    err = capsys.readouterr()
    assert "qr cpu_kernel_max_n 8" in err.out
    assert "writing failed after measuring" in err.err and "No space left" in err.err
    saved = list(tmp_path.glob("metal_linalg_torch-calibration-*.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text())["chosen"] == result["chosen"]


# --- gpu_alt_min_n / gpu_alt_max_n ---------------------------------------------------------


def test_alt_phase_planned_for_ops_with_an_alternative_before_blocked():
    phases = cal.plan_phases(
        ["qr", "eigh", "svdvals"],
        cpu=False,
        host_gpu=False,
        device_gpu=True,
        lanes=False,
        blocked=True,
        alt=True,
    )
    assert phases == [
        ("qr", "blocked"),
        ("qr", "gpu_min_batch"),
        ("eigh", "alt"),
        ("eigh", "blocked"),
        ("eigh", "gpu_min_batch"),
        ("svdvals", "alt"),
        ("svdvals", "blocked"),
        ("svdvals", "gpu_min_batch"),
    ]
    assert ("eigh", "alt") not in cal.plan_phases(
        ["eigh"], cpu=False, host_gpu=False, device_gpu=True, lanes=False, blocked=True
    )
    assert shared_cal.PHASE_WEIGHTS["alt"] > 0


def test_alt_window_may_start_above_the_smallest_size():
    sizes, batches = shared_cal.ALT_SIZES, shared_cal.ALT_BATCHES
    # The alternative loses at 33 and 48, wins from 64 on: the window starts at 64.
    t = {(n, b): ((1e-3, 2e-3) if n >= 64 else (2e-3, 1e-3)) for n in sizes for b in batches}
    assert cal.choose_simd(t, sizes, batches) == (64, max(sizes))
    # Beyond the alternative's window nothing is compared: the window ends before it.
    for b in batches:
        t[(128, b)] = (None, None)
    assert cal.choose_simd(t, sizes, batches) == (64, 96)


# --- the linear systems -----------------------------------------------------------------------

LINSYS = ["cholesky", "solve", "inv", "solve_triangular", "lu_factor"]


def test_linear_systems_are_calibrated_without_the_host_phase():
    assert [op for op in cal.POLICY_OPS if op not in cal.OPS] == LINSYS
    phases = cal.plan_phases(
        ["qr", "cholesky", "solve"],
        cpu=True,
        host_gpu=True,
        device_gpu=True,
        lanes=False,
        simd=True,
        blocked=True,
        alt=True,
    )
    # Host data of the linear systems always stays with LAPACK: no host phase for them;
    # cholesky's register-column kernels are its alternative group kernels.
    assert phases == [
        ("qr", "cpu_kernel"),
        ("qr", "simd"),
        ("qr", "blocked"),
        ("qr", "gpu_min_batch"),
        ("qr", "host"),
        ("cholesky", "cpu_kernel"),
        ("cholesky", "simd"),
        ("cholesky", "alt"),
        ("cholesky", "blocked"),
        ("cholesky", "gpu_min_batch"),
        ("solve", "cpu_kernel"),
        ("solve", "simd"),
        ("solve", "blocked"),
        ("solve", "gpu_min_batch"),
    ]
    # Their SIMD lines reach n = 128 (solve_triangular_simd128): the simd phase times up to it.
    assert shared_cal.simd_sizes("solve_triangular")[-2:] == (96, 128)
    assert max(shared_cal.simd_sizes("qr")) == 64


_FAKE_SIMD_POLICY = {**_FAKE_POLICY, "gpu_simd_max_n": 0, "gpu_simd_min_n": 0}


class _FakeSimdFrontend:
    """A GPU frontend without a GPU for simd_timings of a linear system: its SIMD line covers
    n <= 128 and wins from n = 24 on, the group kernel covers every n."""

    def __init__(self):
        self.gpu = "cuda"
        self.shapes = []
        # The linear systems' queries take the order n alone.
        self.q = _FakeQueries(
            _FAKE_SIMD_POLICY, solve_triangular_backend=lambda n, b, device=None: self.route(n)
        )

    def route(self, n):
        f = self.q.fields
        if f["gpu_simd_min_n"] <= n <= min(f["gpu_simd_max_n"], 128):
            return "cuda:solve_triangular_simd128" if n > 64 else "cuda:solve_triangular_simd"
        return "cuda:solve_triangular_group"

    def op(self, op, device):
        def call(ab):
            a, b = ab
            self.shapes.append((a, b))

        return call

    def random_input(self, op, n, batch, device, seed):
        return ((batch, n, n), (batch, n, 1))  # the pair (A, B) the op takes

    def sync(self, device):
        pass

    def event_timer(self, device):
        def timer(call, x):
            (batch, n, _), _ = x
            call(x)
            simd = self.route(n).startswith("cuda:solve_triangular_simd")
            return 1e-6 * batch * n * (0.5 if simd and n >= 24 else 1.0 if simd else 0.8)

        return timer


def test_simd_timings_of_a_linear_system_cover_its_window():
    fe = _FakeSimdFrontend()
    t = shared_cal.simd_timings(fe, "solve_triangular", log=lambda s: None)
    sizes = shared_cal.simd_sizes("solve_triangular")
    assert {n for n, _ in t} == set(sizes)
    # Work above SIMD_MAX_WORK is not timed; every call got the pair (A, B).
    assert (128, 16384) not in t and (64, 16384) in t
    assert all(b[:2] == a[:2] and b[2] == 1 for a, b in fe.shapes)
    # Loses below 24 (0.8 vs 1.0 per unit), wins from 24 through 128: the window's lower bound
    # is 24, its upper the largest size timed.
    assert shared_cal.choose_simd(t, sizes) == (24, 128)
    assert fe.q.fields == fe.q.defaults


def test_torch_calibration_inputs_of_the_linear_systems():
    import torch
    from metal_linalg_torch._frontend import frontend

    fe = frontend()
    a = fe.random_input("cholesky", 12, 3, "cpu", seed=1)
    assert a.shape == (3, 12, 12) and torch.equal(a, a.mT)
    assert torch.linalg.eigvalsh(a.double()).min() > 0.5  # G G^T / n + I
    a, b = fe.random_input("solve_triangular", 12, 3, "cpu", seed=1)
    assert torch.equal(a, a.tril()) and b.shape == (3, 12, 1)
    assert a.diagonal(dim1=-2, dim2=-1).abs().min() > 1.0  # tril(G) + sqrt(n) I
    a, b = fe.random_input("solve", 12, 3, "cpu", seed=1)
    assert b.shape == (3, 12, 1) and torch.linalg.cond(a.double()).max() < 100
    a = fe.random_input("inv", 12, 3, "cpu", seed=2)
    assert a.shape == (3, 12, 12) and torch.linalg.cond(a.double()).max() < 100


def test_cli_calibrates_the_linear_systems_on_the_cpu(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("METAL_LINALG_")}
    env.update(
        METAL_LINALG_POLICY_FILE=str(tmp_path / "machine.policy"),
        METAL_LINALG_NO_CALIBRATION_NOTICE="1",
    )
    raw = tmp_path / "t.json"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "metal_linalg_torch",
            "calibrate",
            *("--ops", "cholesky", "solve_triangular", "--cpu-only", "--json-out", str(raw)),
        ],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(raw.read_text())
    for op in ("cholesky", "solve_triangular"):
        points = data["points"][op]["cpu_kernel"]
        # The kernels across SIMD lanes against LAPACK, up to their bound (cholesky 64,
        # solve_triangular 96).
        assert [p["n"] for p in points][:3] == [2, 3, 4]
        assert max(p["n"] for p in points) <= (64 if op == "cholesky" else 96)
        assert all(p["kernel_s"] > 0 and p["lapack_s"] > 0 for p in points)
        chosen = data["chosen"][op]["cpu_kernel_max_n"]
        assert chosen == shared_cal.choose_cpu_kernel_max_n(
            [(p["n"], p["kernel_s"], p["lapack_s"]) for p in points]
        )
    lines = (tmp_path / "machine.policy").read_text().split("\n")
    assert [ln.split()[:2] for ln in lines if ln and not ln.startswith("#")] == [
        ["cholesky", "cpu_kernel_max_n"],
        ["solve_triangular", "cpu_kernel_max_n"],
    ]
    # The file makes them tuned in a fresh process, which routes by the measured bound.
    code = (
        "import json, metal_linalg_torch as m; "
        "print(json.dumps([m.calibration_status(), m.cholesky_policy_source(), "
        "m.cholesky_policy()['cpu_kernel_max_n']]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    status, source, bound = json.loads(out.stdout.strip().splitlines()[-1])
    assert status["cholesky"] == "tuned" == status["solve_triangular"]
    assert status["solve"] == "untuned" and source.startswith("tuned:")
    assert bound == data["chosen"]["cholesky"]["cpu_kernel_max_n"]


def test_table_orders_the_linear_systems_after_the_decompositions_and_keeps_other_ops():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks"))
    try:
        import tune_policy_gpu
    finally:
        sys.path.pop(0)
    values = {
        "solve": {"gpu_simd_max_n": 32},
        "qr": {"gpu_simd_max_n": 64},
        "cholesky": {"gpu_alt_min_n": 33, "gpu_alt_max_n": 128},
    }
    text = cal.format_table("NVIDIA H200", values, date="d", command="c", notes=["qr: a note"])
    entries = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert entries == [
        "qr gpu_simd_max_n 64",
        "cholesky gpu_alt_min_n 33",
        "cholesky gpu_alt_max_n 128",
        "solve gpu_simd_max_n 32",
    ]
    # --keep-table: a run measuring the linear systems keeps the decompositions' lines of the
    # earlier table, with their notes, and drops its lines of the ops measured again.
    kept = tune_policy_gpu.kept_lines(text, ["cholesky", "solve"], "NVIDIA H200")
    assert kept == ["# qr: a note", "qr gpu_simd_max_n 64"]
    with pytest.raises(SystemExit, match="not a table of"):
        tune_policy_gpu.kept_lines(text, ["solve"], "NVIDIA A100")


class _FakeLinsysGpu:
    """A frontend with a simulated CUDA device for the whole calibration of the linear systems:
    routes as the core does (docs/routing.md: host route below gpu_min_batch, the blocked path
    from gpu_blocked_min_n and beyond n = 128, the SIMD lines up to 64, cholesky's register
    columns in its alt window, group kernels, lane launches), times from a cost model in which
    the lanes beat LAPACK at every n, the SIMD lines win up to 32, cholesky's columns from 33,
    the blocked path from 96 at batch 1, lane launches nowhere, the GPU (n = 32) from batch 4."""

    package, framework, framework_version = "metal_linalg_torch", "torch", "fake"
    gpu = "cuda"

    def __init__(self):
        fe = self
        self.calls = []

        class Q(_FakeQueries):
            def backends_available(self):
                return {"cpu": True, "cuda": True, "metal": False}

            def device_name(self):
                return "Fake GPU"

            def version(self):
                return "0"

            def lapack_info(self):
                return "fake"

            def get_cpu_threads(self):
                return 1

        backends = {f"{op}_backend": fe.backend_query(op) for op in LINSYS}
        from metal_linalg_torch import queries

        # Every field of the core's policy, at the built-in values of solve (no SIMD line, an
        # empty alt window), the lanes to 32.
        self.q = Q({**queries.policy("solve"), "cpu_kernel_max_n": 32}, **backends)

    def backend_query(self, op):
        """The package's <op>_backend(n, batch, device=None) of a linear system."""
        return lambda n, batch, device=None: self.route(op, n, batch, device)

    def route(self, op, n, batch, device):
        f = self.q.fields
        if device == "cpu":
            return "cpu:kernel:linsys_lanes" if n <= f["cpu_kernel_max_n"] else "cpu:lapack"
        if batch < f["gpu_min_batch"] or n > f["gpu_max_n"]:
            return "cpu:lapack"
        in_window = n <= 128
        blocked = n >= f["gpu_blocked_min_n"] and batch <= f["gpu_blocked_max_batch"]
        if not in_window or blocked:
            return f"cuda:blocked_{op}"
        if f["gpu_simd_min_n"] <= n <= min(f["gpu_simd_max_n"], 64):
            return f"cuda:{op}_simd"
        alt = f["gpu_alt_min_n"] <= n <= f["gpu_alt_max_n"] and batch <= f["gpu_alt_max_batch"]
        if op == "cholesky" and alt and n <= 128:
            return "cuda:cholesky_cols"
        lane = n <= f["gpu_lane_max_n"] and batch >= f["gpu_lane_min_batch"]
        return f"cuda:{op}_group" + ("/lane" if lane else "")

    def op(self, op, device):
        def call(x):
            (n, batch), dev = x
            self.calls.append((op, n, batch, self.route(op, n, batch, dev)))

        return call

    def random_input(self, op, n, batch, device, seed):
        return (n, batch), device

    def sync(self, device):
        pass

    def warm_gpu(self):
        pass

    def calibration_meta(self):
        return {}

    def event_timer(self, device):
        return lambda call, x: self.seconds(call, x)

    def seconds(self, call, x):
        call(x)
        _, n, batch, name = self.calls[-1]
        work = batch * n**3 * 1e-9
        if name == "cpu:kernel:linsys_lanes":
            return 1e-6 + 0.3 * work
        if name.startswith("cpu:"):
            return 1e-6 + 0.85 * work
        launch = 3e-5
        if name.endswith("/lane"):
            return launch + 3 * work
        if name.endswith("_simd"):
            return launch + (0.5 if n <= 32 else 2.0) * work
        if name.endswith("cholesky_cols"):
            return launch + 0.5 * work
        if ":blocked_" in name:
            return 4e-5 + (0.3 if batch == 1 and n >= 96 else 3.0) * work
        return launch + work  # the group kernels


def test_whole_gpu_calibration_of_the_linear_systems(monkeypatch):
    fe = _FakeLinsysGpu()
    # The device-data phases time with the fake's event timer, the others by the wall clock.
    monkeypatch.setattr(shared_cal, "wall_timer", lambda fe_, device: fe_.event_timer(device))
    result = shared_cal.measure(fe, ["cholesky", "solve"], cpu=True, gpu=True, log=lambda s: None)
    for op in ("cholesky", "solve"):
        notes = result["notes"][op]
        assert not [n for n in notes if "failed" in n], notes
        assert "host" not in result["points"][op]  # host data of a linear system stays on the CPU
        chosen = result["chosen"][op]
        assert "host_gpu_min_work" not in chosen
        # The model's winners: SIMD lines up to 32, no lane launches, the blocked path at
        # batch 1 from 96, the GPU from batch 4.
        assert (chosen["gpu_simd_min_n"], chosen["gpu_simd_max_n"]) == (0, 32), chosen
        assert chosen["gpu_lane_max_n"] == 0
        assert (chosen["gpu_blocked_min_n"], chosen["gpu_blocked_max_batch"]) == (96, 1), chosen
        assert chosen["gpu_min_batch"] == 4
        assert chosen["cpu_kernel_max_n"] == 128  # the lanes win up to the largest size timed
    # cholesky's register columns win wherever they cover n (33..128): its alt window.
    alt = result["chosen"]["cholesky"]
    assert (alt["gpu_alt_min_n"], alt["gpu_alt_max_n"]) == (33, 128), alt
    assert "gpu_alt_max_n" not in result["chosen"]["solve"]
    assert fe.q.fields == fe.q.defaults  # every phase reset the policy


BENCH_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks")


def _linsys_gpu():
    """benchmarks/linsys_gpu.py as a module."""
    sys.path.insert(0, BENCH_DIR)
    try:
        import linsys_gpu
    finally:
        sys.path.pop(0)
    return linsys_gpu


def test_linsys_benchmark_reports_the_targets():
    # benchmarks/linsys_gpu.py's target summary on the committed H200 run of the first kernels.
    linsys_gpu = _linsys_gpu()
    with open(os.path.join(BENCH_DIR, "results", "nvidia-h200-linsys.json")) as f:
        rows = json.load(f)
    lines = linsys_gpu.target_lines(rows)
    small = [ln for ln in lines if ln.startswith("- batched small")]
    assert len(small) == 1 and ">= 3x the best peer: 0 of 12 points" in small[0], lines
    assert "lowest 0.32x" in small[0] and "solve_triangular 64 x4096 (16 rhs) 0.32x" in small[0]
    few = next(ln for ln in lines if ln.startswith("- batch 1 and 64"))
    assert "0 of 3 points" in few and "cholesky 32 x1 0.63x" in few
    assert not [ln for ln in lines if ln.startswith("- large")]  # no such point in that run
    rows[0]["speedup"] = 3.5
    assert "1 of 12 points" in linsys_gpu.target_lines(rows)[0]


def test_linsys_benchmark_names_the_plan_of_the_call():
    # benchmarks/linsys_gpu.py names the core's plan of each call, right-hand sides included
    # (here through a host exec: the same ml_plan call the GPU run makes on a CUDA one).
    import metal_linalg_torch as mlt
    from metal_linalg_torch import _lib

    linsys_gpu = _linsys_gpu()
    ex = _lib.MlExec()
    ex.memory = _lib.ML_MEMORY_HOST
    assert linsys_gpu.route_name("solve", 8, 64, 1, ex=ex) == "cpu:kernel:linsys_lanes"
    assert linsys_gpu.route_name("solve", 300, 2, 16, ex=ex) == "cpu:lapack"
    assert linsys_gpu.route_name("cholesky", 16, 64, 0, ex=ex) == mlt.cholesky_backend(16, 64)
    got = linsys_gpu.route_name("solve_triangular_right", 64, 8, 16, ex=ex)
    assert got == mlt.solve_triangular_backend(64, 8, device="cpu"), got
