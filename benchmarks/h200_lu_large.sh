#!/usr/bin/env bash
# One GPU-machine call for large LU (lu_factor, solve, inv at batch 1..8, n 1024..4096): the torch
# package prebuilt for sm_90 on PYTHONPATH (e.g. a `pip install --target` of python-torch with
# -C cmake.define.ML_BUILD_CUDA=ON, carried with the call), then
#   1. tests/python/cuda/test_cuda_linsys.py (the leaves and the lookahead forced on by their
#      variables in test_blocked_lu_leaves_and_lookahead),
#   2. benchmarks/profile_steps.py per variant (launches and GPU time per step),
#   3. benchmarks/linsys_ab.py: the variants side by side with torch.linalg,
#   4. benchmarks/linsys_gpu.py with torch, CuPy and JAX under FINAL's variables (default: the
#      leaves and the lookahead on).
# Variants (variables read per call by core/src/blocked_linsys.cpp): launches = the panels as
# four launches per register panel (the former default), leaf = one launch per panel, leafla =
# leaf with lookahead, la128 / la32 = leafla with panels of 128 / 32 columns.
#   OUT=out bash benchmarks/h200_lu_large.sh
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. benchmarks/h200_common.sh
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONPATH="${PYTHONPATH:-}:$PWD/benchmarks"
L=METAL_LINALG_LS_LU_LEAF A=METAL_LINALG_LS_LU_LOOKAHEAD N=METAL_LINALG_LS_LU_NB
timeout "${PYTEST_S:-90}" python3 -m pytest tests/python/cuda/test_cuda_linsys.py -q \
  -p no:cacheprovider --maxfail=20 -o addopts="" 2>&1 | tee "$OUT/pytest.log" | tail -4
echo "== tests done after $SECONDS s"
VARIANTS="launches:$L=0,$A=0;leaf:$L=1,$A=0;leafla:$L=1,$A=1;la128:$L=1,$A=1,$N=128" \
  timeout "${PROFILE_S:-60}" python3 benchmarks/profile_steps.py lu_factor:1024x1024x1 \
  lu_factor:2048x2048x1 lu_factor:4096x4096x1 2>&1 | tee "$OUT/profile_steps.log" | grep "=="
echo "== profile done after $SECONDS s"
timeout "${AB_S:-90}" python3 benchmarks/linsys_ab.py --out "$OUT" --slug lu-ab --reps 5 \
  --peers torch --points lu_factor:1024:1 lu_factor:2048:1 lu_factor:4096:1 lu_factor:2048:8 \
  solve:4096:1:1 inv:2048:1 --variant "launches:$L=0,$A=0" --variant "leaf:$L=1,$A=0" \
  --variant "leafla:$L=1,$A=1" --variant "la128:$L=1,$A=1,$N=128" \
  --variant "la32:$L=1,$A=1,$N=32" >"$OUT/ab.log" 2>&1
cat "$OUT/lu-ab.md" 2>/dev/null || tail -5 "$OUT/ab.log"
echo "== variants done after $SECONDS s"
# shellcheck disable=SC2086
env ${FINAL:-$L=1 $A=1} timeout "${BENCH_S:-120}" python3 benchmarks/linsys_gpu.py --out "$OUT" \
  --slug nvidia-h200-linsys-lu-large --reps 5 --points lu_factor:1024:1 lu_factor:2048:1 \
  lu_factor:4096:1 lu_factor:2048:8 lu_factor:1024:8 solve:1024:1:1 solve:4096:1:1 \
  solve:2048:8:16 inv:1024:1 inv:2048:1 2>&1 | tail -20
echo "== all done after $SECONDS s"
