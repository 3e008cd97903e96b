#!/usr/bin/env bash
# One call on the GPU machine for the small linear-system kernels (cholesky_simd, cholesky_cols,
# cholesky_cols128, solve_triangular_simd, solve_triangular_simd128): the CUDA tests of the linear
# systems (the blocked path left out), benchmarks/linsys_gpu.py on the anchor points with
# torch.linalg, CuPy and JAX (SITE: the torch package built for sm_90 from this tree; the new
# lines turned on by their policy fields, NEW below), the same points under the built-in policy
# (BASE if given, else SITE: cholesky_simd, cholesky_group, solve_triangular_group) and with the
# SIMD line off at n <= 32 (cholesky_cols instead),
# then Nsight Compute on cholesky at 32 x32 x16384 (BASE and SITE) and on the new kernels at their
# anchor shapes. Results and logs to $OUT.
#   SITE=path/to/site BASE=path/to/base-site bash benchmarks/h200_linsys_small.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/h200_common.sh
SITE=${SITE:-.site}
BASE=${BASE:-}
export XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
P="cholesky:8:1 cholesky:8:64 cholesky:8:16384 cholesky:16:1 cholesky:16:64 cholesky:16:16384"
P="$P cholesky:32:1 cholesky:32:64 cholesky:32:16384 cholesky:64:1 cholesky:64:64 cholesky:64:1024"
P="$P cholesky:64:16384 cholesky:128:1 cholesky:128:64 cholesky:128:1024"
P="$P solve_triangular:64:4096:16 solve_triangular_upper:64:4096:16 solve_triangular_right:64:4096:16"
P="$P solve_triangular:8:16384:16 solve_triangular:32:16384:16 solve_triangular:128:1024:16"
P="$P solve_triangular:16:1:16 solve_triangular:64:1:16 solve_triangular:64:64:16 solve_triangular:128:64:16"
# The lines not yet timed on a GPU are off by default: on for the "after" run.
NEW=(env METAL_LINALG_SOLVE_TRIANGULAR_GPU_SIMD_MAX_N=128 METAL_LINALG_CHOLESKY_GPU_ALT_MIN_N=33
  METAL_LINALG_CHOLESKY_GPU_ALT_MAX_N=128)
rc=0
echo "== tests"
PYTHONPATH=$SITE timeout "${TESTS_S:-75}" python3 -m pytest -q -x -p no:cacheprovider \
  -o addopts="" -k "not blocked" tests/python/cuda/test_cuda_linsys.py 2>&1 | tail -6
rc=$(( rc | PIPESTATUS[0] ))
echo "== after (with the peers)"
PYTHONPATH=$SITE:benchmarks "${NEW[@]}" timeout "${BENCH_S:-150}" python3 benchmarks/linsys_gpu.py \
  --out "$OUT" --slug after --points $P > "$OUT/after.log" 2>&1
rc=$(( rc | $? ))
tail -30 "$OUT/after.log"
echo "== before (the built-in policy)"
PYTHONPATH=${BASE:-$SITE}:benchmarks timeout "${BEFORE_S:-45}" python3 benchmarks/linsys_gpu.py \
  --out "$OUT" --slug before --ours-only --points $P > "$OUT/before.log" 2>&1
tail -28 "$OUT/before.log"
echo "== cholesky_cols at n <= 32 (the SIMD line off)"
METAL_LINALG_CHOLESKY_GPU_SIMD_MAX_N=0 METAL_LINALG_CHOLESKY_GPU_ALT_MIN_N=1 \
  METAL_LINALG_CHOLESKY_GPU_ALT_MAX_N=128 PYTHONPATH=$SITE:benchmarks timeout 25 python3 \
  benchmarks/linsys_gpu.py --out "$OUT" --slug cols32 --ours-only --points cholesky:8:16384 \
  cholesky:16:16384 cholesky:32:16384 cholesky:32:1 cholesky:32:64 2>&1 | tail -6
M="--clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats"
M="$M --section MemoryWorkloadAnalysis"
echo "== ncu"
if [ -n "$BASE" ]; then
  PYTHONPATH=$BASE timeout 40 ncu $M --section WarpStateStats -k regex:ml_cuda_cholesky_simd \
    --launch-skip 1 --launch-count 1 python3 benchmarks/ncu_linsys_small.py > "$OUT/ncu_before.txt" 2>&1
fi
PYTHONPATH=$SITE "${NEW[@]}" timeout 50 ncu $M -k regex:"ml_cuda_(cholesky|solve_tri)" \
  python3 benchmarks/ncu_linsys_small.py all > "$OUT/ncu_after.txt" 2>&1
grep -hE "ml_cuda_|Duration|Memory Throughput|Achieved Occupancy|Registers Per|Theoretical Occ|Block Limit" \
  "$OUT"/ncu_*.txt | head -80
exit $rc
