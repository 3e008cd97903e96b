#!/usr/bin/env bash
# One call on the GPU machine for the LU SIMD lines (core/kernels/linsys_lu_simd.h): the torch
# package built elsewhere with the CUDA backend for sm_90 (pip install --target SITE
# ./python-torch -C cmake.define.ML_BUILD_CUDA=ON -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90-real),
# carried along with .whl (the scipy_openblas32 wheel) where the machine lacks it; then the CUDA
# tests of the linear systems' kernels (not the blocked path), benchmarks/linsys_gpu.py on the
# group kernels (the SIMD lines off by the environment, ours only) and on the SIMD lines against
# torch.linalg, CuPy and JAX, and Nsight Compute on two of the SIMD kernels. Results to $OUT:
# group.{json,md,png}, simd.{json,md,png}, ncu.txt, pytest.log (8 files).
#   SITE=path/to/site bash benchmarks/h200_lu_simd.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-out}
SITE=${SITE:-.site}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 METAL_LINALG_NO_CALIBRATION_NOTICE=1
if ls .whl/scipy_openblas32-*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
    .whl/scipy_openblas32-*.whl || exit 1
fi
mkdir -p /tmp/site && rm -rf /tmp/site/metal_linalg_torch && cp -r "$SITE/metal_linalg_torch" /tmp/site/ || exit 1
export PYTHONPATH=/tmp/site:$PWD/benchmarks
python3 -c 'import sys, metal_linalg_torch as m; sys.exit(0 if m._lib.lib.ml_backend_available(b"cuda") else 1)' \
  || { echo "no usable CUDA backend"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
rc=0
timeout "${TESTS_S:-150}" python3 -m pytest tests/python/cuda/test_cuda_linsys.py -k "not blocked" -q \
  -p no:cacheprovider --maxfail=20 -o addopts="" 2>&1 | tee "$OUT/pytest.log" | tail -15
rc=$(( rc | PIPESTATUS[0] ))
# The anchor points, batch 1 and 64 at n 8, 16, 32, 64, and batches of 1024 and more.
PTS=${PTS:-"solve:64:4096:1 solve:64:4096:16 inv:64:1024 lu_factor:32:16384 solve:16:16384:1
  lu_factor:8:16384 lu_factor:16:16384 lu_factor:64:4096 lu_factor:64:1024 inv:8:16384 inv:16:16384
  inv:32:4096 solve:8:16384:1 solve:32:4096:1 solve:32:16384:16 solve:64:1024:64
  lu_factor:8:1 lu_factor:16:1 lu_factor:32:1 lu_factor:64:1 lu_factor:8:64 lu_factor:16:64
  lu_factor:32:64 lu_factor:64:64 solve:8:1:1 solve:16:1:1 solve:32:1:1 solve:64:1:1 solve:8:64:1
  solve:16:64:1 solve:32:64:1 solve:64:64:1 inv:8:1 inv:16:1 inv:32:1 inv:64:1 inv:8:64 inv:16:64
  inv:32:64 inv:64:64"}
# shellcheck disable=SC2086
METAL_LINALG_SOLVE_GPU_SIMD_MAX_N=0 METAL_LINALG_INV_GPU_SIMD_MAX_N=0 \
  METAL_LINALG_LU_FACTOR_GPU_SIMD_MAX_N=0 timeout "${GROUP_S:-90}" python3 benchmarks/linsys_gpu.py \
  --out "$OUT" --slug group --ours-only --points $PTS > /tmp/group.log 2>&1
rc=$(( rc | $? ))
cat "$OUT/group.md"
# The SIMD lines are off by default (gpu_simd_max_n 0 until measured): on for this run.
# shellcheck disable=SC2086
METAL_LINALG_SOLVE_GPU_SIMD_MAX_N=64 METAL_LINALG_INV_GPU_SIMD_MAX_N=64 \
  METAL_LINALG_LU_FACTOR_GPU_SIMD_MAX_N=64 timeout "${BENCH_S:-240}" python3 benchmarks/linsys_gpu.py \
  --out "$OUT" --slug simd --points $PTS > /tmp/simd.log 2>&1
rc=$(( rc | $? ))
cat "$OUT/simd.md"
cat > /tmp/ncu_target.py <<'PY'
import sys

import metal_linalg_torch as mlt
import torch

op, n, batch, nrhs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
a = torch.randn(batch, n, n, device="cuda") + n**0.5 * torch.eye(n, device="cuda")
b = torch.randn(batch, n, nrhs, device="cuda")
for _ in range(2):
    mlt.solve(a, b) if op == "solve" else getattr(mlt, op)(a)
torch.cuda.synchronize()
PY
for t in ${NCU:-solve_simd64:solve:64:4096:1 solve_simd16:solve:16:16384:1}; do
  IFS=: read -r k op n b r <<< "$t"
  METAL_LINALG_SOLVE_GPU_SIMD_MAX_N=64 timeout "${NCU_S:-60}" ncu -k "regex:$k" -c 1 --section SpeedOfLight --section Occupancy \
    --section LaunchStats --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis python3 /tmp/ncu_target.py "$op" "$n" "$b" "$r" \
    >> "$OUT/ncu.txt" 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Issue Slots Busy|Compute \(SM\) Throughput|Memory Throughput|Local" "$OUT/ncu.txt" | tail -12
done
exit $rc
