#!/usr/bin/env bash
# One GPU-machine call for the blocked QR panels: the torch package (a core library prebuilt for
# sm_90 under .devlib/ when it loads there, else built there), the CUDA blocked QR tests, one
# group per panel vs panels spread over groups vs torch.linalg.qr (benchmarks/qr_panels.py) and
# a step profile of the spread panels. Logs and results into $OUT.
#   bash benchmarks/h200_qr.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 METAL_LINALG_NO_CALIBRATION_NOTICE=1
site=/tmp/site
mkdir -p "$site"
if [ -f .devlib/libmetal_linalg.so ]; then
  cp -r python-torch/metal_linalg_torch "$site/"
  cp -r python-shared/_shared "$site/metal_linalg_torch/_shared"
  cp .devlib/libmetal_linalg.so "$site/metal_linalg_torch/"
fi
export PYTHONPATH=$site
usable='import sys, metal_linalg_torch as m; sys.exit(0 if m._lib.lib.ml_backend_available(b"cuda") else 1)'
built=0
if ! python3 -c "$usable"; then
  echo "== building the torch package here"
  rm -rf "$site/metal_linalg_torch"
  CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=90" CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip install \
    -q --no-build-isolation --no-deps --target "$site" ./python-torch 2>&1 | tail -20
  python3 -c "$usable" || { echo "CUDA backend unusable"; exit 1; }
  built=1
fi
echo "== ready after ${SECONDS} s"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
# The blocked QR tests with the panels spread (row blocks of 256 rows), then as routed.
METAL_LINALG_BLOCKED_QR_TSQR_ROWS=256 timeout 40 python3 -m pytest tests/python/cuda/test_cuda_blocked.py \
  -k qr -q -p no:cacheprovider -o addopts="" 2>&1 | tee "$OUT/pytest_tsqr.log" | tail -15
timeout 40 python3 -m pytest tests/python/cuda/test_cuda_blocked.py -k qr -q -p no:cacheprovider \
  -o addopts="" 2>&1 | tee "$OUT/pytest.log" | tail -5
echo "== tests done after ${SECONDS} s"
timeout 75 python3 benchmarks/qr_panels.py --out "$OUT" 2>&1 | tee "$OUT/bench.log"
echo "== bench done after ${SECONDS} s"
if [ "$built" = 0 ]; then
  METAL_LINALG_BLOCKED_QR_TSQR_ROWS=256 timeout 20 python3 benchmarks/profile_steps.py \
    qr:1024x1024x1 qr:4096x4096x1 2>&1 | tee "$OUT/profile.log"
fi
