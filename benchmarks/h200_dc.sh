#!/usr/bin/env bash
# One call on the GPU machine for the divide-and-conquer tridiagonal eigensolver: install the
# carried wheel (.whl-dc/, built here with the CUDA backend) or build there, run the blocked CUDA
# tests, then benchmarks/dc_bench.py with divide and conquer (and torch.linalg) and with the old
# solver (METAL_LINALG_TRIDIAG_DC_MIN_N=0). Logs and dc.jsonl go to $OUT.
#   bash benchmarks/h200_dc.sh
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. benchmarks/h200_common.sh
install_or_build .whl-dc 90
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
rc=0
timeout "${PYTEST_S:-75}" python3 -m pytest tests/python/cuda/test_cuda_blocked.py -q \
  -p no:cacheprovider --maxfail=20 -o addopts="" 2>&1 | tee "$OUT/pytest.log" | tail -25
rc=${PIPESTATUS[0]}
timeout 45 python3 benchmarks/dc_bench.py --label dc --peers --out "$OUT/dc.jsonl" \
  --eigh 256,512,1024,2048,4096 2>&1 | tee "$OUT/bench_dc.log"
METAL_LINALG_TRIDIAG_DC_MIN_N=0 timeout 50 python3 benchmarks/dc_bench.py --label old \
  --out "$OUT/dc.jsonl" --eigh 256,512,1024,2048,4096 2>&1 | tee "$OUT/bench_old.log"
exit $rc
