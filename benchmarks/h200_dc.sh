#!/usr/bin/env bash
# One call on the GPU machine for the divide-and-conquer tridiagonal eigensolver: install the
# carried wheel (.whl-dc/, built here with the CUDA backend) or build there, run the blocked CUDA
# tests, then benchmarks/dc_bench.py with divide and conquer (and torch.linalg) and with the old
# solver (METAL_LINALG_TRIDIAG_DC_MIN_N=0). Logs and dc.jsonl go to $OUT.
#   bash benchmarks/h200_dc.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 METAL_LINALG_NO_CALIBRATION_NOTICE=1
usable='import sys, metal_linalg_torch as m; sys.exit(0 if m._lib.lib.ml_backend_available(b"cuda") else 1)'
export PYTHONPATH=/tmp/site
if ls .whl-dc/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl-dc/*.whl
fi
if ! python3 -c "$usable" 2>/dev/null; then
  echo "== building the CUDA backend here"
  rm -rf /tmp/site/metal_linalg_torch
  CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=90" CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip install \
    -q --no-build-isolation --no-deps --target /tmp/site ./python-torch 2>&1 | tail -20
  python3 -c "$usable" || { echo "CUDA backend unusable"; exit 1; }
fi
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
