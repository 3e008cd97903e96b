#!/usr/bin/env bash
# One call on the GPU machine that measures the linear systems' routing and applies it: the torch
# package prebuilt for sm_90 (SITE, e.g. a `pip install --target` of python-torch with
# -C cmake.define.ML_BUILD_CUDA=ON -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90-real, carried with
# the call), then
#   1. tests/python/cuda/test_cuda_linsys.py without the blocked path (its fixture turns every
#      kernel line on, so the lines not yet timed on a GPU are tested too);
#   2. benchmarks/tune_policy_gpu.py for cholesky, solve, inv, solve_triangular and lu_factor (the
#      simdgroup, alternative, lane, blocked and device-data phases of `calibrate`), the
#      decompositions' lines of core/tuned/NVIDIA_H200.policy kept: $OUT/tune/NVIDIA_H200.policy
#      is the new table to commit;
#   3. benchmarks/linsys_gpu.py on the anchor points against torch.linalg, CuPy and JAX, under the
#      new table (METAL_LINALG_POLICY_FILE) and, ours only, under the built-in one (before).
# Results and logs to $OUT. TUNE=0: steps 1 and 3 only, the package's built-in table (the one
# committed) in place of a new one, and no "before" run.
#   SITE=path/to/site bash benchmarks/h200_linsys_tune.sh
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. benchmarks/h200_common.sh
SITE=${SITE:-.site}
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONPATH="$SITE:$PWD/benchmarks"
cuda_usable || { echo "no usable CUDA backend in $SITE"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
rc=0
echo "== tests"
timeout "${TESTS_S:-100}" python3 -m pytest -q -p no:cacheprovider --maxfail=20 -o addopts="" \
  -k "not blocked" tests/python/cuda/test_cuda_linsys.py 2>&1 | tee "$OUT/pytest.log" | tail -6
rc=$(( rc | PIPESTATUS[0] ))
TABLE=()
if [ "${TUNE:-1}" != 0 ]; then
echo "== tune ($SECONDS s)"
timeout "${TUNE_S:-260}" python3 benchmarks/tune_policy_gpu.py --out "$OUT/tune" \
  --budget-s "${BUDGET_S:-200}" --ops cholesky solve inv solve_triangular lu_factor \
  --keep-table core/tuned/NVIDIA_H200.policy > "$OUT/tune.log" 2>&1
rc=$(( rc | $? ))
grep -E "^(cholesky|solve|inv|solve_triangular|lu_factor) " "$OUT/tune/NVIDIA_H200.policy"
TABLE=("METAL_LINALG_POLICY_FILE=$OUT/tune/NVIDIA_H200.policy")
fi
# The issue's anchor points: batches of n 8..128 (1 and 16 right-hand sides), batch 1 and 64.
P=${POINTS:-"cholesky:8:16384 cholesky:32:16384 cholesky:64:1024 cholesky:64:16384 cholesky:128:1024
  cholesky:8:1 cholesky:32:1 cholesky:64:1 cholesky:128:1 cholesky:8:64 cholesky:32:64 cholesky:64:64
  cholesky:128:64 solve:8:16384:1 solve:16:16384:1 solve:32:4096:1 solve:64:4096:1 solve:64:4096:16
  solve:128:1024:16 solve:8:1:1 solve:32:1:1 solve:64:1:1 solve:8:64:1 solve:32:64:1 solve:64:64:16
  inv:8:16384 inv:32:4096 inv:64:1024 inv:128:256 inv:8:1 inv:64:1 inv:8:64 inv:64:64
  lu_factor:8:16384 lu_factor:32:16384 lu_factor:64:4096 lu_factor:8:1 lu_factor:64:1
  lu_factor:8:64 lu_factor:64:64 solve_triangular:8:16384:16 solve_triangular:32:16384:16
  solve_triangular:64:4096:16 solve_triangular:128:1024:16 solve_triangular:16:1:16
  solve_triangular:64:1:16 solve_triangular:64:64:16 solve_triangular_upper:64:4096:16
  solve_triangular_right:64:4096:16"}
echo "== after: the new table, with the peers ($SECONDS s)"
# shellcheck disable=SC2086
env "${TABLE[@]}" timeout "${BENCH_S:-130}" python3 \
  benchmarks/linsys_gpu.py --out "$OUT" --slug nvidia-h200-linsys-tuned --points $P \
  > "$OUT/after.log" 2>&1
rc=$(( rc | $? ))
tail -55 "$OUT/after.log"
[ "${TUNE:-1}" = 0 ] && { echo "== done after $SECONDS s"; exit $rc; }
echo "== before: the built-in policy, ours only ($SECONDS s)"
# shellcheck disable=SC2086
METAL_LINALG_POLICY_FILE="$OUT/none.policy" timeout "${BEFORE_S:-50}" python3 \
  benchmarks/linsys_gpu.py --out "$OUT" --slug before --ours-only --points $P \
  > "$OUT/before.log" 2>&1
tail -55 "$OUT/before.log"
echo "== done after $SECONDS s"
exit $rc
