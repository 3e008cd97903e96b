"""The blocked algorithms' matrix product on CUDA: the dialect step (core/kernels/gemm.h, each tile
variant the host may pick), cuBLAS behind the Runner hook, and torch.mm (cuBLAS, TF32 off) as the
peer, on the shapes the blocked algorithms use. TFLOP/s and % of the fp32 FMA peak per shape.

    python3 benchmarks/gemm_bench.py --out DIR     # writes DIR/nvidia-h200-gemm.{json,md}

Times with CUDA events after a warm-up: best and median of --reps runs. Needs metal_linalg_torch
built with the CUDA backend (its product entry ml_cuda_blocked_gemm).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess

import torch
from cuda_events import best_and_median_ms
from metal_linalg_torch import _lib

TRANS_A, TRANS_B = 1, 2
# H200 SXM: 132 SMs x 128 fp32 FMA lanes x 2 flops x 1.98 GHz boost.
PEAK_TFLOPS = 66.9

_gemm = _lib.lib.ml_cuda_blocked_gemm
_gemm.restype = ctypes.c_int32
_i32, _i64, _f = ctypes.c_int32, ctypes.c_int64, ctypes.c_float
_gemm.argtypes = [_i32, _i32, _i32, _i32, _i32, _i32, _i32, _f, _f, ctypes.c_void_p]
_gemm.argtypes += [_i64, _i32, _i64, _i32, _i64, _i32, _i64, _i64, _i64, _i64, ctypes.c_void_p]

# (label, m, n, k, flags, batch, beta): the algorithms' products and the square reference.
SHAPES = [
    ("square 4096^3", 4096, 4096, 4096, 0, 1, 0.0),
    ("square 2048^3", 2048, 2048, 2048, 0, 1, 0.0),
    ("rank-2k update 4096x4096x32 (C -= V W^T)", 4096, 4096, 32, TRANS_B, 1, 1.0),
    ("rank-2k update 4096x4096x64 (C -= V W^T)", 4096, 4096, 64, TRANS_B, 1, 1.0),
    ("panel 32x4096x4096 (V^T C)", 32, 4096, 4096, TRANS_A, 1, 0.0),
    ("panel 4096x32x4096 (C W)", 4096, 32, 4096, 0, 1, 0.0),
    ("trailing update 4064x4064x32 (C -= V X)", 4064, 4064, 32, 0, 1, 1.0),
    ("batch 8 x 1024^3", 1024, 1024, 1024, 0, 8, 0.0),
    ("batch 64 x 1024^3", 1024, 1024, 1024, 0, 64, 0.0),
    ("batch 8 x 1024x1024x32 (C -= V W^T)", 1024, 1024, 32, TRANS_B, 8, 1.0),
]
# Product variants: (name, impl, lanes, regs); impl 1 the dialect step, 2 cuBLAS via the hook.
VARIANTS = [
    ("dialect (host's tile)", 1, 0, 0),
    ("dialect 64x64 tiles", 1, 16, 4),
    ("dialect 128x128 tiles", 1, 16, 8),
    ("cuBLAS via hook", 2, 0, 0),
]


def timed(fn, reps: int) -> tuple[float, float]:
    for _ in range(3):
        fn()
    return best_and_median_ms(fn, reps)


def bench_shape(m, n, k, flags, batch, beta, reps):
    ta, tb = flags & TRANS_A, flags & TRANS_B
    ar, ac = (k, m) if ta else (m, k)
    br, bc = (n, k) if tb else (k, n)
    sa, sb, sc = ar * ac, br * bc, m * n
    split_floats = 16 * m * n if m * n <= (1 << 20) else 0  # split-k scratch for few tiles
    stride = (sa + sb + sc + split_floats + 31) // 32 * 32
    ws = torch.randn(batch * stride, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    rows = {}
    for name, impl, lanes, regs in VARIANTS:
        if impl == 2 and _lib.lib.ml_cuda_cublas_available() != 1:
            continue

        def run(impl=impl, lanes=lanes, regs=regs):
            st = _gemm(
                impl,
                lanes,
                regs,
                flags,
                m,
                n,
                k,
                -1.0,
                beta,
                ws.data_ptr(),
                0,
                ar,
                sa,
                br,
                sa + sb,
                m,
                batch,
                stride,
                sa + sb + sc,
                split_floats,
                stream,
            )
            _lib.check(st, "ml_cuda_blocked_gemm")

        try:
            rows[name] = timed(run, reps)
        except (RuntimeError, ValueError, MemoryError) as e:  # the others still run
            print(f"{name}: {e}", flush=True)
    # Peer: torch (cuBLAS, TF32 off) on the same stored operands.
    v = ws.view(batch, stride)
    A = v[:, :sa].view(batch, ac, ar).mT  # column-major ar x ac
    B = v[:, sa : sa + sb].view(batch, bc, br).mT
    C = v[:, sa + sb : sa + sb + sc].view(batch, n, m).mT
    opa, opb = (A.mT if ta else A), (B.mT if tb else B)
    out = torch.empty_like(C)

    def peer():
        if batch == 1:
            torch.addmm(C[0], opa[0], opb[0], beta=beta, alpha=-1.0, out=out[0])
        else:
            torch.baddbmm(C, opa, opb, beta=beta, alpha=-1.0, out=out)

    rows["torch (cuBLAS, TF32 off)"] = timed(peer, reps)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    os.makedirs(args.out, exist_ok=True)
    device = torch.cuda.get_device_name()
    try:
        clocks = subprocess.run(
            ["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        clocks = ""
    results = []
    for label, m, n, k, flags, batch, beta in SHAPES:
        flops = 2.0 * m * n * k * batch
        rows = bench_shape(m, n, k, flags, batch, beta, args.reps)
        entry = {
            "shape": label,
            "m": m,
            "n": n,
            "k": k,
            "flags": flags,
            "batch": batch,
            "beta": beta,
            "flops": flops,
            "variants": {},
        }
        for name, (best, med) in rows.items():
            tf = flops / (best * 1e-3) / 1e12
            entry["variants"][name] = {
                "best_ms": best,
                "median_ms": med,
                "tflops": tf,
                "pct_peak": 100 * tf / PEAK_TFLOPS,
            }
            print(
                f"{label:45s} {name:26s} {best:9.3f} ms {tf:7.2f} TFLOP/s "
                f"{100 * tf / PEAK_TFLOPS:5.1f}%",
                flush=True,
            )
        results.append(entry)
    meta = {
        "device": device,
        "torch": torch.__version__,
        "peak_tflops_fp32_fma": PEAK_TFLOPS,
        "clocks_sm_now_max": clocks,
        "reps": args.reps,
        "tf32": False,
    }
    stem = os.path.join(args.out, "nvidia-h200-gemm")
    with open(stem + ".json", "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    names = [v[0] for v in VARIANTS] + ["torch (cuBLAS, TF32 off)"]
    lines = [
        f"# The blocked algorithms' product on {device}",
        "",
        (
            f"TFLOP/s (best of {args.reps}) and % of the fp32 FMA peak ({PEAK_TFLOPS} TFLOP/s); "
            f"torch {torch.__version__}, TF32 off everywhere. Written by benchmarks/gemm_bench.py."
        ),
        "",
        "| shape | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for e in results:
        cells = []
        for nm in names:
            r = e["variants"].get(nm)
            cells.append(f"{r['tflops']:.1f} ({r['pct_peak']:.0f}%)" if r else "-")
        lines.append(f"| {e['shape']} x{e['batch']} | " + " | ".join(cells) + " |")
    with open(stem + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
