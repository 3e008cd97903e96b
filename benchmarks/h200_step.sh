#!/usr/bin/env bash
# One GPU-machine call (device tool, carry [".site", ".whl"]) after a change to the blocked
# steps: the prebuilt torch package (benchmarks/h200_site.sh), the blocked CUDA tests and the
# large hard-family accuracy tests, benchmarks/sytrd_bench.py over VNAMES, then
# benchmarks/profile_steps.py on PROFILE. Logs and sytrd.jsonl go to $OUT.
#   VNAMES=default,launches PROFILE="svd:4096x4096x1" bash benchmarks/h200_step.sh
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. benchmarks/h200_common.sh
export XLA_PYTHON_CLIENT_PREALLOCATE=false
# shellcheck disable=SC1091
. benchmarks/h200_site.sh
timeout "${PYTEST_S:-120}" python3 -m pytest tests/python/cuda/test_cuda_blocked.py \
  tests/python/cuda/test_cuda_large_accuracy.py -q -k "${PYTEST_K:-eig or svd}" \
  -p no:cacheprovider --maxfail=20 -o addopts="" 2>&1 | tee "$OUT/pytest.log" | tail -8
rc=${PIPESTATUS[0]}
echo "== tests done after $SECONDS s"
if [ -n "${VNAMES:-}" ]; then
  timeout "${BENCH_S:-120}" python3 benchmarks/sytrd_bench.py --label nb32 --variants \
    --vshapes "${VSHAPES:-1024x1,2048x1,4096x1,1024x8,512x64}" --vnames "$VNAMES" \
    --out "$OUT/sytrd.jsonl" 2>&1 | tee "$OUT/bench.log" | grep -v '^{'
  echo "== variants done after $SECONDS s"
fi
# shellcheck disable=SC2086
[ -n "${PROFILE:-}" ] && timeout "${PROFILE_S:-60}" python3 benchmarks/profile_steps.py $PROFILE \
  2>&1 | tee "$OUT/profile_steps.log"
echo "== all done after $SECONDS s"
exit $rc
