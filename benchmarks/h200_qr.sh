#!/usr/bin/env bash
# One GPU-machine call for the blocked QR panels and the SVD's vector fix: the torch package (a
# core library prebuilt for sm_90 under .devlib/ when it loads there, else built there), the
# variants of benchmarks/qr_panels.py against torch.linalg and CuPy, the CUDA blocked QR / SVD
# tests with the new options on, and a step profile. Each phase is bounded so that the whole
# stays within BUDGET seconds (default 190). Logs and results into $OUT.
#   bash benchmarks/h200_qr.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-out}
BUDGET=${BUDGET:-190}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 METAL_LINALG_NO_CALIBRATION_NOTICE=1
left() { local r=$((BUDGET - SECONDS - $1)); echo $((r > 5 ? r : 5)); }
site=/tmp/site
mkdir -p "$site"
if [ -f .devlib/libmetal_linalg.so ]; then
  cp -r python-torch/metal_linalg_torch "$site/"
  cp -r python-shared/_shared "$site/metal_linalg_torch/_shared"
  cp .devlib/libmetal_linalg.so "$site/metal_linalg_torch/"
fi
export PYTHONPATH=$site
usable='import sys, metal_linalg_torch as m; sys.exit(0 if m._lib.lib.ml_backend_available(b"cuda") else 1)'
if ! python3 -c "$usable"; then
  echo "== building the torch package here"
  rm -rf "$site/metal_linalg_torch"
  CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip install -q --no-build-isolation --no-deps \
    --target "$site" ./python-torch -C cmake.define.ML_BUILD_CUDA=ON \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90-real -C build.tool-args=-j16 2>&1 | tail -20
  python3 -c "$usable" || { echo "CUDA backend unusable"; exit 1; }
fi
echo "== ready after ${SECONDS} s"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
timeout "$(left 75)" python3 benchmarks/qr_panels.py --out "$OUT" 2>&1 | tee "$OUT/bench.log"
echo "== bench done after ${SECONDS} s"
# The tests with every new option on (split panels, 1024-lane tall panels, the SVD fix a warp per
# column), then QR with the spread panels and split columns.
new="METAL_LINALG_BLOCKED_QR_PANEL_SPLIT=1 METAL_LINALG_BLOCKED_QR_PANEL_LANES=1024"
new="$new METAL_LINALG_BLOCKED_SVD_FIX_LANES=1024"
env $new timeout "$(left 35)" python3 -m pytest tests/python/cuda/test_cuda_blocked.py \
  -k "qr or svd" -q -p no:cacheprovider -o addopts="" 2>&1 | tee "$OUT/pytest_new.log" | tail -8
echo "== tests done after ${SECONDS} s"
env $new METAL_LINALG_BLOCKED_QR_TSQR_ROWS=256 timeout "$(left 15)" python3 -m pytest \
  tests/python/cuda/test_cuda_blocked.py -k qr -q -p no:cacheprovider -o addopts="" 2>&1 |
  tee "$OUT/pytest_tsqr_split.log" | tail -5
echo "== tsqr tests done after ${SECONDS} s"
env $new timeout "$(left 0)" python3 benchmarks/profile_steps.py qr:1024x1024x1 qr:4096x4096x1 \
  svd:4096x4096x1 2>&1 | tee "$OUT/profile.log"
echo "== all done after ${SECONDS} s"
