"""Measure the CUDA routing policy of this machine for every op (metal_linalg_torch.calibrate; the
decompositions and the linear systems):
host_gpu_min_work (host tensors: CPU backend vs the GPU route, copies included; not for the linear
systems, whose host data stays on the CPU), gpu_simd_min_n / gpu_simd_max_n and gpu_alt_* (device
tensors: the simdgroup and alternative kernels against the route without them), gpu_lane_max_n /
gpu_lane_min_batch (device tensors: lane-per-matrix vs block kernels, when the core has these
fields), gpu_global_max_n / gpu_global_min_batch (device tensors beyond the shared window: the
global launch vs the host route), gpu_blocked_min_n / gpu_blocked_max_batch (device tensors inside
the shared window: the blocked path vs the table's kernels) and gpu_min_batch (device tensors: GPU
vs the CPU route), within a total time budget.

Writes to --out: <device>.policy (the core/tuned table, device line = ml_device_name()),
policy-gpu.json (every raw timing) and policy-gpu.md (chosen values and timing tables per op).
Never touches the per-machine policy file of the user (METAL_LINALG_POLICY_FILE points into --out,
and that file is neither read nor written).

    python3 benchmarks/tune_policy_gpu.py --out "$OUT" --budget-s 240
    python3 benchmarks/tune_policy_gpu.py --out "$OUT" --ops cholesky solve inv solve_triangular \
        lu_factor --keep-table core/tuned/NVIDIA_H200.policy   # add these ops to a table
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

DECOMPOSITIONS = ("qr", "eigh", "eigvalsh", "svd", "svdvals")
OPS = (*DECOMPOSITIONS, "cholesky", "solve", "inv", "solve_triangular", "lu_factor")


def _ms(t) -> str:
    return "-" if t is None else f"{t * 1e3:.3g}"


def _grid(points, key_a, key_b, cell) -> list:
    rows = sorted({p[key_a] for p in points})
    cols = sorted({p[key_b] for p in points})
    at = {(p[key_a], p[key_b]): p for p in points}
    out = [
        f"| {key_a} \\ {key_b} | " + " | ".join(str(c) for c in cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for r in rows:
        out.append(f"| {r} | " + " | ".join(cell(at.get((r, c))) for c in cols) + " |")
    return out


def _pair_cell(a_key: str, b_key: str, missing: str, mark: str, b_first: bool = False):
    """A grid cell "a / b" of one timed point (times a_key against b_key, seconds), the winner
    marked when a is faster; `missing` stands for a's time when it has none; b_first: b is
    printed first (host data: cpu / gpu)."""

    def cell(p) -> str:
        if p is None:
            return ""
        if p.get("skipped"):
            return "skipped" if p["skipped"] == "time budget" else "-"
        a, b = p.get(a_key), p.get(b_key)
        if a is None:
            return f"{_ms(b)} / {missing}" if b_first else f"{missing} / {_ms(b)}"
        won = f" **{mark}**" if b is not None and a < b else ""
        return f"{_ms(b)} / {_ms(a)}{won}" if b_first else f"{_ms(a)} / {_ms(b)}{won}"

    return cell


_lane_cell = _pair_cell("lane_s", "block_s", "no lane", "L")
_host_cell = _pair_cell("gpu_s", "cpu_s", "no GPU", "G", b_first=True)
_global_cell = _pair_cell("global_s", "host_s", "no global", "G")
_blocked_cell = _pair_cell("blocked_s", "table_s", "failed", "B")
_simd_cell = _pair_cell("simd_s", "other_s", "no simd", "S")
_alt_cell = _pair_cell("alt_s", "first_s", "no alt", "A")


def markdown(result: dict, command: str) -> str:
    meta = result["meta"]
    lines = [
        f"# Routing policy measured on {meta['device']}",
        "",
        (
            f"Date {meta['date']}; torch {meta['torch']}, core {meta['version']}, LAPACK "
            f"{meta['lapack']}, {meta['cpu_threads']} CPU threads; time budget "
            f"{meta['budget_s']} s, took {meta.get('elapsed_s')} s. Command: `{command}`."
        ),
        (
            "Best per-call time after a warm-up (device tensors: CUDA events; host tensors: "
            "synchronize + wall clock), ms. host_gpu_min_work 0 = never; gpu_lane_max_n 0 = off."
        ),
        "",
    ]
    for op, chosen in result["chosen"].items():
        lines += [f"## {op}", ""]
        lines += [f"- `{op} {f} {v}`" for f, v in chosen.items()] or ["- nothing measured"]
        lines += [f"- note: {n}" for n in result["notes"][op]]
        pts = result["points"][op]
        if pts.get("lane"):
            lines += ["", "Device tensors, lane / block ms (**L**: lane faster):", ""]
            lines += _grid(pts["lane"], "n", "batch", _lane_cell)
        if pts.get("simd"):
            lines += ["", "Device tensors, simdgroup kernel / without ms (**S**: simd faster):", ""]
            lines += _grid(pts["simd"], "n", "batch", _simd_cell)
        if pts.get("alt"):
            lines += [
                "",
                "Device tensors, alternative / first group kernel ms (**A**: alternative faster):",
                "",
            ]
            lines += _grid(pts["alt"], "n", "batch", _alt_cell)
        if pts.get("global"):
            lines += [
                "",
                (
                    "Device tensors beyond the shared window, global launch / host route ms "
                    "(**G**: global faster):"
                ),
                "",
            ]
            lines += _grid(pts["global"], "n", "batch", _global_cell)
        if pts.get("blocked"):
            lines += [
                "",
                (
                    "Device tensors inside the shared window, blocked path / table kernel ms "
                    "(**B**: blocked faster):"
                ),
                "",
            ]
            lines += _grid(pts["blocked"], "n", "batch", _blocked_cell)
        if pts.get("host"):
            lines += ["", "Host tensors, CPU backend / GPU route ms (**G**: GPU faster):", ""]
            lines += _grid(pts["host"], "n", "batch", _host_cell)
        if pts.get("gpu_min_batch"):
            lines += ["", "Device tensors 32x32, GPU / via CPU ms by batch:", ""]
            lines += [
                "- "
                + ", ".join(
                    f"x{p['batch']}: {_ms(p['gpu_s'])} / {_ms(p['via_cpu_s'])}"
                    for p in pts["gpu_min_batch"]
                )
            ]
        lines.append("")
    return "\n".join(lines)


def kept_lines(old_text: str, measured_ops, device: str) -> list:
    """The lines of an earlier table for the ops not measured now (its comments about them
    included); the table must be of the same device."""
    lines = old_text.splitlines()
    if not lines or lines[0].strip() != f"# device: {device}":
        raise SystemExit(f"--keep-table: not a table of {device!r} (first line {lines[:1]})")
    kept = []
    for line in lines[1:]:
        body = line.split("#", 1)[0].split()
        if body:
            if body[0] not in measured_ops:
                kept.append(line)
        elif any(line.startswith(f"# {op}: ") for op in OPS if op not in measured_ops):
            kept.append(line)
    return kept


def _setup_env(out: Path) -> None:
    # Set before the library loads: no earlier calibration of this machine leaks into the run.
    os.environ["METAL_LINALG_POLICY_FILE"] = str(out / "unused-machine.policy")
    os.environ["METAL_LINALG_NO_CALIBRATION_NOTICE"] = "1"


def child(args) -> int:
    """One op in this process: a CUDA error or crash of one op cannot spoil the others."""
    _setup_env(Path(args.out))
    import metal_linalg_torch as mlt
    import torch
    from metal_linalg_torch import calibrate

    if not calibrate.cuda_usable():
        print(
            f"no usable CUDA backend (torch.cuda {torch.cuda.is_available()}, core "
            f"{mlt.backends_available()}): nothing to tune"
        )
        return 3
    print(
        f"== {args.child} on {mlt.device_name()} | torch {torch.__version__} | core "
        f"{mlt.version()} | lane fields {'yes' if calibrate.has_lane_fields() else 'no'} | "
        f"budget {args.budget_s:.0f} s",
        flush=True,
    )
    result = calibrate.measure(
        (args.child,),
        cpu=args.with_cpu,
        cuda=True,
        budget_s=args.budget_s,
        log=lambda s: print(s, flush=True),
    )
    calibrate.write_json(str(Path(args.out) / f"part-{args.child}.json"), result)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="bench-out", help="folder for the table, JSON and Markdown")
    p.add_argument("--budget-s", type=float, default=240.0, help="total seconds for all ops")
    p.add_argument("--ops", nargs="+", choices=OPS, default=list(OPS))
    p.add_argument(
        "--with-cpu", action="store_true", help="also measure cpu_kernel_max_n on this host's CPU"
    )
    p.add_argument(
        "--table-skip",
        nargs="*",
        default=["gpu_min_batch"],
        help="measured fields left out of the table (kept in the JSON and Markdown); default "
        "gpu_min_batch: device tensors stay on the GPU whatever the batch (no host sync, CUDA "
        "graphs keep working), although a small batch can run faster through the host CPU",
    )
    p.add_argument(
        "--keep-table",
        metavar="PATH",
        help="an existing table of this device: its lines of the ops not measured now are kept "
        "in the new table (e.g. adding the linear systems to core/tuned/NVIDIA_H200.policy)",
    )
    p.add_argument("--child", choices=OPS, help=argparse.SUPPRESS)
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    forced = [k for k in os.environ if k.startswith("METAL_LINALG_") and k.endswith("_BACKEND")]
    if forced:
        print(f"unset {', '.join(forced)} first: forced backends defeat the measurement")
        return 2
    if args.child:
        return child(args)
    command = "python3 benchmarks/tune_policy_gpu.py " + " ".join(sys.argv[1:])
    t0 = time.monotonic()
    parts, failed = {}, {}
    for i, op in enumerate(args.ops):
        left = args.budget_s - (time.monotonic() - t0)
        if left <= 0:
            failed[op] = "not measured (time budget)"
            continue
        share = left / (len(args.ops) - i)
        part = out / f"part-{op}.json"
        part.unlink(missing_ok=True)
        cmd = [sys.executable, __file__, "--child", op, "--out", str(out)]
        cmd += ["--budget-s", f"{share:.1f}"] + (["--with-cpu"] if args.with_cpu else [])
        try:
            rc = subprocess.run(cmd, timeout=share + 120, check=False).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        if rc == 3:
            return 2  # no usable CUDA backend: nothing to tune, no table
        if rc == 0 and part.exists():
            parts[op] = json.loads(part.read_text())
            part.unlink()
        else:
            failed[op] = f"measurement process failed (exit status {rc}): no values"
            print(f"== {op}: {failed[op]}", flush=True)
    if not parts:
        print("no op was measured: no table written")
        return 1

    _setup_env(out)
    from metal_linalg_torch import calibrate

    first = next(iter(parts.values()))
    result = {
        "meta": {**first["meta"], "budget_s": args.budget_s, "command": command},
        "chosen": {},
        "notes": {},
        "points": {},
    }
    for op in args.ops:
        got = parts.get(op, {})
        for key in ("chosen", "notes", "points"):
            result[key][op] = got.get(key, {}).get(op, [] if key == "notes" else {})
        if op in failed:
            result["notes"][op].append(failed[op])
        elif got["meta"]["device"] != result["meta"]["device"]:
            raise RuntimeError(f"device changed between ops: {got['meta']['device']}")
    result["meta"]["elapsed_s"] = round(time.monotonic() - t0, 1)
    table = out / calibrate.table_file_name(result["meta"]["device"])
    in_table = {
        **result,
        "chosen": {
            op: {f: v for f, v in fields.items() if f not in args.table_skip}
            for op, fields in result["chosen"].items()
        },
        "notes": {op: list(items) for op, items in result["notes"].items()},
    }
    for op, fields in result["chosen"].items():
        left = {f: v for f, v in fields.items() if f in args.table_skip}
        if left:
            measured = ", ".join(f"{f} {v}" for f, v in sorted(left.items()))
            in_table["notes"].setdefault(op, []).append(f"measured, not applied: {measured}")
    calibrate.write_table(str(table), in_table, command)
    if args.keep_table:
        kept = kept_lines(Path(args.keep_table).read_text(), args.ops, result["meta"]["device"])
        with open(table, "a") as f:
            f.write(f"# kept from {args.keep_table} (not measured by this run):\n")
            f.write("".join(line + "\n" for line in kept))
    calibrate.write_json(str(out / "policy-gpu.json"), result)
    (out / "policy-gpu.md").write_text(markdown(result, command))
    print(f"\n== {table} ({result['meta']['elapsed_s']:.0f} s)")
    print(table.read_text())
    print(f"wrote {table}, {out / 'policy-gpu.json'}, {out / 'policy-gpu.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
