#!/usr/bin/env bash
# One GPU-machine call (device tool, carry [".site", ".whl"]) for the large-matrix work: the torch
# package prebuilt on the build machine with the CUDA backend for sm_90 into .site,
#   pip install --no-build-isolation --no-deps --target .site ./python-torch \
#     -C cmake.define.ML_BUILD_CUDA=ON -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90-real
# and the scipy_openblas32 wheel in .whl; then the CUDA tests of the products and the blocked
# algorithms, the spread QR panels' tests and comparison (QR_S seconds, 0: skipped), and the
# large-matrix grid with peers (run_gpu.py --large) in what is left of TOTAL_S seconds.
# Everything it prints goes to $OUT/log; results to $OUT (grid) and $OUT/qr (QR panels).
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. benchmarks/h200_common.sh
mkdir -p "$OUT/qr"
exec > >(tee -a "$OUT/log") 2>&1
. benchmarks/h200_site.sh
rc=0
timeout "${TESTS_S:-150}" python3 -m pytest tests/python/cuda/test_cuda_gemm.py \
  tests/python/cuda/test_cuda_blocked.py -q -p no:cacheprovider --maxfail=20 -o addopts=""
rc=$(( rc | $? ))
echo "== tests done after ${SECONDS} s"
if [ "${QR_S:-60}" -gt 0 ]; then
  METAL_LINALG_BLOCKED_QR_TSQR_ROWS=256 timeout 40 python3 -m pytest \
    tests/python/cuda/test_cuda_blocked.py -k qr -q -p no:cacheprovider -o addopts="" | tail -4
  timeout "${QR_S:-60}" python3 benchmarks/qr_panels.py --out "$OUT/qr"
  echo "== QR panels done after ${SECONDS} s"
fi
left=$(( ${TOTAL_S:-570} - SECONDS ))
timeout "$left" python3 benchmarks/run_gpu.py --out "$OUT" --large --point-ms 250 --reps 5 \
  --budget-s "$(( left - 90 ))" --ours-extra-s 60 ${LARGE_ARGS:-} | tail -100
rc=$(( rc | PIPESTATUS[0] ))
rm -f "$OUT/inflight.json"
echo "== done after ${SECONDS} s (rc $rc)"
exit "$rc"
