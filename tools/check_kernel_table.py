#!/usr/bin/env python3
"""Consistency of the kernel table (core/kernels/kernel_table.h) with its targets.

Fails when a line of the table lacks a target: its CUDA entries (cuda/kernels.cu) or its
KernelDesc row, its Metal entries (metal/kernels.metal), or its CPU-runner test entry
(tests/kernels/test_kernel_table.cpp), each read from the preprocessed source (so what the
generators really produce is checked), or when a kernel function of core/kernels has no
table line. Usage: check_kernel_table.py CLANG [--self-test]
  --self-test: plants, in a copy of the tree, a kernel function without a table line and
  generators that drop entries, and requires the check to fail on each (and the clean tree
  to pass).
"""

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def preprocess(clang: str, tree: Path, args: list[str]) -> str:
    cmd = [clang, "-E", "-P", *args]
    out = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr}")
    return out.stdout


def table(tree: Path) -> list[tuple[str, str, str]]:
    src = (tree / "core/kernels/kernel_table.h").read_text()
    body = src[src.index("#define ML_KERNEL_TABLE(X)") :]
    rows = re.findall(r"X\((\w+),\s*(ML_OP_\w+),\s*(\w+),\s*(O\w+),\s*(GROUP|REGISTER|SIMD),", body)
    return [(name, fn, kind) for name, _op, fn, _outs, kind in rows]


def check(clang: str, tree: Path) -> list[str]:
    errors = []
    rows = table(tree)
    if not rows:
        return ["no table lines found in core/kernels/kernel_table.h"]
    listed = {fn for _, fn, _ in rows}
    # Every kernel function (ML_FN void ml_x(ML_CTX ctx, ML_PARAMS p, <a>, <outputs>,
    # ML_DEVICE int *info)) has a line.
    sig = r"ML_FN\s+void\s+(ml_\w+)\s*\(\s*ML_CTX\s+\w+\s*,\s*ML_PARAMS([^)]*)\)"
    for h in sorted((tree / "core/kernels").glob("*.h")):
        for fn, params in re.findall(sig, h.read_text()):
            if not re.search(r"ML_DEVICE\s+int\s*\*\s*info\s*$", params):
                continue  # a helper with other arguments
            if fn not in listed:
                errors.append(f"core/kernels/{h.name}: kernel {fn} has no line in kernel_table.h")
    metal = preprocess(
        clang,
        tree,
        [
            "-x",
            "cl",
            "-cl-std=clc++2021",
            "-I",
            str(ROOT / "tools/metal_check"),
            "-I",
            "core/kernels",
            "metal/kernels.metal",
        ],
    )
    cuda = preprocess(
        clang, tree, ["-x", "c++", "-std=c++17", "-I", "core/kernels", "cuda/kernels.cu"]
    )
    runner = preprocess(
        clang,
        tree,
        ["-x", "c++", "-std=c++20", "-I", "core/include", "tests/kernels/test_kernel_table.cpp"],
    )
    for name, fn, kind in rows:
        # GROUP: block + lane entries; REGISTER: lane entry; SIMD: block entry (Metal and CUDA).
        lane = ["_lane"] if kind != "SIMD" else []
        block = [""] if kind != "REGISTER" else []
        want_metal = [f"ml_metal_{name}{s}" for s in lane + block]
        for entry in want_metal:
            if not re.search(rf"__kernel\s+void\s+{entry}\s*\(", metal):
                errors.append(f"{name}: no Metal entry {entry} in metal/kernels.metal")
        # CUDA also has a global entry (scratch in device memory) per GROUP line.
        glob = ["_global"] if kind == "GROUP" else []
        want_cuda = [f"ml_cuda_{name}{s}" for s in lane + block + glob]
        for entry in want_cuda:
            bounds = r"(?:__launch_bounds__\s*\([^)]*\)\s*)?"
            if not re.search(rf"__global__\s+void\s+{bounds}{entry}\s*\(", cuda):
                errors.append(f"{name}: no CUDA entry {entry} in cuda/kernels.cu")
        if not re.search(r'\{\s*"' + name + r'"\s*,', cuda):
            errors.append(f"{name}: no KernelDesc row in cuda/kernels.cu")
        if not re.search(r'\{\s*"' + name + r'"\s*,', runner):
            errors.append(
                f"{name}: not in the CPU runner's list (tests/kernels/test_kernel_table.cpp)"
            )
    return errors


def main() -> int:
    clang = sys.argv[1] if len(sys.argv) > 1 else "clang-14"
    if "--self-test" in sys.argv:
        status = 0
        if check(clang, ROOT):
            print("check_kernel_table self-test: the clean tree fails")
            status = 1
        plants = [
            (
                "kernel without a table line",
                "core/kernels/qr_householder.h",
                "#endif",
                (
                    "ML_FN void ml_zz_planted(ML_CTX ctx, ML_PARAMS p, ML_DEVICE const float *a,\n"
                    "                         ML_DEVICE int *info) {}\n#endif"
                ),
                "ml_zz_planted",
            ),
            (
                "Metal generator dropping REGISTER lines",
                "metal/kernels.metal",
                "ML_KERNEL_TABLE(ML_METAL_ENTRIES)",
                (
                    "#undef ML_METAL_ENTRIES_REGISTER\n#define ML_METAL_ENTRIES_REGISTER(name, fn, outs)\n"
                    "ML_KERNEL_TABLE(ML_METAL_ENTRIES)"
                ),
                "no Metal entry",
            ),
            (
                "CUDA generator dropping lane entries",
                "cuda/kernels.cu",
                "ML_KERNEL_TABLE(ML_CUDA_ENTRIES)",
                (
                    "#undef ML_CUDA_ENTRIES_GROUP\n#define ML_CUDA_ENTRIES_GROUP(name, fn, outs) "
                    "ML_CUDA_BLOCK_ENTRY(name, fn, outs)\nML_KERNEL_TABLE(ML_CUDA_ENTRIES)"
                ),
                "no CUDA entry",
            ),
        ]
        for what, path, old, new, expect in plants:
            with tempfile.TemporaryDirectory() as tmp:
                tree = Path(tmp)
                for d in ("core", "cuda", "metal", "tests/kernels"):
                    shutil.copytree(ROOT / d, tree / d)
                p = tree / path
                src = p.read_text()
                k = src.rindex(old)
                p.write_text(src[:k] + new + src[k + len(old) :])
                errs = check(clang, tree)
                if any(expect in e for e in errs):
                    print(f"check_kernel_table self-test: planted '{what}' caught")
                else:
                    print(f"check_kernel_table self-test: planted '{what}' NOT caught: {errs}")
                    status = 1
        return status
    errors = check(clang, ROOT)
    for e in errors:
        print("check_kernel_table: FAIL", e)
    if not errors:
        print(f"check_kernel_table: OK ({len(table(ROOT))} kernels, every target present)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
