#!/usr/bin/env bash
# One GPU-machine call (device tool, carry [".site", ".whl"]) that checks a merged tree: the torch
# package prebuilt here with the CUDA backend for sm_90 into .site (as benchmarks/h200_large.sh
# says), then the CUDA tests (products, blocked algorithms, the small kernels' svd/eigh/qr
# subsets; with LARGE_ACC_S > 0 the large-size hard families too), the one-stage
# tridiagonalisation's variants (benchmarks/sytrd_bench.py --variants), and a spot grid of large
# points with the peers (run_gpu.py --large, SPOT_ARGS) in what is left of TOTAL_S seconds.
# Everything printed goes to $OUT/log; the grid to $OUT/spot.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. benchmarks/h200_common.sh
mkdir -p "$OUT/spot"
export XLA_PYTHON_CLIENT_PREALLOCATE=false
exec > >(tee -a "$OUT/log") 2>&1
. benchmarks/h200_site.sh
rc=0
timeout "${TESTS_S:-150}" python3 -m pytest tests/python/cuda/test_cuda_gemm.py \
  tests/python/cuda/test_cuda_blocked.py -q -p no:cacheprovider --maxfail=20 -o addopts="" | tail -15
rc=$(( rc | PIPESTATUS[0] ))
echo "== blocked tests done after ${SECONDS} s"
timeout "${OPS_S:-60}" python3 -m pytest tests/python/cuda -q -p no:cacheprovider --maxfail=20 \
  -o addopts="" --ignore=tests/python/cuda/test_cuda_gemm.py \
  --ignore=tests/python/cuda/test_cuda_blocked.py \
  --ignore=tests/python/cuda/test_cuda_large_accuracy.py -k "${OPS_K:-32 or 9x9 or 17}" | tail -8
rc=$(( rc | PIPESTATUS[0] ))
echo "== op tests done after ${SECONDS} s"
if [ "${LARGE_ACC_S:-0}" -gt 0 ]; then
  timeout "$LARGE_ACC_S" python3 -m pytest tests/python/cuda/test_cuda_large_accuracy.py -v \
    -p no:cacheprovider -o addopts="" 2>&1 | grep -E "PASS|FAIL|Error|passed|failed"
  rc=$(( rc | PIPESTATUS[0] ))
  echo "== large-size accuracy done after ${SECONDS} s"
fi
timeout "${SYTRD_S:-35}" python3 benchmarks/sytrd_bench.py --label final --variants \
  --vshapes "${SYTRD_SHAPES:-2048x1,4096x1,1024x8}" \
  --vnames "${SYTRD_NAMES:-old,default,upd512,rows16,rows64}" \
  --out "$OUT/sytrd.jsonl" | tail -30
echo "== sytrd variants done after ${SECONDS} s"
# shellcheck disable=SC2086
large_grid "$OUT/spot" "${TOTAL_S:-450}" 60 40 60 ${SPOT_ARGS:-}
rc=$(( rc | $? ))
echo "== done after ${SECONDS} s (rc $rc)"
exit "$rc"
